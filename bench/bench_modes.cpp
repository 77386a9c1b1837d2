// sd::compile's modes: the first call of a fresh compiled callable and its steady state, per
// mode, on an element-wise chain, a softmax, an MLP of three 256-wide layers at batch 1 and
// ResNet-18 at batch 1. solder compiles at build time, so a first call should cost what the
// steady state costs (target: at most 2x in every mode but max_autotune, whose first call times
// the GEMM engine's configurations). bench/peers/torch_modes.py times PyTorch on the MLP.
//   OMP_WAIT_POLICY=passive bench_modes
#include <solder/solder.hpp>
#include <solder/nn/models/mlp.hpp>
#include <solder/nn/models/resnet.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common.hpp"

namespace sd = solder;
namespace sb = solder_bench;

namespace {

using Vec = sd::Tensor<float, 1>;
using Mat = sd::Tensor<float, 2>;
using Img = sd::Tensor<float, 4>;

struct Workload {
  char const* name;
  benchmark::TimeUnit unit;
};

char const* mode_name(sd::Mode m) {
  return m == sd::Mode::standard ? "standard" : m == sd::Mode::reduce_overhead ? "reduce_overhead" : "max_autotune";
}

// Registers, for a callable f and its input, the plain call, and per mode the first call of a
// fresh sd::compile(f) and its steady state.
template <class F, class In>
void add_workload(char const* name, benchmark::TimeUnit unit, F const& f, In const& input) {
  sb::add((std::string("BM_") + name + "/plain").c_str(), unit, 0,
          [f, input] { return sd::nn::detail::finish(f(input)); });  // evaluated, as a compiled call's
  for (sd::Mode mode : {sd::Mode::standard, sd::Mode::reduce_overhead, sd::Mode::max_autotune}) {
    std::string const base = std::string("BM_") + name + "/" + mode_name(mode);
    auto first = [f, input, mode](benchmark::State& state) {
      for (auto _ : state) {
        sd::runtime::Autotuner tuner;  // max_autotune's first call tunes, from nothing each time
        auto compiled = sd::compile(f, {.mode = mode, .tuner = &tuner});
        auto const start = std::chrono::steady_clock::now();
        auto y = compiled(input);
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        benchmark::DoNotOptimize(y);
      }
    };
    // sb::configure's settings, with the time each iteration measures (its first call only).
    benchmark::RegisterBenchmark((base + "/first").c_str(), first)
        ->UseManualTime()
        ->Repetitions(5)
        ->ReportAggregatesOnly(true)
        ->Unit(unit);
    auto steady = [f, input, mode](benchmark::State& state) {
      sd::runtime::Autotuner tuner;
      auto compiled = sd::compile(f, {.mode = mode, .tuner = &tuner});
      compiled(input);
      for (auto _ : state) {
        auto y = compiled(input);
        benchmark::DoNotOptimize(y);
      }
    };
    sb::configure(benchmark::RegisterBenchmark((base + "/steady").c_str(), steady), unit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  sb::print_wait_policy();
  std::printf("ISA: %s, %d threads\n", sb::isa, sb::threads);

  auto const us = benchmark::kMicrosecond;
  Vec const x = sd::rand<float>({1 << 20}, -1.f, 1.f);
  add_workload("chain", us, [](Vec const& v) { return sd::tanh(v * 0.5f + 0.25f) * sd::sigmoid(v) + v * v * 0.1f; }, x);
  Mat const logits = sd::rand<float>({1024, 1024});
  add_workload("softmax", us, [](Mat const& m) { return sd::softmax(m, -1); }, logits);
  auto const mlp = sd::models::mlp({.in_channels = 256, .hidden_channels = {256, 256, 256}});
  add_workload("mlp_batch1", us, [&mlp](Mat const& in) { return mlp(in); }, Mat(sd::rand<float>({1, 256})));
  auto const resnet = sd::models::resnet18();
  add_workload("resnet18_batch1", benchmark::kMillisecond, [&resnet](Img const& in) { return resnet(in); },
               Img(sd::rand<float>({1, 3, 224, 224})));

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);
  std::printf("\n");
  for (char const* w : {"chain", "softmax", "mlp_batch1", "resnet18_batch1"})
    for (sd::Mode mode : {sd::Mode::standard, sd::Mode::reduce_overhead, sd::Mode::max_autotune}) {
      std::string const base = std::string("BM_") + w + "/" + mode_name(mode);
      std::string const label = std::string(w) + " " + mode_name(mode) + ": steady/first call";
      sb::report_ratio(rep, label.c_str(), (base + "/steady").c_str(), (base + "/first").c_str(),
                       mode == sd::Mode::max_autotune ? 0 : 0.5);
      std::string const plain = std::string(w) + " " + mode_name(mode) + ": plain/compiled steady";
      sb::report_ratio(rep, plain.c_str(), (std::string("BM_") + w + "/plain").c_str(), (base + "/steady").c_str(), 0);
    }
  return 0;
}
