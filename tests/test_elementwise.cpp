// Element-wise ops and operators against a double-precision <cmath> reference: every op, float
// and double (and the integer/bool dtypes where the op applies), PyTorch's type promotion,
// shapes with 0, 1, prime and 1<<20 elements, strided and broadcast inputs, strided outputs,
// and special values (NaN, +-inf) through the fused path.
//
// Tolerances (ref::Tol, in ulps of the expected value in the tested dtype, see reference.hpp):
//   + - * /, maximum/minimum/clamp/relu/abs/neg, comparisons: correctly rounded or exact
//     (1 ulp or exact equality).
//   exp expm1 log log1p sqrt rsqrt tanh sigmoid erf sin cos: solder's math.hpp promises
//     <= 2 ulp in float; the tests allow 3 ulp (the reference is the exact value rounded once
//     more to double) plus FLT_MIN/DBL_MIN absolute, so a flushed subnormal result passes.
//   silu, pow: two roundings of <= 2 ulp functions: 4 ulp.
//   gelu, gelu(tanh), softplus: 1 + erf(..) / 1 + tanh(..) cancel for negative x, so the
//     error is absolute: <= 4 eps * |x| (erf/tanh <= 2 ulp of a value <= 1, the sum rounds
//     once more, the factor 0.5 x carries it), i.e. scale_eps 8 with scale |x|.
#include "reference.hpp"

#include <array>
#include <string>

namespace sd = solder;
using ref::Array;

namespace {

// Overwrites the first elements of a contiguous tensor with the given special inputs.
template <class TT>
void put(TT& t, std::vector<double> const& v) {
  for (std::size_t i = 0; i < v.size() && static_cast<std::int64_t>(i) < t.numel(); ++i)
    t.data()[i] = static_cast<typename TT::value_type>(v[i]);
}

// Runs one unary op `f` (a generic lambda building the solder expression) against `g` (the
// double reference) over many shapes and layouts.
template <class T, class F, class G>
void unary_case(std::string const& name, F const& f, G const& g, double lo, double hi,
                ref::Tol tol, std::vector<double> const& extra, bool scale_by_x = false) {
  auto scale_of = [&](Array const& x) {
    return ref::map([](double v) { return std::fabs(v); }, x);
  };
  auto check = [&](auto const& got, Array const& x, std::string const& what) {
    Array s = scale_of(x);
    ref::check_close(got, ref::map(g, x), tol, name + " " + what, scale_by_x ? &s : nullptr);
  };
  // Contiguous 1-D: empty, one element, a prime (vector body + tail), a few vector blocks.
  for (std::int64_t n : {0, 1, 7, 4099}) {
    auto x = ref::uniform<T>(lo, hi, n);
    put(x, extra);
    sd::Tensor<T, 1> y = f(x);  // new storage
    check(y, ref::of(x), "contiguous n=" + std::to_string(n));
    sd::Tensor<T, 1> z(x.shape());
    z = f(x);  // existing storage
    check(z, ref::of(x), "assign n=" + std::to_string(n));
  }
  // Strided 2-D inputs: a transpose of a 17x13 (13x17 read column-wise), a step-3 slice, an
  // expand of a [1, 13] row along a new axis (stride 0).
  auto base = ref::uniform<T>(lo, hi, 17, 13);
  put(base, extra);
  Array b = ref::of(base);
  check(sd::eval(f(sd::transpose(base, 0, 1))), ref::transpose(b, 0, 1), "transposed 13x17");
  {
    auto s = sd::slice(base, 1, 1, 13, 3);  // [17, 4]: columns 1, 4, 7, 10
    Array e({17, 4});
    for (std::int64_t r = 0; r < 17; ++r)
      for (std::int64_t c = 0; c < 4; ++c) e[r * 4 + c] = b.at({r, 1 + 3 * c});
    check(sd::eval(f(s)), e, "slice step 3");
  }
  {
    auto row = sd::slice(base, 0, 2, 3);  // [1, 13]
    auto ex = sd::expand(row, std::array<std::int64_t, 2>{5, 13});
    Array er({5, 13});
    for (std::int64_t i = 0; i < 5; ++i)
      for (std::int64_t j = 0; j < 13; ++j) er[i * 13 + j] = b.at({2, j});
    check(sd::eval(f(ex)), er, "expanded [1,13]->[5,13]");
  }
}

template <class T>
std::vector<double> interesting(double lo, double hi) {
  std::vector<double> all = {0.0,  -0.0, 1e-7, -1e-7, 1e-5, -1e-5, 1e-3, -1e-3, 0.1,  -0.1,
                             0.5,  -0.5, 1.0,  -1.0,  2.0,  -2.0,  3.0,  -3.0,  5.0,  -5.0,
                             9.75, -9.75, 15.0, -15.0, 30.0, -30.0, 80.0, -80.0, 0.69314718,
                             3.14159265, -3.14159265, 6.28318531, 1.5707963};
  std::vector<double> r;
  for (double v : all)
    if (v >= lo && v <= hi) r.push_back(v);
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Unary float ops
// ---------------------------------------------------------------------------------------------
TEMPLATE_TEST_CASE("unary floating ops match <cmath>", "[elementwise][unary]", float, double) {
  using T = TestType;
  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  ref::Tol exact{0, 0};
  ref::Tol fn{3, tiny};   // one math function
  ref::Tol fn2{4, tiny};  // a function and one more rounding
  auto I = [](double lo, double hi) { return interesting<T>(lo, hi); };

  SECTION("neg") {
    unary_case<T>("neg", [](auto const& x) { return -x; }, [](double v) { return -v; }, -10, 10,
                  exact, I(-10, 10));
    unary_case<T>("neg()", [](auto const& x) { return sd::neg(x); }, [](double v) { return -v; },
                  -10, 10, exact, I(-10, 10));
  }
  SECTION("abs") {
    unary_case<T>("abs", [](auto const& x) { return sd::abs(x); },
                  [](double v) { return std::fabs(v); }, -10, 10, exact, I(-10, 10));
  }
  SECTION("relu") {
    unary_case<T>("relu", [](auto const& x) { return sd::relu(x); },
                  [](double v) { return v < 0 ? 0.0 : v; }, -10, 10, exact, I(-10, 10));
  }
  SECTION("leaky_relu") {
    unary_case<T>("leaky_relu", [](auto const& x) { return sd::leaky_relu(x); },
                  [](double v) { return v < 0 ? v * 0.01 : v; }, -10, 10, ref::Tol{1.5, tiny},
                  I(-10, 10));
    unary_case<T>("leaky_relu(0.2)", [](auto const& x) { return sd::leaky_relu(x, 0.2); },
                  [](double v) { return v < 0 ? v * 0.2 : v; }, -10, 10, ref::Tol{1.5, tiny},
                  I(-10, 10));
  }
  SECTION("clamp") {
    unary_case<T>("clamp", [](auto const& x) { return sd::clamp(x, T(-0.5), T(0.75)); },
                  [](double v) { return std::min(std::max(v, -0.5), 0.75); }, -2, 2, exact,
                  I(-2, 2));
  }
  SECTION("exp") {
    unary_case<T>("exp", [](auto const& x) { return sd::exp(x); },
                  [](double v) { return std::exp(v); }, -80, 80, fn, I(-80, 80));
  }
  SECTION("expm1") {
    unary_case<T>("expm1", [](auto const& x) { return sd::expm1(x); },
                  [](double v) { return std::expm1(v); }, -20, 20, fn, I(-20, 20));
  }
  SECTION("log") {
    unary_case<T>("log", [](auto const& x) { return sd::log(x); },
                  [](double v) { return std::log(v); }, 1e-6, 1e6, fn,
                  {1.0, 0.999, 1.001, 1e-30, 1e30, 0.5, 2.0, 1.0000001});
  }
  SECTION("log1p") {
    unary_case<T>("log1p", [](auto const& x) { return sd::log1p(x); },
                  [](double v) { return std::log1p(v); }, -0.99, 100, fn, I(-0.99, 100));
  }
  SECTION("sqrt") {
    unary_case<T>("sqrt", [](auto const& x) { return sd::sqrt(x); },
                  [](double v) { return std::sqrt(v); }, 0, 1e4, ref::Tol{1, tiny}, I(0, 1e4));
  }
  SECTION("rsqrt") {
    unary_case<T>("rsqrt", [](auto const& x) { return sd::rsqrt(x); },
                  [](double v) { return 1.0 / std::sqrt(v); }, 1e-4, 1e4, fn,
                  {1e-30, 1e30, 1.0, 4.0, 0.25, 2.0});
  }
  SECTION("tanh") {
    unary_case<T>("tanh", [](auto const& x) { return sd::tanh(x); },
                  [](double v) { return std::tanh(v); }, -10, 10, fn, I(-30, 30));
  }
  SECTION("sigmoid") {
    unary_case<T>("sigmoid", [](auto const& x) { return sd::sigmoid(x); },
                  [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -20, 20, fn, I(-80, 80));
  }
  SECTION("erf") {
    unary_case<T>("erf", [](auto const& x) { return sd::erf(x); },
                  [](double v) { return std::erf(v); }, -5, 5, fn, I(-10, 10));
  }
  SECTION("sin") {
    unary_case<T>("sin", [](auto const& x) { return sd::sin(x); },
                  [](double v) { return std::sin(v); }, -10, 10, fn, I(-10, 10));
  }
  SECTION("cos") {
    unary_case<T>("cos", [](auto const& x) { return sd::cos(x); },
                  [](double v) { return std::cos(v); }, -10, 10, fn, I(-10, 10));
  }
  SECTION("silu") {
    unary_case<T>("silu", [](auto const& x) { return sd::silu(x); },
                  [](double v) { return v / (1.0 + std::exp(-v)); }, -20, 20, fn2, I(-80, 80));
  }
  SECTION("gelu") {
    unary_case<T>("gelu", [](auto const& x) { return sd::gelu(x); },
                  [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }, -8, 8,
                  ref::Tol{4, tiny, 8}, I(-10, 10), true);
  }
  SECTION("gelu tanh approximation") {
    unary_case<T>(
        "gelu_tanh", [](auto const& x) { return sd::gelu(x, sd::tanh_approximation); },
        [](double v) {
          return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
        },
        -8, 8, ref::Tol{4, tiny, 8}, I(-10, 10), true);
  }
  SECTION("softplus") {
    auto sp = [](double beta, double thr) {
      return [=](double v) { return v * beta > thr ? v : std::log1p(std::exp(v * beta)) / beta; };
    };
    unary_case<T>("softplus", [](auto const& x) { return sd::softplus(x); }, sp(1, 20), -30, 30,
                  ref::Tol{4, 4 * ref::eps<T>()}, I(-30, 30));
    unary_case<T>("softplus(2, 5)", [](auto const& x) { return sd::softplus(x, 2, 5); }, sp(2, 5),
                  -10, 10, ref::Tol{4, 4 * ref::eps<T>()}, {2.5, 2.4999, 2.5001, -2.5, 0.0});
  }
}

// ---------------------------------------------------------------------------------------------
// Binary float ops
// ---------------------------------------------------------------------------------------------
TEMPLATE_TEST_CASE("binary floating ops match the reference", "[elementwise][binary]", float, double) {
  using T = TestType;
  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  ref::Tol rounded{1, tiny};  // correctly rounded (0.5 ulp), 1 ulp allowed
  ref::Tol exact{0, 0};

  // Shapes: [13, 17] contiguous, [13, 17] from transposes, broadcast [3,1]+[4] and
  // [5,1,7]*[1,6,1], an empty [0, 5].
  auto a = ref::uniform<T>(-4, 4, 13, 17);
  auto b = ref::uniform<T>(0.25, 4, 13, 17);
  auto at = sd::transpose(ref::uniform<T>(-4, 4, 17, 13), 0, 1);
  Array A = ref::of(a), B = ref::of(b), AT = ref::of(at);

  auto binary = [&](std::string const& name, auto const& f, auto const& g, ref::Tol tol) {
    ref::check_close(sd::eval(f(a, b)), ref::map(g, A, B), tol, name + " contiguous");
    ref::check_close(sd::eval(f(at, b)), ref::map(g, AT, B), tol, name + " transposed lhs");
    ref::check_close(sd::eval(f(b, at)), ref::map(g, B, AT), tol, name + " transposed rhs");
    auto c31 = ref::uniform<T>(0.25, 4, 3, 1);
    auto r4 = ref::uniform<T>(0.25, 4, 4);
    ref::check_close(sd::eval(f(c31, r4)), ref::map(g, ref::of(c31), ref::of(r4)), tol,
                     name + " [3,1] op [4]");
    ref::check_close(sd::eval(f(r4, c31)), ref::map(g, ref::of(r4), ref::of(c31)), tol,
                     name + " [4] op [3,1]");
    auto x517 = ref::uniform<T>(0.25, 4, 5, 1, 7);
    auto x161 = ref::uniform<T>(0.25, 4, 1, 6, 1);
    auto r = sd::eval(f(x517, x161));
    CHECK(r.shape() == sd::Index<3>{5, 6, 7});
    ref::check_close(r, ref::map(g, ref::of(x517), ref::of(x161)), tol, name + " [5,1,7] op [1,6,1]");
    auto e0 = ref::uniform<T>(0, 1, 0, 5);
    auto e1 = ref::uniform<T>(0.25, 1, 5);
    auto re = sd::eval(f(e0, e1));
    CHECK(re.shape() == sd::Index<2>{0, 5});
    // Scalars on either side.
    ref::check_close(sd::eval(f(a, T(1.5))), ref::map([&](double x) { return g(x, 1.5); }, A),
                     tol, name + " tensor op scalar");
    ref::check_close(sd::eval(f(T(1.5), b)), ref::map([&](double x) { return g(1.5, x); }, B),
                     tol, name + " scalar op tensor");
  };

  binary("add", [](auto const& x, auto const& y) { return x + y; },
         [](double x, double y) { return x + y; }, rounded);
  binary("sub", [](auto const& x, auto const& y) { return x - y; },
         [](double x, double y) { return x - y; }, rounded);
  binary("mul", [](auto const& x, auto const& y) { return x * y; },
         [](double x, double y) { return x * y; }, rounded);
  binary("div", [](auto const& x, auto const& y) { return x / y; },
         [](double x, double y) { return x / y; }, rounded);
  binary("add()", [](auto const& x, auto const& y) { return sd::add(x, y); },
         [](double x, double y) { return x + y; }, rounded);
  binary("sub()", [](auto const& x, auto const& y) { return sd::sub(x, y); },
         [](double x, double y) { return x - y; }, rounded);
  binary("mul()", [](auto const& x, auto const& y) { return sd::mul(x, y); },
         [](double x, double y) { return x * y; }, rounded);
  binary("div()", [](auto const& x, auto const& y) { return sd::div(x, y); },
         [](double x, double y) { return x / y; }, rounded);
  binary("maximum", [](auto const& x, auto const& y) { return sd::maximum(x, y); },
         [](double x, double y) { return std::max(x, y); }, exact);
  binary("minimum", [](auto const& x, auto const& y) { return sd::minimum(x, y); },
         [](double x, double y) { return std::min(x, y); }, exact);

  SECTION("pow") {
    // Positive bases (the reference and solder agree on the real branch only).
    auto x = ref::uniform<T>(0.1, 4, 13, 17);
    auto y = ref::uniform<T>(-3, 3, 13, 17);
    auto pw = [](double u, double v) { return std::pow(u, v); };
    ref::check_close(sd::eval(sd::pow(x, y)), ref::map(pw, ref::of(x), ref::of(y)),
                     ref::Tol{4, tiny}, "pow tensor^tensor");
    ref::check_close(sd::eval(sd::pow(x, T(2))), ref::map([](double u) { return u * u; }, ref::of(x)),
                     ref::Tol{4, tiny}, "pow tensor^2");
    ref::check_close(sd::eval(sd::pow(T(2), y)), ref::map([](double v) { return std::exp2(v); }, ref::of(y)),
                     ref::Tol{4, tiny}, "pow 2^tensor");
    auto ex = ref::values<T>({0, 1, 2, 0.5, 1, 3, 4}, 7);
    auto ey = ref::values<T>({0, 0, 10, -1, 7, 3, 0.5}, 7);
    ref::check_close(sd::eval(sd::pow(ex, ey)), ref::map(pw, ref::of(ex), ref::of(ey)),
                     ref::Tol{1, 0}, "pow special points");
  }
  SECTION("sd::max / sd::min of two tensors are element-wise") {
    ref::check_close(sd::eval(sd::max(a, at)), ref::map([](double x, double y) { return std::max(x, y); }, A, AT),
                     exact, "sd::max(a, b)");
    ref::check_close(sd::eval(sd::min(a, at)), ref::map([](double x, double y) { return std::min(x, y); }, A, AT),
                     exact, "sd::min(a, b)");
  }
}

// ---------------------------------------------------------------------------------------------
// Type promotion (PyTorch's result_type), checked on the expression's value_type and on values
// ---------------------------------------------------------------------------------------------
TEST_CASE("type promotion follows PyTorch", "[elementwise][promotion]") {
  auto i32 = ref::uniform<std::int32_t>(-1000, 1000, 7, 13);
  auto i32b = ref::uniform<std::int32_t>(1, 50, 7, 13);
  auto i64 = ref::uniform<std::int64_t>(-1000, 1000, 7, 13);
  auto f32 = ref::uniform<float>(-4, 4, 7, 13);
  auto f64 = ref::uniform<double>(-4, 4, 7, 13);
  auto b = ref::uniform<bool>(0, 1, 7, 13);
  Array I32 = ref::of(i32), I32B = ref::of(i32b), I64 = ref::of(i64), F32 = ref::of(f32),
        F64 = ref::of(f64), B = ref::of(b);

  using std::is_same_v;
  // int tensor with a float literal -> float32; with an int literal stays int32.
  static_assert(is_same_v<decltype(i32 * 0.5f)::value_type, float>);
  static_assert(is_same_v<decltype(i32 * 0.5)::value_type, float>);
  static_assert(is_same_v<decltype(i64 * 2.0)::value_type, float>);
  static_assert(is_same_v<decltype(i32 * 2)::value_type, std::int32_t>);
  static_assert(is_same_v<decltype(i32 * std::int64_t{2})::value_type, std::int32_t>);
  // float tensor with a double literal stays float32.
  static_assert(is_same_v<decltype(f32 * 0.5)::value_type, float>);
  static_assert(is_same_v<decltype(0.5 + f32)::value_type, float>);
  // bool tensor with an int literal -> int64; with a float literal -> float32.
  static_assert(is_same_v<decltype(b + 1)::value_type, std::int64_t>);
  static_assert(is_same_v<decltype(b * 1.5f)::value_type, float>);
  // tensor with tensor: the wider / higher category wins.
  static_assert(is_same_v<decltype(i32 + f32)::value_type, float>);
  static_assert(is_same_v<decltype(i32 + i64)::value_type, std::int64_t>);
  static_assert(is_same_v<decltype(f32 + f64)::value_type, double>);
  static_assert(is_same_v<decltype(i64 + f32)::value_type, float>);
  static_assert(is_same_v<decltype(b + i32)::value_type, std::int32_t>);
  // true division of ints is floating; floating functions of ints compute in float32.
  static_assert(is_same_v<decltype(i32 / i32b)::value_type, float>);
  static_assert(is_same_v<decltype(sd::exp(i32))::value_type, float>);
  static_assert(is_same_v<decltype(sd::sqrt(i64))::value_type, float>);
  static_assert(is_same_v<decltype(sd::sigmoid(f64))::value_type, double>);
  // sign-preserving ops keep the dtype; comparisons and logic give bool.
  static_assert(is_same_v<decltype(sd::abs(i32))::value_type, std::int32_t>);
  static_assert(is_same_v<decltype(sd::relu(i64))::value_type, std::int64_t>);
  static_assert(is_same_v<decltype(-i32)::value_type, std::int32_t>);
  static_assert(is_same_v<decltype(i32 < 0.5f)::value_type, bool>);
  static_assert(is_same_v<decltype(f32 == f64)::value_type, bool>);
  static_assert(is_same_v<decltype(!f32)::value_type, bool>);
  static_assert(is_same_v<decltype(sd::logical_and(i32, f32))::value_type, bool>);
  // where promotes its values, not its condition; cast is exactly its target.
  static_assert(is_same_v<decltype(sd::where(b, i32, 0.5f))::value_type, float>);
  static_assert(is_same_v<decltype(sd::where(b, i32, f64))::value_type, double>);
  static_assert(is_same_v<decltype(sd::where(b, i32, i64))::value_type, std::int64_t>);
  static_assert(is_same_v<decltype(sd::cast<double>(f32))::value_type, double>);
  static_assert(is_same_v<decltype(sd::cast<std::int32_t>(f64))::value_type, std::int32_t>);
  static_assert(is_same_v<decltype(sd::cast<bool>(i32))::value_type, bool>);
  // eval produces a tensor of the expression's dtype.
  static_assert(is_same_v<decltype(sd::eval(i32 * 0.5f))::value_type, float>);
  static_assert(is_same_v<decltype(sd::eval(b + 1))::value_type, std::int64_t>);

  // The values: the promoted computation is exact for these small integers.
  ref::check_equal(sd::eval(i32 * 0.5f), ref::map([](double x) { return x * 0.5; }, I32), "i32 * 0.5f");
  ref::check_equal(sd::eval(i32 + f32), ref::map([](double x, double y) { return double(float(x + y)); }, I32, F32),
                   "i32 + f32");
  ref::check_equal(sd::eval(b + 1), ref::map([](double x) { return x + 1; }, B), "bool + 1");
  ref::check_equal(sd::eval(f32 * 0.5), ref::map([](double x) { return x * 0.5; }, F32), "f32 * 0.5");
  ref::check_equal(sd::eval(f32 + f64), ref::map([](double x, double y) { return x + y; }, F32, F64), "f32 + f64");
  ref::check_equal(sd::eval(i32 + i64), ref::map([](double x, double y) { return x + y; }, I32, I64), "i32 + i64");
  ref::check_equal(sd::eval(i32 * 3), ref::map([](double x) { return x * 3; }, I32), "i32 * 3");
  ref::check_equal(sd::eval(b * 1.5f), ref::map([](double x) { return x * 1.5; }, B), "bool * 1.5f");
  // int / int: both operands are exact in float, so the result is the correctly rounded quotient.
  ref::check_close(sd::eval(i32 / i32b), ref::map([](double x, double y) { return x / y; }, I32, I32B),
                   ref::Tol{0.5, 0}, "i32 / i32");
  ref::check_close(sd::eval(sd::exp(i32b / 10)), ref::map([](double x) { return std::exp(float(x / 10)); }, I32B),
                   ref::Tol{3, 0}, "exp(int / 10) in float");
}

// ---------------------------------------------------------------------------------------------
// Integer and bool dtypes: arithmetic, comparisons, abs/relu/neg, where, cast — all exact
// ---------------------------------------------------------------------------------------------
TEMPLATE_TEST_CASE("integer element-wise ops are exact", "[elementwise][int]", std::int32_t, std::int64_t) {
  using T = TestType;
  auto a = ref::uniform<T>(-30000, 30000, 13, 17);
  auto b = ref::uniform<T>(-30000, 30000, 13, 17);
  auto small = ref::uniform<T>(-3, 3, 13, 17);  // many ties
  auto at = sd::transpose(ref::uniform<T>(-30000, 30000, 17, 13), 0, 1);
  Array A = ref::of(a), B = ref::of(b), S = ref::of(small), AT = ref::of(at);

  static_assert(std::is_same_v<typename decltype(a + b)::value_type, T>);
  ref::check_equal(sd::eval(a + b), ref::map([](double x, double y) { return x + y; }, A, B), "a + b");
  ref::check_equal(sd::eval(a - at), ref::map([](double x, double y) { return x - y; }, A, AT), "a - at");
  ref::check_equal(sd::eval(a * small), ref::map([](double x, double y) { return x * y; }, A, S), "a * s");
  ref::check_equal(sd::eval(a * 3 + 7), ref::map([](double x) { return x * 3 + 7; }, A), "a * 3 + 7");
  ref::check_equal(sd::eval(-a), ref::map([](double x) { return -x; }, A), "-a");
  ref::check_equal(sd::eval(sd::abs(a)), ref::map([](double x) { return std::fabs(x); }, A), "abs");
  ref::check_equal(sd::eval(sd::relu(at)), ref::map([](double x) { return std::max(x, 0.0); }, AT), "relu");
  ref::check_equal(sd::eval(sd::maximum(a, b)), ref::map([](double x, double y) { return std::max(x, y); }, A, B), "maximum");
  ref::check_equal(sd::eval(sd::minimum(a, b)), ref::map([](double x, double y) { return std::min(x, y); }, A, B), "minimum");
  ref::check_equal(sd::eval(sd::clamp(a, -100, 200)), ref::map([](double x) { return std::clamp(x, -100.0, 200.0); }, A), "clamp");
  ref::check_equal(sd::eval(sd::pow(small, 3)), ref::map([](double x) { return x * x * x; }, S), "pow(s, 3)");

  // Comparisons with many ties, tensor-tensor and tensor-scalar.
  auto s2 = ref::uniform<T>(-3, 3, 13, 17);
  Array S2 = ref::of(s2);
  ref::check_equal(sd::eval(small == s2), ref::map([](double x, double y) { return double(x == y); }, S, S2), "==");
  ref::check_equal(sd::eval(small != s2), ref::map([](double x, double y) { return double(x != y); }, S, S2), "!=");
  ref::check_equal(sd::eval(small < s2), ref::map([](double x, double y) { return double(x < y); }, S, S2), "<");
  ref::check_equal(sd::eval(small <= s2), ref::map([](double x, double y) { return double(x <= y); }, S, S2), "<=");
  ref::check_equal(sd::eval(small > s2), ref::map([](double x, double y) { return double(x > y); }, S, S2), ">");
  ref::check_equal(sd::eval(small >= s2), ref::map([](double x, double y) { return double(x >= y); }, S, S2), ">=");
  ref::check_equal(sd::eval(small > 0.5f), ref::map([](double x) { return double(x > 0.5); }, S), "> 0.5f");
  ref::check_equal(sd::eval(sd::ge(small, 1)), ref::map([](double x) { return double(x >= 1); }, S), "ge(s, 1)");

  // where / cast
  ref::check_equal(sd::eval(sd::where(small > 0, a, b)),
                   ref::map([](double c, double x, double y) { return c > 0 ? x : y; }, S, A, B), "where");
  ref::check_equal(sd::eval(sd::where(small > 0, a, T(-1))),
                   ref::map([](double c, double x) { return c > 0 ? x : -1.0; }, S, A), "where scalar");
  ref::check_equal(sd::eval(sd::cast<float>(a)), A, "cast<float>");
  ref::check_equal(sd::eval(sd::cast<bool>(small)), ref::map([](double x) { return double(x != 0); }, S), "cast<bool>");
  ref::check_equal(sd::eval(sd::cast<std::int64_t>(a) * 100000),
                   ref::map([](double x) { return x * 100000; }, A), "cast<int64> widens before *");
}

TEST_CASE("bool element-wise ops", "[elementwise][bool]") {
  auto p = ref::uniform<bool>(0, 1, 7, 13);
  auto q = sd::transpose(ref::uniform<bool>(0, 1, 13, 7), 0, 1);
  auto f = ref::uniform<float>(-2, 2, 7, 13);
  Array P = ref::of(p), Q = ref::of(q), F = ref::of(f);
  auto both = [](auto g) { return [g](double x, double y) { return double(g(x != 0, y != 0)); }; };
  ref::check_equal(sd::eval(sd::logical_and(p, q)), ref::map(both([](bool x, bool y) { return x && y; }), P, Q), "and");
  ref::check_equal(sd::eval(sd::logical_or(p, q)), ref::map(both([](bool x, bool y) { return x || y; }), P, Q), "or");
  ref::check_equal(sd::eval(sd::logical_xor(p, q)), ref::map(both([](bool x, bool y) { return x != y; }), P, Q), "xor");
  ref::check_equal(sd::eval(sd::logical_not(p)), ref::map([](double x) { return double(x == 0); }, P), "not");
  ref::check_equal(sd::eval(!q), ref::map([](double x) { return double(x == 0); }, Q), "!");
  ref::check_equal(sd::eval(p == q), ref::map([](double x, double y) { return double(x == y); }, P, Q), "==");
  ref::check_equal(sd::eval(sd::cast<float>(p) * 2.5f), ref::map([](double x) { return x * 2.5; }, P), "cast<float>");
  ref::check_equal(sd::eval(sd::where(p, f, -f)), ref::map([](double c, double x) { return c != 0 ? x : -x; }, P, F), "where");
  // Logic on floats: non-zero is true.
  auto z = ref::values<float>({0, 1, -0.f, 2, 0, 0.5f, 0}, 7);
  auto w = ref::values<float>({0, 0, 3, 1, -1, 0.f, 0}, 7);
  Array Z = ref::of(z), W = ref::of(w);
  ref::check_equal(sd::eval(sd::logical_and(z, w)), ref::map(both([](bool x, bool y) { return x && y; }), Z, W), "and(float)");
  ref::check_equal(sd::eval(sd::logical_or(z, w)), ref::map(both([](bool x, bool y) { return x || y; }), Z, W), "or(float)");
  ref::check_equal(sd::eval(!z), ref::map([](double x) { return double(x == 0); }, Z), "!float");
  ref::check_equal(sd::eval(sd::cast<bool>(f)), ref::map([](double x) { return double(x != 0); }, F), "cast<bool>(float)");
}

TEMPLATE_TEST_CASE("float comparisons, where and casts", "[elementwise][compare]", float, double) {
  using T = TestType;
  // Small integer values make ties; NaNs compare false except !=.
  auto a = ref::uniform<T>(-3, 3, 13, 17);
  auto b = ref::uniform<T>(-3, 3, 13, 17);
  std::vector<T> ia(static_cast<std::size_t>(a.numel())), ib(ia.size());
  for (std::size_t i = 0; i < ia.size(); ++i) {
    ia[i] = std::round(a.data()[i]);
    ib[i] = std::round(b.data()[i]);
  }
  ia[3] = ib[5] = std::numeric_limits<T>::quiet_NaN();
  ia[9] = ib[9] = std::numeric_limits<T>::quiet_NaN();
  auto x = ref::values<T>(ia, 13, 17), y = ref::values<T>(ib, 13, 17);
  Array X = ref::of(x), Y = ref::of(y);
  auto cmp = [](auto g) { return [g](double u, double v) { return double(g(u, v)); }; };
  ref::check_equal(sd::eval(x == y), ref::map(cmp([](double u, double v) { return u == v; }), X, Y), "==");
  ref::check_equal(sd::eval(x != y), ref::map(cmp([](double u, double v) { return u != v; }), X, Y), "!=");
  ref::check_equal(sd::eval(x < y), ref::map(cmp([](double u, double v) { return u < v; }), X, Y), "<");
  ref::check_equal(sd::eval(x <= y), ref::map(cmp([](double u, double v) { return u <= v; }), X, Y), "<=");
  ref::check_equal(sd::eval(x > y), ref::map(cmp([](double u, double v) { return u > v; }), X, Y), ">");
  ref::check_equal(sd::eval(x >= y), ref::map(cmp([](double u, double v) { return u >= v; }), X, Y), ">=");
  ref::check_equal(sd::eval(sd::eq(x, T(1))), ref::map([](double u) { return double(u == 1); }, X), "eq(x, 1)");
  ref::check_equal(sd::eval(sd::ne(x, T(1))), ref::map([](double u) { return double(u != 1); }, X), "ne(x, 1)");
  ref::check_equal(sd::eval(sd::lt(T(0), x)), ref::map([](double u) { return double(0 < u); }, X), "lt(0, x)");
  ref::check_equal(sd::eval(sd::le(x, y)), ref::map(cmp([](double u, double v) { return u <= v; }), X, Y), "le");
  ref::check_equal(sd::eval(sd::gt(x, y)), ref::map(cmp([](double u, double v) { return u > v; }), X, Y), "gt");
  // where with a fused condition, broadcast values and a scalar.
  auto bias = ref::uniform<T>(-1, 1, 17);
  ref::check_equal(sd::eval(sd::where(x > y, x * T(2), bias)),
                   ref::map([](double u, double v, double c) { return u > v ? u * 2 : c; }, X, Y, ref::of(bias)),
                   "where(x > y, 2x, bias)");
  ref::check_equal(sd::eval(sd::where(a > T(0), a, T(0))),
                   ref::map([](double u) { return u > 0 ? u : 0.0; }, ref::of(a)), "where(a > 0, a, 0)");
  // casts: truncation toward zero, as static_cast (and torch's .to(int)).
  auto c = ref::uniform<T>(-1000, 1000, 7, 13);
  ref::check_equal(sd::eval(sd::cast<std::int32_t>(c)), ref::map([](double u) { return std::trunc(u); }, ref::of(c)),
                   "cast<int32>");
  ref::check_equal(sd::eval(sd::cast<std::int64_t>(c)), ref::map([](double u) { return std::trunc(u); }, ref::of(c)),
                   "cast<int64>");
  ref::check_equal(sd::eval(sd::cast<double>(c)), ref::of(c), "cast<double>");
  ref::check_equal(sd::eval(sd::cast<float>(c)), ref::map([](double u) { return double(float(u)); }, ref::of(c)),
                   "cast<float>");
}

// ---------------------------------------------------------------------------------------------
// Layouts: views on expressions, strided outputs, many threads
// ---------------------------------------------------------------------------------------------
TEST_CASE("views of element-wise expressions are pushed to the leaves", "[elementwise][views]") {
  auto a = ref::uniform<float>(-2, 2, 13, 17);
  auto r = ref::uniform<float>(-2, 2, 17);
  Array A = ref::of(a), R = ref::of(r);
  Array E = ref::map([](double x, double y) { return double(float(float(x * 2) + float(y))); }, A, R);  // [13, 17]
  auto e = a * 2.f + r;
  ref::check_equal(sd::eval(sd::transpose(e, 0, 1)), ref::transpose(E, 0, 1), "transpose(expr)");
  ref::check_equal(sd::eval(sd::permute(e, {1, 0})), ref::transpose(E, 0, 1), "permute(expr)");
  {
    Array S({13, 6});
    for (std::int64_t i = 0; i < 13; ++i)
      for (std::int64_t j = 0; j < 6; ++j) S[i * 6 + j] = E.at({i, 2 + 2 * j});
    ref::check_equal(sd::eval(sd::slice(e, 1, 2, 14, 2)), S, "slice(expr, 1, 2, 14, 2)");
  }
  {
    auto u = sd::eval(sd::unsqueeze(e, 1));
    CHECK(u.shape() == sd::Index<3>{13, 1, 17});
    Array U = E;
    U.shape = {13, 1, 17};
    ref::check_equal(u, U, "unsqueeze(expr, 1)");
  }
  {
    auto row = sd::slice(a, 0, 4, 5);  // [1, 17]
    auto x = sd::eval(sd::expand(row * 3.f, std::array<std::int64_t, 3>{2, 5, 17}));
    Array X({2, 5, 17});
    for (std::int64_t k = 0; k < X.numel(); ++k) X[k] = double(float(A.at({4, k % 17}) * 3));
    ref::check_equal(x, X, "expand(expr)");
  }
}

TEST_CASE("writes into strided output views", "[elementwise][views]") {
  auto a = ref::uniform<float>(-2, 2, 17, 13);
  auto b = ref::uniform<float>(-2, 2, 13);
  Array A = ref::of(a), B = ref::of(b);
  // x * y + 1 may be contracted to one fma (g++ contracts by default): allow the two roundings
  // of the unfused form, 0.5 ulp of |x y| and 0.5 ulp of the result, as eps (|x y| + |r|).
  Array E = ref::map([](double x, double y) { return x * y + 1; }, A, B);  // [17, 13]
  Array ES = ref::map([](double x, double y) { return std::fabs(x * y) + std::fabs(x * y + 1); }, A, B);
  ref::Tol tol{0, 0, 1};

  SECTION("into a transposed view") {
    auto dst = sd::zeros<float>(13, 17);
    auto dt = sd::transpose(dst, 0, 1);  // [17, 13] with strides [1, 17]
    REQUIRE_FALSE(dt.is_contiguous());
    dt = a * b + 1.f;
    Array EST = ref::transpose(ES, 0, 1);
    ref::check_close(dst, ref::transpose(E, 0, 1), tol, "dst after writing through its transpose", &EST);
    ref::check_close(dt, E, tol, "the view itself", &ES);
  }
  SECTION("into a step-2 slice leaves the other columns alone") {
    auto dst = sd::full<float>(sd::shape(17, 26), -7.f);
    auto ds = sd::slice(dst, 1, 1, 26, 2);  // 13 columns: 1, 3, ..., 25
    REQUIRE(ds.shape() == sd::Index<2>{17, 13});
    ds = a * b + 1.f;
    Array D({17, 26}, -7.0), DS({17, 26}, 0.0);
    for (std::int64_t i = 0; i < 17; ++i)
      for (std::int64_t j = 0; j < 13; ++j) {
        D[i * 26 + 1 + 2 * j] = E.at({i, j});
        DS[i * 26 + 1 + 2 * j] = ES.at({i, j});
      }
    ref::check_close(dst, D, tol, "dst after writing a step-2 slice", &DS);
  }
  SECTION("a large transposed output with two threads") {
    sd::set_num_threads(2);
    auto x = ref::uniform<float>(-2, 2, 512, 384);
    auto dst = sd::zeros<float>(384, 512);
    auto dt = sd::transpose(dst, 0, 1);
    dt = sd::tanh(x) * 0.5f;
    ref::check_close(dt, ref::map([](double v) { return std::tanh(double(float(v))) * 0.5; }, ref::of(x)),
                     ref::Tol{3, 1e-38}, "tanh(x)*0.5 into [512,384] transposed");
  }
  SECTION("a shape mismatch throws sd::Error") {
    auto dst = sd::zeros<float>(13, 17);
    CHECK_THROWS_AS(dst = a * b, sd::Error);
    auto c = ref::uniform<float>(0, 1, 12);
    CHECK_THROWS_AS(a + c, sd::Error);
  }
}

TEST_CASE("large tensors use the multi-threaded path", "[elementwise][threads]") {
  constexpr std::int64_t n = std::int64_t{1} << 20;
  auto x = ref::uniform<float>(-5, 5, n);
  auto y = ref::uniform<float>(-5, 5, n);
  Array X = ref::of(x), Y = ref::of(y);
  // exp(x * 0.5f) * y + 1: three roundings on top of exp's (<= 2 ulp): bounded by a few ulp of
  // the terms; the sum can cancel, so the bound is absolute in the size of exp(..)*y and 1.
  Array E = ref::map([](double u, double v) { return std::exp(double(float(u * 0.5))) * v + 1; }, X, Y);
  Array scale = ref::map([](double u, double v) { return std::fabs(std::exp(u * 0.5) * v) + 1; }, X, Y);
  for (int threads : {1, 2}) {
    sd::set_num_threads(threads);
    INFO("threads = " << threads);
    sd::Tensor<float, 1> r = sd::exp(x * 0.5f) * y + 1.f;
    ref::check_close(r, E, ref::Tol{0, 0, 4}, "exp(x*0.5)*y+1, 1<<20", &scale);
    // Strided: every other element of a 2n array, and a broadcast [1024,1] * [1024].
    auto big = ref::uniform<float>(-5, 5, 2 * n);
    auto s = sd::slice(big, 0, 0, 2 * n, 2);
    Array S = ref::map([](double u) { return std::fabs(u); }, ref::of(s));
    ref::check_equal(sd::eval(sd::abs(s)), S, "abs(strided 1<<20)");
    auto col = ref::uniform<float>(-1, 1, 1024, 1);
    auto row = ref::uniform<float>(-1, 1, 1024);
    ref::check_equal(sd::eval(sd::maximum(col, row)),
                     ref::map([](double u, double v) { return std::max(u, v); }, ref::of(col), ref::of(row)),
                     "maximum([1024,1], [1024])");
  }
  sd::set_num_threads(2);
}

TEST_CASE("operands broadcast along a run repeat one value in it", "[elementwise][broadcast]") {
  // A per-channel [1, C, 1, 1] and a per-sample [N, 1, 1, 1] over [N, C, H, W]: the kernel
  // walks runs of H * W, in which both repeat one value. Two threads share the runs.
  sd::set_num_threads(2);
  auto x = ref::uniform<float>(-2, 2, 4, 6, 30, 50);
  auto c = ref::uniform<float>(-2, 2, 1, 6, 1, 1);
  auto n = ref::uniform<float>(-2, 2, 4, 1, 1, 1);
  Array X = ref::of(x), C = ref::of(c), N = ref::of(n);
  // Two roundings: (x - c), then the product.
  ref::check_close(sd::eval((x - c) * n), ref::map([](double a, double b, double d) { return (a - b) * d; }, X, C, N),
                   ref::Tol{2, 0}, "(x - c) * n");
  // Into a strided output view, and a run that is the whole tensor (a [1, 1, 1, 1] operand).
  auto dst = sd::zeros<float>(4, 6, 30, 100);
  auto half = sd::slice(dst, 3, 0, 100, 2);
  auto one = ref::uniform<float>(1, 2, 1, 1, 1, 1);
  half = x * c + one;
  ref::check_close(sd::eval(half * 1.f),
                   ref::map([](double a, double b, double d) { return a * b + d; }, X, C, ref::of(one)),
                   ref::Tol{2, 1e-6}, "x * c + one into a strided view");
  // Reductions read such operands too: per-channel sums of c * x fold runs of H * W.
  int d023[] = {0, 2, 3};
  Array prod = ref::map([](double a, double b) { return a * b; }, X, C);
  Array abs_sum = ref::reduce(ref::map([](double v) { return std::fabs(v); }, prod), {0, 2, 3}, true, ref::fsum);
  ref::check_close(sd::eval(sd::sum(c * x, d023, sd::keepdim)), ref::reduce(prod, {0, 2, 3}, true, ref::fsum),
                   ref::Tol{0, 0, 6000}, "sum(c * x, {0, 2, 3})", &abs_sum);
}

// ---------------------------------------------------------------------------------------------
// Special values through the fused (vectorized) path
// ---------------------------------------------------------------------------------------------
TEMPLATE_TEST_CASE("NaN and inf through the fused path", "[elementwise][special]", float, double) {
  using T = TestType;
  constexpr double nan = ref::nan, inf = ref::inf;
  // 48 elements, so the specials land in different vector lanes and in the scalar tail.
  std::vector<double> pattern = {nan, 1, -inf, inf, 0, -2, 3, nan, 100, -100, 1000, -1000, 0.5, -0.f};
  std::vector<T> xv(48), yv(48);
  for (std::size_t i = 0; i < 48; ++i) {
    xv[i] = static_cast<T>(pattern[i % pattern.size()]);
    yv[i] = static_cast<T>(pattern[(i * 5 + 3) % pattern.size()]);
  }
  auto x = ref::values<T>(xv, 48), y = ref::values<T>(yv, 48);
  Array X = ref::of(x), Y = ref::of(y);
  auto pmax = [](double u, double v) { return std::isnan(u) || std::isnan(v) ? nan : std::max(u, v); };
  auto pmin = [](double u, double v) { return std::isnan(u) || std::isnan(v) ? nan : std::min(u, v); };
  ref::Tol exact{0, 0};
  ref::check_close(sd::eval(sd::maximum(x, y)), ref::map(pmax, X, Y), exact, "maximum propagates NaN");
  ref::check_close(sd::eval(sd::minimum(x, y)), ref::map(pmin, X, Y), exact, "minimum propagates NaN");
  ref::check_close(sd::eval(sd::maximum(y, x) + T(0)), ref::map(pmax, Y, X), exact, "maximum(y, x) fused");
  ref::check_close(sd::eval(sd::clamp(x, T(-1), T(2))),
                   ref::map([&](double u) { return pmin(pmax(u, -1), 2); }, X), exact, "clamp keeps NaN");
  ref::check_close(sd::eval(sd::clamp(x, y, T(2))),
                   ref::map([&](double u, double v) { return pmin(pmax(u, v), 2); }, X, Y), exact,
                   "clamp(x, tensor, 2)");
  ref::check_close(sd::eval(sd::relu(x)), ref::map([](double u) { return std::isnan(u) ? nan : std::max(u, 0.0); }, X),
                   exact, "relu keeps NaN");
  ref::check_close(sd::eval(sd::abs(x)), ref::map([](double u) { return std::fabs(u); }, X), exact, "abs");

  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  auto round_t = [](double v) {  // to T, overflowing to inf
    return std::fabs(v) > static_cast<double>(std::numeric_limits<T>::max()) ? std::copysign(inf, v)
                                                                            : static_cast<double>(static_cast<T>(v));
  };
  ref::check_close(sd::eval(sd::exp(x)), ref::map([&](double u) { return round_t(std::exp(u)); }, X),
                   ref::Tol{3, tiny}, "exp: exp(inf)=inf, exp(-inf)=0, overflow=inf, NaN");
  ref::check_close(sd::eval(sd::sigmoid(x)), ref::map([](double u) { return 1 / (1 + std::exp(-u)); }, X),
                   ref::Tol{3, tiny}, "sigmoid: +-inf -> 1, 0");
  ref::check_close(sd::eval(sd::tanh(x)), ref::map([](double u) { return std::tanh(u); }, X),
                   ref::Tol{3, tiny}, "tanh: +-inf -> +-1");
  // silu(-inf) = -inf * sigmoid(-inf) = -inf * 0: NaN, as PyTorch's x / (1 + exp(-x)).
  ref::check_close(sd::eval(sd::silu(x)), ref::map([](double u) { return u / (1 + std::exp(-u)); }, X),
                   ref::Tol{4, tiny}, "silu at +-inf");
  ref::check_close(sd::eval(sd::exp(x) * T(0) + T(1)),
                   ref::map([&](double u) { return std::isinf(round_t(std::exp(u))) || std::isnan(u) ? nan : 1.0; }, X),
                   exact, "exp(x)*0+1: NaN from inf*0 (exp overflowing too)");
  // log / sqrt outside and at the edge of their domains.
  auto d = ref::values<T>({T(0), T(-1), std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN(),
                           T(1), T(-0.0), T(4), T(0)}, 8);
  Array Dv = ref::of(d);
  ref::check_close(sd::eval(sd::log(d)), ref::map([](double u) { return std::log(u); }, Dv), ref::Tol{3, tiny},
                   "log(0)=-inf, log(-1)=NaN, log(inf)=inf");
  ref::check_close(sd::eval(sd::sqrt(d)), ref::map([](double u) { return std::sqrt(u); }, Dv), ref::Tol{1, tiny},
                   "sqrt(-1)=NaN, sqrt(inf)=inf");
  ref::check_close(sd::eval(sd::rsqrt(d)), ref::map([](double u) { return 1 / std::sqrt(u); }, Dv), ref::Tol{3, tiny},
                   "rsqrt(0)=inf");
}

// t broadcast to `shape`, as a new contiguous tensor written by plain loops.
template <class TT, class Shape>
auto spread(TT const& t, Shape const& shape) {
  using T = typename TT::value_type;
  constexpr int R = TT::rank;
  sd::Tensor<T, R> out(shape);
  std::vector<T> src = sd::to_vector(t);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    std::int64_t r = i, k = 0;
    for (int a = R - 1; a >= 0; --a) {
      if (t.shape()[a] != 1) k += r % shape[a] * t.strides()[a];
      r /= shape[a];
    }
    out.data()[i] = src[static_cast<std::size_t>(k)];
  }
  return out;
}

TEST_CASE("operands that repeat along long runs: chunks and blocks", "[elementwise][broadcast]") {
  // Runs of 130 * 131 = 17030 elements: the element-wise loop takes them a chunk at a time and
  // the per-channel reductions fold them in blocks, each with the repeating operands read from
  // a buffer of their value. Compared bit for bit with the same maths on operands spread out.
  sd::set_num_threads(2);
  auto x = ref::uniform<float>(-2, 2, 3, 5, 130, 131);
  auto c = ref::uniform<float>(-2, 2, 1, 5, 1, 1);
  auto n = ref::uniform<float>(-2, 2, 3, 1, 1, 1);
  auto cx = spread(c, x.shape()), nx = spread(n, x.shape());
  auto same = [](auto const& a, auto const& b, char const* what) {
    INFO(what);
    CHECK(sd::to_vector(a) == sd::to_vector(b));
  };
  same(sd::eval(x * c + n), sd::eval(x * cx + nx), "x * c + n");
  same(sd::eval(sd::where(x > c, n, x)), sd::eval(sd::where(x > cx, nx, x)), "where(x > c, n, x)");
  int d023[] = {0, 2, 3};
  same(sd::eval(sd::sum(x * c - n, d023, sd::keepdim)), sd::eval(sd::sum(x * cx - nx, d023, sd::keepdim)),
       "sum(x * c - n, {0, 2, 3})");
  same(sd::eval(sd::amax(x - c, d023)), sd::eval(sd::amax(x - cx, d023)), "amax(x - c, {0, 2, 3})");
  same(sd::eval(sd::mean((x - c) * (x - c), d023)), sd::eval(sd::mean((x - cx) * (x - cx), d023)),
       "mean((x - c)^2, {0, 2, 3})");
  // A [1] operand over a long vector: one run, shared out between the threads.
  auto v = ref::uniform<float>(-2, 2, 100003);
  auto s1 = ref::uniform<float>(-2, 2, 1);
  auto sv = spread(s1, v.shape());
  same(sd::eval(v * s1 - s1), sd::eval(v * sv - sv), "v * s - s");
  // Integers and doubles.
  auto xi = ref::uniform<std::int32_t>(-50, 50, 2, 3, 40, 41);
  auto ci = ref::uniform<std::int32_t>(-50, 50, 1, 3, 1, 1);
  same(sd::eval(xi * ci), sd::eval(xi * spread(ci, xi.shape())), "int32 x * c");
  auto xd = ref::uniform<double>(-2, 2, 2, 3, 40, 41);
  auto cd = ref::uniform<double>(-2, 2, 1, 3, 1, 1);
  same(sd::eval(sd::sum(xd / cd, d023)), sd::eval(sd::sum(xd / spread(cd, xd.shape()), d023)),
       "double sum(x / c, {0, 2, 3})");
}
