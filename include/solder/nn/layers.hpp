// The built-in modules of torch.nn: PyTorch's constructor arguments (positional sizes, an
// options struct for the rest), its parameter and buffer names and its initialisation
// (reset_parameters), in eval mode from construction. Each forward returns an expression, so
// what follows a module fuses with it: relu(fc(x)) is one kernel.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "../backend/results.hpp"
#include "../core/factories.hpp"
#include "../expr/contract.hpp"
#include "../expr/conv.hpp"
#include "../expr/embedding.hpp"
#include "../expr/functions.hpp"
#include "../expr/rows.hpp"
#include "../expr/view.hpp"
#include "derived.hpp"
#include "module.hpp"

namespace solder::nn {

// Parameters are float host tensors with run-time extents.
template <int R>
using Param = BasicTensor<float, dynamic_extents<R>(), Host>;

namespace detail {

// U(-bound, bound): kaiming_uniform_(a=sqrt(5)) of a weight with this fan_in gives
// bound = 1/sqrt(fan_in), as does PyTorch's bias initialisation.
template <std::size_t N>
Param<int(N)> uniform(std::int64_t const (&shape)[N], std::int64_t fan_in) {
  float const bound = fan_in > 0 ? static_cast<float>(1 / std::sqrt(static_cast<double>(fan_in))) : 0.f;
  return rand<float>(shape, -bound, bound);
}

// An optional bias as PyTorch's bias=False: not state, and zeros in the maths, so a module's
// forward has one type either way (adding 0 is exact).
struct Bias {
  Param<1> value;
  bool present = true;
};

template <class X>
std::string shape_text(X const& x) {
  return shape_string<node_t<X>::rank>(x.shape());
}

// x w^T + b on device D for a module's weight w [out, in]: w packed for the host's GEMM engine
// on its first product and kept in `derived` (not in training), as Linear and the attention
// projections all run it.
template <class D, class X>
auto module_linear(X const& x, Derived const& derived, Param<2> const& w, Param<1> const& b, bool training) {
  auto product = solder::detail::contract(x, transpose(derived.on<D>(w, training), 0, 1), "linear");
  product.b_pack = derived.pack(training);
  return product + derived.on<D>(b, training);
}

}  // namespace detail

// Calls forward: `fc1(x)` is `fc1.forward(x)`. A user's module is callable too where it derives
// from it: `struct Block : sd::nn::Callable<Block> { ... };` (a member operator() is the only
// way C++ calls an object, and SOLDER_MODULE, after the struct, cannot add one).
template <class Derived>
struct Callable {
  template <class... X>
  auto operator()(X const&... x) const {
    return static_cast<Derived const&>(*this).forward(x...);
  }
};

// Element-wise modules never start a kernel: inside a Sequential they extend the expression of
// the module before them instead of receiving a materialized tensor.
template <class M>
concept ElementWise = requires { requires M::element_wise; };

struct LinearOptions {
  bool bias = true;
};

// nn.Linear(in_features, out_features): y = x W^T + b, W [out, in].
struct Linear : Callable<Linear> {
  std::int64_t in_features, out_features;
  Param<2> weight;
  detail::Bias bias;
  bool training = false;
  detail::Derived derived;  // the packed weight, device copies (nn/derived.hpp)

  Linear(std::int64_t in, std::int64_t out, LinearOptions o = {})
      : in_features(in), out_features(out), weight(detail::uniform({out, in}, in)),
        bias{o.bias ? detail::uniform({out}, in) : zeros<float>(out), o.bias} {}

  template <Lazy X>
  auto forward(X const& x) const {
    constexpr int R = node_t<X>::rank;
    static_assert(R >= 1, "solder: nn::Linear: the input needs a last dim of in_features");
    solder::detail::check(x.shape()[R - 1] == in_features, "nn::Linear(in_features=", in_features,
                          ", out_features=", out_features, "): input of shape ", detail::shape_text(x),
                          " does not end in ", in_features, " features (weight of shape ",
                          shape_string<2>(weight.shape()), ")");
    return detail::module_linear<device_of<X>>(x, derived, weight, bias.value, training);  // (linear(x, weight, bias))
  }
  void prepare() { derived.clear(); }
  template <class V>
  void visit(V& v) {
    v.parameter("weight", weight);
    if (bias.present) v.parameter("bias", bias.value);
  }
};

struct Conv2dOptions {
  Pair2 stride = 1;
  ConvPadding padding = 0;
  Pair2 dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};

// nn.Conv2d(in_channels, out_channels, kernel_size, {.stride, .padding, .dilation, .groups,
// .bias}): weight [out, in / groups, kH, kW].
struct Conv2d : Callable<Conv2d> {
  std::int64_t in_channels, out_channels;
  Pair2 kernel_size;
  solder::Conv2dOptions options;
  Param<4> weight;
  detail::Bias bias;
  bool training = false;
  detail::Derived derived;  // the packed weight, device copies (nn/derived.hpp)

  // Options by reference (also MaxPool2d's, AvgPool2d's): GCC 12.2 at -O2 tuned for AVX-512 Intel cores
  // (-march=native on this host) builds a by-value argument {1, 1, 0, 0} as a broadcast of 1.
  Conv2d(std::int64_t in, std::int64_t out, Pair2 kernel, Conv2dOptions const& o = {})
      : in_channels(in), out_channels(out), kernel_size(kernel), options{o.stride, o.padding, o.dilation, o.groups},
        weight(make_weight(in, out, kernel, o.groups)),
        bias{o.bias ? detail::uniform({out}, fan_in(in, kernel, o.groups)) : zeros<float>(out), o.bias} {}

  template <Lazy X>
  auto forward(X const& x) const {
    constexpr int R = node_t<X>::rank;
    static_assert(R == 3 || R == 4, "solder: nn::Conv2d: the input must be [N, C, H, W] or [C, H, W]");
    solder::detail::check(x.shape()[R - 3] == in_channels, "nn::Conv2d(", in_channels, ", ", out_channels,
                          "): input of shape ", detail::shape_text(x), " has ", x.shape()[R - 3],
                          " channels, expected ", in_channels, " (weight of shape ",
                          shape_string<4>(weight.shape()), ")");
    using D = device_of<X>;
    auto conv = conv2d(x, derived.on<D>(weight, training), options);
    conv.w_pack = derived.pack(training);
    return conv + unsqueeze(unsqueeze(derived.on<D>(bias.value, training), -1), -1);  // (conv2d(x, weight, bias))
  }
  void prepare() { derived.clear(); }
  template <class V>
  void visit(V& v) {
    v.parameter("weight", weight);
    if (bias.present) v.parameter("bias", bias.value);
  }

 private:
  static std::int64_t fan_in(std::int64_t in, Pair2 k, std::int64_t groups) {
    solder::detail::check(groups > 0 && in % groups == 0, "nn::Conv2d: in_channels ", in,
                          " is not divisible by groups ", groups);
    return in / groups * k.h * k.w;
  }
  static Param<4> make_weight(std::int64_t in, std::int64_t out, Pair2 k, std::int64_t groups) {
    solder::detail::check(out % groups == 0, "nn::Conv2d: out_channels ", out, " is not divisible by groups ", groups);
    return detail::uniform({out, in / groups, k.h, k.w}, fan_in(in, k, groups));
  }
};

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
};

// nn.BatchNorm2d(num_features): in eval mode y = x * scale + shift per channel, the scale and
// shift folded from the running statistics and the affine weights once, by prepare() (after
// construction, load_state_dict, eval and train), never per call — and being element-wise
// the fold runs in the epilogue of the convolution before it. In training mode, after a
// convolution (x = conv2d(...) or an element-wise expression over one, its bias), one kernel
// stores the convolution's output and folds the batch's per-channel sums and sums of squares
// in its epilogue (sd::assign with sd::sum, backend/results.hpp); the returned expression
// reads that output (Conv2d::output), so conv + bn + relu is 2 kernels and the convolution is
// computed once. After anything else, the input is stored once and its mean and variance come
// from one assignment of two results. The running statistics are updated as PyTorch does
// (momentum, unbiased variance, num_batches_tracked), and the same scale-and-shift form applies
// the batch's. The forward is const and safe from several threads: the batch's output, scale
// and shift are the call's own, and the running statistics are updated under a lock
// (update_running).
struct BatchNorm2d : Callable<BatchNorm2d> {
  static constexpr bool element_wise = true;
  std::int64_t num_features;
  BatchNormOptions options;
  bool training = false;
  Param<1> weight, bias, running_mean, running_var;
  BasicTensor<std::int64_t, Extents<0>{}, Host> num_batches_tracked;
  Param<3> scale, shift;  // [C, 1, 1]: derived, not state
  detail::Derived derived;  // device copies of scale and shift (nn/derived.hpp)

  BatchNorm2d(std::int64_t n, BatchNormOptions o = {})
      : num_features(n), options(o), weight(ones<float>(n)), bias(zeros<float>(n)), running_mean(zeros<float>(n)),
        running_var(ones<float>(n)) {
    num_batches_tracked.data()[0] = 0;
    prepare();
  }

  void prepare() {
    // Storage of this module's own: a copy of the module (nn::clone, or a plain one) refolds
    // without writing into the scale and shift of the module it was copied from.
    scale = Param<3>(num_features, 1, 1);
    shift = Param<3>(num_features, 1, 1);
    fold(running_mean, running_var, scale, shift);
    derived.clear();
  }

  template <Lazy X>
  auto forward(X const& x) const {
    constexpr int R = node_t<X>::rank;
    using D = device_of<X>;
    static_assert(R == 4, "solder: nn::BatchNorm2d: the input must be [N, C, H, W]");
    solder::detail::check(x.shape()[1] == num_features, "nn::BatchNorm2d(", num_features, "): input of shape ",
                          detail::shape_text(x), " has ", x.shape()[1], " channels");
    if (training) {
      solder::detail::check(std::is_same_v<D, Host>, "nn::BatchNorm2d(", num_features,
                            "): training mode on sd::Cuda tensors is not supported yet");
      if constexpr (std::is_same_v<D, Host> && solder::detail::conv_anchored<node_t<X>>()) {
        auto const [known, s, t] = conv_scale_shift(as_node(x));
        return known * s + t;
      } else if constexpr (std::is_same_v<D, Host>) {
        auto const [s, t] = batch_scale_shift(x);
        return x * s + t;
      }
    }
    return x * derived.on<D>(scale, training) + derived.on<D>(shift, training);
  }
  template <class V>
  void visit(V& v) {
    v.parameter("weight", weight);
    v.parameter("bias", bias);
    v.buffer("running_mean", running_mean);
    v.buffer("running_var", running_var);
    v.buffer("num_batches_tracked", num_batches_tracked);
  }

 private:
  template <class Mean, class Var>
  void fold(Mean const& mean, Var const& var, Param<3> const& into_scale, Param<3> const& into_shift) const {
    float *s = into_scale.data(), *t = into_shift.data();
    for (std::int64_t c = 0; c < num_features; ++c) {
      double const k = weight.data()[c] / std::sqrt(static_cast<double>(var.data()[c]) + options.eps);
      s[c] = static_cast<float>(k);
      t[c] = static_cast<float>(bias.data()[c] - mean.data()[c] * k);
    }
  }
  // The running statistics updated with a batch's mean and biased variance over n values per
  // channel, and the batch's scale and shift.
  template <class Mean, class Var>
  std::pair<Param<3>, Param<3>> update_running(Mean const& mean, Var const& var, double n) const {
    double const m = options.momentum;
    {
      static std::mutex running_update;  // (a few values per channel: one lock for every module)
      std::lock_guard lock(running_update);
      for (std::int64_t c = 0; c < num_features; ++c) {
        running_mean.data()[c] = static_cast<float>((1 - m) * running_mean.data()[c] + m * mean.data()[c]);
        double const unbiased = n > 1 ? var.data()[c] * n / (n - 1) : var.data()[c];
        running_var.data()[c] = static_cast<float>((1 - m) * running_var.data()[c] + m * unbiased);
      }
      ++num_batches_tracked.data()[0];
    }
    std::pair<Param<3>, Param<3>> scale_shift{Param<3>(num_features, 1, 1), Param<3>(num_features, 1, 1)};
    fold(mean, var, scale_shift.first, scale_shift.second);
    return scale_shift;
  }
  // This batch's scale and shift, and the running statistics updated with its statistics.
  template <class X>
  std::pair<Param<3>, Param<3>> batch_scale_shift(X const& x) const {
    // The input stored once: the variance reads it twice and the mean once, and a break below
    // a reduction would be computed apart from the one a row op shares.
    auto const input = [&] {
      if constexpr (TensorType<X>) return x;
      else return Param<4>(x);
    }();
    auto const [mean, var] = solder::eval(solder::mean(input, {0, 2, 3}), solder::var(input, {0, 2, 3}, 0));
    return update_running(mean, var, static_cast<double>(x.shape()[0] * x.shape()[2] * x.shape()[3]));
  }
  // After a convolution: x with its convolution's output computed, by the kernel that also sums
  // each channel of x and of x * x (in double), and this batch's scale and shift. The variance
  // is E[x^2] - E[x]^2 of those double sums: its rounding, about 1e-16 * E[x^2], is far below
  // float's unless |mean| / std exceeds about 10^4.
  template <class N>
  std::tuple<N, Param<3>, Param<3>> conv_scale_shift(N const& x) const {
    std::int64_t const C = num_features;
    BasicTensor<double, dynamic_extents<1>(), Host> mean(C), var(C);  // (the sums of x and x * x first)
    N known = x;
    solder::detail::with_anchor<4>(x, [&](auto const& conv) {
      using Out = solder::detail::materialized_t<std::remove_cvref_t<decltype(conv)>>;
      auto const y = std::make_shared<Out>(solder::detail::make_like<Out>(conv));
      solder::assign(std::tie(*y, mean, var), conv, solder::sum(x, {0, 2, 3}), solder::sum(x * x, {0, 2, 3}));
      known = solder::detail::map_anchor<4>(x, [&](auto const& a) {
        auto b = a;
        b.output = y;
        return b;
      });
    });
    double const n = static_cast<double>(x.shape()[0] * x.shape()[2] * x.shape()[3]);
    for (std::int64_t c = 0; c < C; ++c) {
      double const mu = mean.data()[c] / n;
      mean.data()[c] = mu;
      var.data()[c] = std::max(0.0, var.data()[c] / n - mu * mu);
    }
    auto [s, t] = update_running(mean, var, n);
    return {std::move(known), std::move(s), std::move(t)};
  }
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
};

// nn.LayerNorm(normalized_shape) over the last dim: weight and bias [normalized_shape].
struct LayerNorm : Callable<LayerNorm> {
  std::int64_t normalized_shape;
  LayerNormOptions options;
  Param<1> weight, bias;
  bool training = false;
  detail::Derived derived;  // device copies (nn/derived.hpp)

  LayerNorm(std::int64_t n, LayerNormOptions o = {})
      : normalized_shape(n), options(o), weight(ones<float>(n)), bias(zeros<float>(n)) {}

  template <Lazy X>
  auto forward(X const& x) const {
    using D = device_of<X>;
    return layer_norm(x, derived.on<D>(weight, training), derived.on<D>(bias, training), options.eps);
  }
  void prepare() { derived.clear(); }
  template <class V>
  void visit(V& v) {
    if (options.elementwise_affine) v.parameter("weight", weight);
    if (options.elementwise_affine && options.bias) v.parameter("bias", bias);
  }
};

struct RMSNormOptions {
  std::optional<double> eps = std::nullopt;  // none: the dtype's epsilon, as PyTorch
  bool elementwise_affine = true;
};

// nn.RMSNorm(normalized_shape) over the last dim.
struct RMSNorm : Callable<RMSNorm> {
  std::int64_t normalized_shape;
  RMSNormOptions options;
  Param<1> weight;
  bool training = false;
  detail::Derived derived;  // device copies (nn/derived.hpp)

  RMSNorm(std::int64_t n, RMSNormOptions o = {}) : normalized_shape(n), options(o), weight(ones<float>(n)) {}

  template <Lazy X>
  auto forward(X const& x) const {
    using T = typename node_t<X>::value_type;
    return rms_norm(x, derived.on<device_of<X>>(weight, training), options.eps.value_or(std::numeric_limits<T>::epsilon()));
  }
  void prepare() { derived.clear(); }
  template <class V>
  void visit(V& v) {
    if (options.elementwise_affine) v.parameter("weight", weight);
  }
};

struct EmbeddingOptions {
  std::optional<std::int64_t> padding_idx = std::nullopt;  // that row starts at zero
};

// nn.Embedding(num_embeddings, embedding_dim): weight ~ N(0, 1).
struct Embedding : Callable<Embedding> {
  std::int64_t num_embeddings, embedding_dim;
  EmbeddingOptions options;
  Param<2> weight;
  bool training = false;
  detail::Derived derived;  // device copies (nn/derived.hpp)

  Embedding(std::int64_t num, std::int64_t dim, EmbeddingOptions o = {})
      : num_embeddings(num), embedding_dim(dim), options(o), weight(randn<float>({num, dim})) {
    if (o.padding_idx) {
      std::int64_t p = *o.padding_idx < 0 ? *o.padding_idx + num : *o.padding_idx;
      solder::detail::check(p >= 0 && p < num, "nn::Embedding: padding_idx ", *o.padding_idx, " out of range for ",
                            num, " embeddings");
      std::fill_n(weight.data() + p * dim, dim, 0.f);
    }
  }
  template <Lazy I>
  auto forward(I const& indices) const {
    return embedding(indices, derived.on<device_of<I>>(weight, training));
  }
  void prepare() { derived.clear(); }
  template <class V>
  void visit(V& v) {
    v.parameter("weight", weight);
  }
};

// Modules without state: element-wise maps and views.
#define SOLDER_STATELESS(Name, expression)      \
  struct Name : Callable<Name> {                \
    static constexpr bool element_wise = true;  \
    template <Lazy X>                           \
    auto forward(X const& x) const {            \
      return expression;                        \
    }                                           \
    template <class V>                          \
    void visit(V&) {}                           \
  }
SOLDER_STATELESS(ReLU, relu(x));
SOLDER_STATELESS(SiLU, silu(x));
SOLDER_STATELESS(Tanh, tanh(x));
SOLDER_STATELESS(Sigmoid, sigmoid(x));
SOLDER_STATELESS(Identity, x);
SOLDER_STATELESS(Flatten, flatten<1>(x));  // nn.Flatten(): start_dim=1, end_dim=-1
#undef SOLDER_STATELESS

struct GELUOptions {
  char const* approximate = "none";  // or "tanh"
};
// nn.GELU(approximate="none" | "tanh"): the exact (erf) form or the tanh one, chosen at run time.
struct GELU : Callable<GELU> {
  static constexpr bool element_wise = true;
  bool tanh_form = false;
  GELU(GELUOptions o = {}) : tanh_form(std::string_view(o.approximate) == "tanh") {
    solder::detail::check(tanh_form || std::string_view(o.approximate) == "none",
                          "nn::GELU: approximate must be \"none\" or \"tanh\", got \"", o.approximate, "\"");
  }
  template <Lazy X>
  auto forward(X const& x) const {
    return make_map(ops::GeluForm{{}, tanh_form}, x);
  }
  template <class V>
  void visit(V&) {}
};

// nn.Dropout(p): the identity in eval mode. Training mode needs a random mask per call, which
// comes with autograd; until then it is an error rather than a silent identity.
struct Dropout : Callable<Dropout> {
  static constexpr bool element_wise = true;
  double p = 0.5;
  bool training = false;
  Dropout(double p_ = 0.5) : p(p_) {
    solder::detail::check(p >= 0 && p <= 1, "nn::Dropout: p must be in [0, 1], got ", p);
  }
  template <Lazy X>
  X forward(X const& x) const {  // a tensor stays a tensor: no copy kernel where it is materialized
    solder::detail::check(!training || p == 0, "nn::Dropout(p=", p,
                          "): training mode is not supported yet; call sd::nn::eval(model) for inference");
    return x;
  }
  template <class V>
  void visit(V&) {}
};

// nn.MaxPool2d(kernel_size, {.stride, .padding, .dilation, .ceil_mode}).
struct MaxPool2d : Callable<MaxPool2d> {
  Pair2 kernel_size;
  MaxPool2dOptions options;
  MaxPool2d(Pair2 k, MaxPool2dOptions const& o = {}) : kernel_size(k), options(o) {}
  template <Lazy X>
  auto forward(X const& x) const {
    return max_pool2d(x, kernel_size, options);
  }
  template <class V>
  void visit(V&) {}
};

// nn.AvgPool2d(kernel_size, {.stride, .padding, .ceil_mode, .count_include_pad, ...}).
struct AvgPool2d : Callable<AvgPool2d> {
  Pair2 kernel_size;
  AvgPool2dOptions options;
  AvgPool2d(Pair2 k, AvgPool2dOptions const& o = {}) : kernel_size(k), options(o) {}
  template <Lazy X>
  auto forward(X const& x) const {
    return avg_pool2d(x, kernel_size, options);
  }
  template <class V>
  void visit(V&) {}
};

// nn.AdaptiveAvgPool2d(output_size).
struct AdaptiveAvgPool2d : Callable<AdaptiveAvgPool2d> {
  Pair2 output_size;
  AdaptiveAvgPool2d(Pair2 s) : output_size(s) {}
  template <Lazy X>
  auto forward(X const& x) const {
    return adaptive_avg_pool2d(x, output_size);
  }
  template <class V>
  void visit(V&) {}
};

}  // namespace solder::nn
