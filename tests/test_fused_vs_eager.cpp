// The fused plan (sd::eval: DESIGN.md §3's kernels) and the eager baseline (sd::eager: one
// kernel per node) compute the same maths: for each expression, both agree with each other
// within float rounding, and both agree with a double-precision reference.
//
// Tolerance: the two evaluations round differently (the fused kernel may contract a*b+c into
// one fma, keeps intermediates in registers, and sums in a different order), so both are held
// to the reference's bound, and to each other within twice that bound. Bounds per expression
// are in its section, in units of eps (the dtype's epsilon) times a per-element scale.
#include "reference.hpp"

#include <string>

namespace sd = solder;
using ref::Array;

namespace {

// Checks eval(e) and eager(e) against the reference and against each other.
template <class E>
void fused_vs_eager(E const& e, Array const& expected, Array const& scale, double scale_eps,
                    std::string const& what) {
  auto fused = sd::eval(e);
  auto eager = sd::eager(e);
  static_assert(std::is_same_v<typename decltype(fused)::value_type, typename decltype(eager)::value_type>);
  static_assert(sd::eager_kernel_count<E> >= sd::kernel_count<E>);
  ref::Tol tol{0, 1e-300, scale_eps};
  ref::check_close(fused, expected, tol, what + ": sd::eval vs reference", &scale);
  ref::check_close(eager, expected, tol, what + ": sd::eager vs reference", &scale);
  ref::Tol twice{0, 1e-300, 2 * scale_eps};
  ref::check_close(fused, ref::of(eager), twice, what + ": sd::eval vs sd::eager", &scale);
}

double f(float c) { return static_cast<double>(c); }  // a float literal, as the expression sees it

}  // namespace

TEMPLATE_TEST_CASE("fused and eager agree on the element-wise chain", "[fused][eager]", float, double) {
  using T = TestType;
  // DESIGN.md §1's chain. Terms: tanh(..)*sigmoid(..) (|.| <= 1, each factor <= 2 ulp plus the
  // argument's 2 roundings), x*x*0.1 (2 roundings), three sums: bound 8 eps (1 + 0.1 x^2 + |r|).
  auto chain_ref = [](double x) {
    return std::tanh(x * f(0.5f) + f(0.25f)) / (1 + std::exp(-x)) + x * x * f(0.1f) - f(0.3f);
  };
  auto chain_scale = [&](double x) { return 1 + 0.1 * x * x + std::fabs(chain_ref(x)); };
  for (std::int64_t n : {0, 1, 7, 4099, 1 << 16}) {
    auto x = ref::uniform<T>(-6, 6, n);
    auto e = sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
    static_assert(std::is_same_v<typename decltype(e)::value_type, T>);
    Array X = ref::of(x);
    fused_vs_eager(e, ref::map(chain_ref, X), ref::map(chain_scale, X), 8, "chain n=" + std::to_string(n));
  }
  auto x2 = sd::transpose(ref::uniform<T>(-6, 6, 17, 13), 0, 1);
  auto e2 = sd::tanh(x2 * 0.5f + 0.25f) * sd::sigmoid(x2) + x2 * x2 * 0.1f - 0.3f;
  Array X2 = ref::of(x2);
  fused_vs_eager(e2, ref::map(chain_ref, X2), ref::map(chain_scale, X2), 8, "chain, transposed 13x17");
}

TEMPLATE_TEST_CASE("fused and eager agree on row ops, biases and breaks", "[fused][eager]", float, double) {
  using T = TestType;
  auto x = ref::uniform<T>(-3, 3, 37, 129);
  Array X = ref::of(x);
  // Sums of up to 129 terms: the (n-1) eps sum|x| bound of any summation order, n = 129.
  constexpr double n = 129;

  SECTION("softmax") {
    // Relative (n + |x - max| + 6) eps: see test_rows.cpp; |x - max| <= 6.
    Array y = ref::reduce(X, {1}, true, ref::fmax);
    Array E({37, 129}), S({37, 129});
    for (std::int64_t i = 0; i < 37; ++i) {
      long double s = 0;
      for (std::int64_t j = 0; j < 129; ++j) s += std::exp(X[i * 129 + j] - y[i]);
      for (std::int64_t j = 0; j < 129; ++j) {
        E[i * 129 + j] = static_cast<double>(std::exp(X[i * 129 + j] - y[i]) / s);
        S[i * 129 + j] = (n + 12) * E[i * 129 + j];
      }
    }
    fused_vs_eager(sd::softmax(x, -1), E, S, 1, "softmax");
    // log_softmax: absolute (n + 4 + |x - max| + 2 |log sum| + |y|) eps.
    Array L({37, 129}), LS({37, 129});
    for (std::int64_t i = 0; i < 37; ++i) {
      long double s = 0;
      for (std::int64_t j = 0; j < 129; ++j) s += std::exp(X[i * 129 + j] - y[i]);
      double ls = std::log(static_cast<double>(s));
      for (std::int64_t j = 0; j < 129; ++j) {
        double v = X[i * 129 + j] - y[i];
        L[i * 129 + j] = v - ls;
        LS[i * 129 + j] = n + 4 + std::fabs(v) + 2 * std::fabs(ls) + std::fabs(v - ls);
      }
    }
    fused_vs_eager(sd::log_softmax(x, -1), L, LS, 1, "log_softmax");
  }
  SECTION("layer_norm") {
    auto g = ref::uniform<T>(0.5, 1.5, 129);
    auto b = ref::uniform<T>(-0.5, 0.5, 129);
    Array G = ref::of(g), B = ref::of(b);
    Array E({37, 129}), S({37, 129});
    for (std::int64_t i = 0; i < 37; ++i) {
      long double mu = 0, ma = 0, var = 0;
      for (std::int64_t j = 0; j < 129; ++j) mu += X[i * 129 + j], ma += std::fabs(X[i * 129 + j]);
      mu /= 129;
      ma /= 129;
      for (std::int64_t j = 0; j < 129; ++j) var += (X[i * 129 + j] - mu) * (X[i * 129 + j] - mu);
      double r = static_cast<double>(1 / std::sqrt(var / 129 + 1e-5));
      for (std::int64_t j = 0; j < 129; ++j) {
        double nv = static_cast<double>(X[i * 129 + j] - mu) * r;
        E[i * 129 + j] = nv * G[j] + B[j];
        S[i * 129 + j] = (n + 10) * (std::fabs(nv * G[j]) + static_cast<double>(ma) * r * G[j] + std::fabs(B[j]));
      }
    }
    fused_vs_eager(sd::layer_norm(x, g, b), E, S, 1, "layer_norm");
  }
  SECTION("broadcast bias + relu") {
    auto bias = ref::uniform<T>(-1, 1, 129);
    auto col = ref::uniform<T>(-1, 1, 37, 1);
    Array E = ref::map([](double u, double v, double c) { return std::max(u * f(0.5f) + v + c, 0.0); }, X,
                       ref::of(bias), ref::of(col));
    Array S = ref::map([](double u, double v, double c) { return std::fabs(u) + std::fabs(v) + std::fabs(c); }, X,
                       ref::of(bias), ref::of(col));
    fused_vs_eager(sd::relu(x * 0.5f + bias + col), E, S, 2, "relu(x*0.5 + bias[129] + col[37,1])");
  }
  SECTION("sum(x, 0) + x: a break") {
    auto e = sd::sum(x, 0) + x;
    static_assert(sd::kernel_count<decltype(e)> == 2);
    Array cs = ref::reduce(X, {0}, false, ref::fsum), ca = ref::reduce(X, {0}, false, ref::fsum_abs);
    Array E = ref::map([](double s, double u) { return s + u; }, cs, X);
    Array S = ref::map([](double a, double u) { return 37 * a + std::fabs(u); }, ca, X);
    fused_vs_eager(e, E, S, 1, "sum(x,0) + x");
  }
  SECTION("nested breaks: sum(sum(x, 0) + x, 0) + x") {
    auto e = sd::sum(sd::sum(x, 0) + x, 0) + x;
    static_assert(sd::kernel_count<decltype(e)> == 3);
    Array cs = ref::reduce(X, {0}, false, ref::fsum), ca = ref::reduce(X, {0}, false, ref::fsum_abs);
    // sum over 37 rows of (cs + x) = 37 cs + cs = 38 cs.
    Array E = ref::map([](double s, double u) { return 38 * s + u; }, cs, X);
    Array S = ref::map([](double a, double u) { return 2 * 38 * 37 * a + std::fabs(u); }, ca, X);
    fused_vs_eager(e, E, S, 1, "sum(sum(x,0)+x,0)+x");
  }
  SECTION("reductions with fused producers and consumers") {
    Array ss = ref::reduce(ref::map([](double u) { return u * u; }, X), {1}, false, ref::fsum);
    Array E = ref::map([](double s) { return std::sqrt(s) * 2; }, ss);
    Array S = ref::map([](double s) { return std::sqrt(s) * 2 * (n + 4); }, ss);
    fused_vs_eager(sd::sqrt(sd::sum(x * x, 1)) * 2.f, E, S, 1, "sqrt(sum(x*x,1))*2");
    Array C = ref::map([](double u, double m) { return u - m; }, X, ref::reduce(X, {1}, true, ref::fmean));
    Array CS = ref::map([](double u, double m) { return std::fabs(u) + m * n; }, X, ref::reduce(X, {1}, true, [](auto const& v) {
      return ref::fsum_abs(v) / static_cast<double>(v.size()); }));
    fused_vs_eager(x - sd::mean(x, -1, sd::keepdim), C, CS, 2, "x - mean(x,-1,keepdim)");
    Array V = ref::reduce(X, {1}, false, ref::fvar(1));
    fused_vs_eager(sd::var(x, 1), V, ref::map([&](double v) { return v * (n + 6); }, V), 2, "var(x, 1)");
  }
}

TEST_CASE("eager of a bare tensor is a copy; eager results are plain tensors", "[fused][eager]") {
  auto x = ref::uniform<float>(-1, 1, 5, 7);
  auto c = sd::eager(x);
  CHECK(c.data() != x.data());
  ref::check_equal(c, ref::of(x), "eager(tensor)");
  auto t = sd::eager(sd::transpose(x, 0, 1));
  CHECK(t.data() != x.data());
  ref::check_equal(t, ref::transpose(ref::of(x), 0, 1), "eager(transpose view)");
  auto e = sd::eager(x * 2.f);
  CHECK(e.is_contiguous());
  ref::check_equal(e, ref::map([](double u) { return u * 2; }, ref::of(x)), "eager(x*2)");
}
