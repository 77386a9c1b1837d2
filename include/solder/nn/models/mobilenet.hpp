// torchvision.models.MobileNetV2 with torchvision's keys (features.0.0.weight,
// features.2.conv.1.0.weight, features.18.1.running_var, classifier.1.bias, ...) and channel
// arithmetic (_make_divisible). Every convolution is one kernel with its BatchNorm, ReLU6 and
// (an InvertedResidual's last, when stride is 1 and the width is kept) residual add in its
// epilogue; blocks take and return materialized tensors, so each is compiled once. The default
// model's forward is 54 kernels: 52 convolutions, the average pool and the classifier. On the
// host its activations are channels-last from the stem's output to the pool (NHWC strides:
// the depthwise convolutions vectorize over channels, the 1x1 ones are plain products).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../block.hpp"
#include "../containers.hpp"
#include "../layers.hpp"

namespace solder::models {

struct MobileNetV2Config {
  std::int64_t num_classes = 1000;
  double width_mult = 1.0;
  // Rows {t, c, n, s}: expand ratio, output channels (before width_mult), blocks, first stride.
  std::vector<std::array<std::int64_t, 4>> inverted_residual_setting = {
      {1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  std::int64_t round_nearest = 8;
  std::int64_t last_channel = 1280;  // scaled by max(1, width_mult), as torchvision does
  double dropout = 0.2;
};

// nn.ReLU6: min(max(x, 0), 6), element-wise.
struct ReLU6 : nn::Callable<ReLU6> {
  static constexpr bool element_wise = true;
  template <Lazy X>
  auto forward(X const& x) const {
    return clamp(x, 0.f, 6.f);
  }
  template <class V>
  void visit(V&) {}
};

namespace detail {

// torchvision's _make_divisible: v rounded to the nearest multiple of divisor, at least divisor,
// and never more than 10% below v.
inline std::int64_t make_divisible(double v, std::int64_t divisor) {
  std::int64_t r = std::max(divisor, static_cast<std::int64_t>(v + divisor / 2.0) / divisor * divisor);
  return r < 0.9 * v ? r + divisor : r;
}

// torchvision's Conv2dNormActivation with ReLU6: keys "0.weight", "1.running_mean", ...
using ConvBNReLU6 = nn::Sequential<nn::Conv2d, nn::BatchNorm2d, ReLU6>;

inline ConvBNReLU6 conv_bn_relu6(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride = 1,
                                 std::int64_t groups = 1) {
  return {{in, out, k, {.stride = stride, .padding = (k - 1) / 2, .groups = groups, .bias = false}}, {out}, {}};
}

}  // namespace detail

struct InvertedResidual : nn::Callable<InvertedResidual> {
  // torchvision's `conv` Sequential, numbered at run time: [expand,] depthwise, project, bn.
  struct Layers {
    std::optional<detail::ConvBNReLU6> expand;  // a 1x1 convolution, absent when the expand ratio is 1
    detail::ConvBNReLU6 depthwise;
    nn::Conv2d project;
    nn::BatchNorm2d bn;

    template <class V>
    void visit(V& v) {
      int i = 0;
      if (expand) v.child(std::to_string(i++), *expand);
      v.child(std::to_string(i++), depthwise);
      v.child(std::to_string(i++), project);
      v.child(std::to_string(i), bn);
    }
  };
  Layers conv;
  bool use_res_connect;

  InvertedResidual(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t expand_ratio)
      : conv(make_layers(in, out, stride, expand_ratio)), use_res_connect(stride == 1 && in == out) {}

  template <class D>  // (a template per device: on each, compiled once)
  Tensor<float, 4, D> forward(Tensor<float, 4, D> const& x) const {
    Tensor<float, 4, D> h = conv.expand ? nn::materialize((*conv.expand)(x)) : x;
    h = nn::materialize(conv.depthwise(h));
    auto const y = conv.bn(conv.project(h));
    return use_res_connect ? nn::materialize(y + x) : nn::materialize(y);
  }
  template <class V>
  void visit(V& v) {
    v.child("conv", conv);
  }

 private:
  static Layers make_layers(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t expand_ratio) {
    std::int64_t const hidden = in * expand_ratio;
    return {expand_ratio == 1 ? std::nullopt : std::optional(detail::conv_bn_relu6(in, hidden, 1)),
            detail::conv_bn_relu6(hidden, hidden, 3, stride, hidden),
            {hidden, out, 1, {.bias = false}},
            {out}};
  }
};

struct MobileNetV2 : nn::Callable<MobileNetV2> {
  // torchvision's `features` Sequential: the stem, the blocks, the last 1x1 convolution,
  // numbered 0, 1 ... blocks.size(), blocks.size() + 1.
  struct Features {
    detail::ConvBNReLU6 stem;
    std::vector<InvertedResidual> blocks;
    detail::ConvBNReLU6 last;

    template <class V>
    void visit(V& v) {
      v.child("0", stem);
      for (std::size_t i = 0; i < blocks.size(); ++i) v.child(std::to_string(i + 1), blocks[i]);
      v.child(std::to_string(blocks.size() + 1), last);
    }
  };
  Features features;
  nn::Sequential<nn::Dropout, nn::Linear> classifier;

  explicit MobileNetV2(MobileNetV2Config const& c)
      : features(make_features(c)), classifier({c.dropout}, {last_channel(c), c.num_classes}) {}

  template <Lazy X>
  auto forward(X const& x) const {
    Tensor<float, 4, nn::device_of<X>> h = nn::materialize(x);  // one kernel type for any input type
    h = nn::materialize(features.stem(h), channels_last);  // and every block after it (rule 7)
    for (InvertedResidual const& block : features.blocks) h = block(h);
    h = nn::materialize(features.last(h));
    return classifier(flatten<1>(adaptive_avg_pool2d(h, 1)));
  }
  template <class V>
  void visit(V& v) {
    v.child("features", features);
    v.child("classifier", classifier);
  }

 private:
  static std::int64_t last_channel(MobileNetV2Config const& c) {
    return detail::make_divisible(c.last_channel * std::max(1.0, c.width_mult), c.round_nearest);
  }
  // torchvision's loop: each row's first block strides s, the others 1.
  static Features make_features(MobileNetV2Config const& c) {
    std::int64_t const first = detail::make_divisible(32 * c.width_mult, c.round_nearest);
    std::int64_t in = first;
    std::vector<InvertedResidual> blocks;
    for (auto const& [t, channels, n, s] : c.inverted_residual_setting) {
      std::int64_t const out = detail::make_divisible(channels * c.width_mult, c.round_nearest);
      for (std::int64_t i = 0; i < n; ++i, in = out) blocks.emplace_back(in, out, i == 0 ? s : 1, t);
    }
    return {detail::conv_bn_relu6(3, first, 3, 2), std::move(blocks), detail::conv_bn_relu6(in, last_channel(c), 1)};
  }
};

inline MobileNetV2 mobilenet_v2(MobileNetV2Config const& c = {}) {
  MobileNetV2 m(c);
  nn::eval(m);
  return m;
}

}  // namespace solder::models
