// conv2d (cuDNN) and the 2-d pools (backend/cuda/conv.hpp, pool.hpp) on sd::Cuda tensors against
// the host's results on the same inputs (tests/test_conv.cpp holds those to double-precision
// loops), and every kernel count against the kernels that run. conv2d: strides, padding (sizes,
// "same" with an odd total, "valid"), dilation, groups, depthwise, 1x1, [C, H, W] inputs, the
// rests cuDNN's fused call computes (bias, residual, ReLU, a number times the convolution: one
// call) and the others (two kernels), views in and out, no input channels, double, half and
// bfloat16.
// cuDNN picks its algorithm (implicit GEMM, Winograd, FFT), so a value may differ from the host's
// by more than a dot product's rounding: within 1000 eps of its sum |x w| (1 + that). The pools
// compute each value as the host does: the same bits. Shape errors are the host's sd::Errors.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "compare.hpp"

using namespace gpu_test;
using Catch::Matchers::Contains;

namespace {

template <class T>
constexpr double eps = std::numeric_limits<T>::epsilon();

// conv2d(x, w, o) of the device copies against the host's, within cuDNN's rounding of sum |x w|:
// one kernel, cuDNN's, into the output.
template <class TX, class TW>
void conv_on_both(TX const& x, TW const& w, sd::Conv2dOptions const& o) {
  using T = typename TX::value_type;
  auto const e = sd::conv2d(x.template to<sd::Cuda>(), w.template to<sd::Cuda>(), o);
  static_assert(sd::kernel_count<decltype(e)> == 1);
  close(counted(e, 1), sd::eval(sd::conv2d(x, w, o)), sd::eval(sd::conv2d(sd::abs(x), sd::abs(w), o)),
        1000 * eps<T>);
}

}  // namespace

TEST_CASE("conv2d: strides, padding, dilation", "[gpu][conv]") {
  auto x = host_rand<float>(2, 3, 7, 9);
  auto w = host_rand<float>(5, 3, 3, 3);
  conv_on_both(x, w, {});
  conv_on_both(x, w, {.padding = 1});
  conv_on_both(x, w, {.stride = 2, .padding = 1});
  auto x2 = host_rand<float>(2, 4, 11, 13);
  auto w2 = host_rand<float>(6, 4, 3, 3);
  conv_on_both(x2, w2, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}});
  conv_on_both(x2, w2, {.stride = 3, .dilation = 2});
  conv_on_both(x2, host_rand<float>(6, 4, 5, 2), {.padding = {2, 0}});
  conv_on_both(x2, w2, {.padding = "valid"});
  conv_on_both(x2, w2, {.padding = "same", .dilation = 2});
  // "same" with an odd total: one more row and column after than before, as PyTorch. cuDNN pads
  // both sides alike, so the result is a window of a larger one, copied out in the same kernel.
  conv_on_both(x2, host_rand<float>(6, 4, 4, 2), {.padding = "same"});
  // A ResNet layer's shape, and a 1x1 convolution (a GEMM in any engine).
  conv_on_both(host_rand<float>(4, 32, 28, 28), host_rand<float>(64, 32, 3, 3), {.padding = 1});
  conv_on_both(host_rand<float>(2, 16, 5, 5), host_rand<float>(8, 16, 1, 1), {});
  // One image, [C, H, W].
  conv_on_both(host_rand<float>(3, 7, 9), w, {.padding = 1});
  conv_on_both(host_rand<double>(2, 3, 7, 9), host_rand<double>(5, 3, 3, 3), {.stride = 2, .padding = 1});
}

TEST_CASE("conv2d: groups and depthwise", "[gpu][conv]") {
  conv_on_both(host_rand<float>(2, 6, 8, 8), host_rand<float>(4, 3, 3, 3), {.padding = 1, .groups = 2});
  conv_on_both(host_rand<float>(2, 6, 8, 8), host_rand<float>(9, 2, 3, 3), {.stride = 2, .groups = 3});
  // Depthwise (MobileNet's 3x3, stride 1 and 2), and a channel multiplier of 2.
  auto x = host_rand<float>(2, 8, 9, 9);
  conv_on_both(x, host_rand<float>(8, 1, 3, 3), {.padding = 1, .groups = 8});
  conv_on_both(x, host_rand<float>(8, 1, 3, 3), {.stride = 2, .padding = 1, .groups = 8});
  conv_on_both(x, host_rand<float>(16, 1, 5, 5), {.padding = 2, .dilation = 1, .groups = 8});
}

// y = act(alpha1 * conv2d(x, w) + z + bias), as the expression builder makes it: one cuDNN call
// (cudnnConvolutionBiasActivationForward), by kernel_count and at run time.
TEST_CASE("conv2d: bias, residual and ReLU in cuDNN's fused call", "[gpu][conv][fusion]") {
  auto x = host_rand<float>(2, 3, 7, 9);
  auto w = host_rand<float>(5, 3, 3, 3);
  auto b = host_rand<float>(5);
  auto r = host_rand<float>(2, 5, 7, 9);
  auto dx = x.to<sd::Cuda>(), dw = w.to<sd::Cuda>(), dr = r.to<sd::Cuda>();
  auto db = b.to<sd::Cuda>();
  sd::Conv2dOptions const o{.padding = 1};
  auto mag = sd::eval(sd::conv2d(sd::abs(x), sd::abs(w), sd::abs(b), o) + sd::abs(r));  // (of every form)
  double const rel = 1000 * eps<float>;
  auto fused = [&](auto const& f) {
    auto const e = f(dx, dw, db, dr);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    close(counted(e, 1), sd::eval(f(x, w, b, r)), mag, rel);
  };
  fused([&](auto const& x_, auto const& w_, auto const& b_, auto const&) { return sd::conv2d(x_, w_, b_, o); });
  fused([&](auto const& x_, auto const& w_, auto const& b_, auto const&) {
    return sd::relu(sd::conv2d(x_, w_, b_, o));
  });
  fused([&](auto const& x_, auto const& w_, auto const& b_, auto const& r_) {
    return sd::relu(sd::conv2d(x_, w_, b_, o) + r_);
  });
  fused([&](auto const& x_, auto const& w_, auto const& b_, auto const& r_) {
    return sd::relu(r_ + sd::conv2d(x_, w_, b_, o));
  });
  // No bias: the call adds zeros.
  fused([&](auto const& x_, auto const& w_, auto const&, auto const& r_) {
    return sd::relu(sd::conv2d(x_, w_, o) + r_);
  });
  fused([&](auto const& x_, auto const& w_, auto const&, auto const&) { return sd::relu(sd::conv2d(x_, w_, o)); });
  // The identity (cuDNN runs it in IMPLICIT_PRECOMP_GEMM only).
  fused([&](auto const& x_, auto const& w_, auto const&, auto const& r_) { return sd::conv2d(x_, w_, o) + r_; });
  // A bias written [1, C, 1, 1], added before the convolution, and a number times it (alpha1).
  fused([&](auto const& x_, auto const& w_, auto const& b_, auto const& r_) {
    auto const b4 = sd::unsqueeze(sd::unsqueeze(sd::unsqueeze(b_, 0), -1), -1);
    return sd::relu(r_ + (b4 + sd::conv2d(x_, w_, o) * 0.5f));
  });
  fused([&](auto const& x_, auto const& w_, auto const& b_, auto const&) {
    return sd::relu(0.5f * sd::conv2d(x_, w_, o) + sd::unsqueeze(sd::unsqueeze(b_, -1), -1));
  });
  CHECK_THAT(sd::explain(sd::relu(sd::conv2d(dx, dw, db, o) + dr)), Contains("solder plan: 1 kernel"));

  // Without a residual, z is the output itself, with alpha2 = 0: what it held is not read.
  sd::Tensor<float, 4, sd::Cuda> y =
      sd::full<float, sd::Cuda>(sd::shape(2, 5, 7, 9), std::numeric_limits<float>::quiet_NaN());
  auto const before = sd::detail::kernels_run();
  y = sd::relu(sd::conv2d(dx, dw, db, o));
  CHECK(sd::detail::kernels_run() - before == 1);
  close(y, sd::eval(sd::relu(sd::conv2d(x, w, b, o))), mag, rel);

  // One image, [C, H, W]; a strided, grouped convolution; double.
  auto img = host_rand<float>(3, 7, 9);
  auto r3 = host_rand<float>(5, 7, 9);
  auto g = [&](auto const& x_, auto const& w_, auto const& b_, auto const& r_) {
    return sd::relu(sd::conv2d(x_, w_, b_, o) + r_);
  };
  close(counted(g(img.to<sd::Cuda>(), dw, db, r3.to<sd::Cuda>()), 1), sd::eval(g(img, w, b, r3)),
        sd::eval(sd::conv2d(sd::abs(img), sd::abs(w), sd::abs(b), o) + sd::abs(r3)), rel);
  auto xg = host_rand<float>(2, 6, 9, 9);
  auto wg = host_rand<float>(4, 3, 3, 3);
  auto bg = host_rand<float>(4);
  sd::Conv2dOptions const og{.stride = 2, .padding = 1, .groups = 2};
  auto const e = sd::relu(sd::conv2d(xg.to<sd::Cuda>(), wg.to<sd::Cuda>(), bg.to<sd::Cuda>(), og));
  close(counted(e, 1), sd::eval(sd::relu(sd::conv2d(xg, wg, bg, og))),
        sd::eval(sd::conv2d(sd::abs(xg), sd::abs(wg), sd::abs(bg), og)), rel);
  auto xd = host_rand<double>(2, 3, 7, 9), wd = host_rand<double>(5, 3, 3, 3), rd = host_rand<double>(2, 5, 7, 9);
  auto bd = host_rand<double>(5);
  close(counted(g(xd.to<sd::Cuda>(), wd.to<sd::Cuda>(), bd.to<sd::Cuda>(), rd.to<sd::Cuda>()), 1),
        sd::eval(g(xd, wd, bd, rd)), sd::eval(sd::conv2d(sd::abs(xd), sd::abs(wd), sd::abs(bd), o) + sd::abs(rd)),
        1000 * eps<double>);
}

// Rests cuDNN's call does not compute, by their types (kernel_count: 2) or at run time (the
// shapes or layouts: kernel_count's 1 is a run-time break): the convolution stored, then the
// rest as one element-wise kernel.
TEST_CASE("conv2d: other element-wise rests run after cuDNN's call", "[gpu][conv][fusion]") {
  auto x = host_rand<float>(2, 3, 7, 9);
  auto w = host_rand<float>(5, 3, 3, 3);
  auto b = host_rand<float>(5);
  auto scale = sd::rand<float>(sd::shape(1, 5, 1, 1), 0.5f, 1.5f);
  auto shift = host_rand<float>(1, 5, 1, 1);
  auto residual = host_rand<float>(2, 5, 7, 9);
  auto dx = x.to<sd::Cuda>(), dw = w.to<sd::Cuda>(), dres = residual.to<sd::Cuda>();
  auto db = b.to<sd::Cuda>();
  sd::Conv2dOptions const o{.padding = 1};
  auto mag = sd::eval(sd::conv2d(sd::abs(x), sd::abs(w), o));
  double const rel = 1000 * eps<float>;

  // Batch norm's scale and shift (tensors per channel, not a number and a bias).
  auto f = [&](auto const& x_, auto const& w_, auto const& s_, auto const& c_, auto const& r_) {
    return sd::relu(sd::conv2d(x_, w_, o) * s_ + c_ + r_);
  };
  auto const e = f(dx, dw, scale.to<sd::Cuda>(), shift.to<sd::Cuda>(), dres);
  static_assert(sd::kernel_count<decltype(e)> == 2);  // the convolution, then the rest
  CHECK_THAT(sd::explain(e), Contains("runs after conv2d, which is stored first"));
  close(counted(e, 2), sd::eval(f(x, w, scale, shift, residual)),
        sd::eval(mag * sd::abs(scale) + sd::abs(shift) + sd::abs(residual)), rel);
  // Two residuals (by type a bias and a residual: a run-time break); an activation cuDNN's call
  // does not take.
  auto const two = sd::relu(sd::conv2d(dx, dw, o) + dres + dres);
  close(counted(two, 2), sd::eval(sd::relu(sd::conv2d(x, w, o) + residual + residual)),
        sd::eval(mag + 2 * sd::abs(residual)), rel);
  auto const s = sd::sigmoid(sd::conv2d(dx, dw, db, o));
  static_assert(sd::kernel_count<decltype(s)> == 2);
  close(counted(s, 2), sd::eval(sd::sigmoid(sd::conv2d(x, w, b, o))), mag, rel);

  auto g = [&](auto const& x_, auto const& w_, auto const& b_, auto const& r_) {
    return sd::relu(sd::conv2d(x_, w_, b_, o) + r_);
  };
  auto gmag = [&](auto const& b_, auto const& r_) {
    return sd::eval(sd::conv2d(sd::abs(x), sd::abs(w), sd::abs(b_), o) + sd::abs(r_));
  };
  // A residual broadcast ([1, ...] over [2, ...]); a bias that is not contiguous.
  auto r1 = host_rand<float>(1, 5, 7, 9);
  close(counted(g(dx, dw, db, r1.to<sd::Cuda>()), 2), sd::eval(g(x, w, b, r1)), gmag(b, r1), rel);
  auto wide = host_rand<float>(10);
  auto strided = sd::slice(wide, 0, 0, 10, 2);
  close(counted(g(dx, dw, sd::slice(wide.to<sd::Cuda>(), 0, 0, 10, 2), dres), 2),
        sd::eval(g(x, w, strided, residual)), gmag(strided, residual), rel);
  // The convolution broadcast in its own rest.
  auto one = host_rand<float>(1, 3, 7, 9);
  auto const h = sd::conv2d(one.to<sd::Cuda>(), dw, o) + dres;
  close(counted(h, 2), sd::eval(sd::conv2d(one, w, o) + residual),
        sd::eval(sd::conv2d(sd::abs(one), sd::abs(w), o) + sd::abs(residual)), rel);
  // "same" with an odd total: cuDNN would pad more than the convolution does.
  auto w42 = host_rand<float>(5, 3, 4, 2);
  auto const same = sd::relu(sd::conv2d(dx, w42.to<sd::Cuda>(), db, {.padding = "same"}));
  close(counted(same, 2), sd::eval(sd::relu(sd::conv2d(x, w42, b, {.padding = "same"}))),
        sd::eval(sd::conv2d(sd::abs(x), sd::abs(w42), sd::abs(b), {.padding = "same"})), rel);
  // Into a transposed view; the output its own residual (read before it is written).
  sd::Tensor<float, 4, sd::Cuda> store(2, 5, 9, 7);
  auto out = sd::transpose(store, 2, 3);
  auto before = sd::detail::kernels_run();
  out = sd::relu(sd::conv2d(dx, dw, db, o));
  CHECK(sd::detail::kernels_run() - before == 2);
  close(out, sd::eval(sd::relu(sd::conv2d(x, w, b, o))), gmag(b, residual), rel);
  sd::Tensor<float, 4, sd::Cuda> y = residual.to<sd::Cuda>();
  before = sd::detail::kernels_run();
  y = g(dx, dw, db, y);
  CHECK(sd::detail::kernels_run() - before == 2);
  close(y, sd::eval(g(x, w, b, residual)), gmag(b, residual), rel);
  // An operand that is an expression is materialized first.
  auto const p = sd::conv2d(sd::relu(dx), dw, o);
  static_assert(sd::kernel_count<decltype(p)> == 2);
  close(counted(p, 2), sd::eval(sd::conv2d(sd::relu(x), w, o)), mag, rel);
}

TEST_CASE("conv2d: views in and out, no input channels", "[gpu][conv]") {
  auto w = host_rand<float>(5, 3, 3, 3);
  auto dw = w.to<sd::Cuda>();
  auto wide = host_rand<float>(2, 3, 7, 12);
  auto x = sd::slice(wide, 3, 1, 10);  // columns of a wider tensor: copied first (a kernel more)
  close(counted(sd::conv2d(sd::slice(wide.to<sd::Cuda>(), 3, 1, 10), dw, {.padding = 1}), 2),
        sd::eval(sd::conv2d(x, w, {.padding = 1})), sd::eval(sd::conv2d(sd::abs(x), sd::abs(w), {.padding = 1})),
        1000 * eps<float>);
  // A weight that is a view (its planes transposed): copied first too.
  auto wt = host_rand<float>(5, 3, 3, 3);
  auto w_view = sd::transpose(wt, 2, 3);
  auto xd = host_rand<float>(2, 3, 7, 9);
  close(counted(sd::conv2d(xd.to<sd::Cuda>(), sd::transpose(wt.to<sd::Cuda>(), 2, 3)), 2),
        sd::eval(sd::conv2d(xd, w_view)), sd::eval(sd::conv2d(sd::abs(xd), sd::abs(w_view))), 1000 * eps<float>);
  // Into a transposed view of the output: stored first, then copied.
  sd::Tensor<float, 4, sd::Cuda> store(2, 5, 9, 7);
  auto out = sd::transpose(store, 2, 3);
  auto const before = sd::detail::kernels_run();
  out = sd::conv2d(xd.to<sd::Cuda>(), dw, {.padding = 1});
  CHECK(sd::detail::kernels_run() - before == 2);
  close(out, sd::eval(sd::conv2d(xd, w, {.padding = 1})),
        sd::eval(sd::conv2d(sd::abs(xd), sd::abs(w), {.padding = 1})), 1000 * eps<float>);
  // No input channels: zeros, as PyTorch.
  auto z = counted(sd::conv2d(host_rand<float>(2, 0, 5, 5).to<sd::Cuda>(), host_rand<float>(4, 0, 3, 3).to<sd::Cuda>()), 1);
  CHECK(z.shape() == sd::Index<4>{2, 4, 3, 3});
  for (float v : sd::to_vector(z)) CHECK(v == 0);
}

TEMPLATE_TEST_CASE("conv2d of half and bfloat16 computes in float", "[gpu][conv][half]", sd::half, sd::bfloat16) {
  using H = TestType;
  double const u = std::is_same_v<H, sd::half> ? 1.0 / 2048 : 1.0 / 256;  // one rounding to H
  auto rounded = [](auto const& t) { return sd::eval(sd::cast<H>(t)); };
  auto widened = [](auto const& t) { return sd::eval(sd::cast<float>(t)); };
  auto x = rounded(host_rand<float>(2, 8, 10, 10));
  auto w = rounded(host_rand<float>(16, 8, 3, 3));
  auto dw_ = rounded(host_rand<float>(8, 1, 3, 3));
  auto xf = widened(x), wf = widened(w), dwf = widened(dw_);
  auto const e = sd::conv2d(x.template to<sd::Cuda>(), w.template to<sd::Cuda>(), {.padding = 1});
  static_assert(std::is_same_v<typename decltype(e)::value_type, H>);
  auto mag = sd::eval(sd::conv2d(sd::abs(xf), sd::abs(wf), {.padding = 1}));
  close(widened(counted(e, 1)), sd::eval(sd::conv2d(xf, wf, {.padding = 1})), mag, 2 * u);
  auto const d = sd::conv2d(x.template to<sd::Cuda>(), dw_.template to<sd::Cuda>(), {.stride = 2, .groups = 8});
  close(widened(counted(d, 1)), sd::eval(sd::conv2d(xf, dwf, {.stride = 2, .groups = 8})),
        sd::eval(sd::conv2d(sd::abs(xf), sd::abs(dwf), {.stride = 2, .groups = 8})), 2 * u);
  // cuDNN's fused call, its bias and residual in H: the convolution may be rounded to H before
  // each add, each sum rounded again (three roundings).
  auto b = rounded(host_rand<float>(16));
  auto r = rounded(host_rand<float>(2, 16, 10, 10));
  auto bf = widened(b);
  auto rf = widened(r);
  auto const f = sd::relu(sd::conv2d(x.template to<sd::Cuda>(), w.template to<sd::Cuda>(), b.template to<sd::Cuda>(),
                                     {.padding = 1}) +
                          r.template to<sd::Cuda>());
  static_assert(sd::kernel_count<decltype(f)> == 1);
  close(widened(counted(f, 1)), sd::eval(sd::relu(sd::conv2d(xf, wf, bf, {.padding = 1}) + rf)),
        sd::eval(sd::conv2d(sd::abs(xf), sd::abs(wf), sd::abs(bf), {.padding = 1}) + sd::abs(rf)), 3 * u);
}

TEST_CASE("conv2d on sd::Cuda: the host's shape errors", "[gpu][conv][errors]") {
  auto x = host_rand<float>(2, 3, 7, 9).to<sd::Cuda>();
  CHECK_THROWS_WITH(sd::conv2d(x, host_rand<float>(5, 4, 3, 3).to<sd::Cuda>()),
                    Contains("conv2d: input [2, 3, 7, 9] and weight [5, 4, 3, 3]"));
  CHECK_THROWS_WITH(sd::conv2d(x, host_rand<float>(5, 3, 9, 3).to<sd::Cuda>()), Contains("smaller than the kernel"));
  CHECK_THROWS_WITH(sd::conv2d(x, host_rand<float>(5, 3, 3, 3).to<sd::Cuda>(), {.stride = 0}),
                    Contains("stride must be positive"));
  CHECK_THROWS_WITH(sd::max_pool2d(x, 3, {.padding = 2}), Contains("at most half of kernel_size"));
}

TEST_CASE("pools: the host's values, bit for bit", "[gpu][pool]") {
  auto x = inputs<float>(42, 63, 10.f);  // NaN, infinities and zeros among them
  auto x4 = sd::eval(sd::reshape(x, sd::shape(2, 3, 21, 21)));
  auto dx = x4.to<sd::Cuda>();
  auto both = [&](auto const& f) { same_bits(counted(f(dx), 1), sd::eval(f(x4))); };
  both([](auto const& t) { return sd::max_pool2d(t, 3, {.stride = 2, .padding = 1}); });
  both([](auto const& t) { return sd::max_pool2d(t, 3, {.stride = 2, .ceil_mode = true}); });
  both([](auto const& t) { return sd::max_pool2d(t, {2, 3}, {.stride = {1, 2}, .padding = {1, 1}, .dilation = 2}); });
  both([](auto const& t) { return sd::avg_pool2d(t, 3, {.stride = 2, .padding = 1}); });
  both([](auto const& t) { return sd::avg_pool2d(t, 3, {.stride = 2, .padding = 1, .count_include_pad = false}); });
  both([](auto const& t) { return sd::avg_pool2d(t, 3, {.stride = 2, .padding = 1, .ceil_mode = true}); });
  both([](auto const& t) {
    return sd::avg_pool2d(t, 4, {.stride = 3, .padding = 2, .ceil_mode = true, .count_include_pad = false});
  });
  both([](auto const& t) { return sd::avg_pool2d(t, 2, {.divisor_override = 3}); });
  for (auto s : {sd::Pair2(1), sd::Pair2(2, 3), sd::Pair2(3, 4), sd::Pair2(5, 2), sd::Pair2(21, 21), sd::Pair2(25, 30)})
    both([&](auto const& t) { return sd::adaptive_avg_pool2d(t, s); });
  // One image, [C, H, W]; a transposed input; double.
  auto img = host_rand<float>(3, 8, 11);
  same_bits(counted(sd::max_pool2d(img.to<sd::Cuda>(), 2), 1), sd::eval(sd::max_pool2d(img, 2)));
  auto xt = sd::transpose(x4, 2, 3);
  same_bits(counted(sd::avg_pool2d(sd::transpose(dx, 2, 3), 3, {.padding = 1}), 1),
            sd::eval(sd::avg_pool2d(xt, 3, {.padding = 1})));
  auto xd = host_rand<double>(2, 4, 9, 10);
  same_bits(counted(sd::adaptive_avg_pool2d(xd.to<sd::Cuda>(), {4, 3}), 1), sd::eval(sd::adaptive_avg_pool2d(xd, {4, 3})));
  same_bits(counted(sd::max_pool2d(xd.to<sd::Cuda>(), 3, {.stride = 2, .padding = 1}), 1),
            sd::eval(sd::max_pool2d(xd, 3, {.stride = 2, .padding = 1})));
}

TEST_CASE("pools: outputs of any layout, and element-wise epilogues", "[gpu][pool][fusion]") {
  auto x = host_rand<float>(2, 3, 7, 9);
  auto dx = x.to<sd::Cuda>();
  // The kernel writes any layout itself: one kernel into a transposed view.
  sd::Tensor<float, 4, sd::Cuda> store(2, 3, 5, 4);
  auto out = sd::transpose(store, 2, 3);
  auto const before = sd::detail::kernels_run();
  out = sd::max_pool2d(dx, 3, {.stride = 2, .padding = 1});
  CHECK(sd::detail::kernels_run() - before == 1);
  same_bits(out, sd::eval(sd::max_pool2d(x, 3, {.stride = 2, .padding = 1})));
  // A rest: the pool stored, then one element-wise kernel.
  auto const r = sd::relu(sd::max_pool2d(dx, 3, {.stride = 2, .padding = 1}) - 0.25f);
  static_assert(sd::kernel_count<decltype(r)> == 2);
  CHECK_THAT(sd::explain(r), Contains("runs after max_pool2d, which is stored first"));
  same_bits(counted(r, 2), sd::eval(sd::relu(sd::max_pool2d(x, 3, {.stride = 2, .padding = 1}) - 0.25f)));
  auto const a = sd::adaptive_avg_pool2d(dx, 1) * 2.f + 1.f;
  static_assert(sd::kernel_count<decltype(a)> == 2);
  same_bits(counted(a, 2), sd::eval(sd::adaptive_avg_pool2d(x, 1) * 2.f + 1.f));
  // Broadcast in its rest (squeeze-and-excitation's scale): stored, then read broadcast.
  same_bits(counted(dx * sd::adaptive_avg_pool2d(dx, 1), 2), sd::eval(x * sd::adaptive_avg_pool2d(x, 1)));
  // A pool of a convolution: the convolution and its relu (one cuDNN call) are materialized first.
  auto w = host_rand<float>(5, 3, 3, 3);
  auto const pc = sd::max_pool2d(sd::relu(sd::conv2d(dx, w.to<sd::Cuda>())), 2);
  static_assert(sd::kernel_count<decltype(pc)> == 2);
  close(counted(pc, 2), sd::eval(sd::max_pool2d(sd::relu(sd::conv2d(x, w)), 2)), 1000 * eps<float> * 27);
}

TEMPLATE_TEST_CASE("pools of half and bfloat16 compute in float", "[gpu][pool][half]", sd::half, sd::bfloat16) {
  using H = TestType;
  auto x = sd::eval(sd::cast<H>(host_rand<float>(2, 3, 9, 11)));
  auto xf = sd::eval(sd::cast<float>(x));
  auto dx = x.template to<sd::Cuda>();
  auto rounded = [](auto const& t) { return sd::eval(sd::cast<H>(t)); };  // the float result, rounded once
  same_bits(counted(sd::max_pool2d(dx, 3, {.stride = 2}), 1), rounded(sd::max_pool2d(xf, 3, {.stride = 2})));
  same_bits(counted(sd::avg_pool2d(dx, 3, {.stride = 2, .padding = 1}), 1),
            rounded(sd::avg_pool2d(xf, 3, {.stride = 2, .padding = 1})));
  same_bits(counted(sd::adaptive_avg_pool2d(dx, {2, 3}), 1), rounded(sd::adaptive_avg_pool2d(xf, {2, 3})));
}
