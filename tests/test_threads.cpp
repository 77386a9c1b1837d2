// Threads: results do not depend on the thread count (bitwise), runs are deterministic,
// set_num_threads validates its argument, and small tensors (which never fork) are right.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <solder/solder.hpp>

namespace sd = solder;
using Catch::Matchers::Contains;

namespace {

// Restores the thread count a test started with.
struct ThreadGuard {
  int saved = sd::get_num_threads();
  ~ThreadGuard() { sd::set_num_threads(saved); }
};

template <class T>
bool bitwise_equal(std::vector<T> const& a, std::vector<T> const& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Evaluates f() under 1 thread, 2 threads, and 2 threads again; returns the three results.
template <class F>
auto under_thread_counts(F const& f) {
  ThreadGuard guard;
  sd::set_num_threads(1);
  auto one = sd::to_vector(sd::eval(f()));
  sd::set_num_threads(2);
  auto two = sd::to_vector(sd::eval(f()));
  auto again = sd::to_vector(sd::eval(f()));
  sd::set_num_threads(1);
  auto one_again = sd::to_vector(sd::eval(f()));
  return std::array<decltype(one), 4>{one, two, again, one_again};
}

template <class F>
void check_thread_independent(F const& f) {
  auto r = under_thread_counts(f);
  CHECK(bitwise_equal(r[1], r[2]));  // deterministic for a thread count
  CHECK(bitwise_equal(r[0], r[3]));
  CHECK(bitwise_equal(r[0], r[1]));  // independent of the thread count
}

}  // namespace

TEST_CASE("set_num_threads validates and get_num_threads reports", "[threads]") {
  ThreadGuard guard;
  CHECK_THROWS_WITH(sd::set_num_threads(0), Contains("set_num_threads") && Contains("0"));
  CHECK_THROWS_AS(sd::set_num_threads(-2), sd::Error);
  sd::set_num_threads(3);
  CHECK(sd::get_num_threads() == 3);
  sd::set_num_threads(1);
  CHECK(sd::get_num_threads() == 1);
  CHECK_THROWS_AS(sd::set_num_threads(0), sd::Error);
  CHECK(sd::get_num_threads() == 1);  // a refused call changes nothing
}

TEST_CASE("element-wise kernels: bitwise identical for 1 and 2 threads", "[threads][map]") {
  sd::manual_seed(11);
  auto x = sd::randn<float>(sd::shape(1 << 18));
  auto y = sd::randn<float>(sd::shape(1 << 18));
  check_thread_independent([&] { return sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(y) + x * x * 0.1f - 0.3f; });
  check_thread_independent([&] { return sd::gelu(x) + sd::exp(-sd::abs(y)); });

  // Strided and broadcast (the general path), and a [rows, cols] view.
  auto m = sd::randn<float>(sd::shape(384, 384));
  auto row = sd::randn<float>(sd::shape(384));
  check_thread_independent([&] { return sd::transpose(m, 0, 1) * row + m; });
  check_thread_independent([&] { return sd::slice(m, 1, 0, 384, 3) - 1.f; });

  // Integers and doubles.
  auto xi = sd::arange<std::int32_t>(100000);
  check_thread_independent([&] { return xi * 3 + 1; });
  auto xd = sd::cast<double>(x);
  check_thread_independent([&] { return sd::sqrt(sd::abs(xd)) * 1.5; });

  // The values, not just their agreement.
  ThreadGuard guard;
  sd::set_num_threads(2);
  sd::Tensor<std::int32_t, 1> r = xi * 3 + 1;
  CHECK(r(0) == 1);
  CHECK(r(99999) == 299998);
}

TEST_CASE("row kernels: bitwise identical for 1 and 2 threads", "[threads][rows]") {
  sd::manual_seed(12);
  auto x = sd::randn<float>(sd::shape(256, 512));
  auto gamma = sd::randn<float>(sd::shape(512));
  auto beta = sd::randn<float>(sd::shape(512));
  check_thread_independent([&] { return sd::softmax(x, 1); });
  check_thread_independent([&] { return sd::softmax(x, 0); });
  check_thread_independent([&] { return sd::log_softmax(x * 2.f, -1); });
  check_thread_independent([&] { return sd::layer_norm(x, gamma, beta); });
  check_thread_independent([&] { return sd::rms_norm(x, gamma); });
  check_thread_independent([&] { return x - sd::mean(x, 1, sd::keepdim); });
  // One long row (a single line: the run itself is split).
  auto longrow = sd::randn<float>(sd::shape(1, 200000));
  check_thread_independent([&] { return sd::softmax(longrow, 1); });
}

TEST_CASE("reductions: bitwise identical for 1 and 2 threads", "[threads][reduce]") {
  sd::manual_seed(13);
  auto x = sd::randn<float>(sd::shape(64, 4096));
  // Many outputs, each reduced by one thread.
  check_thread_independent([&] { return sd::sum(x, 1); });
  check_thread_independent([&] { return sd::sum(x, 0); });
  check_thread_independent([&] { return sd::amax(x, 1); });
  check_thread_independent([&] { return sd::argmax(x, 1); });
  check_thread_independent([&] { return sd::var(x, 1); });
  check_thread_independent([&] { return sd::mean(sd::exp(x * 0.1f), {0, 1}, sd::keepdim); });
  // Integer sums are exact anyway.
  auto xi = sd::arange<std::int32_t>(300000);
  check_thread_independent([&] { return sd::sum(xi); });
  // Max/argmax are order-independent.
  check_thread_independent([&] { return sd::max(x); });
  check_thread_independent([&] { return sd::argmin(x); });
}

// Few outputs over long rows: the executor splits each reduction across threads and folds
// the per-thread partial sums, so the float rounding depends on the thread count.
TEST_CASE("float sums over few long rows: bitwise identical for 1 and 2 threads",
          "[threads][reduce][split]") {
  sd::manual_seed(14);
  auto x = sd::randn<float>(sd::shape(1 << 20));
  check_thread_independent([&] { return sd::sum(x); });
  check_thread_independent([&] { return sd::mean(x * x); });
  auto r = sd::view(x, sd::shape(1, 1 << 20));
  check_thread_independent([&] { return sd::sum(r, 1); });
  check_thread_independent([&] { return sd::sum(r, {0, 1}); });
}

TEST_CASE("random factories are independent of the thread count", "[threads][rand]") {
  ThreadGuard guard;
  sd::set_num_threads(1);
  sd::manual_seed(3);
  auto a = sd::to_vector(sd::randn<float>(sd::shape(100001)));
  auto b = sd::to_vector(sd::rand<float>(sd::shape(70001), -1.f, 1.f));
  sd::set_num_threads(2);
  sd::manual_seed(3);
  CHECK(bitwise_equal(sd::to_vector(sd::randn<float>(sd::shape(100001))), a));
  CHECK(bitwise_equal(sd::to_vector(sd::rand<float>(sd::shape(70001), -1.f, 1.f)), b));
}

TEST_CASE("tiny and threshold-sized tensors are right with 2 threads", "[threads][small]") {
  ThreadGuard guard;
  sd::set_num_threads(2);
  for (std::int64_t n : {0, 1, 2, 3, 5, 17, 64, 1000, 32767, 32768, 32769, 65537}) {
    INFO("n = " << n);
    auto x = sd::arange<float>(static_cast<double>(n));
    sd::Tensor<float, 1> y = x * 2.f + 1.f;
    bool ok = y.numel() == n;
    for (std::int64_t i = 0; i < n; ++i) ok = ok && y(i) == 2.f * static_cast<float>(i) + 1.f;
    CHECK(ok);
    // Sum of 0..n-1 in int64: exact.
    sd::Tensor<std::int64_t, 0> s = sd::sum(sd::cast<std::int64_t>(x));
    CHECK(s.item() == n * (n - 1) / 2);
    if (n > 0) {
      CHECK(sd::eval(sd::max(x)).item() == static_cast<float>(n - 1));
      CHECK(sd::eval(sd::argmax(x)).item() == n - 1);
      // A row op over a [2, n] tensor.
      auto m = sd::view(sd::arange<float>(static_cast<double>(2 * n)), sd::shape(2, n));
      sd::Tensor<float, 2> sm = sd::softmax(m * 0.f, 1);
      CHECK(sm(1, n - 1) == Approx(1.0 / static_cast<double>(n)));
    }
  }
  // Rank 0 and a single element with many threads configured.
  sd::set_num_threads(8);
  sd::Tensor<float, 0> z;
  z() = 2.f;
  sd::Tensor<float, 0> w = z * z;
  CHECK(w.item() == 4.f);
  sd::Tensor<float, 2> one = sd::ones<float>(1, 1) * 3.f;
  CHECK(one.item() == 3.f);
  CHECK(sd::eval(sd::sum(one)).item() == 3.f);
}
