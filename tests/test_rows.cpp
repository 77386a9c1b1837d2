// Row operations against double-precision references: softmax and log_softmax (last dim, a
// middle dim, dim 0 whose lines are strided), layer_norm (1-D gamma/beta, and 2-D gamma over
// the last two dims), rms_norm, x - mean(x, -1, keepdim); rows of length 1, 3, 1000 and 4097;
// extreme inputs (1e4, -inf, +inf, an all -inf row).
//
// Tolerances (eps: the dtype's epsilon). A row's sum or mean is computed by the lane-blocked
// reduction of backend/host (16 float / 8 double lanes of 128 terms each, a tree fold of the
// lanes, then block sums added in turn), whose rounding depth is at most
//     depth(n) = min(n, 128 + 4 + ceil(n / 1024))
// so a sum of n terms errs by at most depth(n) eps sum|terms| (relative, for positive terms).
// Strided lines are summed one term after another: depth n (the bound of any order).
// On top of that each op adds a few roundings of <= 2 ulp functions:
//   softmax:     exp(x - max) (x - max rounds to 0.5 ulp of |x - max|, i.e. a relative error
//                of |x - max| eps/2 in exp's result; exp itself <= 2 ulp), the sum (depth eps
//                relative), the reciprocal and the product: relative error
//                (depth + |x - max| + 6) eps.
//   log_softmax: absolute error (depth + 4) eps + eps (|x - max| + 2 |log sum| + |y|).
//   layer_norm:  mean: depth eps mean|x| absolute; centered values carry it; the variance
//                (depth + 4) eps relative, rsqrt halves it and adds 2 ulp; two products and
//                the + beta: absolute (depth + 10) eps (|n g| + mean|x| r |g| + |b|) where
//                n is the normalized value and r = 1/sigma.
//   rms_norm:    relative (depth / 2 + 6) eps: 2 (depth / 2 + 6) ulp.
//   x - mean:    absolute depth eps mean|x| + 1 ulp of the result.
#include "reference.hpp"

#include <array>
#include <string>

namespace sd = solder;
using ref::Array;

namespace {

// Rounding depth of a row's sum: lane-blocked when the row is contiguous, a plain running
// sum (depth n) when it is strided.
double depth(std::int64_t n, bool contiguous = true) {
  if (!contiguous) return static_cast<double>(n);
  return static_cast<double>(std::min<std::int64_t>(n, 128 + 4 + (n + 1023) / 1024));
}

// A reference row op over axis `dim` of X: f(line) -> line, applied to every line.
template <class F>
Array along(Array const& X, int dim, F const& f) {
  int R = static_cast<int>(X.shape.size());
  dim = ref::wrap(dim, R);
  Array Y(X.shape);
  std::int64_t n = X.shape[static_cast<std::size_t>(dim)];
  ref::Shape st = ref::strides_of(X.shape);
  std::int64_t s = st[static_cast<std::size_t>(dim)];
  std::vector<double> line(static_cast<std::size_t>(n));
  for (std::int64_t base = 0; base < X.numel(); ++base) {
    if ((base / s) % n != 0) continue;  // base is the start of a line
    for (std::int64_t j = 0; j < n; ++j) line[static_cast<std::size_t>(j)] = X[base + j * s];
    std::vector<double> out = f(line);
    for (std::int64_t j = 0; j < n; ++j) Y[base + j * s] = out[static_cast<std::size_t>(j)];
  }
  return Y;
}

struct Ref {
  Array y, scale;  // expected values and the per-element absolute-bound scale
};

template <class T>
Ref softmax_ref(Array const& X, int dim, bool contiguous = true) {
  Array scale(X.shape);
  Array y = along(X, dim, [](std::vector<double> const& v) {
    double m = ref::fmax(v);
    std::vector<double> e(v.size());
    long double s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += (e[i] = std::exp(v[i] - m));
    for (auto& x : e) x = static_cast<double>(x / s);
    return e;
  });
  Array sc = along(X, dim, [contiguous](std::vector<double> const& v) {
    double m = ref::fmax(v);
    std::vector<double> out(v.size());
    double d = depth(static_cast<std::int64_t>(v.size()), contiguous);
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = d + std::fabs(v[i] - m) + 6;
    return out;
  });
  for (std::int64_t i = 0; i < y.numel(); ++i) scale[i] = y[i] == 0 ? 0.0 : sc[i] * std::fabs(y[i]);  // -inf inputs: exact 0
  return {y, scale};
}

template <class T>
Ref log_softmax_ref(Array const& X, int dim, bool contiguous = true) {
  Array y = along(X, dim, [](std::vector<double> const& v) {
    double m = ref::fmax(v);
    long double s = 0;
    for (double x : v) s += std::exp(x - m);
    double ls = std::log(static_cast<double>(s));
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = (v[i] - m) - ls;
    return out;
  });
  Array sc = along(X, dim, [contiguous](std::vector<double> const& v) {
    double m = ref::fmax(v);
    long double s = 0;
    for (double x : v) s += std::exp(x - m);
    double ls = std::fabs(std::log(static_cast<double>(s)));
    double d = depth(static_cast<std::int64_t>(v.size()), contiguous);
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out[i] = d + 4 + std::fabs(v[i] - m) + 2 * ls + std::fabs((v[i] - m) - ls);
    return out;
  });
  return {y, sc};
}

// x (any rank) normalized over its trailing `k` dims, with gamma/beta of those dims.
Ref layer_norm_ref(Array const& X, Array const& G, Array const& B, int k, double eps,
                   bool contiguous = true) {
  std::int64_t n = 1;
  for (int i = 0; i < k; ++i) n *= X.shape[X.shape.size() - 1 - static_cast<std::size_t>(i)];
  Array y(X.shape), scale(X.shape);
  double d = depth(n, contiguous);
  for (std::int64_t r = 0; n > 0 && r < X.numel() / n; ++r) {
    long double mu = 0, ma = 0;
    for (std::int64_t j = 0; j < n; ++j) mu += X[r * n + j], ma += std::fabs(X[r * n + j]);
    mu /= n;
    ma /= n;
    long double var = 0;
    for (std::int64_t j = 0; j < n; ++j) var += (X[r * n + j] - mu) * (X[r * n + j] - mu);
    var /= n;
    double rs = static_cast<double>(1 / std::sqrt(var + eps));
    for (std::int64_t j = 0; j < n; ++j) {
      double nv = static_cast<double>(X[r * n + j] - mu) * rs;
      y[r * n + j] = nv * G[j] + B[j];
      scale[r * n + j] = (d + 10) * (std::fabs(nv * G[j]) + static_cast<double>(ma) * rs * std::fabs(G[j]) +
                                     std::fabs(B[j]));
    }
  }
  return {y, scale};
}

Array rms_norm_ref(Array const& X, Array const& G, int k, double eps) {
  std::int64_t n = 1;
  for (int i = 0; i < k; ++i) n *= X.shape[X.shape.size() - 1 - static_cast<std::size_t>(i)];
  Array y(X.shape);
  for (std::int64_t r = 0; n > 0 && r < X.numel() / n; ++r) {
    long double ms = 0;
    for (std::int64_t j = 0; j < n; ++j) ms += static_cast<long double>(X[r * n + j]) * X[r * n + j];
    ms /= n;
    double rs = static_cast<double>(1 / std::sqrt(ms + eps));
    for (std::int64_t j = 0; j < n; ++j) y[r * n + j] = X[r * n + j] * rs * G[j];
  }
  return y;
}

Ref center_ref(Array const& X, int dim, bool contiguous = true) {
  Array y = along(X, dim, [](std::vector<double> const& v) {
    double m = ref::fmean(v);
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i] - m;
    return out;
  });
  Array sc = along(X, dim, [contiguous](std::vector<double> const& v) {
    double ma = ref::fsum_abs(v) / static_cast<double>(v.size());
    double d = depth(static_cast<std::int64_t>(v.size()), contiguous);
    std::vector<double> out(v.size(), (d + 1) * ma);
    return out;
  });
  return {y, sc};
}

template <class T>
void check_softmaxes(sd::Tensor<T, 2> const& x, int dim, std::string const& label, bool contiguous) {
  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  Array X = ref::of(x);
  auto s = sd::softmax(x, dim);
  static_assert(sd::kernel_count<decltype(s)> == 1);
  Ref r = softmax_ref<T>(X, dim, contiguous);
  ref::check_close(sd::eval(s), r.y, ref::Tol{0, tiny, 1}, "softmax " + label, &r.scale);
  Ref l = log_softmax_ref<T>(X, dim, contiguous);
  ref::check_close(sd::eval(sd::log_softmax(x, dim)), l.y, ref::Tol{0, tiny, 1}, "log_softmax " + label, &l.scale);
}

}  // namespace

TEMPLATE_TEST_CASE("softmax and log_softmax over the last dim and over dim 0", "[rows][softmax]", float, double) {
  using T = TestType;
  for (std::int64_t len : {1, 3, 1000, 4097}) {
    std::string L = std::to_string(len);
    auto x = ref::uniform<T>(-5, 5, 6, len);
    check_softmaxes<T>(x, -1, "[6," + L + "] dim -1", true);
    check_softmaxes<T>(x, 1, "[6," + L + "] dim 1", true);
    // dim 0: lines of length `len` with stride 5.
    auto y = ref::uniform<T>(-5, 5, len, 5);
    check_softmaxes<T>(y, 0, "[" + L + ",5] dim 0 (strided lines)", false);
    // The last dim of a transpose: strided lines again, through a view.
    auto z = ref::uniform<T>(-5, 5, len, 4);
    check_softmaxes<T>(sd::transpose(z, 0, 1), -1, "transpose([" + L + ",4]) dim -1", false);
  }
  SECTION("a middle dim of a rank-3 tensor") {
    constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
    // Its max and sum run as column kernels of their own (a run-time break): runs of 4 columns,
    // and runs of 1100 (a full tile and a partial one) that the threads' shares cut across.
    sd::set_num_threads(2);
    for (std::int64_t cols : {4, 1100}) {
      auto x = ref::uniform<T>(-5, 5, 3, 37, cols);
      Array X = ref::of(x);
      std::string S = "[3,37," + std::to_string(cols) + "]";
      Ref r = softmax_ref<T>(X, 1, false);
      ref::check_close(sd::eval(sd::softmax(x, 1)), r.y, ref::Tol{0, tiny, 1}, "softmax " + S + " dim 1", &r.scale);
      Ref l = log_softmax_ref<T>(X, -2, false);
      ref::check_close(sd::eval(sd::log_softmax(x, -2)), l.y, ref::Tol{0, tiny, 1}, "log_softmax " + S + " dim -2", &l.scale);
    }
  }
  SECTION("rows sum to one") {
    auto x = ref::uniform<T>(-30, 30, 9, 1000);
    auto s = sd::eval(sd::sum(sd::softmax(x, -1), -1));
    ref::check_close(s, Array({9}, 1.0), ref::Tol{0, 2 * depth(1000) * ref::eps<T>()}, "sum(softmax) == 1");
  }
}

TEST_CASE("softmax on extreme inputs", "[rows][softmax][special]") {
  constexpr double tiny = 1e-38;
  SECTION("large values do not overflow") {
    // Rows around 1e4 (exp(1e4) overflows any float) and rows mixing +-1e4.
    auto big = ref::uniform<float>(1e4, 1e4 + 20, 4, 1000);
    Array X = ref::of(big);
    Ref r = softmax_ref<float>(X, -1);
    auto s = sd::eval(sd::softmax(big, -1));
    ref::check_close(s, r.y, ref::Tol{0, tiny, 1}, "softmax around 1e4", &r.scale);
    Ref l = log_softmax_ref<float>(X, -1);
    ref::check_close(sd::eval(sd::log_softmax(big, -1)), l.y, ref::Tol{0, tiny, 1}, "log_softmax around 1e4", &l.scale);
    auto mixed = ref::values<float>({1e4f, -1e4f, 0.f, 1e4f, 5e3f, -1e4f, -1e4f, 1e4f}, 2, 4);
    Array M = ref::of(mixed);
    Ref rm = softmax_ref<float>(M, -1);
    ref::check_close(sd::eval(sd::softmax(mixed, -1)), rm.y, ref::Tol{0, tiny, 1}, "softmax +-1e4", &rm.scale);
    Ref lm = log_softmax_ref<float>(M, -1);
    ref::check_close(sd::eval(sd::log_softmax(mixed, -1)), lm.y, ref::Tol{0, tiny, 1}, "log_softmax +-1e4", &lm.scale);
  }
  SECTION("-inf entries give exactly 0 (log_softmax: -inf)") {
    float const ninf = -std::numeric_limits<float>::infinity();
    std::vector<float> v(3 * 40);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.f;
    for (std::size_t i : {0u, 5u, 17u, 39u, 41u, 42u, 80u, 99u, 119u}) v[i] = ninf;  // masked positions
    auto x = ref::values<float>(v, 3, 40);
    Array X = ref::of(x);
    auto s = sd::eval(sd::softmax(x, -1));
    auto l = sd::eval(sd::log_softmax(x, -1));
    Ref r = softmax_ref<float>(X, -1);
    ref::check_close(s, r.y, ref::Tol{0, tiny, 1}, "softmax with -inf", &r.scale);
    Ref rl = log_softmax_ref<float>(X, -1);
    ref::check_close(l, rl.y, ref::Tol{0, tiny, 1}, "log_softmax with -inf", &rl.scale);
    for (std::size_t i : {0u, 5u, 17u, 39u, 41u, 42u, 80u, 99u, 119u}) {
      CHECK(s.data()[i] == 0.f);
      CHECK(l.data()[i] == ninf);
    }
    // Masked along dim 0 too (strided lines).
    auto xt = sd::transpose(x, 0, 1);
    Ref rt = softmax_ref<float>(ref::transpose(X, 0, 1), 0, false);
    ref::check_close(sd::eval(sd::softmax(xt, 0)), rt.y, ref::Tol{0, tiny, 1}, "softmax dim 0 with -inf", &rt.scale);
  }
  SECTION("an all -inf row and a +inf entry give NaN rows, as PyTorch") {
    float const inf = std::numeric_limits<float>::infinity();
    auto x = ref::values<float>({-inf, -inf, -inf, 1.f, inf, 2.f, 0.f, 1.f, 2.f}, 3, 3);
    auto s = sd::eval(sd::softmax(x, -1));
    for (int j = 0; j < 3; ++j) {
      CHECK(std::isnan(s(0, j)));
      CHECK(std::isnan(s(1, j)));
    }
    Array X = ref::of(x);
    Ref r = softmax_ref<float>(X, -1);
    ref::check_close(s, r.y, ref::Tol{0, 1e-38, 1}, "softmax NaN rows", &r.scale);
  }
}

TEMPLATE_TEST_CASE("layer_norm with 1-D and 2-D gamma", "[rows][layer_norm]", float, double) {
  using T = TestType;
  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  for (std::int64_t len : {1, 3, 1000, 4097}) {
    std::string L = std::to_string(len);
    auto x = ref::uniform<T>(-1, 3, 5, len);
    auto g = ref::uniform<T>(0.5, 1.5, len);
    auto b = ref::uniform<T>(-0.5, 0.5, len);
    auto e = sd::layer_norm(x, g, b);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    Ref r = layer_norm_ref(ref::of(x), ref::of(g), ref::of(b), 1, 1e-5);
    ref::check_close(sd::eval(e), r.y, ref::Tol{0, tiny, 1}, "layer_norm [5," + L + "]", &r.scale);
    // Strided rows (a transpose) and an explicit eps.
    auto xt = sd::transpose(ref::uniform<T>(-1, 3, len, 5), 0, 1);
    Ref rt = layer_norm_ref(ref::of(xt), ref::of(g), ref::of(b), 1, 1e-3, false);
    ref::check_close(sd::eval(sd::layer_norm(xt, g, b, 1e-3)), rt.y, ref::Tol{0, tiny, 1},
                     "layer_norm transpose([" + L + ",5]) eps 1e-3", &rt.scale);
  }
  SECTION("2-D gamma normalizes over the last two dims") {
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{5, 7}, {33, 31}, {1, 1}}) {
      auto x = ref::uniform<T>(-1, 3, 3, m, n);
      auto g = ref::uniform<T>(0.5, 1.5, m, n);
      auto b = ref::uniform<T>(-0.5, 0.5, m, n);
      auto e = sd::layer_norm(x, g, b);
      static_assert(sd::kernel_count<decltype(e)> == 1);
      Ref r = layer_norm_ref(ref::of(x), ref::of(g), ref::of(b), 2, 1e-5);
      ref::check_close(sd::eval(e), r.y, ref::Tol{0, tiny, 1},
                       "layer_norm [3," + std::to_string(m) + "," + std::to_string(n) + "] over 2 dims", &r.scale);
    }
  }
  SECTION("rows of length 1 give beta") {
    auto x = ref::uniform<T>(-1, 3, 4, 1);
    auto g = ref::values<T>({T(2)}, 1);
    auto b = ref::values<T>({T(0.25)}, 1);
    ref::check_equal(sd::eval(sd::layer_norm(x, g, b)), Array({4, 1}, 0.25), "layer_norm of single elements");
  }
}

TEMPLATE_TEST_CASE("rms_norm", "[rows][rms_norm]", float, double) {
  using T = TestType;
  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  for (std::int64_t len : {1, 3, 1000, 4097}) {
    std::string L = std::to_string(len);
    auto x = ref::uniform<T>(-2, 2, 5, len);
    auto g = ref::uniform<T>(0.5, 1.5, len);
    auto e = sd::rms_norm(x, g);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    double ulps = 2 * (depth(len) / 2 + 6), ulps_strided = 2 * (depth(len, false) / 2 + 6);
    // Default eps: the dtype's epsilon (torch.nn.functional.rms_norm).
    Array r = rms_norm_ref(ref::of(x), ref::of(g), 1, ref::eps<T>());
    ref::check_close(sd::eval(e), r, ref::Tol{ulps, tiny}, "rms_norm [5," + L + "]");
    auto xt = sd::transpose(ref::uniform<T>(-2, 2, len, 5), 0, 1);
    Array rt = rms_norm_ref(ref::of(xt), ref::of(g), 1, 1e-6);
    ref::check_close(sd::eval(sd::rms_norm(xt, g, 1e-6)), rt, ref::Tol{ulps_strided, tiny}, "rms_norm strided, eps 1e-6");
  }
  SECTION("2-D gamma") {
    auto x = ref::uniform<T>(-2, 2, 3, 6, 11);
    auto g = ref::uniform<T>(0.5, 1.5, 6, 11);
    Array r = rms_norm_ref(ref::of(x), ref::of(g), 2, ref::eps<T>());
    ref::check_close(sd::eval(sd::rms_norm(x, g)), r, ref::Tol{2 * (depth(66) / 2 + 6), tiny}, "rms_norm 2-D gamma");
  }
}

TEMPLATE_TEST_CASE("x - mean(x, dim, keepdim)", "[rows][center]", float, double) {
  using T = TestType;
  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  for (std::int64_t len : {1, 3, 1000, 4097}) {
    std::string L = std::to_string(len);
    auto x = ref::uniform<T>(-1, 3, 5, len);
    auto e = x - sd::mean(x, -1, sd::keepdim);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    Ref r = center_ref(ref::of(x), -1);
    ref::check_close(sd::eval(e), r.y, ref::Tol{1, tiny, 1}, "x - mean(x,-1) [5," + L + "]", &r.scale);
    auto y = ref::uniform<T>(-1, 3, len, 5);
    Ref r0 = center_ref(ref::of(y), 0, false);
    ref::check_close(sd::eval(y - sd::mean(y, 0, sd::keepdim)), r0.y, ref::Tol{1, tiny, 1},
                     "y - mean(y,0) [" + L + ",5]", &r0.scale);
  }
}

TEST_CASE("batch norm: statistics over leading dims", "[rows][leading]") {
  // Its reductions fold dim 0: they run as column kernels of their own (a run-time break),
  // and the normalization reads them as broadcast rows. Two threads share every kernel.
  sd::set_num_threads(2);
  constexpr double tiny = 1e-38, eps = 1e-5;
  auto x = ref::uniform<float>(-1, 3, 300, 2500);
  auto e = (x - sd::mean(x, 0, sd::keepdim)) * sd::rsqrt(sd::var(x, 0, sd::keepdim, 0.0) + float(eps));
  static_assert(sd::kernel_count<decltype(e)> == 1);  // by type; by shape: 3 (explain says so)
  CHECK_THAT(sd::explain(e), Catch::Contains("fold leading dims"));
  // The reference: layer norm of the transpose, whose normalized dim is then the last one.
  Array ones({300}, 1.0), zeros({300}, 0.0);
  Ref r = layer_norm_ref(ref::transpose(ref::of(x), 0, 1), ones, zeros, 1, eps, false);
  Array rs = ref::transpose(r.scale, 0, 1);
  ref::check_close(sd::eval(e), ref::transpose(r.y, 0, 1), ref::Tol{0, tiny, 1}, "batch norm [300, 2500]", &rs);
  // Rank 3 over dims {0, 1}, as BatchNorm1d on [N, C, L] would be over {0, 2} (not trailing).
  auto y = ref::uniform<float>(-1, 3, 6, 50, 40);
  int d01[] = {0, 1};
  auto cy = y - sd::mean(y, d01, sd::keepdim);
  auto ey = cy * sd::rsqrt(sd::mean(cy * cy, d01, sd::keepdim) + float(eps));
  Array Y = ref::of(y), Yt({40, 300});
  for (std::int64_t i = 0; i < 300; ++i)
    for (std::int64_t k = 0; k < 40; ++k) Yt[k * 300 + i] = Y[i * 40 + k];
  Ref ry = layer_norm_ref(Yt, ones, zeros, 1, eps, false);
  Array want(Y.shape), scale(Y.shape);
  for (std::int64_t i = 0; i < 300; ++i)
    for (std::int64_t k = 0; k < 40; ++k) want[i * 40 + k] = ry.y[k * 300 + i], scale[i * 40 + k] = ry.scale[k * 300 + i];
  ref::check_close(sd::eval(ey), want, ref::Tol{0, tiny, 1}, "batch norm [6, 50, 40] over {0, 1}", &scale);
}

TEST_CASE("row ops on a few long rows use both threads", "[rows][threads]") {
  sd::set_num_threads(2);
  constexpr double tiny = 1e-38;
  for (std::int64_t rows : {1, 3}) {
    INFO("rows = " << rows);
    auto x = ref::uniform<float>(-5, 5, rows, 1 << 17);
    Array X = ref::of(x);
    Ref r = softmax_ref<float>(X, -1);
    ref::check_close(sd::eval(sd::softmax(x, -1)), r.y, ref::Tol{0, tiny, 1}, "softmax long rows", &r.scale);
    auto g = ref::uniform<float>(0.5, 1.5, 1 << 17);
    auto b = ref::uniform<float>(-0.5, 0.5, 1 << 17);
    Ref ln = layer_norm_ref(X, ref::of(g), ref::of(b), 1, 1e-5);
    ref::check_close(sd::eval(sd::layer_norm(x, g, b)), ln.y, ref::Tol{0, tiny, 1}, "layer_norm long rows", &ln.scale);
    // One long strided line (dim 0 of [N, rows]).
    auto y = ref::uniform<float>(-5, 5, 1 << 16, rows);
    Ref ry = softmax_ref<float>(ref::of(y), 0, false);
    ref::check_close(sd::eval(sd::softmax(y, 0)), ry.y, ref::Tol{0, tiny, 1}, "softmax long strided lines", &ry.scale);
  }
}

TEST_CASE("row kernels over several or non-adjacent dims, and into strided outputs", "[rows][dims]") {
  constexpr double tiny = 1e-38;
  auto x = ref::uniform<float>(-1, 3, 3, 5, 7);
  Array X = ref::of(x);
  {
    // Lines over dims 0 and 2 (not adjacent): x - mean over {0, 2}.
    int d02[] = {0, 2};
    auto e = x - sd::mean(x, d02, sd::keepdim);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    Array m = ref::reduce(X, {0, 2}, true, ref::fmean);
    Array ma = ref::reduce(X, {0, 2}, true, [](std::vector<double> const& v) { return ref::fsum_abs(v) / double(v.size()); });
    Array S = ref::map([](double u, double a) { return std::fabs(u) + 22 * a; }, X, ma);
    ref::check_close(sd::eval(e), ref::map([](double u, double mm) { return u - mm; }, X, m), ref::Tol{0, tiny, 1},
                     "x - mean(x, {0,2}, keepdim)", &S);
  }
  {
    // A full keepdim reduction broadcast back over everything.
    int all[] = {0, 1, 2};
    auto e = x / sd::sum(x, all, sd::keepdim);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    Array s = ref::reduce(X, {0, 1, 2}, true, ref::fsum);
    // x in [-1, 3): sum|x| <= 3 * 105 and the sum is ~105, so the sum's relative error is
    // <= 105 * 3 eps; the division adds half an ulp.
    ref::check_close(sd::eval(e), ref::map([](double u, double ss) { return u / ss; }, X, s), ref::Tol{2 * 315 + 1, tiny},
                     "x / sum(x, all, keepdim)");
  }
  {
    // softmax written into a transposed view of a [7, 3*5] buffer (a strided output).
    auto y = ref::uniform<float>(-4, 4, 15, 7);
    auto dst = sd::zeros<float>(7, 15);
    auto dt = sd::transpose(dst, 0, 1);
    dt = sd::softmax(y, -1);
    Ref r = softmax_ref<float>(ref::of(y), -1);
    ref::check_close(dt, r.y, ref::Tol{0, tiny, 1}, "softmax into a transposed view", &r.scale);
    Array rs = ref::transpose(r.scale, 0, 1);
    ref::check_close(dst, ref::transpose(r.y, 0, 1), ref::Tol{0, tiny, 1}, "the buffer behind it", &rs);
  }
  {
    // Two reductions over different dims in one kernel cannot share lines: the executor
    // evaluates them as kernels of their own (a run-time break) and the answer is right.
    auto y = ref::uniform<float>(-1, 1, 4, 6);
    auto e = sd::sum(y, 0, sd::keepdim) + sd::sum(y, 1, sd::keepdim);
    sd::Tensor<float, 2> got = e;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 6; ++j) {
        double col = 0, row = 0;
        for (int k = 0; k < 4; ++k) col += y(k, j);
        for (int k = 0; k < 6; ++k) row += y(i, k);
        CHECK(got(i, j) == Approx(col + row).margin(1e-5));
      }
    CHECK_THAT(sd::explain(e), Catch::Contains("run-time break"));
  }
}

namespace {
// Links a kernel's evaluator as the host executor does for contiguous lines of length `len`,
// and says whether every recalled input found a reduction that records it on the same line.
template <class E>
bool computed_once(E const& e, std::int64_t len) {
  namespace sdd = sd::detail;
  sdd::Temps temps;
  auto ev = sdd::make_eval<E::rank, false, false, E>(e, e.shape(), temps);
  sdd::Links links;
  links.line_len = len;
  links.dom = e.shape().data();
  links.rank = E::rank;
  ev.link(links);
  return links.resolve();
}

// y[i, j] = f(x[i, j]) / sum_j g(x[i, j]) in double, with a relative bound of k eps.
template <class F, class G>
void check_ratio(sd::Tensor<float, 2> const& got, sd::Tensor<float, 2> const& x, F f, G g,
                 std::string const& what) {
  INFO(what);
  auto [rows, cols] = x.shape();
  double worst = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    long double s = 0;
    for (std::int64_t j = 0; j < cols; ++j) s += g(static_cast<double>(x(i, j)));
    for (std::int64_t j = 0; j < cols; ++j) {
      double want = f(static_cast<double>(x(i, j))) / static_cast<double>(s);
      worst = std::max(worst, std::fabs(got(i, j) - want) / std::fabs(want));
    }
  }
  CHECK(worst <= (depth(cols) + 8) * ref::eps<float>());
}
}  // namespace

TEST_CASE("a reduction's input that the kernel uses again is computed once per line",
          "[rows][shared]") {
  sd::Tensor<float, 2> x = ref::uniform<float>(-3, 3, 8, 1000);
  sd::Tensor<float, 2> y = ref::uniform<float>(-3, 3, 8, 1000);
  auto m = sd::max(x, -1, sd::keepdim);
  SECTION("softmax's exp: once, on contiguous lines of the reduced length only") {
    auto s = sd::softmax(x, -1);
    CHECK(computed_once(s, 1000));
    CHECK_FALSE(computed_once(s, -1));   // no contiguous line (strided or general loops)
    CHECK_FALSE(computed_once(s, 500));  // another line length
    CHECK_FALSE(computed_once(sd::log_softmax(x, -1), 1000));  // nothing to share there
  }
  SECTION("the same values written twice are found equal") {
    auto e = sd::exp(x - m) * (1.f / sd::sum(sd::exp(x - m), -1, sd::keepdim));
    CHECK(computed_once(e, 1000));
    auto ex = [](double v) { return std::exp(v); };
    check_ratio(sd::eval(e), x, ex, ex, "exp(x - m) / sum(exp(x - m)): the shifts cancel");
  }
  SECTION("same types, other values: computed apart") {
    auto other_input = sd::exp(y - m) * (1.f / sd::sum(sd::exp(x - m), -1, sd::keepdim));
    CHECK_FALSE(computed_once(other_input, 1000));
    sd::Tensor<float, 2> got = other_input;
    sd::Tensor<float, 2> mx = m;
    double worst = 0;
    for (std::int64_t i = 0; i < 8; ++i) {
      long double s = 0;
      for (std::int64_t j = 0; j < 1000; ++j) s += std::exp(double(x(i, j)) - double(mx(i, 0)));
      for (std::int64_t j = 0; j < 1000; ++j) {
        double want = std::exp(double(y(i, j)) - double(mx(i, 0))) / static_cast<double>(s);
        worst = std::max(worst, std::fabs(got(i, j) - want) / want);
      }
    }
    CHECK(worst <= (depth(1000) + 12) * ref::eps<float>());

    auto other_scalar = sd::exp(x * 0.5f) * (1.f / sd::sum(sd::exp(x * 0.25f), -1, sd::keepdim));
    CHECK_FALSE(computed_once(other_scalar, 1000));
    check_ratio(sd::eval(other_scalar), x, [](double v) { return std::exp(v * 0.5); },
                [](double v) { return std::exp(v * 0.25); }, "other scalar");

    auto shifted_relu = [&](double slope) { return sd::leaky_relu(x, slope) + 4.f; };
    auto other_slope = shifted_relu(0.5) * (1.f / sd::sum(shifted_relu(0.25), -1, sd::keepdim));
    CHECK_FALSE(computed_once(other_slope, 1000));
    auto lr = [](double s) { return [s](double v) { return (v > 0 ? v : s * v) + 4; }; };
    check_ratio(sd::eval(other_slope), x, lr(0.5), lr(0.25), "other slope");
  }
  SECTION("cheap values are not kept: a comparison summed and used again") {
    auto e = sd::sum(x > 0.f, -1, sd::keepdim) * (x > 0.f);
    sd::Tensor<std::int64_t, 2> got = e;
    for (std::int64_t i = 0; i < 8; ++i) {
      std::int64_t n = 0;
      for (std::int64_t j = 0; j < 1000; ++j) n += x(i, j) > 0.f;
      for (std::int64_t j = 0; j < 1000; j += 7) CHECK(got(i, j) == (x(i, j) > 0.f ? n : 0));
    }
  }
  SECTION("a reduction over a broadcast input: another index space, computed apart") {
    sd::Tensor<float, 2> r = ref::uniform<float>(-3, 3, 1, 1000);
    auto e = sd::exp(r) * (1.f / sd::sum(sd::exp(r), -1, sd::keepdim)) + x * 0.f;
    CHECK_FALSE(computed_once(e, 1000));
    sd::Tensor<float, 2> rows = r + x * 0.f;  // r on every row
    auto ex = [](double v) { return std::exp(v); };
    check_ratio(sd::eval(e), rows, ex, ex, "exp(r) / sum(exp(r)) broadcast over 8 rows");
  }
}
