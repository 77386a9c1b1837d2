// torchvision.ops.MLP(in_channels, hidden_channels) with ReLU and no norm: Linear, ReLU, Dropout
// per hidden layer, the last Linear followed by Dropout only, with torchvision's keys ("0.weight",
// "3.weight", ...). The number of layers is a run-time value, so the layers are a vector and the
// forward a loop over materialized tensors: one kernel type however deep the MLP is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../block.hpp"
#include "../layers.hpp"

namespace solder::models {

struct MlpConfig {
  std::int64_t in_channels = 0;
  std::vector<std::int64_t> hidden_channels = {};  // each layer's out_features; the last is the output's
  double dropout = 0.0;
  bool bias = true;
};

struct Mlp : nn::Callable<Mlp> {
  std::vector<nn::Linear> layers;
  nn::Dropout dropout;

  explicit Mlp(MlpConfig const& c) : dropout(c.dropout) {
    solder::detail::check(!c.hidden_channels.empty(), "models::mlp: hidden_channels is empty");
    std::int64_t in = c.in_channels;
    for (std::int64_t out : c.hidden_channels) {
      layers.emplace_back(in, out, nn::LinearOptions{.bias = c.bias});
      in = out;
    }
  }

  // Each hidden layer is one kernel (ReLU in the Linear's epilogue); the last Linear is returned
  // as an expression, so what the caller does with it fuses into it.
  template <Lazy X>
  auto forward(X const& x) const {
    Tensor<float, node_t<X>::rank, nn::device_of<X>> h = nn::materialize(x);
    for (std::size_t i = 0; i + 1 < layers.size(); ++i) h = nn::materialize(dropout(relu(layers[i](h))));
    return dropout(layers.back()(h));
  }

  // torchvision's Sequential numbers Linear, ReLU, Dropout: layer i is element 3 * i.
  template <class V>
  void visit(V& v) {
    for (std::size_t i = 0; i < layers.size(); ++i) v.child(std::to_string(3 * i), layers[i]);
    v.child("dropout", dropout);  // no state: visited so that eval() and train() set its mode
  }
};

inline Mlp mlp(MlpConfig const& c) {
  Mlp m(c);
  nn::eval(m);
  return m;
}

}  // namespace solder::models
