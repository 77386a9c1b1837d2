// ResNet-50 inference on one image (reference/004's torchvision.models.resnet50): the top-5
// classes with their probabilities, the kernels of the forward and its time.
//   resnet50_inference [weights.safetensors [image.safetensors]]
// Without arguments the weights and the image are random. The files, from PyTorch:
//   from safetensors.torch import save_file
//   save_file(torchvision.models.resnet50(weights="DEFAULT").state_dict(), "resnet50.safetensors")
//   save_file({"input": preprocessed_image_batch}, "image.safetensors")   # float32 [N, 3, 224, 224]
#include <solder/solder.hpp>
#include <solder/nn/models/resnet.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

namespace sd = solder;

int main(int argc, char** argv) {
  auto net = sd::models::resnet50();  // torchvision's layout and keys, in eval mode
  if (argc > 1) sd::io::load_safetensors(net, argv[1]);
  sd::Tensor<float, 4> const image = argc > 2 ? sd::io::load_tensor<float, 4>(argv[2], "input")
                                              : sd::randn<float>(sd::shape(1, 3, 224, 224));

  // The plan of the whole forward; its first line is "solder forward: N kernels in M blocks".
  std::string const plan = sd::explain(net, image);
  std::cout << plan.substr(0, plan.find('\n')) << "\n";

  // The kernels one forward runs, and the best time of three forwards.
  auto const kernels_before = sd::detail::kernels_run();
  sd::Tensor<float, 2> logits = net(image);
  auto const kernels = sd::detail::kernels_run() - kernels_before;
  double best_ms = 1e30;
  for (int i = 0; i < 3; ++i) {
    auto const t0 = std::chrono::steady_clock::now();
    logits = net(image);
    std::chrono::duration<double, std::milli> const took = std::chrono::steady_clock::now() - t0;
    best_ms = std::min(best_ms, took.count());
  }
  std::printf("forward of [%lld, 3, %lld, %lld]: %llu kernels, %.1f ms (best of 3, %d threads)\n",
              static_cast<long long>(image.shape()[0]), static_cast<long long>(image.shape()[2]),
              static_cast<long long>(image.shape()[3]), static_cast<unsigned long long>(kernels), best_ms,
              sd::get_num_threads());

  sd::Tensor<float, 2> const probabilities = sd::softmax(logits, -1);
  std::vector<float> const p = sd::to_vector(probabilities);
  std::int64_t const classes = probabilities.shape()[1];
  for (std::int64_t n = 0; n < probabilities.shape()[0]; ++n) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(classes));
    std::iota(order.begin(), order.end(), 0);
    float const* row = p.data() + n * classes;
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
    std::printf("image %lld, top 5 (ImageNet class index: probability):", static_cast<long long>(n));
    for (int k = 0; k < 5; ++k) std::printf("  %lld: %.4f", static_cast<long long>(order[k]), row[order[k]]);
    std::printf("\n");
  }
  return 0;
}
