// The FMA roof that bench_gemm and bench_models measure in the same run as what they compare
// with it: on every thread, independent vector FMAs on as many registers as latency times
// throughput needs (4 cycles x 2 ports = 8) and more, none of them waiting on memory.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>

#include "common.hpp"

namespace solder_bench::fma {

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int lanes = 16, accumulators = 16;
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline float vfirst(Vec v) { return _mm512_cvtss_f32(v); }
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int lanes = 8, accumulators = 12;
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline float vfirst(Vec v) { return _mm256_cvtss_f32(v); }
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
constexpr bool available = true;
constexpr std::int64_t steps = 1 << 20;  // per thread: ~5 ms of FMAs at a few GHz
// The flops of one peak() call.
inline double flops() { return 2.0 * lanes * accumulators * double(steps) * threads; }
inline float peak() {
  float sum = 0;
#pragma omp parallel reduction(+ : sum)
  {
    Vec acc[accumulators];
    for (int i = 0; i < accumulators; ++i) acc[i] = vset(float(i) * 1e-3f);
    Vec const x = vset(0.999999f), y = vset(1e-7f);
    for (std::int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 16
      for (int i = 0; i < accumulators; ++i) acc[i] = vfma(acc[i], x, y);
    }
    for (int i = 0; i < accumulators; ++i) sum += vfirst(acc[i]);
  }
  return sum;
}
#else
constexpr bool available = false;
inline double flops() { return 0; }
inline float peak() { return 0; }
#endif

// The peak in GFLOP/s from the run's BM_fma_peak (0 where it did not run), printed with the
// threads and the ISA.
inline double report_peak(MedianReporter const& rep) {
  double const ns = rep.median_ns("BM_fma_peak");
  double const gflops = ns > 0 ? flops() / ns : 0;
  std::printf("\nFMA peak (%d threads, %s): %.1f GFLOP/s\n", threads, isa, gflops);
  return gflops;
}

}  // namespace solder_bench::fma
