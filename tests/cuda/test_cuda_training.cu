// Training on sd::Cuda tensors against the same steps on the host: the gradients of a
// perceptron's cross-entropy through sd::value_and_grad (the derived backward's kernels run on
// the GPU, its products in cuBLAS), and AdamW's fused update, over three steps.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include "compare.hpp"

using namespace gpu_test;

TEST_CASE("training: gradients and AdamW steps on the device agree with the host's", "[gpu][training]") {
  auto const x = host_rand<float>(64, 10);
  sd::Tensor<std::int64_t, 1> labels = sd::zeros<std::int64_t>(64);
  for (std::int64_t i = 0; i < 64; ++i) labels(i) = i % 4;
  auto w1 = host_rand<float>(32, 10), w2 = host_rand<float>(4, 32);
  auto b1 = host_rand<float>(32), b2 = host_rand<float>(4);
  auto dx = x.to<sd::Cuda>();
  auto dlabels = labels.to<sd::Cuda>();
  auto dw1 = w1.to<sd::Cuda>(), dw2 = w2.to<sd::Cuda>();
  auto db1 = b1.to<sd::Cuda>(), db2 = b2.to<sd::Cuda>();

  auto loss_of = [](auto const& in, auto const& y) {
    return [&in, &y](auto const& p1, auto const& q1, auto const& p2, auto const& q2) {
      return sd::cross_entropy(sd::linear(sd::gelu(sd::linear(in, p1, q1)), p2, q2), y);
    };
  };
  auto const host_loss = loss_of(x, labels);
  auto const device_loss = loss_of(dx, dlabels);
  sd::optim::AdamW host_opt(std::tie(w1, b1, w2, b2), {.lr = 1e-2});
  sd::optim::AdamW device_opt(std::tie(dw1, db1, dw2, db2), {.lr = 1e-2});
  static_assert(std::is_same_v<decltype(device_opt), sd::optim::AdamW<float, sd::Cuda>>);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    auto [hv, hg] = sd::value_and_grad(host_loss)(w1, b1, w2, b2);
    auto [dv, dg] = sd::value_and_grad(device_loss)(dw1, db1, dw2, db2);
    static_assert(std::is_same_v<typename std::tuple_element_t<0, decltype(dg)>::device_type, sd::Cuda>);
    close(dv, hv, 1e-5);
    close(std::get<0>(dg), std::get<0>(hg), 1e-5);
    close(std::get<1>(dg), std::get<1>(hg), 1e-5);
    close(std::get<2>(dg), std::get<2>(hg), 1e-5);
    close(std::get<3>(dg), std::get<3>(hg), 1e-5);
    host_opt.step(hg);
    device_opt.step(dg);
  }
  close(dw1, w1, 1e-4);
  close(db1, b1, 1e-4);
  close(dw2, w2, 1e-4);
  close(db2, b2, 1e-4);
}
