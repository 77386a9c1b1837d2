// A long element-wise chain on 16M floats, written into an existing tensor:
//     y = tanh(x*0.5 + 0.25) * sigmoid(x) + x*x*0.1 - 0.3        x uniform in [-1, 1]
// solder fused (one kernel) against solder eager (one kernel and one temporary per node: the
// baseline), a hand-written OpenMP loop on glibc's vector maths, Eigen's Tensor module on a
// 2-thread ThreadPoolDevice, and the memory roof (a plain copy of the same bytes, with ordinary
// and with streaming stores). For information, eager once more with a caching allocator, so
// the fused/eager ratio can be read without eager's first-touch page faults. And a kernel bound
// by memory, relu(x*0.5 + 0.25), against the same loop written by hand: solder streams its
// output past the caches (information: how close to the roof such kernels get).
// Targets (issue): fused >= 2x the hand loop, >= 1.5x Eigen, >= 4x eager.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"

#if defined(SOLDER_HAVE_EIGEN)
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>
#endif

namespace sd = solder;
namespace sb = solder_bench;

// ---- A caching allocator, switched on only for BM_solder_eager_cached --------------------------
// solder's storage comes from the aligned operator new. Each 64 MiB eager temporary is a fresh
// mmap, so eager pays ~16K first-touch page faults per temporary on top of its memory traffic.
// A caching allocator (what PyTorch's CUDA allocator does) removes those; the cached variant
// shows what remains of fusion's gain once only the traffic differs. Off, this is the default
// behaviour (aligned_alloc / free).
namespace block_cache {
constexpr std::size_t big = std::size_t{1} << 20;
struct State {
  bool on = false;
  std::mutex mu;
  std::unordered_map<void*, std::size_t> live;       // large blocks handed out, with sizes
  std::vector<std::pair<void*, std::size_t>> spare;  // freed large blocks kept for reuse
};
State& state() {
  static State s;
  return s;
}
void set(bool on) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.on = on;
  if (!on) {
    for (auto& b : s.spare) std::free(b.first);
    s.spare.clear();
  }
}
}  // namespace block_cache

void* operator new(std::size_t n, std::align_val_t al) {
  std::size_t a = static_cast<std::size_t>(al);
  if (n >= block_cache::big) {
    auto& s = block_cache::state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.on && a <= 64)
      for (auto it = s.spare.begin(); it != s.spare.end(); ++it)
        if (it->second == n) {
          void* p = it->first;
          s.spare.erase(it);
          s.live.emplace(p, n);
          return p;
        }
    void* p = std::aligned_alloc(std::max<std::size_t>(a, 64), (n + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    s.live.emplace(p, n);
    return p;
  }
  void* p = std::aligned_alloc(a, (n + a - 1) / a * a);
  if (!p) throw std::bad_alloc();
  return p;
}
void operator delete(void* p, std::align_val_t) noexcept {
  if (!p) return;
  auto& s = block_cache::state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.live.find(p);
    if (it != s.live.end()) {
      std::size_t n = it->second;
      s.live.erase(it);
      if (s.on) {
        s.spare.emplace_back(p, n);
        return;
      }
    }
  }
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t al) noexcept { operator delete(p, al); }

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

void BM_solder_eager_cached(benchmark::State& state) {
  auto& d = data();
  block_cache::set(true);
  { auto warm = sd::eager(chain(d.x)); }  // fills the cache: the timed loop reuses its blocks
  for (auto _ : state) {
    auto r = sd::eager(chain(d.x));
    benchmark::DoNotOptimize(r.data());
    benchmark::ClobberMemory();
  }
  block_cache::set(false);
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
  float const nan = std::numeric_limits<float>::quiet_NaN();
  // Every output starts as NaN, so a peer that skips elements cannot pass on stale values.
  sb::peer::fill(d.y.data(), n, nan);
  d.y = e;
  sb::check_close("solder fused vs double reference", d.y.data(), ref.data(), n, tol);
  auto r = sd::eager(e);
  sb::check_close("solder eager vs double reference", r.data(), ref.data(), n, tol);
  sd::Tensor<float, 1> p(n);
  sb::peer::fill(p.data(), n, nan);
  sb::peer::chain(d.x.data(), p.data(), n);
  sb::check_close("hand loop (libmvec) vs double reference", p.data(), ref.data(), n, tol);
#if defined(SOLDER_HAVE_EIGEN)
  sb::peer::fill(p.data(), n, nan);
  eigen_chain(d.x.data(), p.data());
  sb::check_close("Eigen Tensor vs double reference", p.data(), ref.data(), n, tol);
#endif
  {
    float const* x = d.x.data();
    float* r = ref.data();
    for (std::int64_t i = 0; i < n; ++i) r[i] = static_cast<float>(std::max(x[i] * 0.5 + 0.25, 0.0));
  }
  sb::peer::fill(d.y.data(), n, nan);
  d.y = sd::relu(d.x * 0.5f + 0.25f);
  sb::check_close("solder relu(x*0.5+0.25) vs double", d.y.data(), ref.data(), n, 6e-8);
  sb::peer::fill(p.data(), n, nan);
  sb::peer::affine_relu(d.x.data(), p.data(), n);
  sb::check_close("hand relu(x*0.5+0.25) vs double", p.data(), ref.data(), n, 6e-8);
  sb::peer::fill(p.data(), n, nan);
  sb::peer::copy(d.x.data(), p.data(), n);
  sb::check_close("copy", p.data(), d.x.data(), n, 0);
  sb::peer::fill(p.data(), n, nan);
  sb::peer::copy_stream(d.x.data(), p.data(), n);
  sb::check_close("copy (streaming stores)", p.data(), d.x.data(), n, 0);
  sb::peer::fill(d.y.data(), n, 0.f);
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  check_peers();

  auto ms = benchmark::kMillisecond;
  auto& d = data();
  sb::add("BM_solder_fused", ms, bytes_per_iter, [&] { return (d.y = chain(d.x)).data(); });
  // A fresh result and a temporary per node, as PyTorch eager.
  sb::add("BM_solder_eager", ms, bytes_per_iter, [&] { return sd::eager(chain(d.x)).data(); });
  sb::configure(benchmark::RegisterBenchmark("BM_solder_eager_cached", BM_solder_eager_cached), ms);
  sb::add("BM_hand_omp_libmvec", ms, bytes_per_iter, [&] {
    sb::peer::chain(d.x.data(), d.y.data(), n);
    return d.y.data();
  });
#if defined(SOLDER_HAVE_EIGEN)
  sb::add("BM_eigen_tensor", ms, bytes_per_iter, [&] {
    eigen_chain(d.x.data(), d.y.data());
    return d.y.data();
  });
#endif
  sb::add("BM_solder_light", ms, bytes_per_iter, [&] { return (d.y = sd::relu(d.x * 0.5f + 0.25f)).data(); });
  sb::add("BM_hand_omp_light", ms, bytes_per_iter, [&] {
    sb::peer::affine_relu(d.x.data(), d.y.data(), n);
    return d.y.data();
  });
  sb::add("BM_copy_omp", ms, bytes_per_iter, [&] {
    sb::peer::copy(d.x.data(), d.y.data(), n);
    return d.y.data();
  });
  sb::add("BM_copy_stream", ms, bytes_per_iter, [&] {
    sb::peer::copy_stream(d.x.data(), d.y.data(), n);
    return d.y.data();
  });

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
  sb::report_ratio(rep, "fused/eager with a caching allocator", "BM_solder_eager_cached",
                   "BM_solder_fused", 0);
  double c = rep.median_ns("BM_copy_omp"), s = rep.median_ns("BM_copy_stream");
  char const* roof = (s > 0 && (c <= 0 || s < c)) ? "BM_copy_stream" : "BM_copy_omp";
  std::printf("memory roof: %s (the faster copy)\n", roof);
  sb::report_fraction(rep, "fused vs memory roof (time_roof / time_fused)", roof, "BM_solder_fused");
  // Plain stores also read each destination line first (write-allocate): the roof for a
  // kernel that writes with ordinary stores, as the chain does (it is bound by arithmetic).
  sb::report_fraction(rep, "fused vs plain-store copy", "BM_copy_omp", "BM_solder_fused");
  sb::report_fraction(rep, "Eigen vs plain-store copy", "BM_copy_omp", "BM_eigen_tensor");
  sb::report_ratio(rep, "relu(x*0.5+0.25): solder/hand loop", "BM_hand_omp_light", "BM_solder_light", 0);
  sb::report_fraction(rep, "relu(x*0.5+0.25), solder vs memory roof", roof, "BM_solder_light");
  return 0;
}
