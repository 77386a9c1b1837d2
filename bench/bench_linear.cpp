// Linear layers at BERT-base's and ViT-B/16's shapes, as the models run them, against oneDNN's
// sgemm in the same process (issue 38 #3).
//   x [batch, tokens, in] (BERT: 8 sequences of 128 tokens, M = 1024; ViT: 8 images of 197
//   tokens, M = 1576), w [out, in] (PyTorch's), in -> out: 768 -> 768 (attention's output
//   projection), 768 -> 2304 (the fused q, k, v projection), 768 -> 3072 (FFN up), 3072 -> 768
//   (FFN down).
// Per shape:
//   solder        nn::Linear(in, out, no bias)(x): the weight packed once and kept (its PackCache)
//   unpacked      sd::linear(x, w): the weight packed on every call
//   onednn        dnnl_sgemm('N', 'T'): y = x w^T, row-major
//   relu          relu(nn::Linear(in, out)(x)): one kernel, the bias and the relu on each finished
//                 block of the product
//   onednn_pass   dnnl_sgemm, then one OpenMP pass for the bias and the relu
// and BM_fma_peak (bench/fma_peak.hpp). Every result is checked first against double sums of
// sampled rows. Then the ratios again as medians of back-to-back pairs (paired_ratio), which a
// neighbour's load on this shared machine moves less than the medians of separate runs.
// Targets (issue 38): solder >= 0.95x oneDNN's sgemm; relu >= 1.15x oneDNN + pass.
// Run it with passive waiting (libgomp's spinning threads otherwise take oneDNN's cores):
//     OMP_WAIT_POLICY=passive build/bench/bench_linear
// Built for AVX2 (-march=x86-64-v3) on an AVX-512 machine, hold oneDNN to AVX2 as well:
//     OMP_WAIT_POLICY=passive ONEDNN_MAX_CPU_ISA=AVX2 build-avx2/bench/bench_linear
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"
#include "fma_peak.hpp"

#if defined(SOLDER_HAVE_DNNL)
#include <dnnl.h>
#endif

namespace sd = solder;
namespace sb = solder_bench;

namespace {

using i64 = std::int64_t;

struct Shape {
  char const* name;
  i64 batch, tokens, in, out;
  i64 m() const { return batch * tokens; }
  double flops() const { return 2.0 * double(m()) * double(in) * double(out); }
};
Shape const shapes[] = {
    {"bert_proj_1024x768x768", 8, 128, 768, 768},   {"bert_qkv_1024x768x2304", 8, 128, 768, 2304},
    {"bert_up_1024x768x3072", 8, 128, 768, 3072},   {"bert_down_1024x3072x768", 8, 128, 3072, 768},
    {"vit_proj_1576x768x768", 8, 197, 768, 768},    {"vit_qkv_1576x768x2304", 8, 197, 768, 2304},
    {"vit_up_1576x768x3072", 8, 197, 768, 3072},    {"vit_down_1576x3072x768", 8, 197, 3072, 768},
};

struct Layer {
  Shape s;
  sd::Tensor<float, 3> x;
  sd::nn::Linear plain, biased;  // the same weight; plain without a bias
  sd::Tensor<float, 3> y;
  explicit Layer(Shape const& shape)
      : s(shape), x(sd::randn<float>(sd::shape(s.batch, s.tokens, s.in))), plain(s.in, s.out, {.bias = false}),
        biased(s.in, s.out), y(s.batch, s.tokens, s.out) {
    plain.weight = biased.weight;
    biased.bias.value = sd::randn<float>(sd::shape(s.out));
    sd::nn::eval(plain), sd::nn::eval(biased);
  }
  float const* w() const { return plain.weight.data(); }
  float const* b() const { return biased.bias.value.data(); }
};
std::vector<std::unique_ptr<Layer>>& layers() {
  static std::vector<std::unique_ptr<Layer>> all = [] {
    std::vector<std::unique_ptr<Layer>> v;
    for (Shape const& s : shapes) v.push_back(std::make_unique<Layer>(s));
    return v;
  }();
  return all;
}

#if defined(SOLDER_HAVE_DNNL)
void onednn(Layer& l) {
  dnnl_sgemm('N', 'T', l.s.m(), l.s.out, l.s.in, 1.f, l.x.data(), l.s.in, l.w(), l.s.in, 0.f, l.y.data(), l.s.out);
}
// y = max(y + b, 0), one OpenMP pass.
void bias_relu(Layer& l) {
  float* y = l.y.data();
  float const* b = l.b();
  i64 const m = l.s.m(), n = l.s.out;
#pragma omp parallel for schedule(static)
  for (i64 i = 0; i < m; ++i) {
    float* row = y + i * n;
#pragma omp simd
    for (i64 j = 0; j < n; ++j) row[j] = std::max(row[j] + b[j], 0.f);
  }
}
#endif

// y against double sums of every 61st row (with the bias and the relu when `relu`), within the
// error bound of a float dot product of `in` terms.
void check(Layer const& l, char const* who, bool relu) {
  i64 const k = l.s.in, n = l.s.out;
  double worst = 0;
  for (i64 i = 0; i < l.s.m(); i += 61)
    for (i64 j = 0; j < n; ++j) {
      double s = relu ? l.b()[j] : 0, scale = std::fabs(s);
      for (i64 q = 0; q < k; ++q) {
        double const t = double(l.x.data()[i * k + q]) * l.w()[j * k + q];
        s += t, scale += std::fabs(t);
      }
      double const want = relu && s < 0 ? 0 : s, got = l.y.data()[i * n + j];
      double const err = std::fabs(got - want), bound = double(k + 2) * 1.2e-7 * scale + 1e-30;
      if (!(err <= bound)) {
        std::fprintf(stderr, "check %s %s: FAILED at (%lld, %lld): %.9g vs %.9g\n", l.s.name, who,
                     static_cast<long long>(i), static_cast<long long>(j), got, want);
        std::exit(1);
      }
      worst = std::max(worst, err / bound);
    }
  std::printf("check %-26s %-12s worst error %.3f of the bound  OK\n", l.s.name, who, worst);
}

// The median over `pairs` back-to-back runs of f and g (alternating which goes first) of
// time(g) / time(f): each pair sees the machine in one state, so the ratio holds while a
// neighbour's load comes and goes (this machine's speed halves when another process runs).
template <class F, class G>
double paired_ratio(F f, G g, int pairs = 15) {
  auto seconds = [](auto const& h) {
    auto const begin = std::chrono::steady_clock::now();
    h();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  std::vector<double> r;
  for (int i = 0; i < pairs; ++i) {
    double tf = 0, tg = 0;
    if (i % 2) tf = seconds(f), tg = seconds(g);
    else tg = seconds(g), tf = seconds(f);
    r.push_back(tg / tf);
  }
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

template <class F>
void add(std::string const& name, double flops, F f) {
  auto run = [f, flops](benchmark::State& state) {
    for (auto _ : state) {
      f();
      benchmark::ClobberMemory();
    }
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  };
  sb::configure(benchmark::RegisterBenchmark(name.c_str(), run), benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  sb::print_wait_policy();
  for (auto& lp : layers()) {
    Layer& l = *lp;
    l.y = l.plain(l.x);
    check(l, "solder", false);
    l.y = sd::linear(l.x, l.plain.weight);
    check(l, "unpacked", false);
    l.y = sd::relu(l.biased(l.x));
    check(l, "relu", true);
#if defined(SOLDER_HAVE_DNNL)
    onednn(l);
    check(l, "onednn", false);
    bias_relu(l);
    check(l, "onednn_pass", true);
#endif
    std::string const base = std::string("BM_") + l.s.name;
    double const flops = l.s.flops();
    add(base + "_solder", flops, [&l] { l.y = l.plain(l.x); });
    add(base + "_unpacked", flops, [&l] { l.y = sd::linear(l.x, l.plain.weight); });
    add(base + "_relu", flops, [&l] { l.y = sd::relu(l.biased(l.x)); });
#if defined(SOLDER_HAVE_DNNL)
    add(base + "_onednn", flops, [&l] { onednn(l); });
    add(base + "_onednn_pass", flops, [&l] {
      onednn(l);
      bias_relu(l);
    });
#endif
  }
  if (sb::fma::available) add("BM_fma_peak", sb::fma::flops(), [] { benchmark::DoNotOptimize(sb::fma::peak()); });

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);
  double const peak = sb::fma::report_peak(rep);
  auto rate = [&](Shape const& s, char const* who) {
    double const ns = rep.median_ns(std::string("BM_") + s.name + who);
    return ns > 0 ? s.flops() / ns : 0;
  };
  auto of_peak = [&](double r) { return peak > 0 ? r / peak : 0; };
  std::printf("\nGFLOP/s (of the FMA peak), %d threads, %s:\n%-26s %13s %13s %13s %13s %13s\n", sb::threads, sb::isa,
              "shape", "solder", "unpacked", "oneDNN", "relu", "oneDNN+pass");
  for (Shape const& s : shapes) {
    std::printf("%-26s", s.name);
    for (char const* who : {"_solder", "_unpacked", "_onednn", "_relu", "_onednn_pass"})
      std::printf(" %6.1f (%.2f)", rate(s, who), of_peak(rate(s, who)));
    std::printf("\n");
  }
#if defined(SOLDER_HAVE_DNNL)
  std::printf("\nmedians of 15 back-to-back pairs, time(oneDNN) / time(solder), %d threads, %s:\n%-26s %8s %9s %12s\n",
              sb::threads, sb::isa, "shape", "solder", "unpacked", "relu/+pass");
  for (auto& lp : layers()) {
    Layer& l = *lp;
    if (rep.median_ns(std::string("BM_") + l.s.name + "_solder") <= 0) continue;  // (filtered out)
    auto dnnl = [&l] { onednn(l); };
    double const packed = paired_ratio([&l] { l.y = l.plain(l.x); }, dnnl),
                 unpacked = paired_ratio([&l] { l.y = sd::linear(l.x, l.plain.weight); }, dnnl),
                 relu = paired_ratio([&l] { l.y = sd::relu(l.biased(l.x)); }, [&l] {
                   onednn(l);
                   bias_relu(l);
                 });
    std::printf("%-26s %7.2fx %8.2fx %11.2fx\n", l.s.name, packed, unpacked, relu);
  }
#endif
  std::printf("\n");
  for (Shape const& s : shapes) {
    std::string const base = std::string("BM_") + s.name;
    std::string const l1 = std::string(s.name) + " solder/oneDNN", l2 = std::string(s.name) + " unpacked/oneDNN",
                      l3 = std::string(s.name) + " relu/(oneDNN+pass)";
    sb::report_ratio(rep, l1.c_str(), (base + "_onednn").c_str(), (base + "_solder").c_str(), 0.95);
    sb::report_ratio(rep, l2.c_str(), (base + "_onednn").c_str(), (base + "_unpacked").c_str(), 0);
    sb::report_ratio(rep, l3.c_str(), (base + "_onednn_pass").c_str(), (base + "_relu").c_str(), 1.15);
  }
  return 0;
}
