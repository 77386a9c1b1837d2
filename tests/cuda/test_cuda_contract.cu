// Contractions on sd::Cuda tensors (backend/cuda/contract.hpp) against the host's results on
// the same inputs (tests/test_contract.cpp holds those to double-precision sums): every value
// within the error bound of two dot products, each |device - host| <= 2 gamma_k sum|a||b|, and
// every kernel count against the kernels that run. Shapes with 1, primes, odd and large sizes;
// transposed, sliced, expanded and permuted operands and outputs; vectors and broadcast batches;
// k = 0; cuBLASLt's epilogues and the product followed by an element-wise kernel; half and
// bfloat16 against the host's float results; TF32 off and on.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "compare.hpp"

using gpu_test::counted;
using gpu_test::host_rand;

namespace {

template <class T>
constexpr double eps = std::numeric_limits<T>::epsilon();
// The unit roundoff of a 16-bit float: where the device rounds its float result once.
template <class T>
constexpr double unit16 = std::is_same_v<T, sd::half> ? 1.0 / 2048 : 1.0 / 256;

bool contains(std::string const& s, std::string const& what) { return s.find(what) != std::string::npos; }

// |device - host| <= dot * mag + out * |host| (+ the smallest normal float) element by element:
// mag scales the dot products' bound (sum |a||b|, through the epilogue's own scaling), `out`
// the rounding of what is computed after them.
template <class Dv, class Hv, class Mv>
void within(Dv const& device, Hv const& host, Mv const& mag, double dot, double out) {
  auto d = sd::to_vector(device);
  auto h = sd::to_vector(host);
  auto m = sd::to_vector(mag);
  REQUIRE(d.size() == h.size());
  REQUIRE(m.size() == h.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    double const dv = static_cast<double>(d[i]), hv = static_cast<double>(h[i]),
                 mv = static_cast<double>(m[i]);
    INFO("element " << i << ": device " << dv << ", host " << hv << ", sum |a||b| " << mv);
    CHECK(std::abs(dv - hv) <= dot * mv + out * std::abs(hv) + std::numeric_limits<float>::min());
  }
}

// The bound of two dot products of k terms in T, each within gamma_k of the exact sum.
template <class T>
double dots(std::int64_t k) {
  return static_cast<double>(k + 2) * eps<T>;
}

// f of the device copies against f of the host tensors, kernel_count's kernels run.
template <class F, class TA, class TB>
void product_on_both(F const& f, TA const& a, TB const& b, std::int64_t k) {
  using T = typename TA::value_type;
  auto const e = f(a.template to<sd::Cuda>(), b.template to<sd::Cuda>());
  auto const d = counted(e, sd::kernel_count<decltype(e)>);
  within(d, sd::eval(f(a, b)), sd::eval(f(sd::abs(a), sd::abs(b))), dots<T>(k), 0);
}

}  // namespace

TEST_CASE("matmul: shapes with 1, primes, odd and large sizes", "[gpu][contract]") {
  struct Case {
    std::int64_t m, k, n;
  };
  auto mm = [](auto const& x, auto const& y) { return sd::matmul(x, y); };
  for (Case c : {Case{1, 1, 1}, Case{1, 7, 1}, Case{7, 1, 5}, Case{13, 17, 19}, Case{31, 64, 1},
                 Case{1, 64, 33}, Case{97, 101, 103}, Case{256, 512, 128}, Case{1000, 37, 300},
                 Case{3, 4099, 5}, Case{1024, 1024, 1024}}) {
    INFO("[" << c.m << ", " << c.k << "] x [" << c.k << ", " << c.n << "]");
    product_on_both(mm, host_rand<float>(c.m, c.k), host_rand<float>(c.k, c.n), c.k);
    if (c.m * c.n < 100000)
      product_on_both(mm, host_rand<double>(c.m, c.k), host_rand<double>(c.k, c.n), c.k);
  }
  auto a = host_rand<float>(37, 29);
  auto b = host_rand<float>(29, 41);
  product_on_both([](auto const& x, auto const& y) { return sd::mm(x, y); }, a, b, 29);
  auto p = host_rand<float>(5, 37, 29), q = host_rand<float>(5, 29, 41);
  product_on_both([](auto const& x, auto const& y) { return sd::bmm(x, y); }, p, q, 29);
}

TEST_CASE("matmul: transposed, sliced, expanded and permuted operands and outputs", "[gpu][contract]") {
  auto at = host_rand<float>(23, 19);  // a = at^T: [19, 23]
  auto bb = host_rand<float>(23, 34);
  auto dat = at.to<sd::Cuda>();
  auto dbb = bb.to<sd::Cuda>();
  auto a = sd::transpose(at, 0, 1);
  auto da = sd::transpose(dat, 0, 1);
  auto check = [&](auto const& host_b, auto const& device_b, int kernels) {
    auto const e = sd::matmul(da, device_b);
    within(counted(e, kernels), sd::eval(sd::matmul(a, host_b)),
           sd::eval(sd::matmul(sd::abs(a), sd::abs(host_b))), dots<float>(23), 0);
  };
  SECTION("read in place: a transposed operand, columns of a wider tensor") {
    check(sd::narrow(bb, 1, 3, 17), sd::narrow(dbb, 1, 3, 17), 1);
    check(sd::transpose(sd::eval(sd::transpose(bb, 0, 1)), 0, 1),
          sd::transpose(sd::eval(sd::transpose(dbb, 0, 1)), 0, 1), 1);
  }
  SECTION("copied first (a kernel more): no unit stride, or a stride of 0") {
    check(sd::slice(bb, 1, 0, 34, 2), sd::slice(dbb, 1, 0, 34, 2), 2);
    check(sd::expand(sd::narrow(bb, 1, 0, 1), {23, 5}), sd::expand(sd::narrow(dbb, 1, 0, 1), {23, 5}), 2);
  }
  SECTION("outputs: a transposed view, columns of a wider tensor, no unit stride") {
    auto b = sd::narrow(bb, 1, 0, 17);
    auto db = sd::narrow(dbb, 1, 0, 17);
    auto want = sd::eval(sd::matmul(a, b));
    auto mag = sd::eval(sd::matmul(sd::abs(a), sd::abs(b)));
    sd::Tensor<float, 2, sd::Cuda> t_store(17, 19), w_store(19, 30), s_store(19, 34);
    auto t = sd::transpose(t_store, 0, 1);  // column-major: cuBLASLt writes C, not C^T
    auto w = sd::narrow(w_store, 1, 5, 17);
    auto s = sd::slice(s_store, 1, 0, 34, 2);  // through a temporary: a kernel more
    for (auto [out, kernels] : {std::pair{&t, 1}, std::pair{&w, 1}, std::pair{&s, 2}}) {
      auto const before = sd::detail::kernels_run();
      *out = sd::matmul(da, db);
      CHECK(sd::detail::kernels_run() - before == static_cast<std::uint64_t>(kernels));
      within(*out, want, mag, dots<float>(23), 0);
    }
  }
  SECTION("an output that is an operand: the product first, then a copy") {
    auto sq = host_rand<float>(19, 19);
    auto x = sd::eval(sd::transpose(at, 0, 1));
    auto want = sd::eval(sd::matmul(sq, x));
    auto mag = sd::eval(sd::matmul(sd::abs(sq), sd::abs(x)));
    auto dx = x.to<sd::Cuda>();
    auto const before = sd::detail::kernels_run();
    dx = sd::matmul(sq.to<sd::Cuda>(), dx);
    CHECK(sd::detail::kernels_run() - before == 2);
    within(dx, want, mag, dots<float>(19), 0);
  }
}

TEST_CASE("matmul: vectors, batches, broadcast batch dims", "[gpu][contract]") {
  auto mm = [](auto const& x, auto const& y) { return sd::matmul(x, y); };
  auto v = host_rand<float>(7), w = host_rand<float>(7);
  auto m = host_rand<float>(5, 7), mt = host_rand<float>(7, 4);
  product_on_both(mm, v, w, 7);    // [7] x [7]: a number
  product_on_both(mm, m, v, 7);    // a column
  product_on_both(mm, v, mt, 7);   // a row
  auto b4 = host_rand<float>(4, 1, 5, 7);
  auto b3 = host_rand<float>(3, 7, 2);
  product_on_both(mm, b4, b3, 7);  // [4, 1] with [3]: a call per batch
  auto x3 = host_rand<float>(6, 5, 7);
  product_on_both(mm, x3, mt, 7);  // the right operand broadcast: batch stride 0
  product_on_both(mm, m, b3, 7);
  product_on_both(mm, x3, v, 7);
  product_on_both(mm, v, b3, 7);
  auto big = host_rand<float>(2, 3, 130, 67);
  auto rhs = host_rand<float>(3, 67, 129);
  product_on_both(mm, big, rhs, 67);
  auto inner = host_rand<float>(5, 6, 7);  // batches inside the rows: [6, 5, 7] permuted
  auto right = host_rand<float>(6, 7, 3);
  product_on_both([](auto const& x, auto const& y) { return sd::matmul(sd::permute(x, {1, 0, 2}), y); },
                  inner, right, 7);
  CHECK(sd::matmul(v.to<sd::Cuda>(), w.to<sd::Cuda>()).item() ==
        Approx(sd::matmul(v, w).item()).epsilon(1e-5));
}

TEST_CASE("matmul: empty dims and k = 0 give zeros, as PyTorch", "[gpu][contract]") {
  auto zeros_of = [](auto const& t) {
    for (auto x : sd::to_vector(t)) CHECK(static_cast<double>(x) == 0);
  };
  auto a = host_rand<float>(3, 0).to<sd::Cuda>();
  auto b = host_rand<float>(0, 4).to<sd::Cuda>();
  auto z = counted(sd::matmul(a, b), 1);
  CHECK(z.shape() == sd::Index<2>{3, 4});
  zeros_of(z);
  sd::Tensor<float, 2, sd::Cuda> store(4, 3);
  auto zt = sd::transpose(store, 0, 1);  // not contiguous: zeros through a temporary
  zt = sd::matmul(a, b);
  zeros_of(zt);
  CHECK(counted(sd::matmul(host_rand<float>(0, 5).to<sd::Cuda>(), host_rand<float>(5, 3).to<sd::Cuda>()), 1)
            .numel() == 0);
  CHECK(sd::eval(sd::matmul(host_rand<float>(0, 3, 4).to<sd::Cuda>(), host_rand<float>(4, 5).to<sd::Cuda>()))
            .numel() == 0);
  // An epilogue over k = 0: zeros, then the rest (the product is stored first: 2 kernels).
  auto bias = host_rand<float>(3);
  auto x = host_rand<float>(4, 0).to<sd::Cuda>();
  auto wt = host_rand<float>(3, 0).to<sd::Cuda>();
  auto r = counted(sd::relu(sd::linear(x, wt, bias.to<sd::Cuda>())), 2);
  auto rv = sd::to_vector(r);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(rv[i * 3 + j] == std::max(0.f, bias(j)));
}

TEST_CASE("cuBLASLt's epilogues: bias, relu, gelu (tanh) in one call", "[gpu][contract]") {
  auto x = host_rand<float>(129, 67), w = host_rand<float>(95, 67);
  auto b = host_rand<float>(95);
  auto dx = x.to<sd::Cuda>(), dw = w.to<sd::Cuda>();
  auto db = b.to<sd::Cuda>();
  auto mag = sd::eval(sd::linear(sd::abs(x), sd::abs(w), sd::abs(b)));
  double const dot = dots<float>(67), out = 2 * eps<float>;
  auto one = [&](auto const& f) {
    auto const e = f(dx, dw, db);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    within(counted(e, 1), sd::eval(f(x, w, b)), mag, dot, out);
  };
  one([](auto const& x_, auto const& w_, auto const& b_) { return sd::linear(x_, w_, b_); });
  one([](auto const& x_, auto const& w_, auto const& b_) { return sd::relu(sd::linear(x_, w_, b_)); });
  one([](auto const& x_, auto const& w_, auto const&) {
    return sd::relu(sd::matmul(x_, sd::transpose(w_, 0, 1)));
  });
  one([](auto const& x_, auto const& w_, auto const& b_) {
    return b_ + sd::mm(x_, sd::transpose(w_, 0, 1));  // the bias first
  });
  SECTION("batches share the bias") {
    auto x3 = host_rand<float>(3, 41, 67);
    auto f = [](auto const& x_, auto const& w_, auto const& b_) { return sd::relu(sd::linear(x_, w_, b_)); };
    within(counted(f(x3.to<sd::Cuda>(), dw, db), 1), sd::eval(f(x3, w, b)),
           sd::eval(sd::linear(sd::abs(x3), sd::abs(w), sd::abs(b))), dot, out);
  }
  SECTION("gelu: cuBLASLt's is the tanh form, not the erf one") {
    // Pre-activations of about 2 (standard deviation), where the two forms differ by up to
    // 4.7e-4 (at 2.7). cuBLASLt's tanh need not round as solder's does, so the bound is looser;
    // over all of them the device must still be nearer the tanh form than the erf form.
    auto xs = sd::eval(x * 0.75f);
    auto f = [](auto const& x_, auto const& w_, auto const& b_) {
      return sd::gelu(sd::linear(x_, w_, b_), sd::tanh_approximation);
    };
    auto const e = f(xs.to<sd::Cuda>(), dw, db);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    auto d = counted(e, 1);
    auto pre_mag = sd::eval(sd::linear(sd::abs(xs), sd::abs(w), sd::abs(b)));
    within(d, sd::eval(f(xs, w, b)), pre_mag, 1.2 * dot + 2e-4, 1e-3);
    auto dv = sd::to_vector(d);
    auto tv = sd::to_vector(sd::eval(f(xs, w, b)));
    auto ev = sd::to_vector(sd::eval(sd::gelu(sd::linear(xs, w, b))));
    double to_tanh = 0, to_erf = 0;
    for (std::size_t i = 0; i < dv.size(); ++i) {
      to_tanh += std::abs(double(dv[i]) - tv[i]);
      to_erf += std::abs(double(dv[i]) - ev[i]);
    }
    INFO("mean distance to the tanh form " << to_tanh / dv.size() << ", to the erf form "
                                            << to_erf / dv.size());
    CHECK(to_tanh < to_erf);
    auto g = [](auto const& x_, auto const& w_, auto const&) {
      return sd::gelu(sd::matmul(x_, sd::transpose(w_, 0, 1)), sd::tanh_approximation);
    };
    auto const ge = g(xs.to<sd::Cuda>(), dw, db);
    static_assert(sd::kernel_count<decltype(ge)> == 1);
    within(counted(ge, 1), sd::eval(g(xs, w, b)), pre_mag, 1.2 * dot + 2e-4, 1e-3);
  }
  SECTION("where the shapes or layouts do not fit it: the product, then the rest (2 kernels)") {
    auto f = [](auto const& x_, auto const& w_, auto const& b_) { return sd::relu(sd::linear(x_, w_, b_)); };
    auto wide = host_rand<float>(190);
    auto strided = sd::slice(wide, 0, 0, 190, 2);  // a bias with stride 2
    within(counted(f(dx, dw, sd::slice(wide.to<sd::Cuda>(), 0, 0, 190, 2)), 2), sd::eval(f(x, w, strided)),
           sd::eval(sd::linear(sd::abs(x), sd::abs(w), sd::abs(strided))), dot, out);
    auto lone = host_rand<float>(1);  // a bias of one value, broadcast
    auto g = [](auto const& x_, auto const& w_, auto const& b_) {
      return sd::relu(sd::matmul(x_, sd::transpose(w_, 0, 1)) + b_);
    };
    within(counted(g(dx, dw, lone.to<sd::Cuda>()), 2), sd::eval(g(x, w, lone)),
           sd::eval(sd::linear(sd::abs(x), sd::abs(w)) + sd::abs(lone)), dot, out);
    sd::Tensor<float, 2, sd::Cuda> store(95, 129);  // a column-major output: the bias would
    auto t = sd::transpose(store, 0, 1);              // run along C's columns
    auto const before = sd::detail::kernels_run();
    t = f(dx, dw, db);
    CHECK(sd::detail::kernels_run() - before == 2);
    within(t, sd::eval(f(x, w, b)), mag, dot, out);
  }
}

TEST_CASE("other epilogues: the product, then one element-wise kernel", "[gpu][contract]") {
  auto a = host_rand<float>(77, 45), bm = host_rand<float>(45, 61);
  auto s = host_rand<float>(61), bias = host_rand<float>(61);
  auto r = host_rand<float>(77, 61);
  auto da = a.to<sd::Cuda>(), dbm = bm.to<sd::Cuda>(), dr = r.to<sd::Cuda>();
  auto ds = s.to<sd::Cuda>();
  double const dot = dots<float>(45), out = 4 * eps<float>;
  auto f = [](auto const& a_, auto const& b_, auto const& s_, auto const& r_) {
    return sd::relu(sd::matmul(a_, b_) * s_ + r_);
  };
  auto const e = f(da, dbm, ds, dr);
  static_assert(sd::kernel_count<decltype(e)> == 2);
  CHECK(contains(sd::explain(e), "cuBLAS does not take this epilogue"));
  within(counted(e, 2), sd::eval(f(a, bm, s, r)),
         sd::eval(sd::matmul(sd::abs(a), sd::abs(bm)) * sd::abs(s) + sd::abs(r)), dot, out);

  auto w = sd::eval(sd::transpose(bm, 0, 1));  // [61, 45]
  auto const g = sd::gelu(sd::linear(da, w.to<sd::Cuda>(), bias.to<sd::Cuda>()));  // the erf form
  static_assert(sd::kernel_count<decltype(g)> == 2);
  within(counted(g, 2), sd::eval(sd::gelu(sd::linear(a, w, bias))),
         sd::eval(sd::linear(sd::abs(a), sd::abs(w), sd::abs(bias))), 1.2 * dot, out);

  // A product broadcast in its rest ([1, 61] over [77, 61]): stored first, as on the host.
  auto row = host_rand<float>(1, 45);
  auto const h = sd::matmul(row.to<sd::Cuda>(), dbm) + dr;
  within(counted(h, 2), sd::eval(sd::matmul(row, bm) + r),
         sd::eval(sd::matmul(sd::abs(row), sd::abs(bm)) + sd::abs(r)), dot, out);
  // An operand that is an expression is materialized first.
  auto const p = sd::matmul(da * 2.f, dbm);
  static_assert(sd::kernel_count<decltype(p)> == 2);
  within(counted(p, 2), sd::eval(sd::matmul(a * 2.f, bm)),
         sd::eval(sd::matmul(sd::abs(a) * 2.f, sd::abs(bm))), dot, out);
  // Stored into a wider type: the product, then a cast.
  sd::Tensor<double, 2, sd::Cuda> wide(77, 61);
  auto const before = sd::detail::kernels_run();
  wide = sd::matmul(da, dbm);
  CHECK(sd::detail::kernels_run() - before == 2);
  within(wide, sd::eval(sd::matmul(a, bm)), sd::eval(sd::matmul(sd::abs(a), sd::abs(bm))), dot, 0);
}

TEMPLATE_TEST_CASE("half and bfloat16 operands accumulate in float", "[gpu][contract][half]", sd::half,
                   sd::bfloat16) {
  using H = TestType;
  double const u = unit16<H>;
  // Operands rounded to H; the host computes in float from the rounded values.
  auto rounded = [](auto const& t) { return sd::eval(sd::cast<H>(t)); };
  auto widened = [](auto const& t) { return sd::eval(sd::cast<float>(t)); };
  auto x = rounded(host_rand<float>(131, 96)), w = rounded(host_rand<float>(65, 96));
  auto b = rounded(host_rand<float>(65));
  auto xf = widened(x), wf = widened(w);
  auto bf = widened(b);
  auto dx = x.template to<sd::Cuda>(), dw = w.template to<sd::Cuda>();
  auto db = b.template to<sd::Cuda>();
  auto mag = sd::eval(sd::matmul(sd::abs(xf), sd::transpose(sd::abs(wf), 0, 1)));
  double const dot = dots<float>(96);

  auto const p = sd::matmul(dx, sd::transpose(dw, 0, 1));
  static_assert(std::is_same_v<typename decltype(p)::value_type, H>);
  within(counted(p, 1), sd::eval(sd::matmul(xf, sd::transpose(wf, 0, 1))), mag, dot, 2 * u);

  // cuBLASLt's RELU_BIAS, its bias in H. With a bfloat16 output it rounds the product to H
  // before the bias is added (seen on an H200: errors of u |x.w|, a few units of the output
  // where x.w and the bias cancel), as PyTorch's addmm, which takes the same epilogue.
  auto const lin = sd::relu(sd::linear(dx, dw, db));
  static_assert(sd::kernel_count<decltype(lin)> == 1);
  auto lmag = sd::eval(sd::linear(sd::abs(xf), sd::abs(wf), sd::abs(bf)));
  within(counted(lin, 1), sd::eval(sd::relu(sd::linear(xf, wf, bf))), lmag, dot + u, 2 * u);

  // The product rounded to H, then the rest in float, rounded again.
  auto s = rounded(host_rand<float>(65));
  auto r = rounded(host_rand<float>(131, 65));
  auto sf = widened(s);
  auto rf = widened(r);
  auto const g = sd::relu(sd::linear(dx, dw) * s.template to<sd::Cuda>() + r.template to<sd::Cuda>());
  static_assert(sd::kernel_count<decltype(g)> == 2);
  auto gmag = sd::eval(mag * sd::abs(sf) + sd::abs(rf));
  within(counted(g, 2), sd::eval(sd::relu(sd::linear(xf, wf) * sf + rf)), gmag, dot + 2 * u, 2 * u);

  auto x3 = rounded(host_rand<float>(3, 17, 96));
  auto x3f = widened(x3);
  within(counted(sd::matmul(x3.template to<sd::Cuda>(), sd::transpose(dw, 0, 1)), 1),
         sd::eval(sd::matmul(x3f, sd::transpose(wf, 0, 1))),
         sd::eval(sd::matmul(sd::abs(x3f), sd::transpose(sd::abs(wf), 0, 1))), dot, 2 * u);
}

TEST_CASE("TF32: off by default; on, float products may round their operands to TF32",
          "[gpu][contract][tf32]") {
  REQUIRE_FALSE(sd::cuda::tf32_allowed());
  auto a = host_rand<float>(256, 1024), b = host_rand<float>(1024, 192);
  auto da = a.to<sd::Cuda>(), db = b.to<sd::Cuda>();
  auto want = sd::eval(sd::matmul(a, b));
  auto mag = sd::eval(sd::matmul(sd::abs(a), sd::abs(b)));
  within(counted(sd::matmul(da, db), 1), want, mag, dots<float>(1024), 0);
  sd::cuda::allow_tf32(true);
  // Each operand rounded to TF32's 10 bits (or cut: 2^-10 relative), then float sums.
  auto tf32 = counted(sd::matmul(da, db), 1);
  sd::cuda::allow_tf32(false);
  within(tf32, want, mag, 2.0 / 1024 + dots<float>(1024), 0);
  auto dv = sd::to_vector(tf32), hv = sd::to_vector(want), mv = sd::to_vector(mag);
  double worst = 0;
  for (std::size_t i = 0; i < dv.size(); ++i)
    worst = std::max(worst, std::abs(double(dv[i]) - hv[i]) / mv[i]);
  INFO("TF32: largest |device - host| / sum|a||b|: " << worst);
  CHECK(worst <= 2.0 / 1024 + dots<float>(1024));
  within(counted(sd::matmul(da, db), 1), want, mag, dots<float>(1024), 0);  // off again
}
