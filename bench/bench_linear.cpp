// A fused linear layer: relu(linear(x, w, b)), one kernel in solder (the bias and the relu run on
// each finished block of the product, from the cache), against OpenBLAS's sgemm followed by a
// separate OpenMP pass for the bias and the relu (what a library without fusion does), and
// against solder's own product followed by the same pass (sd::eager).
//   x [2048, 768], w [3072, 768] (nn.Linear's [out, in]), b [3072]: BERT-base's intermediate
//   layer for 4 sequences of 512 tokens (with relu for gelu: the peer's pass has no gelu).
// Run OpenBLAS at its best: OMP_WAIT_POLICY=passive in the environment (libgomp's spinning
// threads otherwise take OpenBLAS's cores between the two calls and double its time), e.g.
//   OMP_WAIT_POLICY=passive build/bench/bench_linear
// Target (issue): fused >= 1.15x OpenBLAS + pass.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"

#if defined(SOLDER_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t m = 2048, k = 768, n = 3072;
constexpr double flops = 2.0 * m * n * k;

struct Data {
  sd::Tensor<float, 2> x = sd::randn<float>(sd::shape(m, k));
  sd::Tensor<float, 2> w = sd::randn<float>(sd::shape(n, k)) * 0.036f;  // ~ 1 / sqrt(in)
  sd::Tensor<float, 1> b = sd::randn<float>(sd::shape(n));
  sd::Tensor<float, 2> y{m, n};
};
Data& data() {
  static Data d;
  return d;
}

// y += b, then relu, as one OpenMP pass over y.
void bias_relu(float* y, float const* b) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i) {
    float* row = y + i * n;
#pragma omp simd
    for (std::int64_t j = 0; j < n; ++j) row[j] = std::max(row[j] + b[j], 0.f);
  }
}

#if defined(SOLDER_HAVE_OPENBLAS)
void openblas_linear(Data& d) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.f, d.x.data(), int(k),
              d.w.data(), int(k), 0.f, d.y.data(), int(n));
  bias_relu(d.y.data(), d.b.data());
}
#endif

// Double-precision reference of a sample of rows (every 97th), and the check of y against it
// within the error bound of a dot product of k terms.
void check(char const* what) {
  auto& d = data();
  double worst = 0;
  for (std::int64_t i = 0; i < m; i += 97)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = d.b.data()[j], scale = std::fabs(s);
      for (std::int64_t q = 0; q < k; ++q) {
        double t = double(d.x.data()[i * k + q]) * d.w.data()[j * k + q];
        s += t;
        scale += std::fabs(t);
      }
      double want = s > 0 ? s : 0, got = d.y.data()[i * n + j];
      double err = std::fabs(got - want), bound = (k + 2) * 1.2e-7 * scale + 1e-30;
      if (!(err <= bound)) {
        std::fprintf(stderr, "check %s: FAILED at (%lld, %lld): %.9g vs %.9g\n", what, static_cast<long long>(i),
                     static_cast<long long>(j), got, want);
        std::exit(1);
      }
      worst = std::max(worst, err / bound);
    }
  std::printf("check %-36s worst error %.3f of the dot-product bound  OK\n", what, worst);
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
#if defined(SOLDER_HAVE_OPENBLAS)
  openblas_set_num_threads(sb::threads);
#endif
  sb::print_wait_policy();
  auto& d = data();
  auto fused = sd::relu(sd::linear(d.x, d.w, d.b));
  static_assert(sd::kernel_count<decltype(fused)> == 1);
  d.y = fused;
  check("solder fused");
  d.y = sd::eager(fused);
  check("solder eager");
#if defined(SOLDER_HAVE_OPENBLAS)
  openblas_linear(d);
  check("OpenBLAS + pass");
#endif

  auto us = benchmark::kMicrosecond;
  auto add = [&](char const* name, auto f) {
    sb::add(name, us, 0, [&d, f] {
      f(d);
      return d.y.data();
    });
  };
  add("BM_linear_relu_solder", [](Data& d) { d.y = sd::relu(sd::linear(d.x, d.w, d.b)); });
  add("BM_linear_relu_eager", [](Data& d) { d.y = sd::eager(sd::relu(sd::linear(d.x, d.w, d.b))); });
#if defined(SOLDER_HAVE_OPENBLAS)
  add("BM_linear_relu_openblas", [](Data& d) { openblas_linear(d); });
#endif

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);
  std::printf("\n");
  for (char const* name : {"BM_linear_relu_solder", "BM_linear_relu_eager", "BM_linear_relu_openblas"}) {
    double ns = rep.median_ns(name);
    if (ns > 0) std::printf("%-28s %8.1f GFLOP/s\n", name, flops / ns);
  }
  sb::report_ratio(rep, "linear+relu solder/OpenBLAS+pass", "BM_linear_relu_openblas", "BM_linear_relu_solder", 1.15);
  sb::report_ratio(rep, "linear+relu solder/eager", "BM_linear_relu_eager", "BM_linear_relu_solder", 0);
  return 0;
}
