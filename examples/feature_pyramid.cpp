// reference/004's FeaturePyramid, written as a solder module. As the reference writes it, the
// model cannot run: flatten(encoded, 1) of a [N, 64, 112, 112] encoding has 802,816 features,
// and the decoder is Linear(64, 10). PyTorch reports that on the first forward (a matmul shape
// error); solder reports it too, at the first forward, as an sd::Error naming the layer and both
// shapes. The corrected model (DESIGN.md) pools each channel to one value first: the convolution
// with its ReLU is one kernel, the pool another, the decoder a third.
#include <solder/solder.hpp>

#include <cstdio>
#include <iostream>

namespace sd = solder;

// As written in reference/004.
struct FeaturePyramidAsWritten {
  sd::nn::Conv2d encoder{3, 64, 5, {.stride = 2, .padding = 2}};
  sd::nn::Linear decoder{64, 10};
  auto forward(auto const& x) const {
    auto encoded = sd::relu(encoder(x));
    auto pooled = sd::flatten<1>(encoded);  // [N, 64 * 112 * 112]: not 64 features
    return decoder(pooled);
  }
};
SOLDER_MODULE(FeaturePyramidAsWritten, encoder, decoder);

// Corrected: every channel averaged to one value before the decoder.
struct FeaturePyramid {
  sd::nn::Conv2d encoder{3, 64, 5, {.stride = 2, .padding = 2}};
  sd::nn::Linear decoder{64, 10};
  auto forward(auto const& x) const {
    auto encoded = sd::relu(encoder(x));
    auto pooled = sd::flatten<1>(sd::adaptive_avg_pool2d(encoded, 1));  // [N, 64]
    return decoder(pooled);
  }
};
SOLDER_MODULE(FeaturePyramid, encoder, decoder);

int main() {
  sd::Tensor<float, 4> const x = sd::randn<float>(sd::shape(2, 3, 224, 224));

  FeaturePyramidAsWritten as_written;
  try {
    sd::Tensor<float, 2> y = as_written.forward(x);
    std::printf("unexpected: the model as written ran\n");
    return 1;
  } catch (sd::Error const& e) {
    std::printf("The model as written: sd::Error: %s\n\n", e.what());
  }

  FeaturePyramid model;
  auto const before = sd::detail::kernels_run();
  sd::Tensor<float, 2> const y = model.forward(x);
  std::printf("The corrected model: output [%lld, %lld] in %llu kernels\n\n", static_cast<long long>(y.shape()[0]),
              static_cast<long long>(y.shape()[1]),
              static_cast<unsigned long long>(sd::detail::kernels_run() - before));
  std::cout << sd::explain(model, x);
  return 0;
}
