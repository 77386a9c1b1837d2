// Convolution and pooling with torch.nn.functional's rules, on [N, C, H, W] tensors (or one
// image, [C, H, W]): conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d. Each is a kernel
// anchor (rule 3: NodeKind::contract, with an id): the element-wise expression over it runs on
// each block of its output before the block is stored, so
// `relu(conv2d(x, w) * scale + shift + residual)` and `relu(max_pool2d(x, 3))` are one kernel
// each. conv2d's bias is such an epilogue: conv2d(x, w, b) is conv2d(x, w) + b viewed as
// [C, 1, 1]. Operands are read from memory: one that is an expression is materialized first.
// The host engines are backend/host/conv.hpp; on sd::Cuda tensors conv2d runs in cuDNN
// (backend/cuda/conv.hpp) and the pools in a kernel of solder's (backend/cuda/pool.hpp).
//
// Sizes are an int or an {h, w} pair (Pair2), as in PyTorch: {.stride = 2}, {.padding = {1, 2}}.
// conv2d's output is [N, C_out, OH, OW], OH = (H + 2 * pad - dilation * (kH - 1) - 1) / stride
// + 1; the pools' rounds up with ceil_mode, the last window starting inside the input or its
// left padding (PyTorch's pooling_output_shape).
#pragma once
#include <optional>
#include <string>

#include "contract.hpp"

namespace solder {

// An int or an {h, w} pair: torch.nn.functional's size arguments (3, or {3, 5}).
struct Pair2 {
  std::int64_t h, w;
  constexpr Pair2(std::int64_t v) : h(v), w(v) {}
  constexpr Pair2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
};

// conv2d's padding: a size, or PyTorch's "valid" (none) or "same" (the output has the input's
// size, stride 1 only; an odd total puts the extra row or column at the end, as PyTorch).
// (A string array, not a pointer: `.padding = 0` must mean a size.)
struct ConvPadding {
  Pair2 size = 0;
  char const* mode = nullptr;
  constexpr ConvPadding(std::int64_t v) : size(v) {}
  constexpr ConvPadding(std::int64_t h, std::int64_t w) : size(h, w) {}
  template <std::size_t N>
  constexpr ConvPadding(char const (&s)[N]) : mode(s) {}
};

// A pool's stride: a size, or left out for the kernel size (PyTorch's stride=None). (Not a
// std::optional<Pair2>: `.stride = {2, 1}` could not initialize one.)
struct PoolStride {
  std::optional<Pair2> size;
  constexpr PoolStride() = default;
  constexpr PoolStride(std::int64_t v) : size(Pair2(v)) {}
  constexpr PoolStride(std::int64_t h, std::int64_t w) : size(Pair2(h, w)) {}
};

struct Conv2dOptions {
  Pair2 stride = 1;
  ConvPadding padding = 0;
  Pair2 dilation = 1;
  std::int64_t groups = 1;
};

struct MaxPool2dOptions {
  PoolStride stride = {};
  Pair2 padding = 0;  // implicit -inf, at most half the kernel
  Pair2 dilation = 1;
  bool ceil_mode = false;
};

struct AvgPool2dOptions {
  PoolStride stride = {};
  Pair2 padding = 0;  // implicit zeros, at most half the kernel
  bool ceil_mode = false;
  bool count_include_pad = true;  // the padding's zeros count in the divisor
  std::optional<std::int64_t> divisor_override = std::nullopt;
};

namespace detail {

// A window over H and W: its size, stride, padding before the first row and column (the output
// size says how far past the end it goes) and dilation.
struct Window2d {
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

// The number of windows along an axis of `in`, padded by `before` and `after` (PyTorch's
// pooling_output_shape_pad_lr): with ceil_mode a last partial window counts when it starts
// inside the input or its left padding.
inline std::int64_t window_count(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d,
                                 std::int64_t before, std::int64_t after, bool ceil_mode) {
  std::int64_t out = floor_div(in + before + after - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (out - 1) * s >= in + before) --out;
  return out;
}

template <int R>
Index<R> window_shape(Index<R> in, std::int64_t c, std::int64_t oh, std::int64_t ow) {
  in[R - 3] = c;
  in[R - 2] = oh;
  in[R - 1] = ow;
  return in;
}

inline std::string pair_text(std::int64_t h, std::int64_t w) {
  return "[" + std::to_string(h) + ", " + std::to_string(w) + "]";
}

// Static channels: x's must be the weight's in_channels times groups (a run-time number), so a
// multiple of them.
template <auto EX, auto EW>
constexpr bool conv2d_channels_ok() {
  constexpr std::int64_t c = EX.e[rank_of<EX> - 3], k = EW.e[1];
  return c == dyn || k == dyn || (k > 0 && c % k == 0) || (k == 0 && c == 0);
}
template <auto EX, auto EW>
constexpr bool check_conv2d_extents() {
  static_assert(conv2d_channels_ok<EX, EW>(),
                "solder: conv2d: the input's channels (dim -3) must be the weight's in_channels (dim 1) "
                "times groups: the static shapes disagree");
  return true;
}
template <auto EX, auto EW>
constexpr auto conv2d_extents() {
  constexpr int R = rank_of<EX>;
  auto e = dynamic_extents<R>();
  if constexpr (R == 4) e.e[0] = EX.e[0];
  e.e[R - 3] = EW.e[0];
  return e;
}
template <auto EX>
constexpr auto pool2d_extents() {
  constexpr int R = rank_of<EX>;
  auto e = dynamic_extents<R>();
  for (int i = 0; i < R - 2; ++i) e.e[i] = EX.e[i];
  return e;
}

// float and double; the 16-bit floats too on sd::Cuda tensors (computed in float there).
template <class X, class Device>
constexpr bool image_value_ok() {
  using T = typename X::value_type;
  return std::is_same_v<T, float> || std::is_same_v<T, double> || (is_half_v<T> && std::is_same_v<Device, Cuda>);
}

}  // namespace detail

// conv2d's node: children x and the weight; the bias is its epilogue (conv2d below).
template <class X, class W>
struct Conv2d : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::contract;
  using child_types = types<X, W>;
  using value_type = typename X::value_type;
  using device_type = typename detail::device_join<typename X::device_type, typename W::device_type>::type;
  static constexpr int rank = X::rank;
  static constexpr bool prologue = false;  // the engine reads its operands from memory
  static_assert(X::rank == 3 || X::rank == 4, "solder: conv2d: the input must be [N, C, H, W] or [C, H, W]");
  static_assert(W::rank == 4,
                "solder: conv2d: the weight must be [out_channels, in_channels / groups, kH, kW]");
  static_assert(std::is_same_v<typename X::value_type, typename W::value_type>,
                "solder: conv2d: the input's and the weight's element types differ (PyTorch refuses it "
                "too): cast one with sd::cast<T>");
  static_assert(detail::image_value_ok<X, device_type>(),
                "solder: conv2d: float and double tensors only (sd::half and sd::bfloat16 on sd::Cuda tensors)");
  static_assert(detail::devices_agree<typename X::device_type, typename W::device_type>(),
                "solder: conv2d: operands live on different devices (sd::Host and sd::Cuda)");
  static_assert(detail::check_conv2d_extents<X::static_extents, W::static_extents>());
  static constexpr auto static_extents = detail::conv2d_extents<X::static_extents, W::static_extents>();

  X x;
  W w;
  detail::Window2d win;
  std::int64_t groups;
  std::uint64_t id = detail::next_node_id();
  Index<rank> shape_;
  std::shared_ptr<detail::PackCache> w_pack;  // w packed once for the engine (a module's weight), or null
  // Its output computed already, by a kernel that also took its channel sums (BatchNorm2d's
  // training forward): a kernel with this anchor reads it instead of computing it again. Holds
  // a materialized_t<Conv2d> (backend/eval.hpp), or null.
  std::shared_ptr<void const> output;

  // (Built by conv2d, which checks the shapes and computes the output's.)
  Conv2d(X x_, W w_, detail::Window2d const& window, std::int64_t g, Index<rank> const& shape)
      : x(std::move(x_)), w(std::move(w_)), win(window), groups(g), shape_(shape) {}
  Index<rank> const& shape() const { return shape_; }
  static std::string name() { return "conv2d"; }
  // Its arguments other than PyTorch's defaults, for explain().
  std::string options() const {
    std::string s;
    auto add = [&](char const* what, std::int64_t h, std::int64_t w_, std::int64_t dflt) {
      if (h != dflt || w_ != dflt)
        s += std::string(s.empty() ? "" : ", ") + what + "=" + detail::pair_text(h, w_);
    };
    add("stride", win.sh, win.sw, 1);
    add("padding", win.ph, win.pw, 0);
    add("dilation", win.dh, win.dw, 1);
    if (groups != 1) s += std::string(s.empty() ? "" : ", ") + "groups=" + std::to_string(groups);
    return s;
  }
  auto item() const { return eval(*this).item(); }
  template <std::size_t I>
    requires(I < 2)
  auto const& child() const {
    if constexpr (I == 0) return x;
    else return w;
  }
  template <std::size_t I>
    requires(I < 2)
  auto& child() {
    if constexpr (I == 0) return x;
    else return w;
  }
  template <class KX, class KW>
  auto rebuild(KX const& kx, KW const& kw) const {
    Conv2d<node_t<KX>, node_t<KW>> c(as_node(kx), as_node(kw), win, groups, shape_);
    c.id = id;
    c.w_pack = w_pack;
    c.output = output;
    return c;
  }
};

enum class PoolKind { max, avg, adaptive_avg };

namespace detail {
// A pool's arguments beyond its window (adaptive pools have none: the shapes say it all).
struct PoolParams {
  Window2d win;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::int64_t divisor = 0;  // avg_pool2d's divisor_override; 0: none
};
template <PoolKind K>
constexpr char const* pool_name() {
  return K == PoolKind::max ? "max_pool2d" : K == PoolKind::avg ? "avg_pool2d" : "adaptive_avg_pool2d";
}
}  // namespace detail

template <PoolKind K, class X>
struct Pool2d : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::contract;
  using child_types = types<X>;
  using value_type = typename X::value_type;
  using device_type = typename X::device_type;
  static constexpr int rank = X::rank;
  static constexpr bool prologue = false;  // the engine reads its operand from memory
  static_assert(X::rank == 3 || X::rank == 4, "solder: the 2-d pools take [N, C, H, W] or [C, H, W]");
  static_assert(detail::image_value_ok<X, device_type>(),
                "solder: the 2-d pools take float and double tensors only (sd::half and sd::bfloat16 on "
                "sd::Cuda tensors)");
  static constexpr auto static_extents = detail::pool2d_extents<X::static_extents>();

  X x;
  detail::PoolParams params;
  std::uint64_t id = detail::next_node_id();
  Index<rank> shape_;

  // (Built by the pool functions, which check the shapes and compute the output's.)
  Pool2d(X x_, detail::PoolParams const& p, Index<rank> const& shape)
      : x(std::move(x_)), params(p), shape_(shape) {}
  Index<rank> const& shape() const { return shape_; }
  static std::string name() { return detail::pool_name<K>(); }
  // Its arguments, for explain().
  std::string options() const {
    using detail::pair_text;
    if constexpr (K == PoolKind::adaptive_avg) {
      return "output_size=" + pair_text(shape_[rank - 2], shape_[rank - 1]);
    } else {
      auto const& w = params.win;
      std::string s = "kernel_size=" + pair_text(w.kh, w.kw) + ", stride=" + pair_text(w.sh, w.sw);
      if (w.ph || w.pw) s += ", padding=" + pair_text(w.ph, w.pw);
      if (w.dh != 1 || w.dw != 1) s += ", dilation=" + pair_text(w.dh, w.dw);
      if (params.ceil_mode) s += ", ceil_mode";
      if (K == PoolKind::avg && !params.count_include_pad) s += ", count_include_pad=false";
      if (params.divisor) s += ", divisor_override=" + std::to_string(params.divisor);
      return s;
    }
  }
  auto item() const { return eval(*this).item(); }
  template <std::size_t I>
    requires(I == 0)
  auto const& child() const {
    return x;
  }
  template <std::size_t I>
    requires(I == 0)
  auto& child() {
    return x;
  }
  template <class KX>
  auto rebuild(KX const& kx) const {
    Pool2d<K, node_t<KX>> p(as_node(kx), params, shape_);
    p.id = id;
    return p;
  }
};

namespace detail {

template <std::size_t R, std::size_t RW>
Index<static_cast<int>(R)> conv2d_shape(std::array<std::int64_t, R> const& xs,
                                        std::array<std::int64_t, RW> const& ws, Conv2dOptions const& o,
                                        Window2d& win) {
  constexpr int D = static_cast<int>(R);
  auto const xt = shape_string<D>(xs);
  auto const wt = shape_string<4>(ws);
  std::int64_t const c = xs[D - 3], h = xs[D - 2], w = xs[D - 1], g = o.groups;
  check(g > 0, "conv2d: groups must be positive, got ", g);
  check(ws[0] % g == 0, "conv2d: weight ", wt, " with groups=", g, ": expected out_channels (weight dim 0) to be "
        "divisible by ", g, ", got ", ws[0]);
  check(c == ws[1] * g, "conv2d: input ", xt, " and weight ", wt, " with groups=", g, ": expected the input to have ",
        ws[1] * g, " channels (weight dim 1 times groups), got ", c);
  check(o.stride.h > 0 && o.stride.w > 0, "conv2d: stride must be positive, got ",
        pair_text(o.stride.h, o.stride.w));
  check(o.dilation.h > 0 && o.dilation.w > 0, "conv2d: dilation must be positive, got ",
        pair_text(o.dilation.h, o.dilation.w));
  win = {ws[2], ws[3], o.stride.h, o.stride.w, o.padding.size.h, o.padding.size.w, o.dilation.h, o.dilation.w};
  std::int64_t after_h = win.ph, after_w = win.pw;
  if (auto const* m = o.padding.mode) {
    std::string const mode = m;
    check(mode == "same" || mode == "valid", "conv2d: padding must be a size, \"same\" or \"valid\", got \"",
          mode, "\"");
    if (mode == "same") {
      check(win.sh == 1 && win.sw == 1, "conv2d: padding=\"same\" is not supported for strided convolutions");
      std::int64_t const th = win.dh * (win.kh - 1), tw = win.dw * (win.kw - 1);
      win.ph = th / 2, win.pw = tw / 2, after_h = th - win.ph, after_w = tw - win.pw;
    } else {
      win.ph = win.pw = after_h = after_w = 0;
    }
  }
  check(win.ph >= 0 && win.pw >= 0, "conv2d: padding must be non-negative, got ", pair_text(win.ph, win.pw));
  std::int64_t const eh = win.dh * (win.kh - 1) + 1, ew = win.dw * (win.kw - 1) + 1;
  check(h + win.ph + after_h >= eh && w + win.pw + after_w >= ew, "conv2d: input ", xt, " padded to ",
        pair_text(h + win.ph + after_h, w + win.pw + after_w), " is smaller than the kernel ",
        pair_text(eh, ew), " (weight ", wt, ", dilation ", pair_text(win.dh, win.dw), ")");
  return window_shape<D>(xs, ws[0], window_count(h, win.kh, win.sh, win.dh, win.ph, after_h, false),
                         window_count(w, win.kw, win.sw, win.dw, win.pw, after_w, false));
}

// A pool's window from its arguments, checked as PyTorch does.
inline Window2d pool_window(char const* op, Pair2 k, PoolStride const& stride, Pair2 pad, Pair2 dil) {
  Pair2 const s = stride.size.value_or(k);
  check(k.h > 0 && k.w > 0, op, ": kernel_size must be positive, got ", pair_text(k.h, k.w));
  check(s.h > 0 && s.w > 0, op, ": stride must be positive, got ", pair_text(s.h, s.w));
  check(dil.h > 0 && dil.w > 0, op, ": dilation must be positive, got ", pair_text(dil.h, dil.w));
  check(pad.h >= 0 && pad.w >= 0 && pad.h <= k.h / 2 && pad.w <= k.w / 2, op, ": padding ",
        pair_text(pad.h, pad.w), " must be non-negative and at most half of kernel_size ", pair_text(k.h, k.w));
  return {k.h, k.w, s.h, s.w, pad.h, pad.w, dil.h, dil.w};
}

template <std::size_t R>
Index<static_cast<int>(R)> pool2d_shape(char const* op, std::array<std::int64_t, R> const& xs,
                                        PoolParams const& p) {
  constexpr int D = static_cast<int>(R);
  auto const& w = p.win;
  std::int64_t const oh = window_count(xs[D - 2], w.kh, w.sh, w.dh, w.ph, w.ph, p.ceil_mode),
                     ow = window_count(xs[D - 1], w.kw, w.sw, w.dw, w.pw, w.pw, p.ceil_mode);
  check(oh >= 1 && ow >= 1, op, ": input ", shape_string<D>(xs), " gives an output of ", pair_text(oh, ow),
        ", too small (kernel_size ", pair_text(w.kh, w.kw), ", stride ", pair_text(w.sh, w.sw), ", padding ",
        pair_text(w.ph, w.pw), ", dilation ", pair_text(w.dh, w.dw), ")");
  return window_shape<D>(xs, xs[D - 3], oh, ow);
}

template <PoolKind K, class X>
auto pool2d(X const& x, PoolParams const& p, Index<node_t<X>::rank> const& shape) {
  return Pool2d<K, node_t<X>>(as_node(x), p, shape);
}

}  // namespace detail

// torch.nn.functional.conv2d(x, w, stride=, padding=, dilation=, groups=): x [N, C_in, H, W]
// (or [C_in, H, W]), w [C_out, C_in / groups, kH, kW].
template <Lazy X, Lazy W>
auto conv2d(X const& x, W const& w, Conv2dOptions const& o = {}) {
  using N = Conv2d<node_t<X>, node_t<W>>;
  detail::Window2d win;
  auto const shape = detail::conv2d_shape(x.shape(), w.shape(), o, win);
  return N(as_node(x), as_node(w), win, o.groups, shape);
}
// ... plus a bias [C_out]: an element-wise add, the convolution's epilogue.
template <Lazy X, Lazy W, Lazy B>
auto conv2d(X const& x, W const& w, B const& bias, Conv2dOptions const& o = {}) {
  static_assert(node_t<B>::rank == 1, "solder: conv2d: the bias must be [out_channels]");
  constexpr std::int64_t nb = node_t<B>::static_extents.e[0], nw = node_t<W>::static_extents.e[0];
  static_assert(nb == dyn || nw == dyn || nb == nw,
                "solder: conv2d: the bias must have out_channels (the weight's dim 0) elements");
  detail::check(bias.shape()[0] == w.shape()[0], "conv2d: bias of shape ", shape_string<1>(bias.shape()),
                " for a weight of shape ", shape_string<4>(w.shape()));
  return conv2d(x, w, o) + unsqueeze(unsqueeze(bias, -1), -1);
}

// torch.nn.functional.max_pool2d(x, kernel_size, stride=kernel_size, padding=, dilation=,
// ceil_mode=): the padding is -inf; NaN propagates.
template <Lazy X>
auto max_pool2d(X const& x, Pair2 kernel_size, MaxPool2dOptions const& o = {}) {
  detail::PoolParams p;
  p.win = detail::pool_window("max_pool2d", kernel_size, o.stride, o.padding, o.dilation);
  p.ceil_mode = o.ceil_mode;
  auto const shape = detail::pool2d_shape("max_pool2d", x.shape(), p);
  return detail::pool2d<PoolKind::max>(x, p, shape);
}

// torch.nn.functional.avg_pool2d(x, kernel_size, stride=kernel_size, padding=, ceil_mode=,
// count_include_pad=, divisor_override=).
template <Lazy X>
auto avg_pool2d(X const& x, Pair2 kernel_size, AvgPool2dOptions const& o = {}) {
  detail::PoolParams p;
  p.win = detail::pool_window("avg_pool2d", kernel_size, o.stride, o.padding, 1);
  p.ceil_mode = o.ceil_mode;
  p.count_include_pad = o.count_include_pad;
  if (o.divisor_override) {
    detail::check(*o.divisor_override != 0, "avg_pool2d: divisor_override must not be zero");
    p.divisor = *o.divisor_override;
  }
  auto const shape = detail::pool2d_shape("avg_pool2d", x.shape(), p);
  return detail::pool2d<PoolKind::avg>(x, p, shape);
}

// torch.nn.functional.adaptive_avg_pool2d(x, output_size): output row i averages input rows
// floor(i * H / OH) to ceil((i + 1) * H / OH), and likewise for columns.
template <Lazy X>
auto adaptive_avg_pool2d(X const& x, Pair2 output_size) {
  constexpr int D = node_t<X>::rank;
  auto const& xs = x.shape();
  detail::check(output_size.h >= 0 && output_size.w >= 0,
                "adaptive_avg_pool2d: output_size must be non-negative, got ",
                detail::pair_text(output_size.h, output_size.w));
  detail::check(xs[D - 2] > 0 && xs[D - 1] > 0, "adaptive_avg_pool2d: input ", shape_string<D>(xs),
                ": H and W must not be empty");
  auto const shape = detail::window_shape<D>(xs, xs[D - 3], output_size.h, output_size.w);
  return detail::pool2d<PoolKind::adaptive_avg>(x, detail::PoolParams{}, shape);
}

}  // namespace solder
