// torchvision.models.ResNet v1.5 (a Bottleneck strides on its 3x3 convolution), with
// torchvision's keys (conv1.weight, layer1.0.bn2.running_mean, layer2.0.downsample.0.weight, ...):
// resnet18 and resnet34 (BasicBlock), resnet50 (Bottleneck). Every convolution is one kernel with
// its BatchNorm, ReLU and (a block's last) residual add in its epilogue; a block takes and returns
// a materialized tensor, so each block type is compiled once. ResNet-50's forward is 56 kernels:
// 53 convolutions, the max pool, the average pool and fc.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../block.hpp"
#include "../containers.hpp"
#include "../layers.hpp"

namespace solder::models {

struct ResNetConfig {
  std::vector<std::int64_t> layers = {};  // blocks per stage; empty: the depth's (18: 2,2,2,2; 34 and 50: 3,4,6,3)
  std::array<std::int64_t, 4> widths = {64, 128, 256, 512};  // stage widths; the stem has widths[0] channels
  std::int64_t num_classes = 1000;
};

namespace detail {

using Downsample = nn::Sequential<nn::Conv2d, nn::BatchNorm2d>;

// torchvision's conv3x3 and conv1x1 (and the stem's 7x7): padding k / 2, no bias before a BatchNorm.
inline nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride = 1) {
  return {in, out, k, {.stride = stride, .padding = k / 2, .bias = false}};
}

// _make_layer's downsample: when the block changes the stride or the width.
inline std::optional<Downsample> downsample(std::int64_t in, std::int64_t out, std::int64_t stride) {
  if (stride == 1 && in == out) return std::nullopt;
  return Downsample{conv(in, out, 1, stride), nn::BatchNorm2d(out)};
}

template <class D>
Tensor<float, 4, D> conv_bn_relu(nn::Conv2d const& conv, nn::BatchNorm2d const& bn, Tensor<float, 4, D> const& x) {
  return nn::materialize(relu(bn(conv(x))));
}

// A block's end, relu(y + identity) in the epilogue of y's convolution; the identity is the
// block's input x or its downsample's result.
template <class Y, class D>
Tensor<float, 4, D> add_relu(Y const& y, Tensor<float, 4, D> const& x, std::optional<Downsample> const& downsample) {
  Tensor<float, 4, D> const identity = downsample ? nn::materialize((*downsample)(x)) : x;
  return nn::materialize(relu(y + identity));
}

}  // namespace detail

struct BasicBlock : nn::Callable<BasicBlock> {
  static constexpr std::int64_t expansion = 1;
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  std::optional<detail::Downsample> downsample;

  BasicBlock(std::int64_t in, std::int64_t planes, std::int64_t stride)
      : conv1(detail::conv(in, planes, 3, stride)), bn1(planes), conv2(detail::conv(planes, planes, 3)), bn2(planes),
        downsample(detail::downsample(in, planes, stride)) {}

  template <class D>  // (a template per device: on each, compiled once)
  Tensor<float, 4, D> forward(Tensor<float, 4, D> const& x) const {
    return detail::add_relu(bn2(conv2(detail::conv_bn_relu(conv1, bn1, x))), x, downsample);
  }
  template <class V>
  void visit(V& v) {
    v.child("conv1", conv1);
    v.child("bn1", bn1);
    v.child("conv2", conv2);
    v.child("bn2", bn2);
    v.child("downsample", downsample);
  }
};

struct Bottleneck : nn::Callable<Bottleneck> {
  static constexpr std::int64_t expansion = 4;
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Conv2d conv3;
  nn::BatchNorm2d bn3;
  std::optional<detail::Downsample> downsample;

  Bottleneck(std::int64_t in, std::int64_t planes, std::int64_t stride)
      : conv1(detail::conv(in, planes, 1)), bn1(planes), conv2(detail::conv(planes, planes, 3, stride)), bn2(planes),
        conv3(detail::conv(planes, planes * expansion, 1)), bn3(planes * expansion),
        downsample(detail::downsample(in, planes * expansion, stride)) {}

  template <class D>
  Tensor<float, 4, D> forward(Tensor<float, 4, D> const& x) const {
    Tensor<float, 4, D> const h = detail::conv_bn_relu(conv2, bn2, detail::conv_bn_relu(conv1, bn1, x));
    return detail::add_relu(bn3(conv3(h)), x, downsample);
  }
  template <class V>
  void visit(V& v) {
    v.child("conv1", conv1);
    v.child("bn1", bn1);
    v.child("conv2", conv2);
    v.child("bn2", bn2);
    v.child("conv3", conv3);
    v.child("bn3", bn3);
    v.child("downsample", downsample);
  }
};

template <class Block>
struct ResNet : nn::Callable<ResNet<Block>> {
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::MaxPool2d maxpool{3, {.stride = 2, .padding = 1}};
  std::array<nn::ModuleList<Block>, 4> layers;  // layer1 ... layer4
  nn::AdaptiveAvgPool2d avgpool{1};
  nn::Linear fc;

  // torchvision's _make_layer: the first block of stages 2-4 strides 2.
  explicit ResNet(ResNetConfig const& c)
      : conv1(detail::conv(3, c.widths[0], 7, 2)), bn1(c.widths[0]), fc(c.widths[3] * Block::expansion, c.num_classes) {
    solder::detail::check(c.layers.size() == 4, "models::ResNet: layers must hold 4 block counts, got ",
                          c.layers.size());
    std::int64_t in = c.widths[0];
    for (std::size_t s = 0; s < 4; ++s) {
      for (std::int64_t i = 0; i < c.layers[s]; ++i) {
        layers[s].push_back(Block(in, c.widths[s], s > 0 && i == 0 ? 2 : 1));
        in = c.widths[s] * Block::expansion;
      }
    }
  }

  template <Lazy X>
  auto forward(X const& x) const {
    Tensor<float, 4, nn::device_of<X>> h = nn::materialize(x);  // one kernel type for any input type
    h = nn::materialize(relu(bn1(conv1(h))), channels_last);  // and every block after it (rule 7)
    h = nn::materialize(maxpool(h));
    for (auto const& layer : layers)
      for (Block const& block : layer) h = block(h);
    return fc(flatten<1>(avgpool(h)));  // the flatten is a view of avgpool's result
  }

  template <class V>
  void visit(V& v) {
    v.child("conv1", conv1);
    v.child("bn1", bn1);
    for (std::size_t s = 0; s < 4; ++s) v.child("layer" + std::to_string(s + 1), layers[s]);
    v.child("fc", fc);
  }
};

namespace detail {
template <class Block>
ResNet<Block> resnet(ResNetConfig c, std::vector<std::int64_t> depth_layers) {
  if (c.layers.empty()) c.layers = std::move(depth_layers);
  ResNet<Block> m(c);
  nn::eval(m);
  return m;
}
}  // namespace detail

inline ResNet<BasicBlock> resnet18(ResNetConfig const& c = {}) { return detail::resnet<BasicBlock>(c, {2, 2, 2, 2}); }
inline ResNet<BasicBlock> resnet34(ResNetConfig const& c = {}) { return detail::resnet<BasicBlock>(c, {3, 4, 6, 3}); }
inline ResNet<Bottleneck> resnet50(ResNetConfig const& c = {}) { return detail::resnet<Bottleneck>(c, {3, 4, 6, 3}); }

}  // namespace solder::models
