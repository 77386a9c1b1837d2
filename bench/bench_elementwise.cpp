// A long element-wise chain on 16M floats, written into an existing tensor:
//     y = tanh(x*0.5 + 0.25) * sigmoid(x) + x*x*0.1 - 0.3        x uniform in [-1, 1]
// solder fused (one kernel) against solder eager (one kernel and one temporary per node: the
// baseline), a hand-written OpenMP loop on glibc's vector maths, Eigen's Tensor module on a
// 2-thread ThreadPoolDevice, and the memory roof (a plain copy of the same bytes).
// Targets (issue): fused >= 2x the hand loop, >= 1.5x Eigen, >= 4x eager.
#include <algorithm>
#include <cstdio>

#include <solder/solder.hpp>

#include "common.hpp"

#if defined(SOLDER_HAVE_EIGEN)
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>
#endif

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t n = std::int64_t{1} << 24;                        // 16M floats
constexpr double bytes_per_iter = 2.0 * static_cast<double>(n) * sizeof(float);  // 64 MiB in + 64 MiB out

struct Data {
  sd::Tensor<float, 1> x = sd::rand<float>(sd::shape(n), -1.f, 1.f);
  sd::Tensor<float, 1> y{n};
  Data() { sb::peer::fill(y.data(), n, 0.f); }  // touched before any timing
};
Data& data() {
  static Data d;
  return d;
}

template <class X>
auto chain(X const& x) {
  return sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
}

#if defined(SOLDER_HAVE_EIGEN)
using EMap = Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor, Eigen::Index>, Eigen::Aligned64>;
struct EigenEnv {
  Eigen::ThreadPool pool{sb::threads};
  Eigen::ThreadPoolDevice dev{&pool, sb::threads};
};
EigenEnv& eigen() {
  static EigenEnv e;
  return e;
}
void eigen_chain(float const* xp, float* yp) {
  EMap x(const_cast<float*>(xp), n), y(yp, n);
  y.device(eigen().dev) = (x * 0.5f + 0.25f).tanh() * x.sigmoid() + x * x * 0.1f - 0.3f;
}
#endif

void BM_solder_fused(benchmark::State& state) {
  auto& d = data();
  for (auto _ : state) {
    d.y = chain(d.x);
    benchmark::DoNotOptimize(d.y.data());
    benchmark::ClobberMemory();
  }
  sb::set_bytes(state, bytes_per_iter);
}

void BM_solder_eager(benchmark::State& state) {
  auto& d = data();
  for (auto _ : state) {
    auto r = sd::eager(chain(d.x));  // a fresh result and a temporary per node, as PyTorch eager
    benchmark::DoNotOptimize(r.data());
    benchmark::ClobberMemory();
  }
  sb::set_bytes(state, bytes_per_iter);
}

void BM_hand_omp_libmvec(benchmark::State& state) {
  auto& d = data();
  for (auto _ : state) {
    sb::peer::chain(d.x.data(), d.y.data(), n);
    benchmark::DoNotOptimize(d.y.data());
    benchmark::ClobberMemory();
  }
  sb::set_bytes(state, bytes_per_iter);
}

#if defined(SOLDER_HAVE_EIGEN)
void BM_eigen_tensor(benchmark::State& state) {
  auto& d = data();
  for (auto _ : state) {
    eigen_chain(d.x.data(), d.y.data());
    benchmark::DoNotOptimize(d.y.data());
    benchmark::ClobberMemory();
  }
  sb::set_bytes(state, bytes_per_iter);
}
#endif

void BM_copy_omp(benchmark::State& state) {
  auto& d = data();
  for (auto _ : state) {
    sb::peer::copy(d.x.data(), d.y.data(), n);
    benchmark::DoNotOptimize(d.y.data());
    benchmark::ClobberMemory();
  }
  sb::set_bytes(state, bytes_per_iter);
}

void BM_copy_stream(benchmark::State& state) {
  auto& d = data();
  for (auto _ : state) {
    sb::peer::copy_stream(d.x.data(), d.y.data(), n);
    benchmark::DoNotOptimize(d.y.data());
    benchmark::ClobberMemory();
  }
  sb::set_bytes(state, bytes_per_iter);
}

// Every peer must compute what solder computes before any of them is timed.
void check_peers() {
  auto& d = data();
  auto e = chain(d.x);
  std::printf("solder plan: %d fused kernel(s), eager: %d kernels\n", sd::kernel_count<decltype(e)>,
              sd::eager_kernel_count<decltype(e)>);
  sd::Tensor<float, 1> ref(n);  // double-precision reference
  {
    float const* x = d.x.data();
    float* r = ref.data();
    for (std::int64_t i = 0; i < n; ++i) {
      double v = x[i];
      r[i] = static_cast<float>(std::tanh(v * 0.5 + 0.25) / (1.0 + std::exp(-v)) + v * v * 0.1 - 0.3);
    }
  }
  constexpr double tol = 2e-6;  // |y| <= 1.2: a few float ulps
  d.y = e;
  sb::check_close("solder fused vs double reference", d.y.data(), ref.data(), n, tol);
  auto r = sd::eager(e);
  sb::check_close("solder eager vs double reference", r.data(), ref.data(), n, tol);
  sd::Tensor<float, 1> p(n);
  sb::peer::chain(d.x.data(), p.data(), n);
  sb::check_close("hand loop (libmvec) vs double reference", p.data(), ref.data(), n, tol);
#if defined(SOLDER_HAVE_EIGEN)
  eigen_chain(d.x.data(), p.data());
  sb::check_close("Eigen Tensor vs double reference", p.data(), ref.data(), n, tol);
#endif
  sb::peer::copy(d.x.data(), p.data(), n);
  sb::check_close("copy", p.data(), d.x.data(), n, 0);
  sb::peer::fill(p.data(), n, 0.f);
  sb::peer::copy_stream(d.x.data(), p.data(), n);
  sb::check_close("copy (streaming stores)", p.data(), d.x.data(), n, 0);
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  check_peers();

  auto ms = benchmark::kMillisecond;
  sb::configure(benchmark::RegisterBenchmark("BM_solder_fused", BM_solder_fused), ms);
  sb::configure(benchmark::RegisterBenchmark("BM_solder_eager", BM_solder_eager), ms);
  sb::configure(benchmark::RegisterBenchmark("BM_hand_omp_libmvec", BM_hand_omp_libmvec), ms);
#if defined(SOLDER_HAVE_EIGEN)
  sb::configure(benchmark::RegisterBenchmark("BM_eigen_tensor", BM_eigen_tensor), ms);
#endif
  sb::configure(benchmark::RegisterBenchmark("BM_copy_omp", BM_copy_omp), ms);
  sb::configure(benchmark::RegisterBenchmark("BM_copy_stream", BM_copy_stream), ms);

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;

  sb::print_medians(rep);
  std::printf("\n");
  sb::report_ratio(rep, "fused/hand loop", "BM_hand_omp_libmvec", "BM_solder_fused", 2.0);
#if defined(SOLDER_HAVE_EIGEN)
  sb::report_ratio(rep, "fused/Eigen", "BM_eigen_tensor", "BM_solder_fused", 1.5);
#else
  std::printf("ratio fused/Eigen: n/a (built without Eigen)\n");
#endif
  sb::report_ratio(rep, "fused/eager", "BM_solder_eager", "BM_solder_fused", 4.0);
  double c = rep.median_ns("BM_copy_omp"), s = rep.median_ns("BM_copy_stream");
  char const* roof = (s > 0 && (c <= 0 || s < c)) ? "BM_copy_stream" : "BM_copy_omp";
  std::printf("memory roof: %s\n", roof);
  sb::report_fraction(rep, "fused vs memory roof (time_roof / time_fused)", roof, "BM_solder_fused");
  return 0;
}
