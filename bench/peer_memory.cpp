// The memory roofs: the fastest plain copy (ordinary stores, and non-temporal stores that
// skip the read-for-ownership of the destination) and the fastest read (a sum with many
// independent vector accumulators, so the adds never limit the loads); and a kernel bound by
// memory as a user would write it by hand.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "common.hpp"

namespace solder_bench::peer {

namespace {
// This thread's [begin, end) of n, in whole 64-byte lines (so streaming stores stay aligned).
void my_range(std::int64_t n, std::int64_t& b, std::int64_t& e) {
  int t = 0, nt = 1;
#if defined(_OPENMP)
  t = omp_get_thread_num();
  nt = omp_get_num_threads();
#endif
  std::int64_t chunk = ((n + nt - 1) / nt + 15) / 16 * 16;
  b = std::min(n, t * chunk);
  e = std::min(n, b + chunk);
}
}  // namespace

void copy(float const* x, float* y, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i];
}

void copy_stream(float const* x, float* y, std::int64_t n) {
#pragma omp parallel
  {
    std::int64_t b, e;
    my_range(n, b, e);
    std::int64_t i = b;
    for (; i < e && (reinterpret_cast<std::uintptr_t>(y + i) & 63) != 0; ++i) y[i] = x[i];
#if defined(__AVX512F__)
    for (; i + 64 <= e; i += 64) {
      __m512 a0 = _mm512_loadu_ps(x + i), a1 = _mm512_loadu_ps(x + i + 16);
      __m512 a2 = _mm512_loadu_ps(x + i + 32), a3 = _mm512_loadu_ps(x + i + 48);
      _mm512_stream_ps(y + i, a0);
      _mm512_stream_ps(y + i + 16, a1);
      _mm512_stream_ps(y + i + 32, a2);
      _mm512_stream_ps(y + i + 48, a3);
    }
#elif defined(__AVX__)
    for (; i + 32 <= e; i += 32) {
      __m256 a0 = _mm256_loadu_ps(x + i), a1 = _mm256_loadu_ps(x + i + 8);
      __m256 a2 = _mm256_loadu_ps(x + i + 16), a3 = _mm256_loadu_ps(x + i + 24);
      _mm256_stream_ps(y + i, a0);
      _mm256_stream_ps(y + i + 8, a1);
      _mm256_stream_ps(y + i + 16, a2);
      _mm256_stream_ps(y + i + 24, a3);
    }
#endif
    for (; i < e; ++i) y[i] = x[i];
    _mm_sfence();
  }
}

float read_sum(float const* x, std::int64_t n) {
  int nt = 1;
#if defined(_OPENMP)
  nt = omp_get_max_threads();
#endif
  std::vector<double> part(static_cast<std::size_t>(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    std::int64_t b, e;
    my_range(n, b, e);
    std::int64_t i = b;
    float tail = 0.f;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (; i + 128 <= e; i += 128) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
      a4 = _mm512_add_ps(a4, _mm512_loadu_ps(x + i + 64));
      a5 = _mm512_add_ps(a5, _mm512_loadu_ps(x + i + 80));
      a6 = _mm512_add_ps(a6, _mm512_loadu_ps(x + i + 96));
      a7 = _mm512_add_ps(a7, _mm512_loadu_ps(x + i + 112));
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    alignas(64) float l[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside it (-Werror)
    _mm512_store_ps(l, s);
    for (float v : l) tail += v;
#elif defined(__AVX__)
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (; i + 64 <= e; i += 64) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
      a4 = _mm256_add_ps(a4, _mm256_loadu_ps(x + i + 32));
      a5 = _mm256_add_ps(a5, _mm256_loadu_ps(x + i + 40));
      a6 = _mm256_add_ps(a6, _mm256_loadu_ps(x + i + 48));
      a7 = _mm256_add_ps(a7, _mm256_loadu_ps(x + i + 56));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    alignas(32) float l[8];
    _mm256_store_ps(l, s);
    for (float v : l) tail += v;
#endif
    for (; i < e; ++i) tail += x[i];
    int t = 0;
#if defined(_OPENMP)
    t = omp_get_thread_num();
#endif
    part[static_cast<std::size_t>(t)] = tail;
  }
  double total = 0;
  for (double p : part) total += p;
  return static_cast<float>(total);
}

void affine_relu(float const* x, float* y, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::max(x[i] * 0.5f + 0.25f, 0.f);
}

void fill(float* y, std::int64_t n, float v) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) y[i] = v;
}

}  // namespace solder_bench::peer
