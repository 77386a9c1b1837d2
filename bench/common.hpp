// Shared pieces of solder's benchmark programs (STYLE.md §8: every benchmark next to a copy
// baseline, bytes moved reported as a counter).
//
//   * configure(b, unit)    the house settings: real time (the kernels are multi-threaded),
//                           5 repetitions, aggregates only; the medians are what ratios use.
//   * add(name, unit, bytes, f)  registers a benchmark whose iteration is f(), so configured.
//   * MedianReporter        the console reporter, which also keeps each benchmark's median
//                           real time so main() can print the target lines itself.
//   * report_ratio(...)     "ratio fused/eager: 4.30x (target >= 4x) MET".
//   * check_close(...)      every peer is checked against solder once, before any timing:
//                           a benchmark of a wrong peer is worthless, so a mismatch aborts.
//   * peer::...             hand-written reference kernels, in bench/peer_*.cpp (their own
//                           translation units, so -ffast-math stays in peer_vecmath.cpp).
#pragma once
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace solder_bench {

// The vector ISA the program was compiled for: every table says which one ran, and targets that
// depend on it (bench_rows) read it.
inline constexpr bool avx512 =
#if defined(__AVX512F__)
    true;
#else
    false;
#endif
inline constexpr char const* isa = avx512 ? "AVX-512"
#if defined(__AVX2__)
                                          : "AVX2";
#else
                                          : "SSE2";
#endif
inline constexpr int threads = 2;  // every comparison runs on 2 threads (sd, OpenMP, Eigen)

// Prints OMP_WAIT_POLICY, with a note unless it is passive: libgomp reads it before main, and its
// threads spinning between parallel regions take the cores of a library with threads of its own
// (OpenBLAS, oneDNN) and slow it down, so a peer is at its best only with passive waiting.
inline void print_wait_policy() {
  char const* wait = std::getenv("OMP_WAIT_POLICY");
  bool const passive = wait && (std::string_view(wait) == "passive" || std::string_view(wait) == "PASSIVE");
  std::printf("OMP_WAIT_POLICY=%s%s\n", wait ? wait : "(unset)",
              passive ? "" : ": run with OMP_WAIT_POLICY=passive for the peers at their best");
}

inline benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b,
                                                 benchmark::TimeUnit unit) {
  return b->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true)->Unit(unit);
}

// Bytes moved per iteration, reported twice: as Google Benchmark's bytes_per_second and as a
// plain per-iteration counter (so the row says what the rate was computed from).
inline void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration) *
                          static_cast<std::int64_t>(state.iterations()));
  state.counters["MiB/iter"] = bytes_per_iteration / (1024.0 * 1024.0);
}

// Registers `name` in the house settings: each iteration runs f(), which returns what it wrote
// (a pointer to the output, or a value), kept from the optimizer; `bytes` moved per iteration.
template <class F>
void add(char const* name, benchmark::TimeUnit unit, double bytes, F f) {
  auto run = [f, bytes](benchmark::State& state) {
    for (auto _ : state) {
      auto written = f();
      benchmark::DoNotOptimize(written);
      benchmark::ClobberMemory();
    }
    set_bytes(state, bytes);
  };
  configure(benchmark::RegisterBenchmark(name, run), unit);
}

class MedianReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(std::vector<Run> const& runs) override {
    for (auto const& r : runs) {
      if (r.run_type != Run::RT_Aggregate || r.aggregate_name != "median") continue;
      if (r.error_occurred) continue;
      double ns = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit) * 1e9;
      medians_[r.run_name.function_name] = ns;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // Median real time in ns of the benchmark registered under `name`; < 0 if it did not run.
  double median_ns(std::string const& name) const {
    auto it = medians_.find(name);
    return it == medians_.end() ? -1.0 : it->second;
  }
  std::map<std::string, double> const& medians() const { return medians_; }

 private:
  std::map<std::string, double> medians_;
};

inline void print_medians(MedianReporter const& rep) {
  std::printf("\nmedian real times (%d threads, %s):\n", threads, isa);
  for (auto const& [name, ns] : rep.medians()) std::printf("  %-28s %14.1f ns\n", name.c_str(), ns);
}

// Prints "ratio <label>: <slow/fast>x (target >= T x) MET|NOT MET"; `slow` and `fast` name
// benchmarks. target <= 0: information only. Returns whether the target was met.
inline bool report_ratio(MedianReporter const& rep, char const* label, char const* slow,
                         char const* fast, double target) {
  double s = rep.median_ns(slow), f = rep.median_ns(fast);
  if (s <= 0 || f <= 0) {
    std::printf("ratio %s: n/a (%s or %s not run)\n", label, slow, fast);
    return false;
  }
  double r = s / f;
  if (target > 0) {
    bool met = r >= target;
    std::printf("ratio %s: %.2fx (target >= %gx) %s\n", label, r, target, met ? "MET" : "NOT MET");
    return met;
  }
  std::printf("ratio %s: %.2fx (information)\n", label, r);
  return true;
}

// Fraction of a roof reached: time_roof / time_kernel. roof_share: the part of the roof
// benchmark's time that is the limit (a copy moves each byte twice; a kernel that only reads
// them has half its time as a limit).
inline void report_fraction(MedianReporter const& rep, char const* label, char const* roof,
                            char const* kernel, double target = 0, double roof_share = 1) {
  double r = rep.median_ns(roof) * roof_share, k = rep.median_ns(kernel);
  if (r <= 0 || k <= 0) {
    std::printf("fraction %s: n/a\n", label);
    return;
  }
  double f = r / k;
  if (target > 0)
    std::printf("fraction %s: %.3f of the roof (target >= %g) %s\n", label, f, target,
                f >= target ? "MET" : "NOT MET");
  else
    std::printf("fraction %s: %.3f of the roof (information)\n", label, f);
}

// max |got - ref| over n elements; aborts when some |got - ref| > atol + rtol * |ref| (or a
// NaN appears), printing the worst element.
inline double check_close(char const* what, float const* got, float const* ref, std::int64_t n,
                          double atol, double rtol = 0) {
  double worst = 0, excess = -1;
  std::int64_t at = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    double e = d - (atol + rtol * std::fabs(static_cast<double>(ref[i])));
    if (std::isnan(d)) e = INFINITY;
    if (d > worst || std::isnan(d)) worst = d;
    if (e > excess) excess = e, at = i;
  }
  if (excess > 0) {
    std::fprintf(stderr, "check %s: FAILED: element %lld: %.9g vs reference %.9g (atol %g, rtol %g)\n",
                 what, static_cast<long long>(at), static_cast<double>(got[at]),
                 static_cast<double>(ref[at]), atol, rtol);
    std::abort();
  }
  std::printf("check %-40s max abs diff %.3g  OK\n", what, worst);
  return worst;
}

// Runs the registered benchmarks with a MedianReporter; returns false if flags were bad.
// Defaults, overridable on the command line (later flags win): repetitions of different
// benchmarks interleaved in random order, so a change in the machine's state (another
// process, a neighbour's memory traffic) spreads over all of them instead of skewing one
// ratio; 0.2 s per repetition keeps each program well under a minute.
inline bool run_benchmarks(int& argc, char** argv, MedianReporter& rep) {
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  static char min_time[] = "--benchmark_min_time=0.2";
  std::vector<char*> args{argv[0], interleave, min_time};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return false;
  benchmark::RunSpecifiedBenchmarks(&rep);
  benchmark::Shutdown();
  return true;
}

// Hand-written reference kernels (bench/peer_*.cpp). All use OpenMP with the current thread
// count and split work statically.
namespace peer {
// peer_vecmath.cpp (-ffast-math: glibc libmvec exp/tanh)
void chain(float const* x, float* y, std::int64_t n);  // tanh(x*.5+.25)*sigmoid(x)+x*x*.1-.3
void softmax_rows(float const* x, float* y, std::int64_t rows, std::int64_t cols);
void log_softmax_rows(float const* x, float* y, std::int64_t rows, std::int64_t cols);
// peer_memory.cpp
void copy(float const* x, float* y, std::int64_t n);         // plain OpenMP copy loop
void copy_stream(float const* x, float* y, std::int64_t n);  // non-temporal stores
float read_sum(float const* x, std::int64_t n);              // read roof: 8+ vector accumulators
void affine_relu(float const* x, float* y, std::int64_t n);  // max(x*.5+.25, 0), plain loop
void fill(float* y, std::int64_t n, float v);                // first-touch / warm an output
}  // namespace peer

}  // namespace solder_bench
