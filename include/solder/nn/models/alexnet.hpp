// torchvision.models.AlexNet: features (five convolutions with ReLU, three max pools),
// AdaptiveAvgPool2d(6, 6), classifier (Dropout, Linear, ReLU, Dropout, Linear, ReLU, Linear),
// with torchvision's keys ("features.3.weight", "classifier.6.bias", ...): the Sequentials hold
// torchvision's exact element lists, so their numbering is torchvision's. Each ReLU runs in the
// epilogue of the layer before it: a forward is 12 kernels.
#pragma once
#include <array>
#include <cstdint>

#include "../block.hpp"
#include "../containers.hpp"
#include "../layers.hpp"

namespace solder::models {

struct AlexNetConfig {
  std::array<std::int64_t, 5> widths = {64, 192, 384, 256, 256};  // the convolutions' out_channels
  std::int64_t hidden = 4096;                                     // the classifier's hidden features
  std::int64_t num_classes = 1000;
  double dropout = 0.5;
};

struct AlexNet : nn::Callable<AlexNet> {
  using Features = nn::Sequential<nn::Conv2d, nn::ReLU, nn::MaxPool2d, nn::Conv2d, nn::ReLU, nn::MaxPool2d, nn::Conv2d,
                                  nn::ReLU, nn::Conv2d, nn::ReLU, nn::Conv2d, nn::ReLU, nn::MaxPool2d>;
  using Classifier = nn::Sequential<nn::Dropout, nn::Linear, nn::ReLU, nn::Dropout, nn::Linear, nn::ReLU, nn::Linear>;
  static constexpr std::int64_t pooled = 6;  // avgpool's output size

  Features features;
  nn::AdaptiveAvgPool2d avgpool{pooled};
  Classifier classifier;

  explicit AlexNet(AlexNetConfig const& c)
      : features(make_features(c.widths)),
        classifier({c.dropout}, {c.widths[4] * pooled * pooled, c.hidden}, {}, {c.dropout}, {c.hidden, c.hidden}, {},
                   {c.hidden, c.num_classes}) {}

  template <Lazy X>
  auto forward(X const& x) const {
    Tensor<float, 4, nn::device_of<X>> h = nn::materialize(x);  // one kernel type for any input type
    h = nn::materialize(features(h));
    return classifier(flatten<1>(avgpool(h)));  // the flatten is a view of avgpool's result
  }

  template <class V>
  void visit(V& v) {
    v.child("features", features);
    v.child("classifier", classifier);
  }

 private:
  static Features make_features(std::array<std::int64_t, 5> const& w) {
    nn::MaxPool2d const pool{3, {.stride = 2}};
    return {{3, w[0], 11, {.stride = 4, .padding = 2}},
            {},
            pool,
            {w[0], w[1], 5, {.padding = 2}},
            {},
            pool,
            {w[1], w[2], 3, {.padding = 1}},
            {},
            {w[2], w[3], 3, {.padding = 1}},
            {},
            {w[3], w[4], 3, {.padding = 1}},
            {},
            pool};
  }
};

inline AlexNet alexnet(AlexNetConfig const& c = {}) {
  AlexNet m(c);
  nn::eval(m);
  return m;
}

}  // namespace solder::models
