// Float reductions at least as accurate as PyTorch's cascade sums (backend/cascade.hpp), along
// every host path (one long run, rows, columns, strided terms, a split over threads), and the
// same bits for any thread count. The references: the exact sums in double, and PyTorch 2.15's
// results on the same data (issue 39's table), which solder must not be further from.
// (Under SOLDER_TEST_SCALE=small the random and statistics cases take fewer terms.)
#include "reference.hpp"
#include "test_scale.hpp"

#include <iomanip>

namespace sd = solder;

namespace {

struct Threads {
  int saved = sd::get_num_threads();
  ~Threads() { sd::set_num_threads(saved); }
};

void check_no_further(double got, double exact, double torch, char const* what) {
  INFO(what << ": got " << std::setprecision(10) << got << ", exact " << exact << ", PyTorch " << torch);
  CHECK(std::fabs(got - exact) <= std::fabs(torch - exact));
}

}  // namespace

TEST_CASE("sums of equal terms: no further from the exact sum than PyTorch's", "[reduce][accuracy]") {
  Threads restore;
  sd::set_num_threads(2);
  double const term = static_cast<double>(0.1f);
  {
    std::int64_t const n = 10000000;
    double const exact = term * static_cast<double>(n);  // 1000000.0149
    auto x = sd::full<float>(sd::shape(n), 0.1f);
    float const full = sd::eval(sd::sum(x)).item();
    check_no_further(full, exact, 999999.56, "sum of 10^7 x 0.1f");
    check_no_further(sd::eval(sd::mean(x)).item() * static_cast<double>(n), exact, 999999.56, "mean of 10^7 x 0.1f");
    auto wide = sd::full<float>(sd::shape(2, n), 0.1f);
    sd::Tensor<float, 1> rows = sd::sum(wide, 1);
    check_no_further(rows(1), exact, 999999.56, "row sums of [2, 10^7]");
    auto every_second = sd::slice(sd::full<float>(sd::shape(2 * n), 0.1f), 0, 0, 2 * n, 2);
    check_no_further(sd::eval(sd::sum(every_second)).item(), exact, 999999.56, "a sum of every second term");
    for (int t : {1, 3}) {
      sd::set_num_threads(t);
      INFO(t << " threads");
      CHECK(sd::eval(sd::sum(x)).item() == full);
    }
    sd::set_num_threads(2);
  }
  {
    std::int64_t const n = 4000000;
    double const exact = term * static_cast<double>(n);  // 400000.006
    auto tall = sd::full<float>(sd::shape(n, 3), 0.1f);
    sd::Tensor<float, 1> cols = sd::sum(tall, 0);
    for (int c = 0; c < 3; ++c) check_no_further(cols(c), exact, 399999.66, "column sums of [4 10^6, 3]");
    sd::Tensor<float, 1> cols_mean = sd::mean(tall, 0);
    check_no_further(cols_mean(0) * static_cast<double>(n), exact, 399999.66, "column means of [4 10^6, 3]");
    sd::Tensor<float, 1> transposed = sd::sum(sd::transpose(tall, 0, 1), 1);  // strided rows, term by term
    CHECK(transposed(2) == cols(2));
  }
}

TEST_CASE("sums of random terms: within 2 ulp of the exact sum, the same bits for any thread count",
          "[reduce][accuracy][threads]") {
  Threads restore;
  std::int64_t const n = ref::sized<std::int64_t>(10'000'000, 1'000'000);
  auto x = ref::uniform<float>(0, 1, n);
  auto m = ref::uniform<float>(0, 1, n / 4, 4);
  double exact = 0;
  for (std::int64_t i = 0; i < n; ++i) exact += static_cast<double>(x(i));
  std::array<double, 4> col{};
  for (std::int64_t i = 0; i < n / 4; ++i)
    for (int c = 0; c < 4; ++c) col[c] += static_cast<double>(m(i, c));
  auto within = [](double got, double want, char const* what) {
    INFO(what << ": got " << std::setprecision(10) << got << ", exact " << want);
    CHECK(std::fabs(got - want) <= 2 * ref::ulp<float>(want));
  };
  sd::set_num_threads(1);
  float const full = sd::eval(sd::sum(x)).item();
  sd::Tensor<float, 1> cols = sd::sum(m, 0);
  sd::Tensor<float, 1> rows = sd::sum(sd::transpose(m, 0, 1), 1);
  within(full, exact, "sum of n uniform [0, 1)");
  for (int c = 0; c < 4; ++c) {
    within(cols(c), col[c], "column sums of [n / 4, 4]");
    CHECK(rows(c) == cols(c));
  }
  for (int t : {2, 3, 4}) {
    sd::set_num_threads(t);
    INFO(t << " threads");
    CHECK(sd::eval(sd::sum(x)).item() == full);
    sd::Tensor<float, 1> c2 = sd::sum(m, 0);
    for (int c = 0; c < 4; ++c) CHECK(c2(c) == cols(c));
  }
}

TEST_CASE("statistics of long rows: mean and variance within a few eps of double", "[reduce][accuracy]") {
  std::int64_t const n = ref::sized<std::int64_t>(4'000'000, 400'000);
  auto x = ref::uniform<float>(1, 2, 2, n);  // a mean far from 0: the sum is large, the variance small
  double mean = 0, var = 0;
  for (std::int64_t i = 0; i < n; ++i) mean += static_cast<double>(x(1, i));
  mean /= static_cast<double>(n);
  for (std::int64_t i = 0; i < n; ++i) var += (x(1, i) - mean) * (x(1, i) - mean);
  var /= static_cast<double>(n - 1);
  sd::Tensor<float, 1> m = sd::mean(x, 1), v = sd::var(x, 1);
  INFO("mean " << std::setprecision(10) << m(1) << " (exact " << mean << "), var " << v(1) << " (exact " << var << ")");
  CHECK(std::fabs(m(1) - mean) <= 4 * ref::ulp<float>(mean));
  CHECK(std::fabs(v(1) - var) <= 16 * ref::eps<float>() * var);
}
