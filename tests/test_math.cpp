// solder::math against libm: float results against the double functions (every 97th float bit
// pattern, both signs), double results against the long double functions (1e6 random points
// over the magnitudes), plus exact special values (signed zeros, infinities, NaN, subnormals).
#include <solder/core/math.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

namespace m = solder::math;
using ld = long double;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// The float sweeps dominate the run time (the libm reference is ~50x slower than the vector
// code); debug and sanitizer builds step through fewer patterns.
#if !defined(__OPTIMIZE__)
constexpr std::uint32_t kStride = 10007;
#elif defined(__SANITIZE_ADDRESS__)
constexpr std::uint32_t kStride = 1021;
#else
constexpr std::uint32_t kStride = 97;
#endif
constexpr int kDoublePoints = 1000000;

// |y - ref| in units of the ulp of the correctly rounded result (subnormal ulp below the normal
// range). NaN must match NaN; an infinite ref or result must match exactly.
template <class T, class R>
double ulp_error(T y, R ref) {
  constexpr int digits = std::numeric_limits<T>::digits;
  constexpr int min_exp = std::numeric_limits<T>::min_exponent - digits;
  if (std::isnan(ref) || std::isnan(y)) return std::isnan(ref) && std::isnan(y) ? 0.0 : kInf;
  const T rounded = static_cast<T>(ref);
  if (std::isinf(rounded) || std::isinf(y)) return y == rounded ? 0.0 : kInf;
  int e = 0;
  std::frexp(ref, &e);
  const R ulp = std::ldexp(R(1), std::max(e - digits, min_exp));
  return static_cast<double>(std::fabs(static_cast<R>(y) - ref) / ulp);
}

struct Worst {
  double ulp = 0;
  double x = 0;
  double y = 0;  // second argument (pow)
};

// Largest error(i).ulp over i < n, the (slow) references spread over the threads.
template <class E>
Worst worst_of(int n, E error) {
  Worst worst;
#pragma omp parallel
  {
    Worst local;
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const Worst w = error(i);
      if (w.ulp > local.ulp) local = w;
    }
#pragma omp critical
    if (local.ulp > worst.ulp) worst = local;
  }
  return worst;
}

// Every `stride`-th float bit pattern with lo <= x <= hi (NaN patterns included), evaluated in
// an `omp simd` loop like the library's kernels, compared with ref(double).
template <class F, class R>
Worst sweep_float(F f, R ref, double lo = -kInf, double hi = kInf, std::uint32_t stride = kStride) {
  constexpr std::int64_t kBlock = 4096;
  const std::int64_t patterns = (std::int64_t(1) << 32) / stride + 1;
  const std::int64_t blocks = (patterns + kBlock - 1) / kBlock;
  Worst worst;
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    float x[kBlock], y[kBlock];
    int n = 0;
    for (std::int64_t p = blk * kBlock; p < std::min(patterns, (blk + 1) * kBlock); ++p) {
      const float v = std::bit_cast<float>(static_cast<std::uint32_t>(p * stride));
      if (std::isnan(v) || (v >= lo && v <= hi)) x[n++] = v;
    }
#pragma omp simd
    for (int i = 0; i < n; ++i) y[i] = f(x[i]);
    Worst local;
    for (int i = 0; i < n; ++i) {
      const double e = ulp_error(y[i], ref(static_cast<double>(x[i])));
      if (e > local.ulp) local = {e, x[i], 0};
    }
#pragma omp critical
    if (local.ulp > worst.ulp) worst = local;
  }
  return worst;
}

// Random doubles: half log-uniform over all magnitudes up to max(|lo|, |hi|), half uniform in
// [lo, hi]; both signs where lo < 0.
template <class F, class R>
Worst sweep_double(F f, R ref, double lo, double hi) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double top = std::log2(std::max(std::fabs(lo), std::fabs(hi)));
  std::vector<double> x(kDoublePoints), y(kDoublePoints);
  for (int i = 0; i < kDoublePoints; ++i) {
    double v = lo + (hi - lo) * u(rng);
    if (i % 2 == 0) {
      v = std::exp2(-1074.0 + (top + 1074.0) * u(rng));
      if (lo < 0 && i % 4 == 0) v = -v;
      if (v < lo || v > hi) v = lo + (hi - lo) * u(rng);
    }
    x[i] = v;
  }
#pragma omp simd
  for (int i = 0; i < kDoublePoints; ++i) y[i] = f(x[i]);
  return worst_of(kDoublePoints, [&](int i) { return Worst{ulp_error(y[i], ref(static_cast<ld>(x[i]))), x[i], 0}; });
}

#define CHECK_ULP(worst, bound)                  \
  do {                                           \
    const Worst w_ = (worst);                    \
    INFO("max ulp " << w_.ulp << " at x = " << std::hexfloat << w_.x << ", y = " << w_.y); \
    CHECK(w_.ulp <= (bound));                    \
  } while (0)

// Bitwise equality, with any NaN equal to any NaN (so the sign of zero is checked).
template <class T>
bool same(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(a) ==
                                                 std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(b);
}

#define CHECK_SAME(got, want)                                                              \
  do {                                                                                     \
    const auto g_ = (got);                                                                 \
    const auto w_ = (want);                                                                \
    INFO(#got << " = " << std::hexfloat << g_ << ", want " << w_);                          \
    CHECK(same(g_, w_));                                                                   \
  } while (0)

}  // namespace

// ---- float: dense sweeps ----------------------------------------------------------------------

TEST_CASE("float exp, expm1, log, log1p over all float patterns", "[math][float]") {
  CHECK_ULP(sweep_float([](float x) { return m::exp(x); }, [](double x) { return std::exp(x); }), 2.0);
  CHECK_ULP(sweep_float([](float x) { return m::expm1(x); }, [](double x) { return std::expm1(x); }), 2.0);
  CHECK_ULP(sweep_float([](float x) { return m::log(x); }, [](double x) { return std::log(x); }), 2.0);
  CHECK_ULP(sweep_float([](float x) { return m::log1p(x); }, [](double x) { return std::log1p(x); }), 2.0);
}

TEST_CASE("float tanh, sigmoid, softplus, erf over all float patterns", "[math][float]") {
  CHECK_ULP(sweep_float([](float x) { return m::tanh(x); }, [](double x) { return std::tanh(x); }), 2.0);
  CHECK_ULP(sweep_float([](float x) { return m::sigmoid(x); },
                        [](double x) { return 1.0 / (1.0 + std::exp(-x)); }),
            2.0);
  CHECK_ULP(sweep_float([](float x) { return m::softplus(x); },
                        [](double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }),
            2.0);
  CHECK_ULP(sweep_float([](float x) { return m::erf(x); }, [](double x) { return std::erf(x); }), 2.0);
}

TEST_CASE("float sin, cos", "[math][float]") {
  const auto sin_f = [](float x) { return m::sin(x); };
  const auto cos_f = [](float x) { return m::cos(x); };
  const auto sin_d = [](double x) { return std::sin(x); };
  const auto cos_d = [](double x) { return std::cos(x); };
  SECTION("|x| <= 1e5: 2 ulp") {
    CHECK_ULP(sweep_float(sin_f, sin_d, -1e5, 1e5), 2.0);
    CHECK_ULP(sweep_float(cos_f, cos_d, -1e5, 1e5), 2.0);
  }
  SECTION("|x| < 2^22 pi/2, the end of the reduction's range: 2.5 ulp") {
    const double limit = 0x1p22 * 1.5707963267948966;
    CHECK_ULP(sweep_float(sin_f, sin_d, -limit, limit, kStride * 7), 2.5);
    CHECK_ULP(sweep_float(cos_f, cos_d, -limit, limit, kStride * 7), 2.5);
  }
  SECTION("beyond it the values are wrong but stay in [-1, 1]") {
    float outside = 0;  // first argument with |sin| or |cos| > 1
    for (std::uint64_t b = 0x4ac90fdbu; b < 0x7f800000u && outside == 0; b += 4099) {
      const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));  // 2^22 pi/2 .. max
      if (!(std::fabs(m::sin(x)) <= 1 && std::fabs(m::sin(-x)) <= 1 && std::fabs(m::cos(x)) <= 1)) outside = x;
    }
    INFO(std::hexfloat << outside);
    CHECK(outside == 0);
  }
}

TEST_CASE("float pow", "[math][float]") {
  // x over the float patterns, y random with |y log|x|| up to 100 (results from subnormal to
  // overflow); negative x gets integer y. The reference is pow in double.
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> xs, ys;
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += std::uint64_t(kStride) * 11) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (!std::isfinite(x)) continue;
    const double lx = std::fabs(std::log(std::fabs(static_cast<double>(x))));
    float y = static_cast<float>(u(rng) * std::min(lx > 0 ? 100.0 / lx : 1e6, 1e6));
    if (x < 0) y = std::nearbyint(y);
    xs.push_back(x);
    ys.push_back(y);
  }
  const int n = static_cast<int>(xs.size());
  std::vector<float> out(xs.size());
#pragma omp simd
  for (int i = 0; i < n; ++i) out[i] = m::pow(xs[i], ys[i]);
  CHECK_ULP(worst_of(n, [&](int i) {
              return Worst{ulp_error(out[i], std::pow(double(xs[i]), double(ys[i]))), xs[i], ys[i]};
            }),
            2.0);
}

TEST_CASE("float sqrt and rsqrt are exactly sqrt and 1/sqrt", "[math][float]") {
  const auto sqrt_f = [](double x) { return double(std::sqrt(float(x))); };
  const auto rsqrt_f = [](double x) { return double(1.0f / std::sqrt(float(x))); };
  CHECK_ULP(sweep_float([](float x) { return m::sqrt(x); }, sqrt_f, -kInf, kInf, kStride * 11), 0.0);
  CHECK_ULP(sweep_float([](float x) { return m::rsqrt(x); }, rsqrt_f, -kInf, kInf, kStride * 11), 0.0);
}

// ---- double: random sweeps ----------------------------------------------------------------------

TEST_CASE("double functions against long double", "[math][double]") {
  CHECK_ULP(sweep_double([](double x) { return m::exp(x); }, [](ld x) { return std::exp(x); }, -750, 710), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::expm1(x); }, [](ld x) { return std::expm1(x); }, -50, 710), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::expm1(x); }, [](ld x) { return std::expm1(x); }, -2, 2), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::log(x); }, [](ld x) { return std::log(x); }, 0, 1.7e308), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::log(x); }, [](ld x) { return std::log(x); }, 0.5, 2), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::log1p(x); }, [](ld x) { return std::log1p(x); }, -1, 1.7e308), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::log1p(x); }, [](ld x) { return std::log1p(x); }, -1, 3), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::tanh(x); }, [](ld x) { return std::tanh(x); }, -30, 30), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::sigmoid(x); }, [](ld x) { return 1 / (1 + std::exp(-x)); }, -750, 750), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::sigmoid(x); }, [](ld x) { return 1 / (1 + std::exp(-x)); }, -40, 40), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::softplus(x); },
                         [](ld x) { return x > 20 ? x : std::log1p(std::exp(x)); }, -750, 750),
            2.0);
  CHECK_ULP(sweep_double([](double x) { return m::erf(x); }, [](ld x) { return std::erf(x); }, -7, 7), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::sin(x); }, [](ld x) { return std::sin(x); }, -1e5, 1e5), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::cos(x); }, [](ld x) { return std::cos(x); }, -1e5, 1e5), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::sin(x); }, [](ld x) { return std::sin(x); }, -1e14, 1e14), 2.0);
  CHECK_ULP(sweep_double([](double x) { return m::cos(x); }, [](ld x) { return std::cos(x); }, -1e14, 1e14), 2.0);
}

TEST_CASE("double pow against long double", "[math][double]") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> xs(kDoublePoints), ys(kDoublePoints), out(kDoublePoints);
  for (int i = 0; i < kDoublePoints; ++i) {
    double x = i % 2 ? std::exp2(-20 + 40 * u(rng)) : std::exp2(-1074 + 2098 * u(rng));
    const double lx = std::fabs(std::log(x));
    double y = (2 * u(rng) - 1) * std::min(lx > 0 ? 700.0 / lx : 1e6, 1e6);
    if (i % 4 == 3) {
      x = -x;
      y = std::nearbyint(y);
    }
    xs[i] = x;
    ys[i] = y;
  }
#pragma omp simd
  for (int i = 0; i < kDoublePoints; ++i) out[i] = m::pow(xs[i], ys[i]);
  CHECK_ULP(worst_of(kDoublePoints, [&](int i) {
              return Worst{ulp_error(out[i], std::pow(ld(xs[i]), ld(ys[i]))), xs[i], ys[i]};
            }),
            3.0);
}

// ---- special values -----------------------------------------------------------------------------

TEMPLATE_TEST_CASE("special values", "[math][special]", float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T den = std::numeric_limits<T>::denorm_min();

  CHECK_SAME(m::exp(T(0)), T(1));
  CHECK_SAME(m::exp(T(-0.0)), T(1));
  CHECK_SAME(m::exp(-inf), T(0));
  CHECK_SAME(m::exp(inf), inf);
  CHECK_SAME(m::exp(nan), nan);
  CHECK_SAME(m::exp(T(1000)), inf);
  CHECK_SAME(m::exp(T(-1000)), T(0));

  CHECK_SAME(m::expm1(T(0)), T(0));
  CHECK_SAME(m::expm1(T(-0.0)), T(-0.0));
  CHECK_SAME(m::expm1(-inf), T(-1));
  CHECK_SAME(m::expm1(inf), inf);
  CHECK_SAME(m::expm1(nan), nan);
  CHECK_SAME(m::expm1(T(1000)), inf);
  CHECK_SAME(m::expm1(den), den);
  CHECK_SAME(m::expm1(-den), -den);

  CHECK_SAME(m::log(T(0)), -inf);
  CHECK_SAME(m::log(T(-0.0)), -inf);
  CHECK_SAME(m::log(T(1)), T(0));
  CHECK_SAME(m::log(T(-1)), nan);
  CHECK_SAME(m::log(-inf), nan);
  CHECK_SAME(m::log(-den), nan);
  CHECK_SAME(m::log(inf), inf);
  CHECK_SAME(m::log(nan), nan);

  CHECK_SAME(m::log1p(T(0)), T(0));
  CHECK_SAME(m::log1p(T(-0.0)), T(-0.0));
  CHECK_SAME(m::log1p(T(-1)), -inf);
  CHECK_SAME(m::log1p(T(-2)), nan);
  CHECK_SAME(m::log1p(-inf), nan);
  CHECK_SAME(m::log1p(inf), inf);
  CHECK_SAME(m::log1p(nan), nan);
  CHECK_SAME(m::log1p(den), den);
  CHECK_SAME(m::log1p(-den), -den);

  CHECK_SAME(m::tanh(T(0)), T(0));
  CHECK_SAME(m::tanh(T(-0.0)), T(-0.0));
  CHECK_SAME(m::tanh(inf), T(1));
  CHECK_SAME(m::tanh(-inf), T(-1));
  CHECK_SAME(m::tanh(T(50)), T(1));
  CHECK_SAME(m::tanh(T(-50)), T(-1));
  CHECK_SAME(m::tanh(nan), nan);
  CHECK_SAME(m::tanh(-den), -den);

  CHECK_SAME(m::sigmoid(T(0)), T(0.5));
  CHECK_SAME(m::sigmoid(T(-0.0)), T(0.5));
  CHECK_SAME(m::sigmoid(-inf), T(0));
  CHECK_SAME(m::sigmoid(inf), T(1));
  CHECK_SAME(m::sigmoid(nan), nan);

  CHECK_SAME(m::softplus(T(0)), static_cast<T>(std::log(2.0L)));
  CHECK_SAME(m::softplus(T(20.5)), T(20.5));
  CHECK_SAME(m::softplus(T(1e30)), T(1e30));
  CHECK_SAME(m::softplus(inf), inf);
  CHECK_SAME(m::softplus(-inf), T(0));
  CHECK_SAME(m::softplus(nan), nan);

  CHECK_SAME(m::erf(T(0)), T(0));
  CHECK_SAME(m::erf(T(-0.0)), T(-0.0));
  CHECK_SAME(m::erf(inf), T(1));
  CHECK_SAME(m::erf(-inf), T(-1));
  CHECK_SAME(m::erf(T(10)), T(1));
  CHECK_SAME(m::erf(nan), nan);

  CHECK_SAME(m::sin(T(0)), T(0));
  CHECK_SAME(m::sin(T(-0.0)), T(-0.0));
  CHECK_SAME(m::sin(den), den);
  CHECK_SAME(m::sin(inf), nan);
  CHECK_SAME(m::sin(-inf), nan);
  CHECK_SAME(m::sin(nan), nan);
  CHECK_SAME(m::cos(T(0)), T(1));
  CHECK_SAME(m::cos(T(-0.0)), T(1));
  CHECK_SAME(m::cos(inf), nan);
  CHECK_SAME(m::cos(-inf), nan);
  CHECK_SAME(m::cos(nan), nan);

  CHECK_SAME(m::sqrt(T(0)), T(0));
  CHECK_SAME(m::sqrt(T(-0.0)), T(-0.0));
  CHECK_SAME(m::sqrt(T(-1)), nan);
  CHECK_SAME(m::sqrt(inf), inf);
  CHECK_SAME(m::rsqrt(T(0)), inf);
  CHECK_SAME(m::rsqrt(T(-1)), nan);
  CHECK_SAME(m::rsqrt(inf), T(0));
  CHECK_SAME(m::rsqrt(T(4)), T(0.5));
}

TEMPLATE_TEST_CASE("subnormal results and arguments", "[math][special]", float, double) {
  using T = TestType;
  using R = std::conditional_t<std::is_same_v<T, float>, double, ld>;
  const T den = std::numeric_limits<T>::denorm_min();
  const T tiny = std::numeric_limits<T>::min();
  // exp and sigmoid into the subnormal range round like the reference (float: exp(-100) ~ 3.7e-44).
  for (T x : {T(-88), T(-100), T(-103.5), T(-709), T(-730), T(-744)}) {
    INFO(x);
    CHECK(ulp_error(m::exp(x), std::exp(static_cast<R>(x))) <= 1.0);
    CHECK(ulp_error(m::sigmoid(x), 1 / (1 + std::exp(-static_cast<R>(x)))) <= 1.0);
  }
  // log of subnormals
  for (T x : {den, T(3) * den, tiny / T(3), tiny * T(0.999)}) {
    INFO(std::hexfloat << x);
    CHECK(ulp_error(m::log(x), std::log(static_cast<R>(x))) <= 1.0);
    CHECK(ulp_error(m::pow(x, T(0.5)), std::sqrt(static_cast<R>(x))) <= 2.0);
  }
}

TEMPLATE_TEST_CASE("pow special cases follow C's pow", "[math][special]", float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T big_odd = std::is_same_v<T, float> ? T(0x1p23) + 1 : T(0x1p52) + 1;  // odd, past 2^mant
  const T values[] = {T(0), T(-0.0), T(1), T(-1), T(2), T(-2), T(0.5), T(-0.5), T(3), T(-3),
                      T(2.5), T(-2.5), inf, -inf, nan, big_odd, -big_odd, T(1e-30), T(-1e-30),
                      T(1000), T(-1000), T(1.0 / 3)};
  for (T x : values) {
    for (T y : values) {
      const T want = std::pow(x, y);
      const T got = m::pow(x, y);
      INFO("pow(" << x << ", " << y << ") = " << got << ", want " << want);
      if (std::isnan(want) || std::isinf(want) || want == 0) {
        CHECK(same(got, want));
      } else {
        CHECK(ulp_error(got, std::pow(static_cast<ld>(x), static_cast<ld>(y))) <= 2.0);
      }
    }
  }
  CHECK_SAME(m::pow(T(-2), T(3)), T(-8));
  CHECK_SAME(m::pow(T(-2), T(2)), T(4));
  CHECK_SAME(m::pow(T(-8), T(1.0 / 3)), nan);
  CHECK_SAME(m::pow(nan, T(0)), T(1));
  CHECK_SAME(m::pow(T(1), nan), T(1));
  CHECK_SAME(m::pow(T(-1), inf), T(1));
  CHECK_SAME(m::pow(T(2), T(1e6)), inf);
  CHECK_SAME(m::pow(T(-2), T(1e6 + 1)), -inf);
  CHECK_SAME(m::pow(T(2), T(-1e6)), T(0));
  CHECK_SAME(m::pow(T(-2), T(-1e6 - 1)), T(-0.0));
}
