// 16-bit floats, factories (the same seed gives the same numbers as the host), copies, empty
// tensors, run-time errors and streams (shared by threads; a release on another stream) on
// sd::Cuda tensors.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include "compare.hpp"

#include <thread>
#include <vector>

using namespace gpu_test;

TEMPLATE_TEST_CASE("16-bit floats: storage on the GPU, maths in float, same bits as the host",
                   "[gpu][half]", sd::half, sd::bfloat16) {
  using H = TestType;
  sd::Tensor<H, 2> x = sd::cast<H>(inputs<float>(65, 1031, 8.f));
  same_on_both([](auto const& a) { return sd::tanh(a * 0.5f + 0.25f) * sd::sigmoid(a) - a * a; }, x);
  // The row sum folds in another order, so a result may round to the neighbouring half.
  close(sd::eval(sd::softmax(x.template to<sd::Cuda>(), 1)), sd::eval(sd::softmax(x, 1)), 2e-3);
  same_on_both([](auto const& a) { return sd::max(a, 0); }, x);
  same_on_both([](auto const& a) { return sd::argmax(a, 1); }, x);
  auto fin = sd::eval(sd::cast<H>(sd::rand<float>(sd::shape(257, 1031))));
  close(sd::eval(sd::sum(fin.template to<sd::Cuda>(), 1)), sd::eval(sd::sum(fin, 1)), 4e-3);
  auto g = sd::eval(sd::cast<H>(sd::rand<float>(sd::shape(1031))));
  close(sd::eval(sd::layer_norm(fin.template to<sd::Cuda>(), g.template to<sd::Cuda>(), g.template to<sd::Cuda>())),
        sd::eval(sd::layer_norm(fin, g, g)), 1e-2);
}

TEST_CASE("factories and copies", "[gpu][tensor]") {
  sd::manual_seed(7);
  auto h = sd::rand<float>(sd::shape(1000, 3), -2.f, 3.f);
  auto hn = sd::randn<double>(sd::shape(501));
  sd::manual_seed(7);
  auto d = sd::rand<float, sd::Cuda>(sd::shape(1000, 3), -2.f, 3.f);
  auto dn = sd::randn<double, sd::Cuda>(sd::shape(501));
  same_bits(d, h);  // the same seed gives the same numbers on both devices
  same_bits(dn, hn);
  same_bits(sd::full<float, sd::Cuda>(sd::shape(5, 2), 2.5f), sd::full<float>(sd::shape(5, 2), 2.5f));
  auto back = d.to<sd::Host>();
  CHECK(back.storage() != d.storage());
  same_bits(d.clone(), h);
  same_bits(sd::transpose(d, 0, 1).to<sd::Host>(), sd::eval(sd::transpose(h, 0, 1)));
  CHECK(sd::slice(sd::slice(d, 0, 10, 11), 1, 2, 3).item() == h(10, 2));
  sd::Tensor<float, 2, sd::Cuda> empty(0, 3);
  sd::Tensor<float, 2, sd::Cuda> also_empty = sd::exp(empty);
  CHECK(also_empty.numel() == 0);
  CHECK(sd::eval(sd::sum(empty)).item() == 0.f);
}

TEST_CASE("run-time misuse on the device throws sd::Error", "[gpu][errors]") {
  auto a = sd::zeros<float, sd::Cuda>(sd::shape(3, 4));
  auto b = sd::zeros<float, sd::Cuda>(sd::shape(5, 4));
  CHECK_THROWS_AS(sd::eval(a + b), sd::Error);
  sd::Tensor<float, 2, sd::Cuda> c(4, 3);
  CHECK_THROWS_AS(c = a * 2.f, sd::Error);
}

namespace {

// 64 kernels in a row, each a new tensor from the last: long enough a queue that work not
// ordered after it (a copy, another stream's kernels) starts while it still runs.
std::vector<sd::Tensor<float, 1, sd::Cuda>> queue_steps(sd::Tensor<float, 1, sd::Cuda> const& x) {
  std::vector<sd::Tensor<float, 1, sd::Cuda>> steps{x};
  for (int i = 0; i < 64; ++i) steps.push_back(sd::eval(steps.back() * 1.001f + 0.5f));
  return steps;
}

}  // namespace

TEST_CASE("threads share the default stream: a result handed over is read after its kernels",
          "[gpu][streams]") {
  auto x = sd::rand<float>(sd::shape(1 << 22), 0.f, 1.f);
  auto d = x.to<sd::Cuda>();
  std::vector<sd::Tensor<float, 1, sd::Cuda>> steps;
  std::thread([&] { steps = queue_steps(d); }).join();  // queued, not waited for
  sd::Tensor<float, 1> expected = x;
  for (int i = 0; i < 64; ++i) expected = sd::eval(expected * 1.001f + 0.5f);
  same_bits(steps.back(), expected);  // this thread's copy queues after the other's kernels
}

TEST_CASE("a tensor released on another stream is freed after the kernels that used it",
          "[gpu][streams]") {
  std::int64_t const n = 1 << 22;
  cudaStream_t side = nullptr;
  SOLDER_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  {
    sd::cuda::set_stream(side);  // a queue the default stream does not wait for
    auto steps = queue_steps(sd::full<float, sd::Cuda>(sd::shape(n), 1.f));
    sd::cuda::set_stream(cudaStreamLegacy);
  }  // released on the default stream while `side` may still run: the device is waited for
  // The pool likely hands the last step's block out again here: had it been freed at once,
  // side's last kernel would still write into it after this fill.
  auto y = sd::full<float, sd::Cuda>(sd::shape(n), 2.f);
  SOLDER_CUDA_CHECK(cudaStreamSynchronize(side));
  same_bits(y, sd::full<float>(sd::shape(n), 2.f));
  SOLDER_CUDA_CHECK(cudaStreamDestroy(side));
}
