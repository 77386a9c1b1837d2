// Whole models, inference with torchvision's and Hugging Face's default sizes and random weights
// (eval mode): AlexNet, ResNet-18, ResNet-50, MobileNetV2 on 224x224 images at batch 1 and 8,
// ViT-B/16 at batch 8, BERT-base (BertModel with its pooler) on 8 sequences of 128 tokens.
//   fused   net(x): every layer one kernel, its BatchNorm, activation and residual add in the
//           epilogue of its convolution (the models' headers give the kernel counts)
//   eager   sd::eager(net, x): the same forward, every expression node its own kernel with a
//           fresh temporary (PyTorch eager's way of running it)
// Each model's fused output is checked against its eager one before any timing. Printed: the
// medians, per model the fraction of the FMA peak it reaches (measured in the same run, as
// bench_gemm does: independent vector FMAs on every thread), and the fused/eager ratios.
// FLOPs: 2 x the multiply-adds of the convolutions and linear layers at 224x224, counted from
// the shapes (torch forward hooks over torchvision's models; torchvision's docs round them to
// 0.71, 1.81, 4.09 and 0.30 GMAC); for ViT and BERT also attention's two products, per layer
// 2 L^2 E (ViT-B/16: 17.56 GMAC, as torchvision's docs; BERT-base, 128 tokens: 11.17 GMAC).
//
// A second mode reports the peak resident memory of one ResNet-50 batch-8 forward, in this
// fresh process (getrusage's ru_maxrss), to compare with PyTorch's (bench/peers/torch_models.py):
//   bench_models --rss=fused     or --rss=eager
// bench/peers/torch_models.py reads this program's JSON for solder's ratio to PyTorch:
//   OMP_WAIT_POLICY=passive build-native/bench/bench_models --benchmark_out=models.json
//   (--benchmark_out writes JSON by default: each benchmark's median under its name)
// Run it with OMP_WAIT_POLICY=passive (common.hpp): on this 2-core machine a second process on a
// core (a compiler) slows spinning threads most.
// A third mode prints, per model, where a fused forward spends its time, by kernel kind
// (bench/profile.hpp), against the FMA peak and the copy speed measured in the same run:
//   bench_models --profile           or --profile=NAME for the models whose name contains NAME;
//                                    --top=N adds the N kernels (kind, root op, shape) that took longest
// Targets: information.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <solder/solder.hpp>
#include <solder/nn/models/alexnet.hpp>
#include <solder/nn/models/bert.hpp>
#include <solder/nn/models/mobilenet.hpp>
#include <solder/nn/models/resnet.hpp>
#include <solder/nn/models/vit.hpp>

#include "common.hpp"
#include "fma_peak.hpp"
#include "profile.hpp"

namespace sd = solder;
namespace sb = solder_bench;

namespace {

struct Model {
  char const* name;
  double macs;  // per 224x224 image (per sequence of 128 tokens): convolutions, linear layers, attention
  std::vector<std::int64_t> batches;
};
std::vector<Model> const models = {
    {"alexnet", 714188480.0, {1, 8}},     {"resnet18", 1814073344.0, {1, 8}},
    {"resnet50", 4089184256.0, {1, 8}},   {"mobilenet_v2", 300774272.0, {1, 8}},
    {"vit_b_16", 17563828224.0, {8}},     {"bert", 11174215680.0, {8}},
};
constexpr std::int64_t bert_tokens = 128;

Model const& model(char const* name) {
  for (Model const& m : models)
    if (std::string_view(m.name) == name) return m;
  std::abort();
}

// --profile=NAME: only the models whose name contains NAME are set up.
std::string_view only;
int top = 0;
bool wanted(char const* model) { return std::string_view(model).find(only) != std::string_view::npos; }

// Every model's fused forward at each batch, for --profile.
struct Forward {
  char const* model;
  std::int64_t batch;
  std::function<void()> run;
};
std::vector<Forward>& forwards() {
  static std::vector<Forward> all;
  return all;
}

std::string bench_name(char const* model, std::int64_t batch, char const* how) {
  return std::string("BM_") + model + "_b" + std::to_string(batch) + "_" + how;
}

// One model at one batch size: its input, its output, fused checked against eager.
template <class Net>
void add_model(Net const* net, char const* name, std::int64_t batch) {
  struct Data {
    sd::Tensor<float, 4> x;
    sd::Tensor<float, 2> y;
  };
  sd::Tensor<float, 4> x = sd::randn<float>(sd::shape(batch, 3, 224, 224));
  auto* d = new Data{x, (*net)(x)};  // later forwards write into this y
  sd::Tensor<float, 2> const eager = sd::eager(*net, d->x);
  std::string const what = std::string(name) + " b" + std::to_string(batch) + " eager vs fused";
  sb::check_close(what.c_str(), eager.data(), d->y.data(), d->y.numel(), 1e-5, 1e-4);
  forwards().push_back({name, batch, [net, d] { d->y = (*net)(d->x); }});
  auto ms = benchmark::kMillisecond;
  sb::add(bench_name(name, batch, "fused").c_str(), ms, 0, [net, d] {
    d->y = (*net)(d->x);
    return d->y.data();
  });
  sb::add(bench_name(name, batch, "eager").c_str(), ms, 0, [net, d] {
    d->y = sd::eager(*net, d->x);
    return d->y.data();
  });
}

template <class Net>
void add_model(Net* net, char const* name) {
  if (!wanted(name)) return;
  std::string const plan = sd::explain(*net, sd::randn<float>(sd::shape(1, 3, 224, 224)));
  std::printf("%-14s %s\n", name, plan.substr(0, plan.find('\n')).c_str());
  for (std::int64_t b : model(name).batches) add_model(static_cast<Net const*>(net), name, b);
}

// BERT: token ids (any in the vocabulary), one segment, no padding; its outputs are
// last_hidden_state and pooler_output, each forward returning new tensors.
void add_bert(sd::models::BertModel const* net) {
  if (!wanted("bert")) return;
  for (std::int64_t batch : model("bert").batches) {
    struct Data {
      sd::Tensor<std::int64_t, 2> ids, types, mask;
      sd::models::BertOutput<> out;
    };
    auto* d = new Data{sd::Tensor<std::int64_t, 2>(batch, bert_tokens), sd::zeros<std::int64_t>(batch, bert_tokens),
                       sd::ones<std::int64_t>(batch, bert_tokens), {}};
    std::uint64_t state = 12345;
    for (std::int64_t i = 0; i < d->ids.numel(); ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      d->ids.data()[i] = static_cast<std::int64_t>((state >> 33) % std::uint64_t(net->config.vocab_size));
    }
    if (batch == model("bert").batches.front()) {
      std::string const plan = sd::explain(*net, d->ids, d->types, d->mask);
      std::printf("%-14s %s\n", "bert", plan.substr(0, plan.find('\n')).c_str());
    }
    d->out = (*net)(d->ids, d->types, d->mask);
    auto const eager = sd::eager(*net, d->ids, d->types, d->mask);
    std::string const what = "bert b" + std::to_string(batch) + " eager vs fused";
    sb::check_close(what.c_str(), eager.last_hidden_state.data(), d->out.last_hidden_state.data(),
                    d->out.last_hidden_state.numel(), 1e-4, 1e-4);
    forwards().push_back({"bert", batch, [net, d] { d->out = (*net)(d->ids, d->types, d->mask); }});
    auto ms = benchmark::kMillisecond;
    sb::add(bench_name("bert", batch, "fused").c_str(), ms, 0, [net, d] {
      d->out = (*net)(d->ids, d->types, d->mask);
      return d->out.pooler_output.data();
    });
    sb::add(bench_name("bert", batch, "eager").c_str(), ms, 0, [net, d] {
      d->out = sd::eager(*net, d->ids, d->types, d->mask);
      return d->out.pooler_output.data();
    });
  }
}

double max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

// --rss=fused|eager: one ResNet-50 forward of [8, 3, 224, 224] in this fresh process.
int report_rss(std::string const& how) {
  if (how != "fused" && how != "eager") {
    std::fprintf(stderr, "bench_models: --rss=fused or --rss=eager\n");
    return 1;
  }
  auto const net = sd::models::resnet50();
  sd::Tensor<float, 4> const x = sd::randn<float>(sd::shape(8, 3, 224, 224));
  double const before = max_rss_mib();
  sd::Tensor<float, 2> const y = how == "fused" ? sd::Tensor<float, 2>(net(x)) : sd::eager(net, x);
  benchmark::DoNotOptimize(y.data());
  double const after = max_rss_mib();
  std::printf("peak RSS, solder %s ResNet-50 forward [8, 3, 224, 224] (%d threads, %s): %.1f MiB "
              "(%.1f MiB with the model and the input, before the forward)\n",
              how.c_str(), sb::threads, sb::isa, after, before);
  return 0;
}

template <class F>
double seconds(F f) {
  auto const begin = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --profile[=NAME]: each forward run for about a second (at least 5 times) under a Profile, the
// FMA peak and the copy speed measured before each call: this machine's speed changes with its
// neighbours' load, and the roofs' medians then see the same machine as the forwards.
int profile() {
  std::int64_t const n = std::int64_t(1) << 24;  // 64 MiB, copied: 128 MiB moved
  std::vector<float> from(static_cast<std::size_t>(n), 1.f), to(static_cast<std::size_t>(n));
  for (Forward const& f : forwards()) {
    int const times = std::max(5, int(1.0 / seconds(f.run)));
    std::vector<double> peaks, copies;
    sb::Profile p;
    double wall = 0;
    for (int i = 0; i < times; ++i) {
      if (sb::fma::available) peaks.push_back(sb::fma::flops() / seconds([] { sb::fma::peak(); }) * 1e-9);
      copies.push_back(2.0 * double(n) * sizeof(float) / seconds([&] { sb::peer::copy(from.data(), to.data(), n); }) * 1e-9);
      wall += seconds(f.run);
    }
    sb::print_profile(std::string(f.model) + " b" + std::to_string(f.batch), p, times, wall,
                      peaks.empty() ? 0 : median(peaks), median(copies), top);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--rss=", 6) == 0) return report_rss(argv[i] + 6);
  sb::print_wait_policy();
  bool profiling = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view const arg = argv[i];
    if (arg == "--profile" || arg.starts_with("--profile="))
      profiling = true, only = arg.substr(std::min<std::size_t>(arg.size(), 10));
    if (arg.starts_with("--top=")) top = std::atoi(argv[i] + 6);
  }

  // Every model lives as long as its benchmarks.
  add_model(new auto(sd::models::alexnet()), "alexnet");
  add_model(new auto(sd::models::resnet18()), "resnet18");
  add_model(new auto(sd::models::resnet50()), "resnet50");
  add_model(new auto(sd::models::mobilenet_v2()), "mobilenet_v2");
  add_model(new auto(sd::models::vit_b_16()), "vit_b_16");
  add_bert(new auto(sd::models::bert()));
  if (profiling) return profile();
  if (sb::fma::available) sb::add("BM_fma_peak", benchmark::kMillisecond, 0, [] { return sb::fma::peak(); });

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);

  double const peak = sb::fma::report_peak(rep);  // GFLOP/s
  std::printf("\n%-14s %5s %10s %10s %8s %9s %6s   (%d threads, %s)\n", "model", "batch", "fused ms", "eager ms",
              "eager/f", "GFLOP/s", "peak", sb::threads, sb::isa);
  for (Model const& m : models)
    for (std::int64_t b : m.batches) {
      double const f = rep.median_ns(bench_name(m.name, b, "fused")), e = rep.median_ns(bench_name(m.name, b, "eager"));
      if (f <= 0) continue;
      double const rate = 2.0 * m.macs * double(b) / f;
      std::printf("%-14s %5lld %10.2f %10.2f %8.2f %9.1f %6.3f\n", m.name, static_cast<long long>(b), f * 1e-6,
                  e * 1e-6, e > 0 ? e / f : 0.0, rate, peak > 0 ? rate / peak : 0.0);
    }
  std::printf("\n");
  for (Model const& m : models)
    for (std::int64_t b : m.batches) {
      std::string const label = std::string(m.name) + " b" + std::to_string(b) + " fused/eager";
      std::string const eager = bench_name(m.name, b, "eager"), fused = bench_name(m.name, b, "fused");
      sb::report_ratio(rep, label.c_str(), eager.c_str(), fused.c_str(), 0);
    }
  return 0;
}
