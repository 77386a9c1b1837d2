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
          return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
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
