// Sums in a contraction's epilogue (backend/results.hpp, backend/host/channel_sums.hpp,
// product_sums.hpp): a convolution's output and its per-channel sums and sums of squares from
// one kernel, NCHW and channels-last, with groups, strides, dilation and depthwise; a product's
// output and its column sums (a linear layer's bias gradient) and row sums, batched too;
// checked against double references of the stored output, for the same bits on any thread
// count, and for the misuse that is refused.
#include "reference.hpp"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

namespace sd = solder;

namespace {

struct Case {
  std::int64_t n, cin, h, w, cout, k;
  sd::Conv2dOptions o;
};

// Per channel: the sum of y and of y * y over N, H, W, in double; y * y is the float product, as
// the summed expression computes it.
std::vector<std::vector<double>> channel_sums(ref::Array const& y) {
  std::int64_t const N = y.shape[0], C = y.shape[1], HW = y.shape[2] * y.shape[3];
  std::vector<std::vector<double>> s(2, std::vector<double>(static_cast<std::size_t>(C), 0.0));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < HW; ++i) {
        double const v = y[(n * C + c) * HW + i];
        s[0][static_cast<std::size_t>(c)] += v;
        float const f = static_cast<float>(v);
        s[1][static_cast<std::size_t>(c)] += static_cast<double>(f * f);
      }
  return s;
}

void check_case(Case const& k, bool channels_last) {
  INFO("x [" << k.n << ", " << k.cin << ", " << k.h << ", " << k.w << "], " << k.cout << " channels, "
             << k.k << "x" << k.k << ", stride " << k.o.stride.h << ", dilation " << k.o.dilation.h << ", groups "
             << k.o.groups << (channels_last ? ", channels-last" : ", NCHW"));
  sd::Tensor<float, 4> x = ref::uniform<float>(-1, 1, k.n, k.cin, k.h, k.w);
  if (channels_last) x = sd::contiguous(x, sd::channels_last);
  auto const w = ref::uniform<float>(-0.5, 0.5, k.cout, k.cin / k.o.groups, k.k, k.k);
  auto const b = ref::uniform<float>(-1, 1, k.cout);
  auto const c = sd::conv2d(x, w, k.o) + sd::unsqueeze(sd::unsqueeze(b, -1), -1);
  sd::Tensor<float, 4> const alone = c;  // the convolution as one kernel of its own

  auto [y, s, ss] = sd::eval(c, sd::sum(c, {0, 2, 3}), sd::sum(c * c, {0, 2, 3}));
  CHECK(sd::is_contiguous(y, channels_last ? sd::channels_last : sd::contiguous_format));
  ref::Array const Y = ref::of(y), A = ref::of(alone);
  REQUIRE(Y.numel() == A.numel());
  for (std::int64_t i = 0; i < Y.numel(); ++i) REQUIRE(Y[i] == Approx(A[i]).margin(1e-5));
  // The sums are of the values stored (the same floats), in double, stored as float: within
  // float's rounding of the double sum.
  auto const want = channel_sums(Y);
  for (std::int64_t ch = 0; ch < k.cout; ++ch) {
    auto const i = static_cast<std::size_t>(ch);
    CHECK(s.data()[ch] == Approx(want[0][i]).epsilon(1e-7).margin(1e-6));
    CHECK(ss.data()[ch] == Approx(want[1][i]).epsilon(1e-7));
  }
}

}  // namespace

TEST_CASE("channel sums: conv2d's output and its per-channel sums from one kernel", "[results][conv]") {
  std::vector<Case> const cases{
      {2, 3, 9, 9, 8, 3, {.padding = 1}},                        // few output channels (skinny products)
      {2, 16, 12, 10, 24, 3, {.padding = 1}},                    // blocked GEMM
      {3, 16, 11, 13, 20, 3, {.stride = 2, .padding = 1}},       // strided
      {2, 16, 13, 13, 18, 3, {.padding = 2, .dilation = 2}},     // dilated
      {2, 32, 9, 9, 32, 3, {.padding = 1, .groups = 4}},         // grouped
      {2, 20, 8, 9, 20, 3, {.padding = 1, .groups = 20}},        // depthwise
      {2, 24, 10, 10, 40, 1, {}},                                // 1x1: a plain product
      {1, 8, 40, 40, 16, 3, {.padding = 1}},                     // one image, in several chunks
  };
  for (auto const& k : cases) {
    check_case(k, false);
    check_case(k, true);
  }
}

TEST_CASE("channel sums: one kernel; means and keepdim; into double tensors", "[results][conv]") {
  auto x = ref::uniform<float>(-1, 1, 2, 16, 10, 10);
  auto w = ref::uniform<float>(-0.5, 0.5, 12, 16, 3, 3);
  auto c = sd::share(sd::conv2d(x, w, {.padding = 1}));
  sd::Tensor<float, 4> y(2, 12, 10, 10);
  sd::Tensor<double, 1> s(12), ss(12);
  sd::Tensor<float, 4> m(1, 12, 1, 1);
  CHECK(ref::kernels_of([&] {
          sd::assign(std::tie(y, s, ss, m), c, sd::sum(c, {0, 2, 3}), sd::sum(c * c, {0, 2, 3}),
                     sd::mean(c, {0, 2, 3}, sd::keepdim));
        }) == 1);
  auto const want = channel_sums(ref::of(y));
  for (std::int64_t ch = 0; ch < 12; ++ch) {
    auto const i = static_cast<std::size_t>(ch);
    CHECK(s.data()[ch] == Approx(want[0][i]).epsilon(1e-12).margin(1e-10));
    CHECK(ss.data()[ch] == Approx(want[1][i]).epsilon(1e-12));
    CHECK(m.data()[ch] == Approx(want[0][i] / 200).epsilon(1e-6).margin(1e-7));
  }
}

TEST_CASE("channel sums: one image, [C, H, W]", "[results][conv]") {
  auto x = ref::uniform<float>(-1, 1, 16, 12, 12);
  auto w = ref::uniform<float>(-0.5, 0.5, 20, 16, 3, 3);
  auto const c = sd::conv2d(x, w, {.padding = 1});
  auto [y, s] = sd::eval(c, sd::sum(c, {1, 2}));
  ref::Array const Y = ref::of(y);
  for (std::int64_t ch = 0; ch < 20; ++ch) {
    double want = 0;
    for (std::int64_t i = 0; i < 144; ++i) want += Y[ch * 144 + i];
    CHECK(s.data()[ch] == Approx(want).epsilon(1e-7).margin(1e-6));
  }
}

TEST_CASE("channel sums: the same bits for any thread count", "[results][conv][threads]") {
  int const saved = sd::get_num_threads();
  // The GEMM engine's own split of rows changes with the threads; the sums must not. Each
  // pixel scaled by e^-20 .. e^20 and a 1x1 kernel: the outputs span 2^-58 .. 2^58, so that
  // sums in double round and their order shows (a 3x3 kernel mixes neighbours, and sums of
  // floats of a narrow range are exact in double in any order).
  for (bool channels_last : {false, true}) {
    INFO((channels_last ? "channels-last" : "NCHW"));
    sd::Tensor<float, 4> x = ref::uniform<float>(-1, 1, 4, 64, 32, 32) * sd::exp(ref::uniform<float>(-20, 20, 4, 1, 32, 32));
    if (channels_last) x = sd::contiguous(x, sd::channels_last);
    auto const w = ref::uniform<float>(-0.1, 0.1, 64, 64, 1, 1);
    auto const c = sd::conv2d(x, w);
    std::vector<std::vector<double>> first;
    for (int threads : {1, 2, 3, 4}) {
      sd::set_num_threads(threads);
      sd::Tensor<float, 4> y = sd::detail::make_like<sd::Tensor<float, 4>>(c);
      sd::Tensor<double, 1> s(64), ss(64);  // (double: float would hide the last bits)
      sd::assign(std::tie(y, s, ss), c, sd::sum(c, {0, 2, 3}), sd::sum(c * c, {0, 2, 3}));
      std::vector<std::vector<double>> got{sd::to_vector(s), sd::to_vector(ss)};
      if (first.empty()) first = got;
      INFO(threads << " threads");
      for (std::size_t i = 0; i < got.size(); ++i)
        for (std::size_t j = 0; j < got[i].size(); ++j) REQUIRE(got[i][j] == first[i][j]);  // bit for bit
    }
  }
  sd::set_num_threads(saved);
}

TEST_CASE("channel sums: misuse is refused with what to write instead", "[results][conv][errors]") {
  auto x = ref::uniform<float>(-1, 1, 2, 4, 6, 6);
  auto w = ref::uniform<float>(-1, 1, 5, 4, 3, 3);
  auto const c = sd::conv2d(x, w);
  sd::Tensor<float, 4> y(2, 5, 4, 4);
  sd::Tensor<float, 1> s(5), wrong(4);
  auto message = [](auto const& f) {
    try {
      f();
    } catch (sd::Error const& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Sums over other dims than all but the channels.
  sd::Tensor<float, 2> rows(5, 4);
  CHECK_THAT(message([&] { sd::assign(std::tie(y, rows), c, sd::sum(c, {0, 2})); }),
             Catch::Contains("over every dim but the channels"));
  // A sum's tensor of the wrong shape.
  CHECK_THAT(message([&] { sd::assign(std::tie(y, wrong), c, sd::sum(c, {0, 2, 3})); }),
             Catch::Contains("into a tensor of shape [4]"));
  // Two different convolutions of one type.
  auto const other = sd::conv2d(x, w);
  CHECK_THAT(message([&] { sd::assign(std::tie(y, s), c, sd::sum(other, {0, 2, 3})); }),
             Catch::Contains("one and the same conv2d"));
  // The output written over the input.
  auto x2 = ref::uniform<float>(-1, 1, 2, 5, 4, 4);
  auto w2 = ref::uniform<float>(-1, 1, 5, 5, 1, 1);
  auto const c2 = sd::conv2d(x2, w2);
  CHECK_THAT(message([&] { sd::assign(std::tie(x2, s), c2, sd::sum(c2, {0, 2, 3})); }),
             Catch::Contains("shares memory with what it reads"));
}

namespace {

// Column (over every dim but the last) and row sums of y, in double, flat.
std::vector<std::vector<double>> product_sums(ref::Array const& y) {
  std::int64_t const n = y.shape.back(), rows = y.numel() / n;
  std::vector<std::vector<double>> s{std::vector<double>(static_cast<std::size_t>(n), 0.0),
                                     std::vector<double>(static_cast<std::size_t>(rows), 0.0)};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t q = 0; q < n; ++q) {
      s[0][static_cast<std::size_t>(q)] += y[r * n + q];
      s[1][static_cast<std::size_t>(r)] += y[r * n + q];
    }
  return s;
}

}  // namespace

TEST_CASE("product sums: a linear layer's output, its column sums and its row sums from one kernel",
          "[results][contract]") {
  // A tail of rows and columns past the blocks; several chunks of rows.
  auto x = ref::uniform<float>(-1, 1, 301, 40);
  auto w = ref::uniform<float>(-0.5, 0.5, 37, 40);
  auto b = ref::uniform<float>(-1, 1, 37);
  auto const p = sd::linear(x, w, b);
  sd::Tensor<float, 2> const alone = p;
  sd::Tensor<float, 2> y(301, 37);
  sd::Tensor<double, 1> cols(37), rows(301);
  sd::Tensor<float, 2> mean_rows(301, 1);
  CHECK(ref::kernels_of([&] {
          sd::assign(std::tie(y, cols, rows, mean_rows), p, sd::sum(p, 0), sd::sum(p, -1), sd::mean(p, -1, sd::keepdim));
        }) == 1);
  ref::Array const Y = ref::of(y), A = ref::of(alone);
  for (std::int64_t i = 0; i < Y.numel(); ++i) REQUIRE(Y[i] == Approx(A[i]).margin(1e-5));
  auto const want = product_sums(Y);
  for (std::int64_t q = 0; q < 37; ++q) CHECK(cols.data()[q] == Approx(want[0][static_cast<std::size_t>(q)]).epsilon(1e-12).margin(1e-11));
  for (std::int64_t r = 0; r < 301; ++r) {
    CHECK(rows.data()[r] == Approx(want[1][static_cast<std::size_t>(r)]).epsilon(1e-12).margin(1e-11));
    CHECK(mean_rows.data()[r] == Approx(want[1][static_cast<std::size_t>(r)] / 37).epsilon(1e-6).margin(1e-7));
  }
}

TEST_CASE("product sums: no rows", "[results][contract]") {
  sd::Tensor<float, 2> x(0, 8);
  auto w = ref::uniform<float>(-1, 1, 5, 8);
  auto const p = sd::linear(x, w);
  auto [y, cols, mean_cols] = sd::eval(p, sd::sum(p, 0), sd::mean(p, 0));
  CHECK(y.numel() == 0);
  for (std::int64_t q = 0; q < 5; ++q) {
    CHECK(cols.data()[q] == 0);
    CHECK(std::isnan(mean_cols.data()[q]));  // (torch.mean over no values)
  }
}

TEST_CASE("product sums: batched products, [B, T, C] through a linear layer and bmm", "[results][contract]") {
  auto x = ref::uniform<float>(-1, 1, 3, 50, 24);
  auto w = ref::uniform<float>(-0.5, 0.5, 20, 24);
  auto const p = sd::linear(x, w);  // the weight shared by the batches
  auto [y, db, rs] = sd::eval(p, sd::sum(p, {0, 1}), sd::sum(p * p, -1));
  auto const want = product_sums(ref::of(y));
  ref::Array const Y = ref::of(y);
  for (std::int64_t q = 0; q < 20; ++q) CHECK(db.data()[q] == Approx(want[0][static_cast<std::size_t>(q)]).epsilon(1e-6).margin(1e-5));
  for (std::int64_t r = 0; r < 150; ++r) {
    double sq = 0;
    for (std::int64_t q = 0; q < 20; ++q) {
      float const v = static_cast<float>(Y[r * 20 + q]);
      sq += static_cast<double>(v * v);
    }
    CHECK(rs.data()[r] == Approx(sq).epsilon(1e-6));
  }
  // Each batch its own right operand.
  auto a = ref::uniform<float>(-1, 1, 4, 33, 16);
  auto bb = ref::uniform<float>(-1, 1, 4, 16, 21);
  auto const q = sd::matmul(a, bb);
  auto [z, zc, zr] = sd::eval(q, sd::sum(q, {0, 1}), sd::sum(q, 2));
  auto const zwant = product_sums(ref::of(z));
  for (std::int64_t c = 0; c < 21; ++c) CHECK(zc.data()[c] == Approx(zwant[0][static_cast<std::size_t>(c)]).epsilon(1e-6).margin(1e-5));
  for (std::int64_t r = 0; r < 4 * 33; ++r)
    CHECK(zr.data()[r] == Approx(zwant[1][static_cast<std::size_t>(r)]).epsilon(1e-6).margin(1e-5));
}

TEST_CASE("product sums: the same bits for any thread count", "[results][contract][threads]") {
  int const saved = sd::get_num_threads();
  // Rows scaled by e^-20 .. e^20 (see the convolution's case): the column sums round in double.
  sd::Tensor<float, 2> x = ref::uniform<float>(-1, 1, 2048, 64) * sd::exp(ref::uniform<float>(-20, 20, 2048, 1));
  auto const w = ref::uniform<float>(-0.1, 0.1, 96, 64);
  auto const p = sd::linear(x, w);
  std::vector<std::vector<double>> first;
  for (int threads : {1, 2, 3, 4}) {
    sd::set_num_threads(threads);
    sd::Tensor<float, 2> y(2048, 96);
    sd::Tensor<double, 1> cols(96), rows(2048);
    sd::assign(std::tie(y, cols, rows), p, sd::sum(p * p, 0), sd::sum(p, 1));
    std::vector<std::vector<double>> got{sd::to_vector(cols), sd::to_vector(rows)};
    if (first.empty()) first = got;
    INFO(threads << " threads");
    for (std::size_t i = 0; i < got.size(); ++i)
      for (std::size_t j = 0; j < got[i].size(); ++j) REQUIRE(got[i][j] == first[i][j]);  // bit for bit
  }
  sd::set_num_threads(saved);
}

TEST_CASE("product sums: misuse is refused", "[results][contract][errors]") {
  auto x = ref::uniform<float>(-1, 1, 3, 5, 4);
  auto w = ref::uniform<float>(-1, 1, 6, 4);
  auto const p = sd::linear(x, w);
  sd::Tensor<float, 3> y(3, 5, 6);
  sd::Tensor<float, 2> middle(3, 6);
  try {
    sd::assign(std::tie(y, middle), p, sd::sum(p, 1));  // over the middle dim: neither kind
    FAIL("no error");
  } catch (sd::Error const& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("over every dim but the last"));
  }
}
