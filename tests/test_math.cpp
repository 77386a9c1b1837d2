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
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "test_scale.hpp"

namespace m = solder::math;
using ld = long double;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The float sweeps dominate the run time (the libm reference is ~50x slower than the vector
// code); the sanitizer and debug builds (SOLDER_TEST_SCALE=small) step through fewer patterns,
// and draw fewer random doubles.
std::uint32_t const kStride = ref::sized(97u, 1021u);
int const kDoublePoints = ref::sized(1000000, 100000);

// |y - ref| in units of the ulp of the correctly rounded result (subnormal ulp below the normal
// range). NaN must match NaN; an infinite ref or result must match exactly.
template <class T, class R>
double ulp_error(T y, R ref) {
  constexpr int digits = std::numeric_limits<T>::digits;
  constexpr int min_exp = std::numeric_limits<T>::min_exponent - digits;
  if (std::isnan(ref) || std::isnan(y)) return std::isnan(ref) && std::isnan(y) ? 0.0 : kInf;
  const T rounded = static_cast<T>(ref);
  if (std::isinf(rounded) || std::isinf(y)) return y == rounded ? 0.0 : kInf;
  int e = 0;  // |ref| in [2^(e-1), 2^e)
  R ulp;
  if constexpr (std::is_same_v<R, double>) {  // float sweeps: frexp/ldexp cost as much as libm
    e = static_cast<int>((std::bit_cast<std::uint64_t>(ref) >> 52) & 0x7ff) - 1022;
    ulp = std::bit_cast<double>(std::uint64_t(std::max(e - digits, min_exp) + 1023) << 52);
  } else {
    std::frexp(ref, &e);
    ulp = std::ldexp(R(1), std::max(e - digits, min_exp));
  }
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

// Random doubles in [lo, hi]: half log-uniform over all magnitudes (both signs where lo < 0),
// half uniform in [core_lo, core_hi].
template <class F, class R>
Worst sweep_double(F f, R ref, double lo, double hi, double core_lo, double core_hi) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double top = std::log2(std::max(std::fabs(lo), std::fabs(hi)));
  std::vector<double> x(kDoublePoints), y(kDoublePoints);
  for (int i = 0; i < kDoublePoints; ++i) {
    double v = core_lo + (core_hi - core_lo) * u(rng);
    if (i % 2 == 0) {
      v = std::exp2(-1074.0 + (top + 1074.0) * u(rng));
      if (lo < 0 && i % 4 == 0) v = -v;
      if (v < lo || v > hi) v = lo + (hi - lo) * u(rng);
    }
    x[i] = v;
  }
#pragma omp simd
  for (int i = 0; i < kDoublePoints; ++i) y[i] = f(x[i]);
  return worst_of(kDoublePoints, [&](int i) {
    return Worst{ulp_error(y[i], ref(static_cast<ld>(x[i]))), x[i], 0};
  });
}

// `-s` prints the measured maxima: test_math -s | grep "max ulp"
#define CHECK_ULP(name, worst, bound)                                          \
  do {                                                                         \
    const Worst w_ = (worst);                                                  \
    INFO(name << ": max ulp " << w_.ulp << " at x = " << std::hexfloat << w_.x \
              << ", y = " << w_.y);                                            \
    CHECK(w_.ulp <= (bound));                                                  \
  } while (0)

// Bitwise equality, with any NaN equal to any NaN (so the sign of zero is checked).
template <class T>
bool same(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(a) ==
             std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(b);
}

#define CHECK_SAME(got, want)                                      \
  do {                                                             \
    const auto g_ = (got);                                         \
    const auto w_ = (want);                                        \
    INFO(#got << " = " << std::hexfloat << g_ << ", want " << w_); \
    CHECK(same(g_, w_));                                           \
  } while (0)

}  // namespace

// ---- float: dense sweeps ----------------------------------------------------------------------

#define OURS_F(fn) [](float x) { return m::fn(x); }
#define OURS_D(fn) [](double x) { return m::fn(x); }
#define LIBM_D(fn) [](double x) { return std::fn(x); }
#define LIBM_LD(fn) [](ld x) { return std::fn(x); }

TEST_CASE("float exp, expm1, log, log1p over all float patterns", "[math][float]") {
  CHECK_ULP("exp float", sweep_float(OURS_F(exp), LIBM_D(exp)), 2.0);
  CHECK_ULP("expm1 float", sweep_float(OURS_F(expm1), LIBM_D(expm1)), 2.0);
  CHECK_ULP("log float", sweep_float(OURS_F(log), LIBM_D(log)), 2.0);
  CHECK_ULP("log1p float", sweep_float(OURS_F(log1p), LIBM_D(log1p)), 2.0);
}

TEST_CASE("float tanh, sigmoid, softplus, erf over all float patterns", "[math][float]") {
  const auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  const auto softplus = [](double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); };
  CHECK_ULP("tanh float", sweep_float(OURS_F(tanh), LIBM_D(tanh)), 2.0);
  CHECK_ULP("sigmoid float", sweep_float(OURS_F(sigmoid), sigmoid), 2.0);
  CHECK_ULP("softplus float", sweep_float(OURS_F(softplus), softplus), 2.0);
  CHECK_ULP("erf float", sweep_float(OURS_F(erf), LIBM_D(erf)), 2.0);
}

// The device's tanh divides (1 - e) / (1 + e), e = e^-2a in (0, 1/3], by div_refine from the
// estimate of 1/(1 + e) that rcp.approx gives (within 1 ulp, says the PTX spec). Here every
// float e (below 2^-26 both operands round to 1), with every estimate up to 2 floats away from
// the rounded reciprocal, must give the IEEE quotient: then the device's tanh is the host's.
TEST_CASE("tanh's division from a reciprocal estimate is the IEEE division", "[math][float]") {
  namespace md = solder::math::detail;
  std::uint32_t const stride = ref::sized(1u, kStride / 8);
  const auto wrong_from = [](float n, float d) {  // an estimate that gives another quotient, or 0
    const float near = static_cast<float>(1.0 / static_cast<double>(d));
    float r = std::nextafter(std::nextafter(near, 0.0f), 0.0f);
    const auto ieee = std::bit_cast<std::uint32_t>(n / d);
    for (int k = 0; k < 5; ++k, r = std::nextafter(r, 1.0f))
      if (std::bit_cast<std::uint32_t>(md::div_refine(n, d, r)) != ieee) return r;
    return 0.0f;
  };
  const std::uint32_t first = std::bit_cast<std::uint32_t>(0x1p-26f);
  const std::uint32_t last = std::bit_cast<std::uint32_t>(1.0f / 3.0f);
  std::int64_t wrong = 0;
  float example = 0;
#pragma omp parallel for reduction(+ : wrong) schedule(static)
  for (std::uint32_t b = first; b <= last; b += stride) {
    const float e = std::bit_cast<float>(b);
    if (wrong_from(1.0f - e, 1.0f + e) != 0) {
      ++wrong;
#pragma omp critical
      example = e;
    }
  }
  INFO("e = " << example);
  CHECK(wrong == 0);
  // Not every division is safe: 1 / (2 - 2^-23) = (1 + 2^-24 + 2^-48 + ...) / 2 lies just above a
  // midpoint, and the estimate 1/2 (within an ulp) rounds it down.
  CHECK(md::div_refine(1.0f, 0x1.fffffep0f, 0.5f) != 1.0f / 0x1.fffffep0f);
}

TEST_CASE("float sin, cos", "[math][float]") {
  SECTION("|x| <= 1e5: 2 ulp") {
    CHECK_ULP("sin float |x|<=1e5", sweep_float(OURS_F(sin), LIBM_D(sin), -1e5, 1e5), 2.0);
    CHECK_ULP("cos float |x|<=1e5", sweep_float(OURS_F(cos), LIBM_D(cos), -1e5, 1e5), 2.0);
  }
  SECTION("|x| < 2^22 pi/2, the end of the reduction's range: 2.5 ulp") {
    const double lim = 0x1p22 * 1.5707963267948966;
    const std::uint32_t stride = kStride * 7;
    CHECK_ULP("sin float |x|<2^22pi/2", sweep_float(OURS_F(sin), LIBM_D(sin), -lim, lim, stride), 2.5);
    CHECK_ULP("cos float |x|<2^22pi/2", sweep_float(OURS_F(cos), LIBM_D(cos), -lim, lim, stride), 2.5);
  }
  SECTION("beyond it the values are wrong but stay in [-1, 1]") {
    float outside = 0;  // first argument with |sin| or |cos| > 1
    for (std::uint64_t b = 0x4ac90fdbu; b < 0x7f800000u && outside == 0; b += 4099) {
      const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));  // 2^22 pi/2 .. max
      if (!(std::fabs(m::sin(x)) <= 1 && std::fabs(m::sin(-x)) <= 1 && std::fabs(m::cos(x)) <= 1))
        outside = x;
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
  const auto error = [&](int i) {
    return Worst{ulp_error(out[i], std::pow(double(xs[i]), double(ys[i]))), xs[i], ys[i]};
  };
  CHECK_ULP("pow float", worst_of(n, error), 2.0);
}

TEST_CASE("float sqrt and rsqrt are exactly sqrt and 1/sqrt", "[math][float]") {
  const auto sqrt = [](double x) { return double(std::sqrt(float(x))); };
  const auto rsqrt = [](double x) { return double(1.0f / std::sqrt(float(x))); };
  CHECK_ULP("sqrt float", sweep_float(OURS_F(sqrt), sqrt, -kInf, kInf, kStride * 11), 0.0);
  CHECK_ULP("rsqrt float", sweep_float(OURS_F(rsqrt), rsqrt, -kInf, kInf, kStride * 11), 0.0);
}

// ---- double: random sweeps ----------------------------------------------------------------------

TEST_CASE("double functions against long double", "[math][double]") {
  // (full range for the log-uniform half, core range for the uniform half)
  const auto sigmoid = [](ld x) { return 1 / (1 + std::exp(-x)); };
  const auto softplus = [](ld x) { return x > 20 ? x : std::log1p(std::exp(x)); };
  const double big = 1.7e308;
  CHECK_ULP("exp double", sweep_double(OURS_D(exp), LIBM_LD(exp), -750, 710, -5, 5), 2.0);
  CHECK_ULP("expm1 double", sweep_double(OURS_D(expm1), LIBM_LD(expm1), -50, 710, -2, 2), 2.0);
  CHECK_ULP("log double", sweep_double(OURS_D(log), LIBM_LD(log), 0, big, 0.5, 2), 2.0);
  CHECK_ULP("log1p double", sweep_double(OURS_D(log1p), LIBM_LD(log1p), -1, big, -1, 3), 2.0);
  CHECK_ULP("tanh double", sweep_double(OURS_D(tanh), LIBM_LD(tanh), -30, 30, -3, 3), 2.0);
  CHECK_ULP("sigmoid double", sweep_double(OURS_D(sigmoid), sigmoid, -750, 750, -40, 40), 2.0);
  CHECK_ULP("softplus double", sweep_double(OURS_D(softplus), softplus, -750, 750, -30, 30), 2.0);
  CHECK_ULP("erf double", sweep_double(OURS_D(erf), LIBM_LD(erf), -7, 7, -6, 6), 2.0);
  CHECK_ULP("sin double", sweep_double(OURS_D(sin), LIBM_LD(sin), -1e14, 1e14, -1e5, 1e5), 2.0);
  CHECK_ULP("cos double", sweep_double(OURS_D(cos), LIBM_LD(cos), -1e14, 1e14, -1e5, 1e5), 2.0);
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
  const auto error = [&](int i) {
    return Worst{ulp_error(out[i], std::pow(ld(xs[i]), ld(ys[i]))), xs[i], ys[i]};
  };
  CHECK_ULP("pow double", worst_of(kDoublePoints, error), 3.0);
}

// ---- special values -----------------------------------------------------------------------------

TEMPLATE_TEST_CASE("special values", "[math][special]", float, double) {
  using T = TestType;
  using Fn = T (*)(T);
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T den = std::numeric_limits<T>::denorm_min();
  const T ln2 = static_cast<T>(std::log(2.0L));
  const Fn exp = [](T v) { return m::exp(v); };
  const Fn expm1 = [](T v) { return m::expm1(v); };
  const Fn log = [](T v) { return m::log(v); };
  const Fn log1p = [](T v) { return m::log1p(v); };
  const Fn tanh = [](T v) { return m::tanh(v); };
  const Fn sigmoid = [](T v) { return m::sigmoid(v); };
  const Fn softplus = [](T v) { return m::softplus(v); };
  const Fn erf = [](T v) { return m::erf(v); };
  const Fn sin = [](T v) { return m::sin(v); };
  const Fn cos = [](T v) { return m::cos(v); };
  const Fn sqrt = [](T v) { return m::sqrt(v); };
  const Fn rsqrt = [](T v) { return m::rsqrt(v); };
  const struct {
    const char* name;
    Fn f;
    T x, want;
  } cases[] = {
      {"exp", exp, T(0), T(1)},
      {"exp", exp, T(-0.0), T(1)},
      {"exp", exp, -inf, T(0)},
      {"exp", exp, inf, inf},
      {"exp", exp, nan, nan},
      {"exp", exp, T(1000), inf},
      {"exp", exp, T(-1000), T(0)},
      {"expm1", expm1, T(0), T(0)},
      {"expm1", expm1, T(-0.0), T(-0.0)},
      {"expm1", expm1, -inf, T(-1)},
      {"expm1", expm1, inf, inf},
      {"expm1", expm1, nan, nan},
      {"expm1", expm1, T(1000), inf},
      {"expm1", expm1, den, den},
      {"expm1", expm1, -den, -den},
      {"log", log, T(0), -inf},
      {"log", log, T(-0.0), -inf},
      {"log", log, T(1), T(0)},
      {"log", log, T(-1), nan},
      {"log", log, -inf, nan},
      {"log", log, -den, nan},
      {"log", log, inf, inf},
      {"log", log, nan, nan},
      {"log1p", log1p, T(0), T(0)},
      {"log1p", log1p, T(-0.0), T(-0.0)},
      {"log1p", log1p, T(-1), -inf},
      {"log1p", log1p, T(-2), nan},
      {"log1p", log1p, -inf, nan},
      {"log1p", log1p, inf, inf},
      {"log1p", log1p, nan, nan},
      {"log1p", log1p, den, den},
      {"log1p", log1p, -den, -den},
      {"tanh", tanh, T(0), T(0)},
      {"tanh", tanh, T(-0.0), T(-0.0)},
      {"tanh", tanh, inf, T(1)},
      {"tanh", tanh, -inf, T(-1)},
      {"tanh", tanh, T(50), T(1)},
      {"tanh", tanh, T(-50), T(-1)},
      {"tanh", tanh, nan, nan},
      {"tanh", tanh, -den, -den},
      {"sigmoid", sigmoid, T(0), T(0.5)},
      {"sigmoid", sigmoid, T(-0.0), T(0.5)},
      {"sigmoid", sigmoid, -inf, T(0)},
      {"sigmoid", sigmoid, inf, T(1)},
      {"sigmoid", sigmoid, nan, nan},
      {"softplus", softplus, T(0), ln2},
      {"softplus", softplus, T(20.5), T(20.5)},
      {"softplus", softplus, T(1e30), T(1e30)},
      {"softplus", softplus, inf, inf},
      {"softplus", softplus, -inf, T(0)},
      {"softplus", softplus, nan, nan},
      {"erf", erf, T(0), T(0)},
      {"erf", erf, T(-0.0), T(-0.0)},
      {"erf", erf, inf, T(1)},
      {"erf", erf, -inf, T(-1)},
      {"erf", erf, T(10), T(1)},
      {"erf", erf, nan, nan},
      {"sin", sin, T(0), T(0)},
      {"sin", sin, T(-0.0), T(-0.0)},
      {"sin", sin, den, den},
      {"sin", sin, inf, nan},
      {"sin", sin, -inf, nan},
      {"sin", sin, nan, nan},
      {"cos", cos, T(0), T(1)},
      {"cos", cos, T(-0.0), T(1)},
      {"cos", cos, inf, nan},
      {"cos", cos, -inf, nan},
      {"cos", cos, nan, nan},
      {"sqrt", sqrt, T(0), T(0)},
      {"sqrt", sqrt, T(-0.0), T(-0.0)},
      {"sqrt", sqrt, T(-1), nan},
      {"sqrt", sqrt, inf, inf},
      {"rsqrt", rsqrt, T(0), inf},
      {"rsqrt", rsqrt, T(-1), nan},
      {"rsqrt", rsqrt, inf, T(0)},
      {"rsqrt", rsqrt, T(4), T(0.5)},
  };
  for (const auto& c : cases) {
    const T got = c.f(c.x);
    INFO(c.name << "(" << std::hexfloat << c.x << ") = " << got << ", want " << c.want);
    CHECK(same(got, c.want));
  }
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
  const T values[] = {T(0),     T(-0.0),  T(1),      T(-1),   T(2),     T(-2),     T(0.5), T(-0.5),
                      T(3),     T(-3),    T(2.5),    T(-2.5), inf,      -inf,      nan,    big_odd,
                      -big_odd, T(1e-30), T(-1e-30), T(1000), T(-1000), T(1.0 / 3)};
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
