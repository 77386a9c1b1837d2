// Convolution and pooling (expr/conv.hpp, backend/host/conv.hpp): conv2d, max_pool2d,
// avg_pool2d and adaptive_avg_pool2d with torch.nn.functional's rules, each a kernel anchor
// whose element-wise consumers are its epilogue (rule 3). Every value is checked against
// double-precision loops written here (within the error bound of a dot product for conv2d),
// every kernel count against explain() and the kernels that run.
#include "reference.hpp"

#include <cstring>
#include <string>

namespace sd = solder;
using ref::Array;
using ref::contains;
using ref::run_counted;

namespace {

struct Geometry {
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// [N, C, H, W] or [C, H, W] as (images, the rest): the references work on 4-d arrays.
std::int64_t images(Array const& x) { return x.shape.size() == 4 ? x.shape[0] : 1; }
ref::Shape image_shape(Array const& x, std::int64_t c, std::int64_t oh, std::int64_t ow) {
  if (x.shape.size() == 4) return {x.shape[0], c, oh, ow};
  return {c, oh, ow};
}
double at(Array const& x, std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t z) {
  std::size_t r = x.shape.size();
  std::int64_t C = x.shape[r - 3], H = x.shape[r - 2], W = x.shape[r - 1];
  return x[((n * C + c) * H + y) * W + z];
}

// F.conv2d in double, with each output's sum of |x w| (the error bound's scale).
ref::Product conv_ref(Array const& x, Array const& w, Geometry const& g) {
  std::size_t r = x.shape.size();
  std::int64_t const N = images(x), H = x.shape[r - 2], W = x.shape[r - 1];
  std::int64_t const co_n = w.shape[0], ci_n = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  std::int64_t const OH = (H + 2 * g.ph - g.dh * (KH - 1) - 1) / g.sh + 1;
  std::int64_t const OW = (W + 2 * g.pw - g.dw * (KW - 1) - 1) / g.sw + 1;
  ref::Shape s = image_shape(x, co_n, OH, OW);
  ref::Product p{Array(s), Array(s)};
  std::int64_t o = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t co = 0; co < co_n; ++co)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox, ++o) {
          std::int64_t const group = co / (co_n / g.groups);
          double sum = 0, scale = 0;
          for (std::int64_t ci = 0; ci < ci_n; ++ci)
            for (std::int64_t a = 0; a < KH; ++a)
              for (std::int64_t b = 0; b < KW; ++b) {
                std::int64_t y = oy * g.sh - g.ph + a * g.dh, z = ox * g.sw - g.pw + b * g.dw;
                if (y < 0 || y >= H || z < 0 || z >= W) continue;
                double t = at(x, n, group * ci_n + ci, y, z) * w[((co * ci_n + ci) * KH + a) * KW + b];
                sum += t;
                scale += std::fabs(t);
              }
          p.value[o] = sum;
          p.scale[o] = scale;
        }
  return p;
}

// PyTorch's pooled size: floor or ceil of (in + 2p - d(k - 1) - 1) / s + 1, and with ceil the
// last window starts inside the input or the left padding.
std::int64_t pooled(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d,
                    bool ceil_mode) {
  double q = double(in + 2 * p - d * (k - 1) - 1) / double(s);
  auto out = static_cast<std::int64_t>(ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

struct Pool {
  std::int64_t kh, kw, sh, sw, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil_mode = false, count_include_pad = true;
  std::int64_t divisor = 0;
};

// F.max_pool2d (max = true) or F.avg_pool2d, as PyTorch's CPU loops define them.
Array pool_ref(Array const& x, Pool const& p, bool max) {
  std::size_t r = x.shape.size();
  std::int64_t const N = images(x), C = x.shape[r - 3], H = x.shape[r - 2], W = x.shape[r - 1];
  std::int64_t const OH = pooled(H, p.kh, p.sh, p.ph, p.dh, p.ceil_mode);
  std::int64_t const OW = pooled(W, p.kw, p.sw, p.pw, p.dw, p.ceil_mode);
  Array out(image_shape(x, C, OH, OW));
  std::int64_t o = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox, ++o) {
          double m = -ref::inf, sum = 0;
          for (std::int64_t a = 0; a < p.kh; ++a)
            for (std::int64_t b = 0; b < p.kw; ++b) {
              std::int64_t y = oy * p.sh - p.ph + a * p.dh, z = ox * p.sw - p.pw + b * p.dw;
              if (y < 0 || y >= H || z < 0 || z >= W) continue;
              double v = at(x, n, c, y, z);
              if (v > m || std::isnan(v)) m = v;
              sum += v;
            }
          if (max) {
            out[o] = m;
            continue;
          }
          std::int64_t y0 = oy * p.sh - p.ph, z0 = ox * p.sw - p.pw;
          std::int64_t y1 = std::min(y0 + p.kh, H + p.ph), z1 = std::min(z0 + p.kw, W + p.pw);
          std::int64_t size = (y1 - y0) * (z1 - z0);
          std::int64_t inside = (std::min(y1, H) - std::max<std::int64_t>(y0, 0)) *
                                (std::min(z1, W) - std::max<std::int64_t>(z0, 0));
          out[o] = sum / double(p.divisor ? p.divisor : p.count_include_pad ? size : inside);
        }
  return out;
}

Array adaptive_ref(Array const& x, std::int64_t OH, std::int64_t OW) {
  std::size_t r = x.shape.size();
  std::int64_t const N = images(x), C = x.shape[r - 3], H = x.shape[r - 2], W = x.shape[r - 1];
  Array out(image_shape(x, C, OH, OW));
  std::int64_t o = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox, ++o) {
          auto y0 = static_cast<std::int64_t>(std::floor(double(oy * H) / double(OH)));
          auto y1 = static_cast<std::int64_t>(std::ceil(double((oy + 1) * H) / double(OH)));
          auto z0 = static_cast<std::int64_t>(std::floor(double(ox * W) / double(OW)));
          auto z1 = static_cast<std::int64_t>(std::ceil(double((ox + 1) * W) / double(OW)));
          double sum = 0;
          for (std::int64_t y = y0; y < y1; ++y)
            for (std::int64_t z = z0; z < z1; ++z) sum += at(x, n, c, y, z);
          out[o] = sum / double((y1 - y0) * (z1 - z0));
        }
  return out;
}

// |got - exact| <= (k + 2) * eps * sum|x w| + 2 ulp: the bound of a dot product of k terms.
template <class TT>
void check_product(TT const& got, ref::Product const& p, std::int64_t k, std::string const& what) {
  ref::check_close(got, p.value, ref::Tol{2, 0, static_cast<double>(k + 2)}, what, &p.scale);
}

// An average's bound: its terms' |v| summed, times the count (+ 2), times eps.
template <class TT>
void check_mean(TT const& got, Array const& expect, Array const& x, std::int64_t terms,
                std::string const& what) {
  Array scale(expect.shape, 0);
  double largest = 0;
  for (double v : x.v) largest = std::max(largest, std::fabs(v));
  for (auto& s : scale.v) s = largest;
  ref::check_close(got, expect, ref::Tol{4, 0, static_cast<double>(terms + 2)}, what, &scale);
}

Array relu(Array const& a) {
  return ref::map([](double v) { return v > 0 ? v : 0; }, a);
}

std::string conv_name(std::int64_t n, std::int64_t cin, std::int64_t h, std::int64_t w, std::int64_t cout,
                      std::int64_t k, Geometry const& g) {
  auto s = [](std::int64_t v) { return std::to_string(v); };
  return "conv2d x [" + s(n) + ", " + s(cin) + ", " + s(h) + ", " + s(w) + "], " + s(cout) + " filters " + s(k) +
         "x" + s(k) + ", stride " + s(g.sh) + ", padding " + s(g.ph) + ", dilation " + s(g.dh) + ", groups " +
         s(g.groups);
}

sd::Conv2dOptions options(Geometry const& g) {
  return {.stride = {g.sh, g.sw}, .padding = {g.ph, g.pw}, .dilation = {g.dh, g.dw}, .groups = g.groups};
}

template <class T>
void check_conv(std::int64_t n, std::int64_t cin, std::int64_t h, std::int64_t w, std::int64_t cout,
                std::int64_t kh, std::int64_t kw, Geometry const& g, std::string const& what) {
  auto x = ref::uniform<T>(-1, 1, n, cin, h, w);
  auto wt = ref::uniform<T>(-1, 1, cout, cin / g.groups, kh, kw);
  auto p = conv_ref(ref::of(x), ref::of(wt), g);
  check_product(run_counted(sd::conv2d(x, wt, options(g))), p, cin / g.groups * kh * kw, what);
}

// The same convolution over a channels-last input (NHWC strides), stored into a contiguous
// output and into a channels-last one (nn::materialize keeps its input's format).
template <class T>
void check_conv_channels_last(std::int64_t n, std::int64_t cin, std::int64_t h, std::int64_t w, std::int64_t cout,
                              std::int64_t kh, std::int64_t kw, Geometry const& g, std::string const& what) {
  auto x = sd::contiguous(ref::uniform<T>(-1, 1, n, cin, h, w), sd::channels_last);
  REQUIRE(sd::is_contiguous(x, sd::channels_last));
  auto wt = ref::uniform<T>(-1, 1, cout, cin / g.groups, kh, kw);
  auto p = conv_ref(ref::of(x), ref::of(wt), g);
  std::int64_t const k = cin / g.groups * kh * kw;
  check_product(run_counted(sd::conv2d(x, wt, options(g))), p, k, what + ", into NCHW");
  auto y = sd::nn::materialize(sd::conv2d(x, wt, options(g)));
  CHECK(sd::is_contiguous(y, sd::channels_last));
  check_product(y, p, k, what + ", into NHWC");
}

}  // namespace

TEST_CASE("conv2d over strides, paddings, dilations, groups and kernel sizes", "[conv]") {
  // Every combination on small odd sizes, the input grown where the kernel would not fit;
  // groups 1, 2 and C_in (depthwise, with a channel multiplier of 2).
  int cases = 0;
  for (std::int64_t k : {1, 3, 5, 7})
    for (std::int64_t s : {1, 2})
      for (std::int64_t pad : {0, 1, 2})
        for (std::int64_t d : {1, 2})
          for (std::int64_t groups : {1, 2, 4}) {
            std::int64_t const reach = d * (k - 1) + 1;
            std::int64_t const h = std::max<std::int64_t>(7, reach - 2 * pad + 1), w = h + 2;
            std::int64_t const n = (k + s + pad + d) % 2 + 1, cout = groups == 4 ? 8 : 6;
            Geometry const g{s, s, pad, pad, d, d, groups};
            check_conv<float>(n, 4, h, w, cout, k, k, g, conv_name(n, 4, h, w, cout, k, g));
            ++cases;
          }
  CHECK(cases == 144);
  // Odd channel counts, rectangular kernels and unequal strides, paddings and dilations.
  check_conv<float>(2, 3, 7, 9, 5, 3, 3, {}, "3 -> 5 channels, 3x3");
  check_conv<float>(1, 3, 7, 9, 5, 2, 3, {1, 2, 1, 0, 2, 1, 1},
                    "2x3 kernel, stride [1, 2], padding [1, 0], dilation [2, 1]");
  check_conv<float>(2, 6, 9, 7, 9, 3, 1, {2, 1, 0, 1, 1, 3, 3}, "3x1 kernel, 3 groups");
  check_conv<float>(2, 3, 7, 9, 3, 3, 3, {1, 1, 1, 1, 1, 1, 3}, "depthwise, 3 channels");
  check_conv<double>(2, 3, 7, 9, 5, 3, 3, {2, 2, 1, 1, 1, 1, 1}, "double, 3x3 stride 2");
  check_conv<double>(1, 4, 8, 8, 8, 3, 3, {1, 1, 1, 1, 1, 1, 4}, "double, depthwise");
}

TEST_CASE("conv2d at the sizes of real networks takes every path of the engines", "[conv]") {
  Geometry stem{2, 2, 3, 3, 1, 1, 1};
  check_conv<float>(2, 3, 32, 30, 16, 7, 7, stem, "ResNet's stem: 7x7 stride 2 padding 3");
  check_conv<float>(2, 32, 14, 14, 24, 1, 1, {}, "1x1 (a plain product per image)");
  check_conv<float>(1, 32, 14, 14, 24, 1, 1, {2, 2, 0, 0, 1, 1, 1}, "1x1 stride 2");
  check_conv<float>(2, 16, 20, 20, 40, 3, 3, {1, 1, 1, 1, 1, 1, 1}, "3x3 16 -> 40 (blocked, threads)");
  check_conv<float>(2, 32, 12, 12, 32, 3, 3, {1, 1, 1, 1, 1, 1, 32}, "depthwise 3x3 over 32 channels");
  check_conv<float>(1, 8, 40, 40, 4, 3, 3, {1, 1, 1, 1, 1, 1, 1}, "4 filters (a thin product)");
  check_conv<float>(1, 64, 3, 3, 64, 3, 3, {1, 1, 1, 1, 1, 1, 2}, "few pixels, many channels, 2 groups");
}

TEST_CASE("conv2d reads strided and transposed operands, 3-d inputs and padding strings", "[conv]") {
  auto big = ref::uniform<float>(-1, 1, 2, 8, 7, 9);
  auto x = sd::slice(big, 1, 1, 8, 2);  // channels 1, 3, 5, 7: channel stride 126
  auto w1 = ref::uniform<float>(-1, 1, 5, 4, 1, 1);
  check_product(run_counted(sd::conv2d(x, w1)), conv_ref(ref::of(x), ref::of(w1), {}), 4,
                "1x1 of a sliced input");
  auto w3 = ref::uniform<float>(-1, 1, 5, 4, 3, 3);
  check_product(run_counted(sd::conv2d(x, w3, {.padding = 1})), conv_ref(ref::of(x), ref::of(w3), {1, 1, 1, 1}),
                36, "3x3 of a sliced input");
  auto xt = sd::transpose(ref::uniform<float>(-1, 1, 2, 4, 9, 7), 2, 3);  // [2, 4, 7, 9], W stride 9
  check_product(run_counted(sd::conv2d(xt, w3, {.stride = 2})), conv_ref(ref::of(xt), ref::of(w3), {2, 2}), 36,
                "3x3 of a transposed input");
  check_product(run_counted(sd::conv2d(xt, w1)), conv_ref(ref::of(xt), ref::of(w1), {}), 4,
                "1x1 of a transposed input");
  auto wt = sd::transpose(ref::uniform<float>(-1, 1, 4, 5, 3, 3), 0, 1);  // [5, 4, 3, 3], not contiguous
  check_product(run_counted(sd::conv2d(x, wt)), conv_ref(ref::of(x), ref::of(wt), {}), 36,
                "a transposed weight");

  auto x3 = ref::uniform<float>(-1, 1, 4, 7, 9);  // one image, [C, H, W]
  auto y3 = run_counted(sd::conv2d(x3, w3, {.padding = 1}));
  static_assert(decltype(y3)::rank == 3);
  REQUIRE(y3.shape() == sd::Index<3>{5, 7, 9});
  check_product(y3, conv_ref(ref::of(x3), ref::of(w3), {1, 1, 1, 1}), 36, "[C, H, W] input");

  auto w4 = ref::uniform<float>(-1, 1, 5, 4, 4, 2);  // even kernels: "same" pads the extra at the end
  auto same = run_counted(sd::conv2d(x, w4, {.padding = "same", .dilation = {1, 3}}));
  REQUIRE(same.shape() == sd::Index<4>{2, 5, 7, 9});
  // [3, 3] of padding, 1 before and 2 after; [3] (dilation 3), 1 before and 2 after: the
  // reference sees the input padded with zeros at the end, then padding 1 at both sides.
  Array xp({2, 4, 8, 10}, 0);
  Array xs = ref::of(x);
  for (std::int64_t i = 0; i < 2 * 4; ++i)
    for (std::int64_t y = 0; y < 7; ++y)
      for (std::int64_t z = 0; z < 9; ++z) xp[(i * 8 + y) * 10 + z] = xs[(i * 7 + y) * 9 + z];
  check_product(same, conv_ref(xp, ref::of(w4), {1, 1, 1, 1, 1, 3}), 32, "padding=\"same\"");
  auto valid = run_counted(sd::conv2d(x, w4, {.padding = "valid"}));
  check_product(valid, conv_ref(ref::of(x), ref::of(w4), {}), 32, "padding=\"valid\"");
}

TEST_CASE("channels-last tensors: sd::contiguous and sd::is_contiguous with sd::channels_last", "[conv][layout]") {
  auto x = ref::uniform<float>(-1, 1, 2, 5, 3, 4);
  auto cl = sd::contiguous(x, sd::channels_last);
  CHECK(cl.shape() == x.shape());
  CHECK(cl.strides() == sd::Index<4>{60, 1, 20, 5});
  CHECK(sd::is_contiguous(cl, sd::channels_last));
  CHECK(!sd::is_contiguous(cl));
  CHECK(!sd::is_contiguous(x, sd::channels_last));
  ref::check_equal(cl, ref::of(x), "contiguous(x, channels_last)");
  CHECK(sd::contiguous(cl, sd::channels_last).data() == cl.data());  // already so: the tensor itself
  auto back = sd::contiguous(cl);
  CHECK(back.is_contiguous());
  ref::check_equal(back, ref::of(x), "contiguous(channels_last tensor)");
  auto expr = sd::contiguous(x * 2.f, sd::channels_last);  // an expression, stored channels-last
  CHECK(sd::is_contiguous(expr, sd::channels_last));
  ref::check_equal(expr, ref::map([](double v) { return 2 * v; }, ref::of(x)), "contiguous(x * 2, channels_last)");
  // [N, C, 1, 1] is both, as in PyTorch; so nn::materialize keeps such results contiguous.
  auto pooled = sd::eval(sd::adaptive_avg_pool2d(cl, 1));
  CHECK(sd::is_contiguous(pooled));
  CHECK(sd::is_contiguous(pooled, sd::channels_last));
  CHECK(sd::is_contiguous(sd::nn::materialize(cl + 1.f), sd::channels_last));
  CHECK(sd::is_contiguous(sd::nn::materialize(x + 1.f)));
  CHECK(sd::is_contiguous(sd::nn::materialize(x + 1.f, sd::channels_last), sd::channels_last));
  // Other ranks: contiguous as ever; channels_last is refused, naming the shape.
  auto m = ref::uniform<float>(-1, 1, 3, 4);
  CHECK(!sd::is_contiguous(m, sd::channels_last));
  auto mt = sd::contiguous(sd::transpose(m, 0, 1));
  CHECK(mt.is_contiguous());
  ref::check_equal(mt, ref::of(sd::transpose(m, 0, 1)), "contiguous(transpose(m))");
  std::string const refused = ref::error_message([&] { (void)sd::contiguous(m, sd::channels_last); });
  CHECK(contains(refused, "channels_last is a format of 4-d host tensors"));
  CHECK(contains(refused, "[3, 4]"));
}

TEST_CASE("depthwise conv2d over channels-last inputs: strides, paddings, dilations, channel tails",
          "[conv][layout]") {
  // Channel counts below, at and past the engine's chunk of channels (32 floats, 16 doubles)
  // with tails; each kernel size with every stride, padding and dilation.
  int cases = 0;
  for (std::int64_t c : {3, 17, 32, 70})
    for (std::int64_t k : {3, 5})
      for (std::int64_t s : {1, 2})
        for (std::int64_t pad : {0, 1, 2})
          for (std::int64_t d : {1, 2}) {
            std::int64_t const reach = d * (k - 1) + 1;
            std::int64_t const h = std::max<std::int64_t>(6, reach - 2 * pad + 1), w = h + 3;
            Geometry const g{s, s, pad, pad, d, d, c};
            check_conv_channels_last<float>(2, c, h, w, c, k, k, g, conv_name(2, c, h, w, c, k, g));
            ++cases;
          }
  CHECK(cases == 96);
  check_conv_channels_last<float>(1, 6, 9, 7, 6, 3, 3, {2, 1, 1, 0, 1, 2, 6},
                                  "depthwise, stride [2, 1], padding [1, 0], dilation [1, 2]");
  check_conv_channels_last<float>(2, 4, 7, 7, 8, 3, 3, {1, 1, 1, 1, 1, 1, 4}, "depthwise, channel multiplier 2");
  check_conv_channels_last<double>(2, 17, 8, 9, 17, 3, 3, {2, 2, 1, 1, 1, 1, 17}, "double, depthwise, 17 channels");
  check_conv_channels_last<float>(8, 144, 14, 14, 144, 3, 3, {1, 1, 1, 1, 1, 1, 144},
                                  "MobileNetV2's depthwise 3x3 x 144 (threads)");
}

TEST_CASE("conv2d over channels-last inputs: 1x1 products, kxk patches, groups", "[conv][layout]") {
  check_conv_channels_last<float>(2, 32, 14, 14, 24, 1, 1, {}, "1x1 (one product over all images)");
  check_conv_channels_last<float>(1, 32, 14, 13, 24, 1, 1, {2, 2, 0, 0, 1, 1, 1}, "1x1 stride 2");
  check_conv_channels_last<float>(2, 3, 32, 30, 16, 7, 7, {2, 2, 3, 3, 1, 1, 1}, "ResNet's stem");
  check_conv_channels_last<float>(2, 16, 20, 20, 40, 3, 3, {1, 1, 1, 1, 1, 1, 1}, "3x3 16 -> 40");
  check_conv_channels_last<float>(2, 6, 9, 7, 9, 3, 1, {2, 1, 0, 1, 1, 3, 3}, "3x1 kernel, 3 groups");
  check_conv_channels_last<double>(2, 5, 7, 9, 7, 3, 3, {2, 2, 1, 1, 1, 1, 1}, "double, 3x3 stride 2");
  // A module's weight: reordered and packed once, kept in its cache; the same values each call.
  sd::nn::Conv2d conv(16, 24, 3, {.padding = 1, .bias = false});
  auto x = sd::contiguous(ref::uniform<float>(-1, 1, 2, 16, 10, 10), sd::channels_last);
  auto p = conv_ref(ref::of(x), ref::of(conv.weight), {1, 1, 1, 1});
  for (int call = 0; call < 2; ++call)
    check_product(sd::nn::materialize(conv(x)), p, 144, "nn::Conv2d over NHWC, call " + std::to_string(call));
  check_product(sd::nn::materialize(conv(sd::contiguous(x))), p, 144, "the same module over NCHW");
  check_product(sd::nn::materialize(conv(x)), p, 144, "and over NHWC again");
}

TEST_CASE("a convolution's epilogue over channels-last blocks: batch norm, residual, relu6", "[conv][layout]") {
  auto x = sd::contiguous(ref::uniform<float>(-1, 1, 2, 37, 9, 11), sd::channels_last);
  auto w = ref::uniform<float>(-1, 1, 37, 1, 3, 3);
  auto scale = ref::uniform<float>(0.5, 1.5, 1, 37, 1, 1);
  auto shift = ref::uniform<float>(-1, 1, 1, 37, 1, 1);
  auto residual = ref::uniform<float>(-1, 1, 2, 37, 9, 11);
  auto residual_cl = sd::contiguous(residual, sd::channels_last);
  auto p = conv_ref(ref::of(x), ref::of(w), {1, 1, 1, 1, 1, 1, 37});
  Array expect = ref::map([](double v, double s, double c, double r) { return std::clamp(v * s + c + r, 0.0, 6.0); },
                          p.value, ref::of(scale), ref::of(shift), ref::of(residual));
  Array escale = ref::map([](double v, double s) { return v * s + 4; }, p.scale, ref::of(scale));
  auto conv = [&] { return sd::conv2d(x, w, {.padding = 1, .groups = 37}) * scale + shift; };
  // Every input steps by 1 along C: each pixel's channels are one run.
  auto e = sd::clamp(conv() + residual_cl, 0.f, 6.f);
  static_assert(sd::kernel_count<decltype(e)> == 1);
  auto y = sd::nn::materialize(e);
  CHECK(sd::is_contiguous(y, sd::channels_last));
  ref::check_close(y, expect, ref::Tol{4, 0, 16}, "clamp(dwconv * scale + shift + residual, 0, 6), NHWC", &escale);
  // A residual in NCHW: element by element, the same values.
  auto mixed = sd::nn::materialize(sd::clamp(conv() + residual, 0.f, 6.f));
  CHECK(sd::is_contiguous(mixed, sd::channels_last));
  ref::check_close(mixed, expect, ref::Tol{4, 0, 16}, "... with an NCHW residual", &escale);
  ref::check_close(run_counted(sd::clamp(conv() + residual_cl, 0.f, 6.f)), expect, ref::Tol{4, 0, 16},
                   "... into NCHW", &escale);
  ref::check_close(sd::eager(e), expect, ref::Tol{4, 0, 16}, "eager", &escale);
}

TEST_CASE("max_pool2d and avg_pool2d with padding, dilation, ceil_mode and divisors", "[conv][pool]") {
  auto x = ref::uniform<float>(-1, 1, 2, 3, 7, 9);
  Array const X = ref::of(x);
  for (bool ceil_mode : {false, true})
    for (std::int64_t s : {1, 2, 3})
      for (std::int64_t pad : {0, 1})
        for (std::int64_t d : {1, 2}) {
          Pool p{3, 2, s, s, pad, pad, d, d, ceil_mode};
          std::string what = "max_pool2d 3x2, stride " + std::to_string(s) + ", padding " + std::to_string(pad) +
                             ", dilation " + std::to_string(d) + (ceil_mode ? ", ceil_mode" : "");
          auto m = run_counted(
              sd::max_pool2d(x, {3, 2}, {.stride = s, .padding = {pad, pad}, .dilation = d, .ceil_mode = ceil_mode}));
          ref::check_equal(m, pool_ref(X, p, true), what);
          if (d > 1) continue;
          for (bool include : {true, false}) {
            p.count_include_pad = include;
            auto a = run_counted(sd::avg_pool2d(x, {3, 2}, {.stride = s, .padding = pad, .ceil_mode = ceil_mode,
                                                            .count_include_pad = include}));
            check_mean(a, pool_ref(X, p, false), X, 6,
                       what + (include ? "" : ", count_include_pad=false") + " (avg)");
          }
        }
  Pool third{3, 3, 2, 2, 1, 1, 1, 1, true, true, 7};
  auto a =
      run_counted(sd::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true, .divisor_override = 7}));
  check_mean(a, pool_ref(X, third, false), X, 9, "avg_pool2d divisor_override=7");
  auto r = run_counted(sd::max_pool2d(x, {3, 2}, {.stride = {2, 1}, .padding = {1, 0}}));
  ref::check_equal(r, pool_ref(X, {3, 2, 2, 1, 1, 0}, true), "max_pool2d stride [2, 1], padding [1, 0]");
  // The defaults: stride = kernel size; a 3-d input.
  auto m2 = run_counted(sd::max_pool2d(x, 2));
  REQUIRE(m2.shape() == sd::Index<4>{2, 3, 3, 4});
  ref::check_equal(m2, pool_ref(X, {2, 2, 2, 2}, true), "max_pool2d(x, 2)");
  auto x3 = ref::uniform<double>(-1, 1, 3, 8, 8);
  auto a3 = run_counted(sd::avg_pool2d(x3, 2));
  check_mean(a3, pool_ref(ref::of(x3), {2, 2, 2, 2}, false), ref::of(x3), 4, "avg_pool2d of [C, H, W], double");
  // A transposed input, and NaN, which propagates through max as in PyTorch.
  auto xt = sd::transpose(ref::uniform<float>(-1, 1, 2, 3, 9, 7), 2, 3);
  ref::check_equal(run_counted(sd::max_pool2d(xt, 3, {.stride = 2, .padding = 1})),
                   pool_ref(ref::of(xt), {3, 3, 2, 2, 1, 1}, true), "max_pool2d of a transposed input");
  auto nan = ref::uniform<float>(-1, 1, 1, 1, 4, 4);
  nan.data()[5] = std::numeric_limits<float>::quiet_NaN();
  ref::check_equal(run_counted(sd::max_pool2d(nan, 2)), pool_ref(ref::of(nan), {2, 2, 2, 2}, true),
                   "NaN in max_pool2d");
}

TEST_CASE("adaptive_avg_pool2d to 1, to (2, 3), and to sizes that do not divide the input", "[conv][pool]") {
  auto x = ref::uniform<float>(-1, 1, 2, 3, 7, 9);
  Array const X = ref::of(x);
  struct Size {
    std::int64_t h, w;
  };
  for (Size s : {Size{1, 1}, Size{2, 3}, Size{3, 4}, Size{5, 2}, Size{7, 9}, Size{10, 12}}) {
    auto y = run_counted(sd::adaptive_avg_pool2d(x, {s.h, s.w}));
    std::int64_t terms = (7 + s.h - 1) / s.h * ((9 + s.w - 1) / s.w) + 2;
    check_mean(y, adaptive_ref(X, s.h, s.w), X, terms,
               "adaptive_avg_pool2d to [" + std::to_string(s.h) + ", " + std::to_string(s.w) + "]");
  }
  auto one = run_counted(sd::adaptive_avg_pool2d(x, 1));
  REQUIRE(one.shape() == sd::Index<4>{2, 3, 1, 1});
}

TEST_CASE("pools over channels-last inputs: max, avg, adaptive, NaN, channel tails", "[conv][pool][layout]") {
  auto x = sd::contiguous(ref::uniform<float>(-1, 1, 2, 37, 7, 9), sd::channels_last);  // 32 + a tail of 5
  Array const X = ref::of(x);
  for (bool ceil_mode : {false, true})
    for (std::int64_t s : {1, 2})
      for (std::int64_t pad : {0, 1})
        for (std::int64_t d : {1, 2}) {
          Pool p{3, 2, s, s, pad, pad, d, d, ceil_mode};
          std::string what = "channels-last max_pool2d 3x2, stride " + std::to_string(s) + ", padding " +
                             std::to_string(pad) + ", dilation " + std::to_string(d) + (ceil_mode ? ", ceil_mode" : "");
          auto max = sd::max_pool2d(x, {3, 2}, {.stride = s, .padding = {pad, pad}, .dilation = d, .ceil_mode = ceil_mode});
          ref::check_equal(run_counted(max), pool_ref(X, p, true), what + ", into NCHW");
          auto m = sd::nn::materialize(max);
          CHECK(sd::is_contiguous(m, sd::channels_last));
          ref::check_equal(m, pool_ref(X, p, true), what + ", into NHWC");
          if (d > 1) continue;
          for (bool include : {true, false}) {
            p.count_include_pad = include;
            auto a = sd::nn::materialize(sd::avg_pool2d(
                x, {3, 2}, {.stride = s, .padding = pad, .ceil_mode = ceil_mode, .count_include_pad = include}));
            check_mean(a, pool_ref(X, p, false), X, 6, what + (include ? "" : ", count_include_pad=false") + " (avg)");
          }
        }
  Pool third{3, 3, 2, 2, 1, 1, 1, 1, true, true, 7};
  check_mean(sd::nn::materialize(sd::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true,
                                                       .divisor_override = 7})),
             pool_ref(X, third, false), X, 9, "channels-last avg_pool2d divisor_override=7");
  auto nan = sd::contiguous(ref::uniform<float>(-1, 1, 1, 3, 4, 4), sd::channels_last);
  nan.data()[7] = std::numeric_limits<float>::quiet_NaN();  // channel 1 of pixel (0, 2)
  ref::check_equal(sd::nn::materialize(sd::max_pool2d(nan, 2)), pool_ref(ref::of(nan), {2, 2, 2, 2}, true),
                   "NaN in a channels-last max_pool2d");
  struct Size {
    std::int64_t h, w;
  };
  for (Size s : {Size{1, 1}, Size{3, 4}, Size{10, 12}}) {
    std::int64_t terms = (7 + s.h - 1) / s.h * ((9 + s.w - 1) / s.w) + 2;
    std::string what = "channels-last adaptive_avg_pool2d to [" + std::to_string(s.h) + ", " + std::to_string(s.w) + "]";
    check_mean(run_counted(sd::adaptive_avg_pool2d(x, {s.h, s.w})), adaptive_ref(X, s.h, s.w), X, terms, what);
    check_mean(sd::nn::materialize(sd::adaptive_avg_pool2d(x, {s.h, s.w})), adaptive_ref(X, s.h, s.w), X, terms,
               what + ", into NHWC");
  }
}

TEST_CASE("element-wise maths over a convolution or a pool is its epilogue: one kernel", "[conv][fusion]") {
  auto x = ref::uniform<float>(-1, 1, 2, 3, 7, 9);
  auto w = ref::uniform<float>(-1, 1, 5, 3, 3, 3);
  auto b = ref::uniform<float>(-1, 1, 5);
  auto scale = ref::uniform<float>(0.5, 1.5, 1, 5, 1, 1);
  auto shift = ref::uniform<float>(-1, 1, 1, 5, 1, 1);
  auto residual = ref::uniform<float>(-1, 1, 2, 5, 7, 9);
  auto p = conv_ref(ref::of(x), ref::of(w), {1, 1, 1, 1});

  // The example: a folded batch norm, the residual and the activation on each block.
  auto e = sd::relu(sd::conv2d(x, w, {.padding = 1}) * scale + shift + residual);
  static_assert(sd::kernel_count<decltype(e)> == 1);
  std::string text = sd::explain(e);
  CHECK(contains(text, "contraction kernel"));
  CHECK(contains(text, "conv2d(in0[2, 3, 7, 9], in1[5, 3, 3, 3], padding=[1, 1])"));
  Array expect = relu(ref::map([](double v, double s, double c, double r) { return v * s + c + r; }, p.value,
                              ref::of(scale), ref::of(shift), ref::of(residual)));
  Array escale = ref::map([](double v, double s) { return v * s + 4; }, p.scale, ref::of(scale));
  ref::check_close(run_counted(e), expect, ref::Tol{4, 0, 32}, "relu(conv2d * scale + shift + residual)",
                   &escale);
  ref::check_close(sd::eager(e), expect, ref::Tol{4, 0, 32}, "eager", &escale);

  auto with_bias = sd::relu(sd::conv2d(x, w, b, {.padding = 1}));
  static_assert(sd::kernel_count<decltype(with_bias)> == 1);
  Array bias = ref::of(b);
  bias.shape = {5, 1, 1};
  Array bscale = ref::map([](double v) { return v + 1; }, p.scale);
  ref::check_close(run_counted(with_bias), relu(ref::map([](double v, double c) { return v + c; }, p.value, bias)),
                   ref::Tol{4, 0, 32}, "relu(conv2d(x, w, b))", &bscale);

  // ResNet's stem pool over a relu'd input (the relu, a map under the pool, is its own kernel:
  // operands come from memory), and a relu after the pool (its epilogue).
  auto pool = sd::relu(sd::max_pool2d(x, 3, {.stride = 2, .padding = 1}));
  static_assert(sd::kernel_count<decltype(pool)> == 1);
  CHECK(contains(sd::explain(pool),
                 "max_pool2d(in0[2, 3, 7, 9], kernel_size=[3, 3], stride=[2, 2], padding=[1, 1])"));
  ref::check_equal(run_counted(pool), relu(pool_ref(ref::of(x), {3, 3, 2, 2, 1, 1}, true)), "relu(max_pool2d)");
  auto avg = sd::adaptive_avg_pool2d(x, 1) * 2.f + 1.f;
  static_assert(sd::kernel_count<decltype(avg)> == 1);
  Array aexpect = ref::map([](double v) { return 2 * v + 1; }, adaptive_ref(ref::of(x), 1, 1));
  ref::check_close(run_counted(avg), aexpect, ref::Tol{8, 1e-6}, "adaptive_avg_pool2d * 2 + 1");

  // An operand that is an expression is materialized first: two kernels.
  auto pre = sd::conv2d(sd::relu(x), w, {.padding = 1});
  static_assert(sd::kernel_count<decltype(pre)> == 2);
  CHECK(contains(sd::explain(pre), "an operand of a contraction is read from memory"));
  auto pr = conv_ref(relu(ref::of(x)), ref::of(w), {1, 1, 1, 1});
  check_product(run_counted(pre), pr, 27, "conv2d(relu(x), w)");
  auto pooled_conv = sd::max_pool2d(sd::relu(sd::conv2d(x, w)), 2);
  static_assert(sd::kernel_count<decltype(pooled_conv)> == 2);
  run_counted(pooled_conv);
}

TEST_CASE("a convolution's epilogue writes runs of planes, of rows, or elements", "[conv][fusion]") {
  auto x = ref::uniform<float>(-1, 1, 2, 4, 6, 10);
  auto w = ref::uniform<float>(-1, 1, 3, 4, 3, 3);
  auto p = conv_ref(ref::of(x), ref::of(w), {1, 1, 1, 1});
  Array const pscale = ref::map([](double v) { return v + 1; }, p.scale);
  auto add = [](double v, double c) { return v + c; };

  // A residual with a row pitch (a slice along W): runs of rows.
  auto wide = ref::uniform<float>(-1, 1, 2, 3, 6, 13);
  auto res = sd::slice(wide, 3, 2, 12);
  ref::check_close(run_counted(sd::conv2d(x, w, {.padding = 1}) + res), ref::map(add, p.value, ref::of(res)),
                   ref::Tol{4, 0, 40}, "conv2d + a residual with a row pitch", &pscale);
  // A term broadcast along the rows ([N, C, OH, 1]): rows whose values repeat.
  auto col = ref::uniform<float>(-1, 1, 2, 3, 6, 1);
  ref::check_close(run_counted(sd::conv2d(x, w, {.padding = 1}) - col),
                   ref::map([](double v, double c) { return v - c; }, p.value, ref::of(col)), ref::Tol{4, 0, 40},
                   "conv2d - [N, C, OH, 1]", &pscale);
  // Into a transposed view of the output: element by element.
  sd::Tensor<float, 4> out(2, 3, 10, 6);
  auto out_t = sd::transpose(out, 2, 3);
  auto before = sd::detail::kernels_run();
  out_t = sd::tanh(sd::conv2d(x, w, {.padding = 1}));
  CHECK(sd::detail::kernels_run() - before == 1);
  ref::check_close(out_t, ref::map([](double v) { return std::tanh(v); }, p.value), ref::Tol{8, 0, 40},
                   "tanh(conv2d) into a transposed view", &p.scale);

  // A convolution broadcast in its own epilogue: stored first (a run-time break).
  auto x1 = ref::uniform<float>(-1, 1, 1, 4, 6, 10);
  auto r2 = ref::uniform<float>(-1, 1, 2, 3, 6, 10);
  auto e = sd::conv2d(x1, w, {.padding = 1}) + r2;
  static_assert(sd::kernel_count<decltype(e)> == 1);
  CHECK(contains(sd::explain(e), "run-time break"));
  auto before2 = sd::detail::kernels_run();
  sd::Tensor<float, 4> y = e;
  CHECK(sd::detail::kernels_run() - before2 == 2);
  auto p1 = conv_ref(ref::of(x1), ref::of(w), {1, 1, 1, 1});
  Array const scale1 = ref::map([](double v, double) { return v + 1; }, p1.scale, ref::of(r2));
  ref::check_close(y, ref::map(add, p1.value, ref::of(r2)), ref::Tol{4, 0, 40}, "[1, ...] conv2d + [2, ...]",
                   &scale1);
}

TEST_CASE("an output that is also a convolution's or a pool's operand is written after it", "[conv][alias]") {
  auto y = ref::uniform<float>(-1, 1, 2, 4, 6, 6);
  auto w = ref::uniform<float>(-1, 1, 4, 4, 3, 3);
  auto p = conv_ref(ref::of(y), ref::of(w), {1, 1, 1, 1});
  y = sd::relu(sd::conv2d(y, w, {.padding = 1}));
  ref::check_close(y, relu(p.value), ref::Tol{2, 0, 38}, "y = relu(conv2d(y, w))", &p.scale);
  auto z = ref::uniform<float>(-1, 1, 2, 4, 6, 6);
  Array const pooled = pool_ref(ref::of(z), {3, 3, 1, 1, 1, 1}, true);
  z = sd::max_pool2d(z, 3, {.stride = 1, .padding = 1});
  ref::check_equal(z, pooled, "z = max_pool2d(z, 3, stride 1, padding 1)");
}

TEST_CASE("convolutions and pools do not depend on the run, and take empty sizes", "[conv][edges]") {
  auto x = ref::uniform<float>(-1, 1, 4, 16, 28, 28);
  auto w = ref::uniform<float>(-1, 1, 32, 16, 3, 3);
  auto dw = ref::uniform<float>(-1, 1, 16, 1, 3, 3);
  sd::Tensor<float, 4> a = sd::conv2d(x, w, {.padding = 1}), b = sd::conv2d(x, w, {.padding = 1});
  CHECK(std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<std::size_t>(a.numel())) == 0);
  sd::Tensor<float, 4> c = sd::conv2d(x, dw, {.padding = 1, .groups = 16});
  sd::Tensor<float, 4> m = sd::max_pool2d(x, 3, {.stride = 2});
  int const threads = sd::get_num_threads();
  sd::set_num_threads(1);  // the direct engines: the same values on one thread
  sd::Tensor<float, 4> c1 = sd::conv2d(x, dw, {.padding = 1, .groups = 16});
  sd::Tensor<float, 4> m1 = sd::max_pool2d(x, 3, {.stride = 2});
  sd::set_num_threads(threads);
  CHECK(std::memcmp(c.data(), c1.data(), sizeof(float) * static_cast<std::size_t>(c.numel())) == 0);
  CHECK(std::memcmp(m.data(), m1.data(), sizeof(float) * static_cast<std::size_t>(m.numel())) == 0);

  auto none =
      run_counted(sd::conv2d(ref::uniform<float>(-1, 1, 0, 3, 5, 5), ref::uniform<float>(-1, 1, 4, 3, 3, 3)));
  CHECK(none.shape() == sd::Index<4>{0, 4, 3, 3});
  auto empty_channels = run_counted(
      sd::conv2d(ref::uniform<float>(-1, 1, 1, 0, 5, 5), ref::uniform<float>(-1, 1, 4, 0, 3, 3)) + 1.f);
  ref::check_equal(empty_channels, Array({1, 4, 3, 3}, 1.0), "no input channels: sums of no terms");
  CHECK(run_counted(sd::max_pool2d(ref::uniform<float>(-1, 1, 2, 0, 4, 4), 2)).numel() == 0);
}

TEST_CASE("conv2d and the pools refuse bad shapes and options, naming the op", "[conv][errors]") {
  auto x = ref::uniform<float>(-1, 1, 1, 3, 8, 8);
  auto w = ref::uniform<float>(-1, 1, 4, 2, 3, 3);
  std::string m = ref::error_message([&] { (void)sd::conv2d(x, w); });
  CHECK(contains(m, "conv2d"));
  CHECK(contains(m, "[1, 3, 8, 8]"));
  CHECK(contains(m, "[4, 2, 3, 3]"));
  CHECK(contains(m, "channels"));
  auto w3 = ref::uniform<float>(-1, 1, 4, 3, 3, 3);
  CHECK(contains(ref::error_message([&] { (void)sd::conv2d(x, w3, {.groups = 3}); }), "groups=3"));
  CHECK(contains(ref::error_message([&] { (void)sd::conv2d(x, w3, {.stride = 0}); }), "stride must be positive"));
  CHECK(contains(ref::error_message([&] { (void)sd::conv2d(x, w3, {.dilation = {1, 0}}); }), "dilation must be positive"));
  CHECK(contains(ref::error_message([&] { (void)sd::conv2d(x, w3, {.padding = -1}); }), "padding must be non-negative"));
  CHECK(contains(ref::error_message([&] { (void)sd::conv2d(x, w3, {.stride = 2, .padding = "same"}); }), "strided"));
  CHECK(contains(ref::error_message([&] { (void)sd::conv2d(x, w3, {.padding = "full"}); }), "\"full\""));
  auto big = ref::uniform<float>(-1, 1, 4, 3, 9, 9);
  CHECK(contains(ref::error_message([&] { (void)sd::conv2d(x, big); }), "smaller than the kernel"));
  auto b5 = ref::uniform<float>(-1, 1, 5);
  std::string mb = ref::error_message([&] { (void)sd::conv2d(x, w3, b5); });
  CHECK(contains(mb, "bias"));
  CHECK(contains(mb, "[5]"));

  CHECK(contains(ref::error_message([&] { (void)sd::max_pool2d(x, 3, {.stride = 0}); }),
                 "max_pool2d: stride must be positive"));
  CHECK(contains(ref::error_message([&] { (void)sd::max_pool2d(x, 0); }), "kernel_size must be positive"));
  CHECK(contains(ref::error_message([&] { (void)sd::max_pool2d(x, 3, {.padding = 2}); }), "at most half of kernel_size"));
  CHECK(contains(ref::error_message([&] { (void)sd::avg_pool2d(x, {2, 4}, {.padding = {1, 3}}); }), "avg_pool2d: padding"));
  CHECK(contains(ref::error_message([&] { (void)sd::max_pool2d(x, 9); }), "too small"));
  CHECK(contains(ref::error_message([&] { (void)sd::avg_pool2d(x, 2, {.divisor_override = 0}); }), "divisor_override"));
  CHECK(contains(ref::error_message([&] { (void)sd::adaptive_avg_pool2d(x, {-1, 2}); }), "adaptive_avg_pool2d"));
}
