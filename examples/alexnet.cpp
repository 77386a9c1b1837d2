// The C++ twin of reference/000: AlexNet inference on a batch of random images, timed one kernel
// per node (sd::eager(net, x): PyTorch eager's way of running it) against the fused forward
// (net(x): each layer one kernel with its ReLU in the epilogue, no JIT and no warm-up to compile),
// then the speed-up.
//   alexnet [batch] [batches] [weights.safetensors]
// Defaults: 2 images a batch, 5 batches, random weights (the reference: 32 images, 100 batches,
// torchvision's AlexNet_Weights.DEFAULT, saved with safetensors.torch.save_file(model.state_dict(), path)).
#include <solder/solder.hpp>
#include <solder/nn/models/alexnet.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace sd = solder;

template <class F>
double seconds(int batches, F&& forward) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < batches; ++i) forward();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char** argv) {
  std::int64_t const batch = argc > 1 ? std::atoll(argv[1]) : 2;
  int const batches = argc > 2 ? std::atoi(argv[2]) : 5;

  auto net = sd::models::alexnet();  // torchvision's AlexNet, in eval mode
  if (argc > 3) sd::io::load_safetensors(net, argv[3]);
  sd::Tensor<float, 4> const images = sd::randn<float>(sd::shape(batch, 3, 224, 224));
  std::printf("Using device: CPU, %d threads; %lld images of 3x224x224 a batch\n", sd::get_num_threads(),
              static_cast<long long>(batch));

  // One forward each first (the reference's warm-up); here it only touches the memory.
  sd::Tensor<float, 2> fused = net(images);
  sd::Tensor<float, 2> eager = sd::eager(net, images);
  float const largest = sd::eval(sd::amax(sd::abs(fused - eager))).item();

  double const baseline = seconds(batches, [&] { eager = sd::eager(net, images); });
  std::printf("Baseline (eager, one kernel per node) time for %d batches: %.4f seconds\n", batches, baseline);
  double const compiled = seconds(batches, [&] { fused = net(images); });
  std::printf("Fused time for %d batches: %.4f seconds\n", batches, compiled);
  std::printf("\nSpeedup: %.2fx (largest difference between the two: %g)\n", baseline / compiled,
              static_cast<double>(largest));
  return largest <= 1e-3f ? 0 : 1;
}
