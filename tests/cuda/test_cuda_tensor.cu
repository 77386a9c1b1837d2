// 16-bit floats, factories (the same seed gives the same numbers as the host), copies, empty
// tensors and run-time errors on sd::Cuda tensors.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include "compare.hpp"

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
