// A training step on a plain function: a perceptron of 784 -> 256 -> 256 -> 10 with gelu and
// cross-entropy at batch 256, its gradients through sd::value_and_grad and an AdamW step
// (mlp_step), and the gradients alone (mlp_grad). bench/peers/torch_training.py times the same
// step in PyTorch eager and under torch.compile in the same sitting and, given this program's
// JSON, prints the ratios (issue targets: a step >= 1.3x PyTorch eager, >= 1.1x torch.compile).
//   OMP_WAIT_POLICY=passive build/bench/bench_training --benchmark_format=json --benchmark_out=/tmp/training.json
#include <tuple>

#include <solder/solder.hpp>

#include "common.hpp"

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t batch = 256, in = 784, hidden = 256, classes = 10;

struct Model {
  sd::Tensor<float, 2> x = sd::randn<float>(sd::shape(batch, in));
  sd::Tensor<std::int64_t, 1> labels = sd::eval(sd::cast<std::int64_t>(sd::rand<float>(sd::shape(batch), 0.f, 9.99f)));
  sd::Tensor<float, 2> w1 = sd::rand<float>(sd::shape(hidden, in), -0.035f, 0.035f);
  sd::Tensor<float, 1> b1 = sd::rand<float>(sd::shape(hidden), -0.035f, 0.035f);
  sd::Tensor<float, 2> w2 = sd::rand<float>(sd::shape(hidden, hidden), -0.0625f, 0.0625f);
  sd::Tensor<float, 1> b2 = sd::rand<float>(sd::shape(hidden), -0.0625f, 0.0625f);
  sd::Tensor<float, 2> w3 = sd::rand<float>(sd::shape(classes, hidden), -0.0625f, 0.0625f);
  sd::Tensor<float, 1> b3 = sd::rand<float>(sd::shape(classes), -0.0625f, 0.0625f);
  sd::optim::AdamW<float, sd::Host> opt{std::tie(w1, b1, w2, b2, w3, b3), {.lr = 1e-3}};

  auto loss() const {
    return [this](auto const& p1, auto const& q1, auto const& p2, auto const& q2, auto const& p3, auto const& q3) {
      auto h = sd::gelu(sd::linear(sd::gelu(sd::linear(x, p1, q1)), p2, q2));
      return sd::cross_entropy(sd::linear(h, p3, q3), labels);
    };
  }
};
Model& model() {
  static Model m;
  return m;
}

float const* mlp_step() {
  auto& m = model();
  auto [value, grads] = sd::value_and_grad(m.loss())(m.w1, m.b1, m.w2, m.b2, m.w3, m.b3);
  m.opt.step(grads);
  return value.data();
}
float const* mlp_grad() {
  auto& m = model();
  auto const grads = sd::grad(m.loss())(m.w1, m.b1, m.w2, m.b2, m.w3, m.b3);
  return std::get<0>(grads).data();
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  sb::add("mlp_step", benchmark::kMillisecond, 0, mlp_step);
  sb::add("mlp_grad", benchmark::kMillisecond, 0, mlp_grad);
  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);
  return 0;
}
