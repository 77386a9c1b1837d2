// Transcendental functions for float and double that vectorize: every function is branch-free
// straight-line code (bitwise selects, integer exponent tricks, fma polynomials; no tables, no
// libm calls but sqrt), so g++ vectorizes `omp simd` loops over them and nvcc inlines them into
// device code. Accuracy, method and speed per function: docs/math.md.
//
// Relies on IEEE round-to-nearest and on the compiler not reassociating floating-point
// arithmetic: do not build with -ffast-math / -fassociative-math. std::fma must be the hardware
// instruction (-march with FMA, e.g. native) to be fast and vectorize; without it the results
// are the same but slow. sqrt/rsqrt vectorize only with -fno-math-errno (g++ otherwise keeps a
// scalar errno path for negative arguments).
#pragma once

#include <cmath>
#include <cstdint>

#include "config.hpp"

namespace solder::math {
namespace detail {

template <class T>
struct fp;

template <>
struct fp<float> {
  using U = std::uint32_t;
  using I = std::int32_t;
  static constexpr int mant = 23;  // explicit mantissa bits
  static constexpr I bias = 127;
  static constexpr I max_exp = 127;
  static constexpr float round = 0x1.8p23f;  // v + round rounds |v| < 2^22 to an integer
  static constexpr float two_mant = 0x1p23f;
  static constexpr float min_normal = 0x1p-126f;
  static constexpr U log_off = 0x3f2aaaabu;  // bits of 2/3: log reduces to m in [2/3, 4/3)
  static constexpr U exp_field = 0xff800000u;
  static constexpr float log2e = 0x1.715476p+0f;
  static constexpr float ln2_hi = 0x1.62e43p-1f;
  static constexpr float ln2_lo = -0x1.05c61p-29f;
  static constexpr float ln2_hi16 = 0x1.62e4p-1f;  // 16 bits: e * ln2_hi16 is exact
  static constexpr float ln2_lo16 = 0x1.7f7d1cp-20f;
  static constexpr float two_thirds_hi = 0x1.555556p-1f;
  static constexpr float two_thirds_lo = -0x1.555556p-26f;
  static constexpr float exp_hi = 89.0f;    // exp(89) overflows
  static constexpr float exp_lo = -104.0f;  // exp(-104) < 2^-150 rounds to 0
  static constexpr float tanh_sat = 10.0f;  // tanh(10) rounds to 1
  static constexpr float erf_sat = 4.0f;    // erf(4) rounds to 1
  static constexpr float two_over_pi = 0x1.45f306p-1f;
  static constexpr float pio2_1 = 0x1.921fb6p+0f;
  static constexpr float pio2_2 = -0x1.777a5cp-25f;
  static constexpr float pio2_3 = -0x1.ee59dap-50f;
  static constexpr float sincos_r = 1.06f;  // |r| bound the sin/cos polynomials are fit on
};

template <>
struct fp<double> {
  using U = std::uint64_t;
  using I = std::int64_t;
  static constexpr int mant = 52;
  static constexpr I bias = 1023;
  static constexpr I max_exp = 1023;
  static constexpr double round = 0x1.8p52;
  static constexpr double two_mant = 0x1p52;
  static constexpr double min_normal = 0x1p-1022;
  static constexpr U log_off = 0x3fe5555555555555u;
  static constexpr U exp_field = 0xfff0000000000000u;
  static constexpr double log2e = 0x1.71547652b82fep+0;
  static constexpr double ln2_hi = 0x1.62e42fefa39efp-1;
  static constexpr double ln2_lo = 0x1.abc9e3b39803fp-56;
  static constexpr double ln2_hi16 = 0x1.62e42fefa38p-1;  // 42 bits: e * ln2_hi16 is exact
  static constexpr double ln2_lo16 = 0x1.ef35793c7673p-45;
  static constexpr double two_thirds_hi = 0x1.5555555555555p-1;
  static constexpr double two_thirds_lo = 0x1.5555555555555p-55;
  static constexpr double exp_hi = 710.0;
  static constexpr double exp_lo = -746.0;
  static constexpr double tanh_sat = 20.0;
  static constexpr double erf_sat = 6.0;
  static constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
  static constexpr double pio2_1 = 0x1.921fb54442d18p+0;
  static constexpr double pio2_2 = 0x1.1a62633145c07p-54;
  static constexpr double pio2_3 = -0x1.f1976b7ed8fbcp-110;
  static constexpr double sincos_r = 0.80;
};

template <class T>
SOLDER_HD SOLDER_INLINE constexpr typename fp<T>::U to_bits(T x) {
  return __builtin_bit_cast(typename fp<T>::U, x);
}
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T from_bits(typename fp<T>::U b) {
  return __builtin_bit_cast(T, b);
}
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T inf() {
  return from_bits<T>(typename fp<T>::U(fp<T>::max_exp + fp<T>::bias + 1) << fp<T>::mant);
}
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T nan() {
  return from_bits<T>(typename fp<T>::U(1) << (fp<T>::mant - 1) | to_bits(inf<T>()));
}
// 2^k for k in the normal exponent range. The shift is unsigned: a garbage k (from a NaN
// input, whose result is NaN anyway) must not make it undefined.
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T pow2i(typename fp<T>::I k) {
  return from_bits<T>(typename fp<T>::U(k + fp<T>::bias) << fp<T>::mant);
}
// Flips the sign of x when `neg`.
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T negate_if(T x, bool neg) {
  return from_bits<T>(to_bits(x) ^ (typename fp<T>::U(neg) << (8 * sizeof(T) - 1)));
}
// c ? a : b on the bit patterns. A plain ?: whose arm is computed only for it lets g++ sink
// that computation into a branch; floating-point operations there may trap, so g++ will not
// execute them speculatively and the loop does not vectorize. Here both arms are always used.
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T select(bool c, T a, T b) {
  const auto m = typename fp<T>::U(0) - typename fp<T>::U(c);
  return from_bits<T>((to_bits(a) & m) | (to_bits(b) & ~m));
}
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T clamp_nan(T x, T lo, T hi) {  // NaN passes through
  return select(x < lo, lo, select(x > hi, hi, x));
}

// n / d from an estimate r of 1/d (within an ulp): one Newton step for the reciprocal, the
// quotient, and one correction from its exact remainder: the fast path of CUDA's IEEE division
// (div.rn.f32). For the operands tanh divides it is n / d, rounded once (test_math checks every
// one of them, for every estimate the PTX spec allows); not for all: 1 / (2 - 2^-23) from the
// estimate 1/2 rounds the wrong way.
SOLDER_HD SOLDER_INLINE float div_refine(float n, float d, float r) {
  r = std::fma(r, std::fma(-d, r, 1.0f), r);
  const float q = n * r;
  return std::fma(r, std::fma(-d, q, n), q);
}
// n / d where div_refine is known to round as the division does. On the device that saves the
// division's range check and the branch around its slow path (4 of the 10 instructions it runs).
SOLDER_HD SOLDER_INLINE float div_fast_path(float n, float d) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return div_refine(n, d, r);
#else
  return n / d;
#endif
}
SOLDER_HD SOLDER_INLINE double div_fast_path(double n, double d) { return n / d; }

// c0 + x*(c1 + x*(c2 + ...)), fused.
template <class T>
SOLDER_HD SOLDER_INLINE T horner(T, T c) {
  return c;
}
template <class T, class... C>
SOLDER_HD SOLDER_INLINE T horner(T x, T c0, C... c) {
  return std::fma(horner(x, c...), x, c0);
}

// (exp(r) - 1 - r) / r^2 on |r| <= ln2/2, minimax for the relative error of exp.
SOLDER_HD SOLDER_INLINE float exp_poly(float r) {
  return horner(r, 0x1.fffffcp-2f, 0x1.555492p-3f, 0x1.5558f2p-5f, 0x1.1239e2p-7f, 0x1.6a2434p-10f);
}
SOLDER_HD SOLDER_INLINE double exp_poly(double r) {
  return horner(r, 0x1.000000000000ap-1, 0x1.55555555554fap-3, 0x1.555555555088cp-5,
                0x1.1111111127b9dp-7, 0x1.6c16c18426794p-10, 0x1.a01a012a690aap-13,
                0x1.a0199a16bf1afp-16, 0x1.71df253ba3460p-19, 0x1.28ad68c3f1d54p-22,
                0x1.ad7f78b6cfe92p-26);
}
// Same function, minimax for the relative error of expm1(r).
SOLDER_HD SOLDER_INLINE float expm1_poly(float r) {
  return horner(r, 0x1.fffffep-2f, 0x1.5554b0p-3f, 0x1.555674p-5f, 0x1.122776p-7f, 0x1.6bec06p-10f);
}
SOLDER_HD SOLDER_INLINE double expm1_poly(double r) {
  return horner(r, 0x1.0000000000005p-1, 0x1.5555555555539p-3, 0x1.55555555522c2p-5,
                0x1.1111111118f8fp-7, 0x1.6c16c17ed8cf4p-10, 0x1.a01a01751c4d5p-13,
                0x1.a019a7786c05cp-16, 0x1.71de87fc9ee73p-19, 0x1.28a1d665b1580p-22,
                0x1.ae6bab6b9d1cdp-26);
}

// Nearest integer k to x*log2(e) (as value and as integer, read from the mantissa bits of the
// rounding sum, so no float->int conversion) and x + x_lo - k*ln2 = hi + lo, |hi| <= ln2/2,
// where hi is exact (the fma's product is exact and the difference small) and lo is small.
template <class T>
struct exp_reduced {
  T hi, lo;
  typename fp<T>::I k;
};
template <class T>
SOLDER_HD SOLDER_INLINE exp_reduced<T> exp_reduce(T x, T x_lo = T(0)) {
  using F = fp<T>;
  const T t = std::fma(x, F::log2e, F::round);
  const T k = t - F::round;
  return {std::fma(k, -F::ln2_hi, x), std::fma(k, -F::ln2_lo, x_lo),
          typename F::I(to_bits(t) - to_bits(F::round))};
}
// e^r - 1 for r = hi + lo, rounded once.
template <class T>
SOLDER_HD SOLDER_INLINE T expm1_reduced(T hi, T lo) {
  const T r = hi + lo;
  return hi + std::fma(r * r, exp_poly(r), lo);
}

// e^x = p * 2^k with p = e^r, r = x - k*ln2 rounded once (its error, <= 2^-25 |r| in float,
// moves e^r by < 0.2 ulp) and e^r = 1 + r + r^2*Q(r) one fma chain: fewer operations than the
// hi + lo form. NaN propagates into p.
template <class T>
struct exp_parts {
  T p;
  typename fp<T>::I k;
};
template <class T>
SOLDER_HD SOLDER_INLINE exp_parts<T> exp_split(T x) {
  using F = fp<T>;
  const T t = std::fma(x, F::log2e, F::round);
  const T kf = t - F::round;
  const T r = std::fma(kf, -F::ln2_lo, std::fma(kf, -F::ln2_hi, x));
  return {std::fma(r, std::fma(r, exp_poly(r), T(1)), T(1)),
          typename F::I(to_bits(t) - to_bits(F::round))};
}
// exp(x) for x already clamped to [exp_lo, exp_hi]. 2^k is applied in two halves so that
// overflow and subnormal results (k down to -150 / -1075) need no special case and round once,
// at the last multiply.
template <class T>
SOLDER_HD SOLDER_INLINE T exp_clamped(T x) {
  const auto [p, k] = exp_split(x);
  const auto k1 = k >> 1;
  return p * pow2i<T>(k1) * pow2i<T>(k - k1);
}

// expm1(x + x_lo) = 2^k*expm1(r) + (2^k - 1), where 2^k - 1 is exact for the k where the sum
// cancels. Scale is 2^min(k, max_exp): k = max_exp + 1 only happens on the way to overflow.
template <class T>
struct expm1_parts {
  T q;      // expm1(r)
  T scale;  // 2^k or 2^max_exp
  typename fp<T>::I k;
};
template <class T>
SOLDER_HD SOLDER_INLINE expm1_parts<T> expm1_split(T x, T x_lo) {
  using F = fp<T>;
  const auto [hi, lo, k] = exp_reduce(x, x_lo);
  const T r = hi + lo;
  return {hi + std::fma(r * r, expm1_poly(r), lo), pow2i<T>(k < F::max_exp ? k : F::max_exp), k};
}
// expm1(x + x_lo) for x + x_lo <= 0 (down to -40).
template <class T>
SOLDER_HD SOLDER_INLINE T expm1_nonpos(T x, T x_lo = T(0)) {
  const auto [q, s, k] = expm1_split(x, x_lo);
  return std::fma(q, s, s - T(1));
}
// expm1(x) for x in [-40, exp_hi].
template <class T>
SOLDER_HD SOLDER_INLINE T expm1_clamped(T x) {
  const auto [q, s, k] = expm1_split(x, T(0));
  return select(k > fp<T>::max_exp, (q + T(1)) * s * T(2), std::fma(q, s, s - T(1)));
}

// log(1+f) - f on f in [-1/3, 1/3]. float: minimax f^2*P(f). double: with s = f/(2+f),
// log(1+f) = 2 atanh(s) = f - f^2/2 + s*(f^2/2 + R(s^2)), a series in s^2 <= 1/25 that needs a
// far lower degree (and keeps the division's rounding in the small term).
SOLDER_HD SOLDER_INLINE float log1p_tail(float f) {
  return f * f *
         horner(f, -0x1.p-1f, 0x1.555502p-2f, -0x1.fffe84p-3f, 0x1.99d1f2p-3f, -0x1.55a754p-3f,
                0x1.1ebe68p-3f, -0x1.f25dd8p-4f, 0x1.1ed146p-3f, -0x1.0931e6p-3f);
}
SOLDER_HD SOLDER_INLINE double log1p_tail(double f) {
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double hfsq = 0.5 * f * f;
  // z * (2 atanh(s) - 2s) / s^3 as a polynomial in z = s^2, |s| <= 1/5.
  const double r = z * horner(z, 0x1.5555555555773p-1, 0x1.99999998f1750p-2, 0x1.249249b1b008cp-2,
                              0x1.c71c01a7af622p-3, 0x1.7474d8b3e5894p-3, 0x1.3853932534bddp-3,
                              0x1.3ab8c3b01a813p-3);
  return s * (hfsq + r) - hfsq;
}

// (2 atanh(s) - 2s - 2s^3/3) / s^5 as a polynomial in z = s^2, |s| <= 1/5 (pow's log).
SOLDER_HD SOLDER_INLINE float atanh_tail5(float z) {
  return horner(z, 0x1.999a9ep-2f, 0x1.241aa0p-2f, 0x1.e8da74p-3f);
}
SOLDER_HD SOLDER_INLINE double atanh_tail5(double z) {
  return horner(z, 0x1.9999999999968p-2, 0x1.2492492498cc9p-2, 0x1.c71c71bc81b53p-3,
                0x1.745d1bbf95f9ap-3, 0x1.3b1299af1c9d4p-3, 0x1.1139f4a53582dp-3,
                0x1.dad47c853161bp-4, 0x1.01715192cb12ep-3);
}

// x = m * 2^e with m in [2/3, 4/3): bits minus those of 2/3 carry e in the exponent field.
template <class T>
struct log_reduced {
  T f;  // m - 1, exact
  T e;
  typename fp<T>::I ei;  // e as an integer
};
template <class T>
SOLDER_HD SOLDER_INLINE log_reduced<T> log_reduce_normal(T x) {  // x positive normal
  using F = fp<T>;
  const typename F::U ix = to_bits(x);
  const typename F::U tmp = ix - F::log_off;
  const typename F::I e = typename F::I(tmp) >> F::mant;  // arithmetic shift (C++20)
  // e as a float through the rounding constant's mantissa: AVX2 has no int64->double convert.
  const T ef = from_bits<T>(to_bits(F::round) + typename F::U(e)) - F::round;
  return {from_bits<T>(ix - (tmp & F::exp_field)) - T(1), ef, e};
}
// Any positive x: subnormals are scaled by 2^mant first (ei is then off by mant).
template <class T>
SOLDER_HD SOLDER_INLINE log_reduced<T> log_reduce(T x) {
  using F = fp<T>;
  const bool sub = x < F::min_normal;
  const auto r = log_reduce_normal(select(sub, x * F::two_mant, x));
  return {r.f, r.e - select(sub, T(F::mant), T(0)), r.ei};
}

// (sin(r) - r) / r^3 and (cos(r) - 1) / r^2 as polynomials in z = r^2, on |r| <= sincos_r:
// pi/4 plus the overshoot of a k rounded from x * (2/pi rounded), up to |x| = 2^22 pi/2 in float.
SOLDER_HD SOLDER_INLINE float sin_poly(float z) {
  return horner(z, -0x1.555554p-3f, 0x1.1110dcp-7f, -0x1.9ff70cp-13f, 0x1.68aed2p-19f);
}
SOLDER_HD SOLDER_INLINE double sin_poly(double z) {
  return horner(z, -0x1.5555555555545p-3, 0x1.111111110f2afp-7, -0x1.a01a019b56568p-13,
                0x1.71de34d411cedp-19, -0x1.ae5de554094adp-26, 0x1.5d6d7659981b9p-33);
}
SOLDER_HD SOLDER_INLINE float cos_poly(float z) {
  return horner(z, -0x1.fffffep-2f, 0x1.5554b6p-5f, -0x1.6be418p-10f, 0x1.93303ep-16f);
}
SOLDER_HD SOLDER_INLINE double cos_poly(double z) {
  return horner(z, -0x1.0p-1, 0x1.5555555555532p-5, -0x1.6c16c16c131b1p-10, 0x1.a01a019a62822p-16,
                -0x1.27e4f6a94edd6p-22, 0x1.1ee91b0907b0ep-29, -0x1.8f4d43f163e99p-37);
}
// sin (quadrant shift 0) or cos (shift 1): k = nearest integer to x*2/pi, r = x - k*pi/2 by a
// three-part Cody-Waite reduction, then the sin or cos polynomial by quadrant. Valid while
// x*2/pi + round stays in round's binade: |x| < 2^22 pi/2 (float), 2^51 pi/2 (double).
template <class T, unsigned Shift>
SOLDER_HD SOLDER_INLINE T sincos(T x) {
  using F = fp<T>;
  const T t = std::fma(x, F::two_over_pi, F::round);
  const T k = t - F::round;
  const typename F::U n = to_bits(t) + Shift;  // low bits: quadrant (round's are zero)
  T r = std::fma(k, -F::pio2_1, x);            // exact
  r = std::fma(k, -F::pio2_2, r);
  // Past the valid range k is wrong and r unbounded: keep the polynomials bounded there.
  r = clamp_nan(std::fma(k, -F::pio2_3, r), -F::sincos_r, F::sincos_r);
  const T z = r * r;
  const T s = std::fma(r * z, sin_poly(z), r);
  const T c = std::fma(z, cos_poly(z), T(1));
  return negate_if(select((n & 1) != 0, c, s), (n & 2) != 0);
}

SOLDER_HD SOLDER_INLINE float erf_nonneg(float t) {  // t in [0, 4] (NaN passes)
  // erf(t) = -expm1(log(erfc(t))), log(erfc(t)) = t*Q(t): one polynomial for the whole range,
  // weighted so that its error is relative in erf. Where erf is small its relative error
  // follows that of log(erfc), so t*Q is kept as hi + lo, with -2/sqrt(pi) split in two.
  const float u = t * -0x1.20dd76p+0f;
  const float u_lo = std::fma(t, -0x1.20dd76p+0f, -u);
  const float p = t * horner(t, 0x1.f7ac92p-25f, -0x1.45f2fap-1f, -0x1.a4fa5ep-4f, 0x1.39cdc6p-6f,
                             0x1.505fbep-13f, -0x1.b5004ap-10f, 0x1.4bc9e2p-11f, -0x1.ed6c42p-14f,
                             0x1.3696a0p-17f);
  const float l = u + p;
  return -expm1_nonpos(l, (p - (l - u)) + u_lo);
}
SOLDER_HD SOLDER_INLINE double erf_nonneg(double t) {  // t in [0, 6]
  // t < 1: t*P(t^2); t >= 1: -expm1(log(erfc(t))) with log(erfc) a polynomial in t-1.
  const double small =
      std::fma(t, 0x1.20dd750429b6dp+0,
               t * horner(t * t, 0x1.1ae3a914fed8p-56, -0x1.812746b0379bdp-2, 0x1.ce2f21a040d16p-4,
                          -0x1.b82ce311fa93dp-6, 0x1.565bccf92b2e2p-8, -0x1.c02db03dd6de4p-11,
                          0x1.f9a2baa8f882ap-14, -0x1.f4ca4d6ed9043p-17, 0x1.b97fd3d5a10acp-20,
                          -0x1.5c0726d8472e9p-23, 0x1.d71b0e7799b7cp-27, -0x1.abae474047564p-31));
  const double l = horner(
      t - 1.0, -0x1.d97fbf27aa2a1p+0, -0x1.51c9b0006c21ep+1, -0x1.afabc11a2acf2p-1,
      -0x1.5477f099ef408p-5, 0x1.48c9d3889463fp-7, -0x1.033f5ae421dfap-9, 0x1.f1b07c85914d0p-13,
      0x1.b929ca117cc9bp-16, -0x1.c84b3951e36ccp-16, 0x1.4470bc8564a46p-17, -0x1.1dd89f09a1368p-19,
      0x1.b474c05d90337p-23, 0x1.f94b7aead3842p-25, -0x1.216d733eeede4p-25, 0x1.276908d9c4d8cp-27,
      -0x1.6e54231875bf4p-30, 0x1.0976581239895p-33, -0x1.5ad959d92602ap-38);
  return select(t < 1.0, small, -expm1_nonpos(l));
}
// (tanh(a) - a) / a^3 as a polynomial in z = a^2 on a <= atanh(1/2).
SOLDER_HD SOLDER_INLINE float tanh_poly(float z) {
  return horner(z, -0x1.55554ap-2f, 0x1.110d30p-3f, -0x1.b92a20p-5f, 0x1.594b96p-6f,
                -0x1.9b87fap-8f);
}
SOLDER_HD SOLDER_INLINE double tanh_poly(double z) {
  return horner(z, -0x1.55555555554a2p-2, 0x1.1111111102e37p-3, -0x1.ba1ba1adac57ap-5,
                0x1.664f45cdf550dp-6, -0x1.226dde75c9b5cp-7, 0x1.d6c644355bb53p-9,
                -0x1.7cf53f72b6971p-10, 0x1.2fab9a0e25df4p-11, -0x1.b945ccf32c234p-13,
                0x1.aca97af9c97f4p-15);
}
template <class T>
SOLDER_HD SOLDER_INLINE T tanh_impl(T x) {
  using F = fp<T>;
  const T ax = std::fabs(x);
  const T a = select(ax > F::tanh_sat, F::tanh_sat, ax);  // NaN passes
  const T z = a * a;
  const T small = std::fma(a * z, tanh_poly(z), a);
  // Above atanh(1/2) = 0.5493... e = e^-2a <= 1/3, so neither 1 - e nor 1 + e cancels; e^-2a
  // cannot overflow, and at the saturation point 2^k is still normal.
  const auto [p, k] = exp_split(T(-2) * a);
  const T e = p * pow2i<T>(k);
  const T big = div_fast_path(T(1) - e, T(1) + e);
  return std::copysign(select(a < T(0.54930614433405489), small, big), x);
}

// 1/(1 + e^-x) = 2^-j / (2^-j + 2^m (1+q)) with e^-x = 2^k (1+q), j = max(k,0), m = min(k,0):
// the denominator is rounded once and there is no overflow. 2^-j + 2^m is exact while
// |k| <= mant; past it, for very negative x, 2^-j <= ulp(1)/2 so the sum rounds to 1 (ties to
// even), and 2^-j joins the small terms of q instead. Numerator and denominator carry a factor
// 2^64, so every power of two here is normal and the division rounds subnormal results
// (sigmoid(-100f)) once.
template <class T>
SOLDER_HD SOLDER_INLINE T sigmoid_impl(T x) {
  using F = fp<T>;
  using I = typename F::I;
  // -x clamped (the bounds are symmetric): nvcc makes clamp_nan's inner select one max.
  const auto [hi, lo, k] = exp_reduce(-clamp_nan(x, F::exp_lo, -F::exp_lo));
  const I j = k > 0 ? k : 0;
  const I m = k < 0 ? k : 0;
  const bool far = k > F::mant;
  const T num = pow2i<T>(64 - j);
  const T s = pow2i<T>(64 + m);
  const T tiny = num * T(0x1p-64);  // 2^-j (subnormal or zero far out, where it adds nothing)
  const T r = hi + lo;
  const T q = hi + std::fma(r * r, exp_poly(r), select(far, lo + tiny, lo));
  return num / std::fma(q, s, num + s);
}

template <class T>
SOLDER_HD SOLDER_INLINE T pow_impl(T x, T y) {
  using F = fp<T>;
  const T ax = std::fabs(x);
  // log|x| = l_hi + l_lo to ~2^-33 (float) / 2^-63 (double) relative error: x = m*2^e,
  // s = (m-1)/(m+1) carried as s + s_lo, log m = 2s + 2s^3/3 + s^5*R(s^2), plus s_lo times the
  // derivative 2/(1-s^2). e*ln2, 2s and 2s^3/3 are summed error-free; the rest only needs
  // working precision.
  const auto [f, e, ei] = log_reduce(ax);
  const T d = T(2) + f;
  const T d_lo = (T(2) - d) + f;
  const T s = f / d;
  const T rem = std::fma(-s, d, f) - s * d_lo;              // f - s*(2+f), the division's remainder
  const T s_lo = std::fma(rem, T(-0.5) * s, T(0.5) * rem);  // rem / (2+f) = rem * (1-s) / 2
  const T z = s * s;
  const T s3 = s * z;
  const T s3_lo = std::fma(s, z, -s3) + s * std::fma(s, s, -z);
  const T t = s3 * F::two_thirds_hi;
  const T t_lo =
      std::fma(s3, F::two_thirds_hi, -t) + std::fma(s3, F::two_thirds_lo, s3_lo * F::two_thirds_hi);
  const T hi0 = e * F::ln2_hi16;  // exact
  const T hi1 = hi0 + (s + s);
  const T hi2 = hi1 + t;
  const T lo = ((s + s) - (hi1 - hi0)) + (t - (hi2 - hi1)) + t_lo +
               std::fma(e, F::ln2_lo16, s3 * z * atanh_tail5(z)) +
               (s_lo + s_lo) * horner(z, T(1), T(1), T(1));
  const T l_hi = hi2 + lo;
  const T l_lo = lo - (l_hi - hi2);
  // y*log|x| = z_hi + z_lo, then exp of it with z_lo folded into the reduced argument.
  const T z_hi = y * l_hi;
  const T z_lo = std::fma(y, l_hi, -z_hi) + y * l_lo;
  const bool in_range = (z_hi < F::exp_hi) & (z_hi > F::exp_lo);
  const auto [r_hi, r_lo, k] = exp_reduce(clamp_nan(z_hi, F::exp_lo, F::exp_hi));
  const T p = T(1) + expm1_reduced(r_hi, r_lo + select(in_range, z_lo, T(0)));
  const auto k1 = k >> 1;
  T res = p * pow2i<T>(k1) * pow2i<T>(k - k1);

  // Integer / odd-integer tests on y: v + 2^mant - 2^mant rounds v < 2^mant to an integer.
  const T ay = std::fabs(y);
  const bool y_int = (ay >= F::two_mant) | ((ay + F::two_mant) - F::two_mant == ay);
  const T hy = T(0.5) * ay;
  const bool y_odd = y_int & (ay < T(2) * F::two_mant) & ((hy + F::two_mant) - F::two_mant != hy);
  const bool neg_odd = ((to_bits(x) >> (8 * sizeof(T) - 1)) != 0) & y_odd;  // -0 counts as negative

  // Special cases, as C's pow (Annex F).
  const T pinf = inf<T>();
  res = negate_if(res, neg_odd);
  res = select((x < T(0)) & !y_int, nan<T>(), res);
  const T zero_inf = negate_if(select((y < T(0)) == (ax == T(0)), pinf, T(0)), neg_odd);
  res = select((ax == T(0)) | (ax == pinf), zero_inf, res);
  const T y_inf = select(ax == T(1), T(1), select((ax < T(1)) == (y < T(0)), pinf, T(0)));
  res = select(ay == pinf, y_inf, res);
  res = select((x != x) | (y != y), x + y, res);
  return select((y == T(0)) | (x == T(1)), T(1), res);
}

// Results at the domain edges: pole -> -inf, below -> NaN, +inf and NaN pass through.
template <class T>
SOLDER_HD SOLDER_INLINE T log_special(T x, T pole, T res) {
  return select(x > pole, select(x < inf<T>(), res, x), select(x == pole, -inf<T>(), nan<T>()));
}

template <class T>
SOLDER_HD SOLDER_INLINE T log_impl(T x) {
  using F = fp<T>;
  const auto [f, e, ei] = log_reduce(x);
  const T res = std::fma(e, F::ln2_hi, f + std::fma(e, F::ln2_lo, log1p_tail(f)));
  return log_special(x, T(0), res);
}

// log1p(x) for finite x > -1: u = 1+x rounded and c its rounding error (exact while
// u < 2^(mant+1); zero where e would overflow the 2^-e construction), then
// log1p(x) = e*ln2 + log1p(f + d) with d = c*2^-e, whose d term to first order is d/(1+f),
// here d*(1 - f + f^2). u >= 2^-(mant+1) is normal.
template <class T>
SOLDER_HD SOLDER_INLINE T log1p_finite(T x) {
  using F = fp<T>;
  const T u = T(1) + x;
  const T c = x - (u - T(1));
  const auto [f, e, ei] = log_reduce_normal(u);
  const T d = c * pow2i<T>(-(ei < F::max_exp ? ei : F::max_exp - 1));
  const T tail = log1p_tail(f) + std::fma(d, std::fma(f, f, -f), d);
  return std::fma(e, F::ln2_hi, f + std::fma(e, F::ln2_lo, tail));
}

template <class T>
SOLDER_HD SOLDER_INLINE T log1p_impl(T x) {
  return log_special(x, T(-1), select(x == T(0), x, log1p_finite(x)));
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): the arguments stay in (0, 1] and need none of the
// range handling of exp and log1p; above 20 the result is x, as in PyTorch's softplus.
template <class T>
SOLDER_HD SOLDER_INLINE T softplus_impl(T x) {
  const T a = std::fabs(x);
  const T e = exp_clamped(select(a > -fp<T>::exp_lo, fp<T>::exp_lo, -a));  // NaN passes
  return select(x > T(20), x, select(x > T(0), x, T(0)) + log1p_finite(e));
}

}  // namespace detail

// ---- sqrt, rsqrt -------------------------------------------------------------------------------

SOLDER_HD SOLDER_INLINE float sqrt(float x) { return std::sqrt(x); }
SOLDER_HD SOLDER_INLINE double sqrt(double x) { return std::sqrt(x); }
SOLDER_HD SOLDER_INLINE float rsqrt(float x) { return 1.0f / std::sqrt(x); }
SOLDER_HD SOLDER_INLINE double rsqrt(double x) { return 1.0 / std::sqrt(x); }

// ---- exp, expm1 --------------------------------------------------------------------------------

SOLDER_HD SOLDER_INLINE float exp(float x) {
  return detail::exp_clamped(
      detail::clamp_nan(x, detail::fp<float>::exp_lo, detail::fp<float>::exp_hi));
}
SOLDER_HD SOLDER_INLINE double exp(double x) {
  return detail::exp_clamped(
      detail::clamp_nan(x, detail::fp<double>::exp_lo, detail::fp<double>::exp_hi));
}

SOLDER_HD SOLDER_INLINE float expm1(float x) {  // below -40 the result is -1 in either type
  const float y = detail::expm1_clamped(detail::clamp_nan(x, -40.0f, detail::fp<float>::exp_hi));
  return detail::select(x == 0.0f, x, y);
}
SOLDER_HD SOLDER_INLINE double expm1(double x) {
  const double y = detail::expm1_clamped(detail::clamp_nan(x, -40.0, detail::fp<double>::exp_hi));
  return detail::select(x == 0.0, x, y);
}

// ---- log, log1p --------------------------------------------------------------------------------

SOLDER_HD SOLDER_INLINE float log(float x) { return detail::log_impl(x); }
SOLDER_HD SOLDER_INLINE double log(double x) { return detail::log_impl(x); }
SOLDER_HD SOLDER_INLINE float log1p(float x) { return detail::log1p_impl(x); }
SOLDER_HD SOLDER_INLINE double log1p(double x) { return detail::log1p_impl(x); }

// ---- tanh, sigmoid, softplus -------------------------------------------------------------------

SOLDER_HD SOLDER_INLINE float tanh(float x) { return detail::tanh_impl(x); }
SOLDER_HD SOLDER_INLINE double tanh(double x) { return detail::tanh_impl(x); }
SOLDER_HD SOLDER_INLINE float sigmoid(float x) { return detail::sigmoid_impl(x); }
SOLDER_HD SOLDER_INLINE double sigmoid(double x) { return detail::sigmoid_impl(x); }

// log(1 + e^x), returning x above 20 like PyTorch's softplus (threshold 20).
SOLDER_HD SOLDER_INLINE float softplus(float x) { return detail::softplus_impl(x); }
SOLDER_HD SOLDER_INLINE double softplus(double x) { return detail::softplus_impl(x); }

// ---- erf ---------------------------------------------------------------------------------------

SOLDER_HD SOLDER_INLINE float erf(float x) {
  const float t = detail::clamp_nan(std::fabs(x), 0.0f, detail::fp<float>::erf_sat);
  return std::copysign(detail::erf_nonneg(t), x);
}
SOLDER_HD SOLDER_INLINE double erf(double x) {
  const double t = detail::clamp_nan(std::fabs(x), 0.0, detail::fp<double>::erf_sat);
  return std::copysign(detail::erf_nonneg(t), x);
}

// ---- sin, cos ----------------------------------------------------------------------------------

SOLDER_HD SOLDER_INLINE float sin(float x) {
  return detail::select(x == 0.0f, x, detail::sincos<float, 0>(x));
}
SOLDER_HD SOLDER_INLINE double sin(double x) {
  return detail::select(x == 0.0, x, detail::sincos<double, 0>(x));
}
SOLDER_HD SOLDER_INLINE float cos(float x) { return detail::sincos<float, 1>(x); }
SOLDER_HD SOLDER_INLINE double cos(double x) { return detail::sincos<double, 1>(x); }

// ---- pow ---------------------------------------------------------------------------------------

SOLDER_HD SOLDER_INLINE float pow(float x, float y) { return detail::pow_impl(x, y); }
SOLDER_HD SOLDER_INLINE double pow(double x, double y) { return detail::pow_impl(x, y); }

}  // namespace solder::math
