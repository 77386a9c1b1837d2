// Several results from one kernel (expr/results.hpp, backend/results.hpp): an AdamW-shaped
// in-place update of three tensors, a mean and a variance of one tensor, the fallbacks through
// temporaries (other strides, an overlapping input), and the misuse that is refused. Values are
// checked against double-precision loops; kernel counts against the kernels that run.
#include "reference.hpp"

#include <cmath>
#include <string>
#include <tuple>

namespace sd = solder;


TEST_CASE("results: an AdamW-shaped update of p, m and v is one kernel", "[results]") {
  constexpr float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 1e-2f;
  constexpr float c1 = 1 - 0.9f * 0.9f, c2 = 1 - 0.999f * 0.999f;  // bias corrections, step 2
  // 1031 x 7: a tail past every vector width, and above the size that splits across threads.
  for (std::int64_t rows : {3, 1031 * 7}) {
    INFO("rows " << rows);
    auto g = ref::uniform<float>(-1, 1, rows, 7);
    auto p = ref::uniform<float>(-1, 1, rows, 7);
    auto m = ref::uniform<float>(-0.1, 0.1, rows, 7);
    auto v = ref::uniform<float>(0, 0.01, rows, 7);
    ref::Array G = ref::of(g), P = ref::of(p), M = ref::of(m), V = ref::of(v);

    auto m_next = b1 * m + (1 - b1) * g;
    auto v_next = b2 * v + (1 - b2) * g * g;
    auto p_next = p - lr * ((m_next / c1) / (sd::sqrt(v_next / c2) + eps) + wd * p);
    static_assert(sd::kernel_count<decltype(sd::results(p_next, m_next, v_next))> == 1);
    CHECK(ref::kernels_of([&] { sd::assign(std::tie(p, m, v), p_next, m_next, v_next); }) == 1);

    for (std::int64_t i = 0; i < rows * 7; ++i) {
      std::int64_t const r = i / 7, c = i % 7;
      // (the float constants as solder sees them, widened)
      double const mn = double(b1) * M.at({r, c}) + double(1 - b1) * G.at({r, c});
      double const vn = double(b2) * V.at({r, c}) + double(1 - b2) * G.at({r, c}) * G.at({r, c});
      double const pn = P.at({r, c}) - double(lr) * ((mn / double(c1)) / (std::sqrt(vn / double(c2)) + double(eps)) +
                                                     double(wd) * P.at({r, c}));
      INFO("element " << i);
      REQUIRE(m(r, c) == Approx(mn).epsilon(1e-5).margin(1e-7));
      REQUIRE(v(r, c) == Approx(vn).epsilon(1e-5).margin(1e-9));
      REQUIRE(p(r, c) == Approx(pn).epsilon(1e-5).margin(1e-6));
    }
  }
}

TEST_CASE("results: a mean and a variance of one tensor from one kernel", "[results]") {
  auto x = ref::uniform<float>(-2, 3, 37, 1029);
  ref::Array X = ref::of(x);
  auto e = sd::results(sd::mean(x, 1), sd::var(x, 1));
  static_assert(sd::kernel_count<decltype(e)> == 1);
  std::string const plan = sd::explain(e);
  INFO(plan);
  CHECK(plan.rfind("solder plan: 1 kernel", 0) == 0);
  CHECK(plan.find("float32, float32") != std::string::npos);

  auto const before = sd::detail::kernels_run();
  auto [mean, var] = sd::eval(sd::mean(x, 1), sd::var(x, 1));
  CHECK(sd::detail::kernels_run() - before == 1);
  for (std::int64_t i = 0; i < 37; ++i) {
    double s = 0, ss = 0;
    for (std::int64_t j = 0; j < 1029; ++j) s += X.at({i, j});
    double const mu = s / 1029;
    for (std::int64_t j = 0; j < 1029; ++j) ss += (X.at({i, j}) - mu) * (X.at({i, j}) - mu);
    CHECK(mean(i) == Approx(mu).epsilon(1e-5).margin(1e-6));
    CHECK(var(i) == Approx(ss / 1028).epsilon(1e-5));
  }

  // Results of other element types: a sum in double and an argmax in int64.
  auto [total, where] = sd::eval(sd::sum(sd::cast<double>(x), 0), sd::argmax(x, 0));
  static_assert(std::is_same_v<decltype(total)::value_type, double>);
  static_assert(std::is_same_v<decltype(where)::value_type, std::int64_t>);
  for (std::int64_t j = 0; j < 1029; j += 97) {
    double s = 0;
    std::int64_t best = 0;
    for (std::int64_t i = 0; i < 37; ++i) {
      s += X.at({i, j});
      if (X.at({i, j}) > X.at({best, j})) best = i;
    }
    CHECK(total(j) == Approx(s).epsilon(1e-12));
    CHECK(where(j) == best);
  }
}

TEST_CASE("results: other strides and overlapping inputs go through temporaries", "[results]") {
  auto x = ref::uniform<float>(-1, 1, 6, 5);
  ref::Array X = ref::of(x);
  // Outputs of one shape and other strides: a transposed view beside a contiguous tensor.
  sd::Tensor<float, 2> a(5, 6), b_storage(6, 5);
  auto b = sd::transpose(b_storage, 0, 1);  // [5, 6], strides [1, 5]
  sd::assign(std::tie(a, b), sd::transpose(x, 0, 1) * 2.f, sd::transpose(x, 0, 1) + 1.f);
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 6; ++j) {
      CHECK(a(i, j) == static_cast<float>(X.at({j, i}) * 2));
      CHECK(b_storage(j, i) == static_cast<float>(X.at({j, i}) + 1));
    }

  // An input that is a shifted view of an output: each value is read before any is written.
  sd::Tensor<float, 1> s = sd::arange<float>(10), t(9);
  ref::Array S = ref::of(s);
  auto head = sd::slice(s, 0, 0, 9), tail = sd::slice(s, 0, 1, 10);
  sd::assign(std::tie(head, t), tail * 10.f, tail + head);
  for (std::int64_t i = 0; i < 9; ++i) {
    CHECK(s(i) == static_cast<float>(S.at({i + 1}) * 10));
    CHECK(t(i) == static_cast<float>(S.at({i + 1}) + S.at({i})));
  }
}

TEST_CASE("results: misuse is refused with the shapes", "[results][errors]") {
  auto x = ref::uniform<float>(-1, 1, 4, 3);
  auto y = ref::uniform<float>(-1, 1, 1, 3);
  sd::Tensor<float, 2> a(4, 3), b(4, 3), c(2, 3);
  // Results are not broadcast against each other.
  CHECK_THROWS_WITH(sd::results(x * 1.f, y * 1.f),
                    Catch::Contains("results: expressions of shapes [4, 3] and [1, 3]"));
  CHECK_THROWS_WITH(sd::assign(std::tie(a, c), x * 1.f, x + 1.f),
                    Catch::Contains("results of shape [4, 3] into a tensor of shape [2, 3]"));
  // Two results into one memory: which one wins would be up to the loop order.
  auto left = sd::slice(a, 1, 0, 2), right = sd::slice(a, 1, 1, 3);
  CHECK_THROWS_WITH(sd::assign(std::tie(left, right), sd::slice(x, 1, 0, 2) * 1.f, sd::slice(x, 1, 1, 3) * 1.f),
                    Catch::Contains("results 0 and 1 are stored into tensors that share memory"));
  CHECK_THROWS_WITH(sd::assign(std::tie(a, a), x * 1.f, x + 1.f),
                    Catch::Contains("share memory"));
  // Views of one tensor whose memory ranges are disjoint are fine (interleaved ones, such as
  // two columns of a matrix, are refused: the check compares ranges).
  auto top = sd::slice(b, 0, 0, 2), bottom = sd::slice(b, 0, 2, 4);
  sd::assign(std::tie(top, bottom), sd::slice(x, 0, 2, 4) * 1.f, sd::slice(x, 0, 0, 2) * 1.f);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) CHECK(b(i, j) == x((i + 2) % 4, j));
}
