// sgemm: solder's host GEMM engine (backend/host/gemm.hpp, its epilogue a plain store of each
// finished block into C) against OpenBLAS (cblas_sgemm) and oneDNN (dnnl_sgemm), all on
// sb::threads threads in the same process, and the machine's FMA peak measured in the same run.
//   square     C[n, n] = A[n, n] B[n, n], row-major, n = 256, 512, 1024, 2048
//   layers     as linear layers, y = x W^T with W [out, in] (B's k contiguous):
//              BERT-base [512, 768] x [768, 768] (attention projections), x [768, 3072] (FFN up),
//              [512, 3072] x [3072, 768] (FFN down); ResNet-50's 1x1 convolution of its first
//              stage as a GEMM, [56 * 56, 64] x [64, 256]
//   skinny     a batch-1 linear layer, [1, 4096] x [4096, 4096] (W^T), and the same with B
//              row-major (the engine's skinny path; no target: bound by memory)
//   fma_peak   independent vector FMAs on every thread (16 zmm / 12 ymm accumulators): the roof
// Every product is checked against a double-precision reference on sampled rows before any
// timing, within the error bound of a float dot product of length k.
// Targets (issue 28): solder >= 0.95x OpenBLAS and >= 0.95x oneDNN on the square and layer
// shapes. Each result is also printed as GFLOP/s and as a fraction of the FMA peak.
//
// Run it with OMP_WAIT_POLICY=passive in the environment:
//     OMP_WAIT_POLICY=passive ./bench_gemm
// OpenBLAS runs on its own pthreads; libgomp's idle threads (solder's and oneDNN's) otherwise
// spin after each parallel region and take the cores OpenBLAS needs next. The peers choose
// their kernels from the CPU they run on, not from the flags this file is built with: built
// for AVX2 (-march=x86-64-v3) on an AVX-512 machine, hold them to AVX2 as well,
//     OMP_WAIT_POLICY=passive OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2 ./bench_gemm
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"
#include "fma_peak.hpp"

#if defined(SOLDER_HAVE_OPENBLAS)
#include <cblas.h>
#endif
#if defined(SOLDER_HAVE_DNNL)
#include <dnnl.h>
#endif

namespace sd = solder;
namespace sb = solder_bench;
namespace gemm = sd::detail::host::gemm;

namespace {

using i64 = std::int64_t;

struct Shape {
  char const* name;
  i64 m, n, k;
  bool b_transposed;  // B = W^T, W [n, k] row-major
  double target;      // against each peer; 0: information only
};

Shape const shapes[] = {
    {"square_256", 256, 256, 256, false, 0.95},
    {"square_512", 512, 512, 512, false, 0.95},
    {"square_1024", 1024, 1024, 1024, false, 0.95},
    {"square_2048", 2048, 2048, 2048, false, 0.95},
    {"bert_qkv_512x768x768", 512, 768, 768, true, 0.95},
    {"bert_ffn_up_512x3072x768", 512, 3072, 768, true, 0.95},
    {"bert_ffn_down_512x768x3072", 512, 768, 3072, true, 0.95},
    {"resnet_1x1_3136x256x64", 3136, 256, 64, true, 0.95},
    {"linear_m1_1x4096x4096", 1, 4096, 4096, true, 0},
    {"gemv_rows_1x4096x4096", 1, 4096, 4096, false, 0},
};

struct Problem {
  Shape s;
  std::vector<float> a, b, c;
  i64 ldb() const { return s.b_transposed ? s.k : s.n; }
};

std::vector<Problem>& problems() {
  static std::vector<Problem> all = [] {
    std::vector<Problem> ps;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> value(-1, 1);
    for (Shape const& s : shapes) {
      Problem p{s, std::vector<float>(static_cast<std::size_t>(s.m * s.k)),
                std::vector<float>(static_cast<std::size_t>(s.k * s.n)),
                std::vector<float>(static_cast<std::size_t>(s.m * s.n))};
      for (auto& x : p.a) x = value(rng);
      for (auto& x : p.b) x = value(rng);
      sb::peer::fill(p.c.data(), s.m * s.n, 0.f);
      ps.push_back(std::move(p));
    }
    return ps;
  }();
  return all;
}

// solder: the engine with the epilogue of a plain product, each row of a block copied to C.
struct Store {
  float* c;
  i64 ldc;
  static void rows(void* ctx, i64, i64 i0, i64 j0, i64 mt, i64 nt, float const* block, i64 ld) {
    auto const& s = *static_cast<Store const*>(ctx);
    for (i64 i = 0; i < mt; ++i)
      std::memcpy(s.c + (i0 + i) * s.ldc + j0, block + i * ld,
                  static_cast<std::size_t>(nt) * sizeof(float));
  }
};

void solder_sgemm(Problem& p) {
  Store store{p.c.data(), p.s.n};
  gemm::Left<float> a;
  a.memory = {p.a.data(), p.s.k, 1, 0};
  gemm::Strided<float> const b = p.s.b_transposed ? gemm::Strided<float>{p.b.data(), 1, p.s.k, 0}
                                                  : gemm::Strided<float>{p.b.data(), p.s.n, 1, 0};
  gemm::run<float>({1, p.s.m, p.s.n, p.s.k}, a, b, {&Store::rows, &store});
}

#if defined(SOLDER_HAVE_OPENBLAS)
void openblas_sgemm(Problem& p) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, p.s.b_transposed ? CblasTrans : CblasNoTrans, int(p.s.m),
              int(p.s.n), int(p.s.k), 1.f, p.a.data(), int(p.s.k), p.b.data(), int(p.ldb()), 0.f,
              p.c.data(), int(p.s.n));
}
#endif
#if defined(SOLDER_HAVE_DNNL)
void onednn_sgemm(Problem& p) {  // row-major, as cblas_sgemm's CblasRowMajor
  dnnl_sgemm('N', p.s.b_transposed ? 'T' : 'N', p.s.m, p.s.n, p.s.k, 1.f, p.a.data(), p.s.k,
             p.b.data(), p.ldb(), 0.f, p.c.data(), p.s.n);
}
#endif

// Registers `name` as sb::add does, with a GFLOP/s counter (2 m n k per product).
template <class F>
void add(std::string const& name, double flops, F f) {
  auto run = [f, flops](benchmark::State& state) {
    for (auto _ : state) {
      f();
      benchmark::ClobberMemory();
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  };
  sb::configure(benchmark::RegisterBenchmark(name.c_str(), run), benchmark::kMicrosecond);
}

// Every product checked once, before any timing, against double loops on sampled rows:
// |c - exact| <= k eps sum |a||b| (the bound of any order of summation), plus the half ulp
// of rounding the exact value to float for the comparison.
void check_all() {
  for (Problem& p : problems()) {
    Shape const& s = p.s;
    i64 const rows = std::min<i64>(s.m, 8);
    std::vector<float> ref(static_cast<std::size_t>(rows * s.n)), got(ref.size());
    double bound = 0;
    for (i64 r = 0; r < rows; ++r) {
      i64 const i = r * s.m / rows;
      for (i64 j = 0; j < s.n; ++j) {
        double exact = 0, magnitude = 0;
        for (i64 q = 0; q < s.k; ++q) {
          double const x = double(p.a[std::size_t(i * s.k + q)]) *
                           double(p.b[std::size_t(s.b_transposed ? j * s.k + q : q * s.n + j)]);
          exact += x, magnitude += std::fabs(x);
        }
        ref[std::size_t(r * s.n + j)] = float(exact);
        bound = std::max(bound, double(s.k) * std::numeric_limits<float>::epsilon() * magnitude +
                                    std::fabs(exact) * std::numeric_limits<float>::epsilon());
      }
    }
    auto verify = [&](char const* who, void (*f)(Problem&)) {
      sb::peer::fill(p.c.data(), s.m * s.n, std::numeric_limits<float>::quiet_NaN());
      f(p);
      for (i64 r = 0; r < rows; ++r)
        std::memcpy(got.data() + r * s.n, p.c.data() + (r * s.m / rows) * s.n,
                    std::size_t(s.n) * sizeof(float));
      std::string const what = std::string(s.name) + ": " + who + " vs double";
      sb::check_close(what.c_str(), got.data(), ref.data(), rows * s.n, bound);
    };
    verify("solder", solder_sgemm);
#if defined(SOLDER_HAVE_OPENBLAS)
    verify("OpenBLAS", openblas_sgemm);
#endif
#if defined(SOLDER_HAVE_DNNL)
    verify("oneDNN", onednn_sgemm);
#endif
  }
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
#if defined(SOLDER_HAVE_OPENBLAS)
  openblas_set_num_threads(sb::threads);
#endif
  sb::print_wait_policy();
  check_all();

  for (Problem& p : problems()) {
    double const flops = 2.0 * double(p.s.m) * double(p.s.n) * double(p.s.k);
    std::string const base = std::string("BM_") + p.s.name;
    add(base + "_solder", flops, [&p] { solder_sgemm(p); });
#if defined(SOLDER_HAVE_OPENBLAS)
    add(base + "_openblas", flops, [&p] { openblas_sgemm(p); });
#endif
#if defined(SOLDER_HAVE_DNNL)
    add(base + "_onednn", flops, [&p] { onednn_sgemm(p); });
#endif
  }
  if (sb::fma::available) add("BM_fma_peak", sb::fma::flops(), [] { benchmark::DoNotOptimize(sb::fma::peak()); });

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);

  double const peak = sb::fma::report_peak(rep);  // GFLOP/s
  std::printf("\n%-28s %10s %8s %6s | %8s %6s | %8s %6s | %7s %7s\n", "shape (GFLOP/s, of peak)",
              "solder ms", "solder", "peak", "OpenBLAS", "peak", "oneDNN", "peak", "vs OB",
              "vs DNNL");
  for (Problem const& p : problems()) {
    double const flops = 2.0 * double(p.s.m) * double(p.s.n) * double(p.s.k);
    std::string const base = std::string("BM_") + p.s.name;
    auto rate = [&](char const* who) {
      double const ns = rep.median_ns(base + who);
      return ns > 0 ? flops / ns : 0;
    };
    double const s = rate("_solder"), o = rate("_openblas"), d = rate("_onednn");
    auto of_peak = [&](double r) { return peak > 0 ? r / peak : 0; };
    std::printf("%-28s %10.3f %8.1f %6.2f | %8.1f %6.2f | %8.1f %6.2f | %7.2f %7.2f\n", p.s.name,
                rep.median_ns(base + "_solder") * 1e-6, s, of_peak(s), o, of_peak(o), d, of_peak(d),
                o > 0 ? s / o : 0, d > 0 ? s / d : 0);
  }
  std::printf("\n");
  for (Problem const& p : problems()) {
    std::string const base = std::string("BM_") + p.s.name, mine = base + "_solder";
    std::string const ob = base + "_openblas", dn = base + "_onednn";
    std::string const l1 = std::string(p.s.name) + " solder/OpenBLAS",
                      l2 = std::string(p.s.name) + " solder/oneDNN";
    sb::report_ratio(rep, l1.c_str(), ob.c_str(), mine.c_str(), p.s.target);
    sb::report_ratio(rep, l2.c_str(), dn.c_str(), mine.c_str(), p.s.target);
  }
  return 0;
}
