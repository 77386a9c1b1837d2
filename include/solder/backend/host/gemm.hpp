// The host GEMM engine: C[b] = A[b] * B[b] for a batch of [m, k] by [k, n] matrices, handing
// each finished block of C to an epilogue instead of storing it. The engine's loops are not
// templated on the epilogue (a function pointer and a context): a new fused expression over a
// contraction instantiates its epilogue, never the main loops. A may also come from a
// producer (prologue fusion: the element-wise expression that feeds it is computed while A is
// packed).
//
// Contract (what backend/host/contract.hpp relies on):
//   * the epilogue is called once for every element of C, with disjoint blocks, possibly from
//     several threads at once; a block's values are final (the whole k summed);
//   * for a given thread count, each element of C is summed in a fixed order (deterministic);
//   * k == 0 gives blocks of zeros; m == 0 or n == 0 calls nothing.
//
// How (BLIS's loops, Van Zee and van de Geijn 2015; block sizes from the caches, Low et al.
// 2016, "Analytical modeling is enough for high-performance BLIS"):
//   * blocked path: A is packed into MR-row micro-panels and B into NR-column micro-panels,
//     kc steps of k long (strided, transposed and broadcast operands are read as they lie; a
//     producer fills a plain buffer that is packed in turn); an MR x NR register-tiled
//     micro-kernel runs over them, accumulating into a per-thread mc x nc block of C that goes
//     to the epilogue after the last kc block, while it is in L2. Two ways to feed it:
//       - few rows per B (A's kc-slice fits L2 with a C block): "just in time", the threads
//         split n, share A packed once, and pack each micro-panel of B into L1 just before
//         using it: B goes from memory to the registers once;
//       - many rows: B is packed for the whole k in rounds of columns, shared by the threads,
//         which split the round in a grid of rows x columns and pack A a chunk of mc rows at
//         a time; or, with enough batches, each thread takes whole batches;
//   * skinny path (at most skinny_rows rows of C per B, or columns per A): no packing; B is
//     read along its rows with vector loads (or, when k is B's contiguous dim, as dot products
//     along k) by threads that split n; a thin A is handled as the transposed product.
// Each element of C sums its k in the same order for any thread count: kc blocks in turn, one
// FMA chain per block (blocked); one chain (skinny rows), or fixed vector lanes (dot form).
// Micro-kernels: AVX-512 or AVX2+FMA intrinsics when the code is compiled for them, else plain
// C++ over small arrays that the compiler vectorizes as it can (the header compiles anywhere,
// nvcc's host pass included). Scratch memory is kept per thread between calls (Scratch).
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/dtype.hpp"
#include "../../core/threads.hpp"

#if defined(__x86_64__) && !defined(__CUDA_ARCH__) && defined(__AVX512F__)
#define SOLDER_GEMM_AVX512 1
#elif defined(__x86_64__) && !defined(__CUDA_ARCH__) && defined(__AVX2__) && defined(__FMA__)
#define SOLDER_GEMM_AVX2 1
#endif
#if defined(__x86_64__) && !defined(__CUDA_ARCH__) && defined(__AVX__)
#define SOLDER_GEMM_AVX 1  // 256-bit transposes in packing
#include <immintrin.h>
#endif
// The register tiles' loops unrolled in full, so that their arrays live in registers. nvcc's
// front end does not know GCC's pragma but hands it on to the host compiler: its warning
// (1675, "unrecognized GCC pragma") is silenced for this file.
#define SOLDER_GEMM_UNROLL(n) SOLDER_PRAGMA(GCC unroll n)
#if defined(__CUDACC__)
#pragma nv_diag_suppress 1675
#endif

namespace solder::detail::host {

// Sizes in bytes of the L1 data cache (and its ways), of L2 and of the last level, as sysfs
// gives them for cpu 0 (32 KiB 8-way, 1 MiB and 32 MiB where it cannot be read: a common
// server core). Read once.
struct CacheSizes {
  std::int64_t l1d = 32 << 10, l1d_ways = 8, l2 = 1 << 20, last = 32 << 20;
};
inline CacheSizes const& cache_sizes() {
  static CacheSizes const sizes = [] {
    CacheSizes c;
    int last_level = 0;
    for (int i = 0; i < 8; ++i) {
      std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size"),
          ways_file(dir + "ways_of_associativity");
      int level = 0;
      std::string type;
      std::int64_t size = 0, ways = 0;
      char unit = 0;
      if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size >> unit)) continue;
      if (type == "Instruction" || (unit != 'K' && unit != 'M')) continue;
      size <<= unit == 'K' ? 10 : 20;
      if (level == 1) c.l1d = size;
      if (level == 1 && ways_file >> ways && ways > 1) c.l1d_ways = ways;
      if (level == 2) c.l2 = size;
      if (level > last_level) c.last = size, last_level = level;
    }
    return c;
  }();
  return sizes;
}

}  // namespace solder::detail::host

namespace solder::detail::host::gemm {

// Element (r, c) of batch b at data[b * bs + r * rs + c * cs]: any strides, 0 for broadcast.
template <class T>
struct Strided {
  T const* data;
  std::int64_t rs, cs, bs;
  T at(std::int64_t b, std::int64_t r, std::int64_t c) const { return data[b * bs + r * rs + c * cs]; }
};

// A's values from an expression: writes A[i0 .. i0 + mc) x [k0 .. k0 + kc) of batch b into dst,
// row-major with leading dimension ld.
template <class T>
struct Producer {
  void (*fill)(void const* ctx, std::int64_t b, std::int64_t i0, std::int64_t k0, std::int64_t mc,
               std::int64_t kc, T* dst, std::int64_t ld);
  void const* ctx;
};

// The left operand: strided memory, or a producer when `producer.fill` is set.
template <class T>
struct Left {
  Strided<T> memory{};
  Producer<T> producer{};
};

// Receives rows [i0, i0 + mt) x columns [j0, j0 + nt) of C of batch b: value (r, q) at
// c[r * ldc + q].
template <class T>
struct Epilogue {
  void (*store)(void* ctx, std::int64_t b, std::int64_t i0, std::int64_t j0, std::int64_t mt,
                std::int64_t nt, T const* c, std::int64_t ldc);
  void* ctx;
};

struct Problem {
  std::int64_t batch, m, n, k;
};

// B packed ahead of time (a module's weight, packed once and kept by the caller): where a
// product takes the blocked path, get() returns B in prepack_b's layout, or null to pack it as
// usual. The skinny path reads B where it lies and never asks.
template <class T>
struct Prepacked {
  T const* (*get)(void* ctx, Problem const& p, Strided<T> const& b) = nullptr;
  void* ctx = nullptr;
};

// Products of at most this many rows of C per B (or columns per A) take the skinny path: below
// it a packed A block would be reused by too few rows to pay for packing B.
inline constexpr std::int64_t skinny_rows = 16;

// m * n * k below which the product runs on the calling thread: forking OpenMP's team costs
// microseconds. Measured on 2 threads with libgomp's default (spinning) wait, 2 threads win
// from about 128^3; with OMP_WAIT_POLICY=passive each fork and barrier sleeps and wakes
// threads, tens of microseconds, and 1 thread still won at 256^3.
inline constexpr std::int64_t parallel_min_work = std::int64_t(1) << 21;

// ---- vectors ------------------------------------------------------------------------------

// The vector type of the ISA compiled for, for T: width lanes, and the few operations the
// kernels use. The general template is plain C++ (any T; the compiler vectorizes it as it can).
template <class T>
struct Simd {
  static constexpr int width = 4;
  struct V {
    T x[width];
  };
  static V zero() { return V{}; }
  static V load(T const* p) {
    V v;
    for (int i = 0; i < width; ++i) v.x[i] = p[i];
    return v;
  }
  static void store(T* p, V v) {
    for (int i = 0; i < width; ++i) p[i] = v.x[i];
  }
  static V set1(T a) {
    V v;
    for (int i = 0; i < width; ++i) v.x[i] = a;
    return v;
  }
  static V fma(V a, V b, V c) {
    for (int i = 0; i < width; ++i) c.x[i] += a.x[i] * b.x[i];
    return c;
  }
  static V add(V a, V b) {
    for (int i = 0; i < width; ++i) a.x[i] += b.x[i];
    return a;
  }
  static T sum(V v) {
    T s = v.x[0];
    for (int i = 1; i < width; ++i) s += v.x[i];
    return s;
  }
};

// Register tiles (micro-kernel: mr rows x nv vectors of C; the skinny kernels: rows in groups
// of rg). The FMA's latency (4 cycles) times its two ports needs >= 8 independent
// accumulators; each shape below leaves registers for nv vectors of B and one broadcast of A.
//   AVX-512 (32 zmm): 12 x 2 accumulators = 24 (BLIS's skx kernels: 24 of 32).
//   AVX2 (16 ymm): 6 x 2 = 12 (BLIS's haswell 6x16 sgemm kernel).
//   plain: 4 x 4 small arrays the compiler maps to what it has.
template <class T>
struct Tile {
  static constexpr int mr = 4, nv = 4, rg = 2;
};

#if defined(SOLDER_GEMM_AVX)
// The sum of a 256-bit register's lanes, in a fixed order.
inline float sum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline double sum256(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
#endif

#if defined(SOLDER_GEMM_AVX512)
template <>
struct Simd<double> {
  static constexpr int width = 8;
  using V = __m512d;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(double const* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V set1(double a) { return _mm512_set1_pd(a); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static double sum(V v) { return sum256(_mm256_add_pd(low(v), high(v))); }
  // The halves, by the masked extract: the plain one, the casts to 256 bits and
  // _mm512_reduce_add_* make GCC 12.1/12.2 warn inside their own headers (PR 105593).
  static __m256d low(V v) { return _mm512_maskz_extractf64x4_pd(0xFF, v, 0); }
  static __m256d high(V v) { return _mm512_maskz_extractf64x4_pd(0xFF, v, 1); }
};
template <>
struct Simd<float> {
  static constexpr int width = 16;
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(float const* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float a) { return _mm512_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static float sum(V v) {
    __m512d const d = _mm512_castps_pd(v);
    return sum256(_mm256_add_ps(_mm256_castpd_ps(Simd<double>::low(d)),
                                _mm256_castpd_ps(Simd<double>::high(d))));
  }
};
template <>
struct Tile<float> {
  static constexpr int mr = 12, nv = 2, rg = 4;
};
template <>
struct Tile<double> {
  static constexpr int mr = 12, nv = 2, rg = 4;
};
#elif defined(SOLDER_GEMM_AVX2)
template <>
struct Simd<float> {
  static constexpr int width = 8;
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(float const* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static float sum(V v) { return sum256(v); }
};
template <>
struct Simd<double> {
  static constexpr int width = 4;
  using V = __m256d;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(double const* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V set1(double a) { return _mm256_set1_pd(a); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static double sum(V v) { return sum256(v); }
};
template <>
struct Tile<float> {
  static constexpr int mr = 6, nv = 2, rg = 2;
};
template <>
struct Tile<double> {
  static constexpr int mr = 6, nv = 2, rg = 2;
};
#endif

template <class T>
inline constexpr int nr_of = Tile<T>::nv * Simd<T>::width;

// ---- packing ------------------------------------------------------------------------------

#if defined(SOLDER_GEMM_AVX)
// Square blocks, transposed: d[j * ld + i] = s[i * rs + j].
SOLDER_INLINE void transpose_block(float const* s, std::int64_t rs, float* d, std::int64_t ld,
                                   std::integral_constant<int, 8>) {
  __m256 x[8], t[8];
  for (int i = 0; i < 8; ++i) x[i] = _mm256_loadu_ps(s + i * rs);
  for (int i = 0; i < 8; i += 2)
    t[i] = _mm256_unpacklo_ps(x[i], x[i + 1]), t[i + 1] = _mm256_unpackhi_ps(x[i], x[i + 1]);
  for (int i = 0; i < 8; i += 4) {
    x[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    x[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    x[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    x[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(d + i * ld, _mm256_permute2f128_ps(x[i], x[i + 4], 0x20));
    _mm256_storeu_ps(d + (i + 4) * ld, _mm256_permute2f128_ps(x[i], x[i + 4], 0x31));
  }
}
SOLDER_INLINE void transpose_block(float const* s, std::int64_t rs, float* d, std::int64_t ld,
                                   std::integral_constant<int, 4>) {
  __m128 x0 = _mm_loadu_ps(s), x1 = _mm_loadu_ps(s + rs), x2 = _mm_loadu_ps(s + 2 * rs),
         x3 = _mm_loadu_ps(s + 3 * rs);
  _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
  _mm_storeu_ps(d, x0), _mm_storeu_ps(d + ld, x1), _mm_storeu_ps(d + 2 * ld, x2),
      _mm_storeu_ps(d + 3 * ld, x3);
}
SOLDER_INLINE void transpose_block(double const* s, std::int64_t rs, double* d, std::int64_t ld,
                                   std::integral_constant<int, 4>) {
  __m256d const x0 = _mm256_loadu_pd(s), x1 = _mm256_loadu_pd(s + rs),
                x2 = _mm256_loadu_pd(s + 2 * rs), x3 = _mm256_loadu_pd(s + 3 * rs);
  __m256d const t0 = _mm256_unpacklo_pd(x0, x1), t1 = _mm256_unpackhi_pd(x0, x1),
                t2 = _mm256_unpacklo_pd(x2, x3), t3 = _mm256_unpackhi_pd(x2, x3);
  _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
  _mm256_storeu_pd(d + ld, _mm256_permute2f128_pd(t1, t3, 0x20));
  _mm256_storeu_pd(d + 2 * ld, _mm256_permute2f128_pd(t0, t2, 0x31));
  _mm256_storeu_pd(d + 3 * ld, _mm256_permute2f128_pd(t1, t3, 0x31));
}
SOLDER_INLINE void transpose_block(double const* s, std::int64_t rs, double* d, std::int64_t ld,
                                   std::integral_constant<int, 2>) {
  __m128d const x0 = _mm_loadu_pd(s), x1 = _mm_loadu_pd(s + rs);
  _mm_storeu_pd(d, _mm_unpacklo_pd(x0, x1));
  _mm_storeu_pd(d + ld, _mm_unpackhi_pd(x0, x1));
}
#endif

// dst[q * P + r] = src[r * rs + q] for r < P, q < kc: a transpose, in square blocks of 8 and 4
// floats or 4 and 2 doubles where AVX is compiled for (from L2 about as fast as a copy; from
// memory both are bound by it). A block of rows is walked along the whole k before the next,
// a few streams at a time for the prefetchers.
template <int P, class T>
void pack_transposed(T const* src, std::int64_t rs, std::int64_t kc, T* dst) {
  int r = 0;
  [[maybe_unused]] auto rows = [&]<int B>(std::integral_constant<int, B> block) {
    for (; r + B <= P; r += B) {
      std::int64_t q = 0;
      for (; q + B <= kc; q += B) transpose_block(src + r * rs + q, rs, dst + q * P + r, P, block);
      for (; q < kc; ++q)
        for (int i = 0; i < B; ++i) dst[q * P + r + i] = src[(r + i) * rs + q];
    }
  };
#if defined(SOLDER_GEMM_AVX)
  if constexpr (std::is_same_v<T, float>) {
    rows(std::integral_constant<int, 8>{});
    rows(std::integral_constant<int, 4>{});
  } else if constexpr (std::is_same_v<T, double>) {
    rows(std::integral_constant<int, 4>{});
    rows(std::integral_constant<int, 2>{});
  }
#endif
  for (; r < P; ++r)
    for (std::int64_t q = 0; q < kc; ++q) dst[q * P + r] = src[r * rs + q];
}

// One micro-panel: dst[q * P + r] = src[r * rs + q * cs] for r < rows, q < kc, and zeros in
// rows [rows, P), so that micro-kernels never see an edge. src's rows or its k contiguous (a
// plain or a transposed operand) are copied by vectors; any other strides, 0 included, one
// element at a time.
template <int P, class T>
void pack_panel(T const* src, std::int64_t rs, std::int64_t cs, std::int64_t rows, std::int64_t kc,
                T* dst) {
  constexpr int W = Simd<T>::width;
  if (rows == P && rs == 1 && P % W == 0) {
    for (std::int64_t q = 0; q < kc; ++q)
      for (int r = 0; r < P; r += W)
        Simd<T>::store(dst + q * P + r, Simd<T>::load(src + q * cs + r));
  } else if (rows == P && rs == 1) {
    for (std::int64_t q = 0; q < kc; ++q)
      for (int r = 0; r < P; ++r) dst[q * P + r] = src[q * cs + r];
  } else if (rows == P && cs == 1) {
    pack_transposed<P>(src, rs, kc, dst);
  } else {
    for (std::int64_t q = 0; q < kc; ++q)
      for (int r = 0; r < P; ++r) dst[q * P + r] = r < rows ? src[r * rs + q * cs] : T(0);
  }
}

// B's micro-panel of group g: rows [k0, k0 + kcur) x columns [j0, j0 + NR) into dst.
template <class T>
void pack_b_panel(Strided<T> const& b, std::int64_t n, std::int64_t g, std::int64_t k0, std::int64_t kcur,
                  std::int64_t j0, T* dst) {
  constexpr std::int64_t NR = nr_of<T>;
  pack_panel<NR>(b.data + g * b.bs + k0 * b.rs + j0 * b.cs, b.cs, b.rs, std::min(NR, n - j0), kcur, dst);
}

// ---- kernels ------------------------------------------------------------------------------

// The micro-kernel: the MR x NR block c (leading dimension ldc) = a * b, or += when `add`, for
// an MR-row micro-panel a and an NR-column micro-panel b of kc steps. Each step broadcasts MR
// values of A against NV vectors of B: (MR + NV) loads for MR * NV FMAs. A's panel streams
// from L2 (prefetched a few steps ahead); B's stays in L1 across the mc / MR calls of a block.
template <class T>
[[gnu::noinline]] void micro_kernel(std::int64_t kc, T const* __restrict a, T const* __restrict b,
                                    T* __restrict c, std::int64_t ldc, bool add) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int MR = Tile<T>::mr, NV = Tile<T>::nv, W = S::width, NR = NV * W;
  V acc[MR][NV];
  SOLDER_GEMM_UNROLL(16)
  for (int i = 0; i < MR; ++i) {
    SOLDER_GEMM_UNROLL(4)
    for (int v = 0; v < NV; ++v) acc[i][v] = S::zero();
  }
  for (std::int64_t q = 0; q < kc; ++q) {
    __builtin_prefetch(a + (q + 8) * MR);
    V bv[NV];
    SOLDER_GEMM_UNROLL(4)
    for (int v = 0; v < NV; ++v) bv[v] = S::load(b + q * NR + v * W);
    SOLDER_GEMM_UNROLL(16)
    for (int i = 0; i < MR; ++i) {
      V const ai = S::set1(a[q * MR + i]);
      SOLDER_GEMM_UNROLL(4)
      for (int v = 0; v < NV; ++v) acc[i][v] = S::fma(ai, bv[v], acc[i][v]);
    }
  }
  SOLDER_GEMM_UNROLL(16)
  for (int i = 0; i < MR; ++i) {
    SOLDER_GEMM_UNROLL(4)
    for (int v = 0; v < NV; ++v) {
      T* p = c + i * ldc + v * W;
      S::store(p, add ? S::add(S::load(p), acc[i][v]) : acc[i][v]);
    }
  }
}

// Skinny rows, G of them: c[r * ldc + j] += sum over q in [q0, q0 + U) of a[r * lda + q] *
// b[q * ldb + j] for j < nw. U = 4 steps of k per pass over c, so that each load and store of c
// carries 4 FMAs; the U rows of B are read once for the G rows of A.
template <class T, int G, int U>
SOLDER_INLINE void rows_pass(T const* a, std::int64_t lda, T const* b, std::int64_t ldb,
                             std::int64_t nw, T* c, std::int64_t ldc) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int W = S::width;
  V av[G][U];
  SOLDER_GEMM_UNROLL(4)
  for (int g = 0; g < G; ++g) {
    SOLDER_GEMM_UNROLL(4)
    for (int u = 0; u < U; ++u) av[g][u] = S::set1(a[g * lda + u]);
  }
  std::int64_t j = 0;
  for (; j + W <= nw; j += W) {
    V bv[U];
    SOLDER_GEMM_UNROLL(4)
    for (int u = 0; u < U; ++u) bv[u] = S::load(b + u * ldb + j);
    SOLDER_GEMM_UNROLL(4)
    for (int g = 0; g < G; ++g) {
      V x = S::load(c + g * ldc + j);
      SOLDER_GEMM_UNROLL(4)
      for (int u = 0; u < U; ++u) x = S::fma(av[g][u], bv[u], x);
      S::store(c + g * ldc + j, x);
    }
  }
  for (; j < nw; ++j)
    for (int g = 0; g < G; ++g) {
      T x = c[g * ldc + j];
      for (int u = 0; u < U; ++u) x += a[g * lda + u] * b[u * ldb + j];
      c[g * ldc + j] = x;
    }
}

// c (rows x nw, ldc) = a (rows x k, lda) * b (k x nw, rows ldb apart, contiguous along n).
template <class T>
void skinny_rows_kernel(std::int64_t rows, std::int64_t k, T const* a, std::int64_t lda, T const* b,
                        std::int64_t ldb, std::int64_t nw, T* c, std::int64_t ldc) {
  constexpr int RG = Tile<T>::rg, U = 4;
  for (std::int64_t r = 0; r < rows; ++r) std::fill(c + r * ldc, c + r * ldc + nw, T(0));
  auto pass = [&]<int u>(std::int64_t q) {
    std::int64_t r = 0;
    for (; r + RG <= rows; r += RG)
      rows_pass<T, RG, u>(a + r * lda + q, lda, b + q * ldb, ldb, nw, c + r * ldc, ldc);
    for (; r < rows; ++r)
      rows_pass<T, 1, u>(a + r * lda + q, lda, b + q * ldb, ldb, nw, c + r * ldc, ldc);
  };
  std::int64_t q = 0;
  for (; q + U <= k; q += U) pass.template operator()<U>(q);
  for (; q < k; ++q) pass.template operator()<1>(q);
}

// c[r * ldc + j] = sum over q < k of a[r * lda + q] * b[j * ldb + q] for r < R, j < J: dot
// products along k, R x J vector accumulators summed across lanes at the end.
template <class T, int R, int J>
void dot_block(std::int64_t k, T const* a, std::int64_t lda, T const* b, std::int64_t ldb, T* c,
               std::int64_t ldc) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int W = S::width;
  V acc[R][J];
  SOLDER_GEMM_UNROLL(4)
  for (int r = 0; r < R; ++r) {
    SOLDER_GEMM_UNROLL(4)
    for (int j = 0; j < J; ++j) acc[r][j] = S::zero();
  }
  std::int64_t q = 0;
  for (; q + W <= k; q += W) {
    V bv[J];
    SOLDER_GEMM_UNROLL(4)
    for (int j = 0; j < J; ++j) bv[j] = S::load(b + j * ldb + q);
    SOLDER_GEMM_UNROLL(4)
    for (int r = 0; r < R; ++r) {
      V const av = S::load(a + r * lda + q);
      SOLDER_GEMM_UNROLL(4)
      for (int j = 0; j < J; ++j) acc[r][j] = S::fma(av, bv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      T s = S::sum(acc[r][j]);
      for (std::int64_t t = q; t < k; ++t) s += a[r * lda + t] * b[j * ldb + t];
      c[r * ldc + j] = s;
    }
}

// c (rows x nw, ldc) = a (rows x k, lda) * b, column j of b contiguous along k at b + j * ldb:
// 4 columns at a time, rows in groups of Tile::rg.
template <class T>
void skinny_dot_kernel(std::int64_t rows, std::int64_t k, T const* a, std::int64_t lda, T const* b,
                       std::int64_t ldb, std::int64_t nw, T* c, std::int64_t ldc) {
  constexpr int RG = Tile<T>::rg, J = 4;
  auto cols = [&]<int R>(std::int64_t r) {
    std::int64_t j = 0;
    for (; j + J <= nw; j += J)
      dot_block<T, R, J>(k, a + r * lda, lda, b + j * ldb, ldb, c + r * ldc + j, ldc);
    for (; j < nw; ++j)
      dot_block<T, R, 1>(k, a + r * lda, lda, b + j * ldb, ldb, c + r * ldc + j, ldc);
  };
  std::int64_t r = 0;
  for (; r + RG <= rows; r += RG) cols.template operator()<RG>(r);
  for (; r < rows; ++r) cols.template operator()<1>(r);
}

// ---- scratch and threads --------------------------------------------------------------------

// Scratch memory that outlives the call, a few slots per thread, each aligned to a cache line
// and grown as needed: the next product reuses it. (A fresh allocation of a few MiB comes from
// mmap, and each of its pages faults when first touched: products of alternating shapes lost
// a fifth of their time to it.) A slot keeps at most keep_bytes; a larger request, or one made
// while the slot is in use (a product run from an epilogue), gets memory of its own.
enum Slot { slot_a, slot_b, slot_c, slot_fill, slot_panel, slots };
inline constexpr std::int64_t keep_bytes = std::int64_t(64) << 20;

struct Memory {
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte[], Free> p;
  std::int64_t bytes = 0;
  bool busy = false;
  void grow(std::int64_t n) {
    if (n <= bytes) return;
    p.reset(), bytes = 0;  // before the new one: the old one is not needed
    p.reset(static_cast<std::byte*>(
        ::operator new[](static_cast<std::size_t>(n), std::align_val_t{64})));
    bytes = n;
  }
};

template <class T>
class Scratch {
 public:
  Scratch() = default;
  Scratch(Slot slot, std::int64_t n) { take(slot, n); }
  Scratch(Scratch const&) = delete;
  Scratch& operator=(Scratch const&) = delete;
  ~Scratch() { give_back(); }
  void take(Slot slot, std::int64_t n) {
    give_back();
    std::int64_t const bytes = std::max<std::int64_t>(n, 1) * std::int64_t(sizeof(T));
    thread_local Memory kept[slots];
    Memory& k = kept[slot];
    held_ = !k.busy && bytes <= keep_bytes ? &k : &own_;
    held_->grow(bytes);
    held_->busy = true;
  }
  T* get() const { return held_ ? reinterpret_cast<T*>(held_->p.get()) : nullptr; }

 private:
  void give_back() {
    if (held_) held_->busy = false;
    if (held_ == &own_) own_ = Memory{};
    held_ = nullptr;
  }
  Memory own_;
  Memory* held_ = nullptr;
};

inline int team_size() {
#if defined(_OPENMP)
  return omp_get_num_threads();
#else
  return 1;
#endif
}
inline int team_rank() {
#if defined(_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Part t of [0, n) split into `parts` ranges whose sizes differ by at most one.
inline std::array<std::int64_t, 2> part(std::int64_t n, std::int64_t parts, std::int64_t t) {
  return {n * t / parts, n * (t + 1) / parts};
}

// ---- the skinny path ----------------------------------------------------------------------

// C = L * R where L has few rows (`rows` per group, gathered into a plain rows x k buffer) and
// R is read where it lies. Normal form: L = A's rows (of `per` batches per group when B is
// shared), R = B. Transposed form (`flip`): C^T = B^T A^T, L = B^T's n rows, R = A^T (read in
// place, or filled by the producer a strip at a time); blocks are transposed back for the
// epilogue.
template <class T>
void run_skinny(Problem const& p, Left<T> const& a, Strided<T> const& b, Epilogue<T> const& out,
                bool flip, [[maybe_unused]] bool parallel) {
  constexpr int W = Simd<T>::width;
  std::int64_t const k = p.k;
  bool const shared = !flip && b.bs == 0;
  std::int64_t const per = shared ? p.batch : 1, groups = p.batch / per;
  std::int64_t const rows = flip ? p.n : p.m * per, wide = flip ? p.m : p.n;
  bool const produced = flip && a.producer.fill;
  // R's element (q, j) of group g at r_data + g * r_bs + q * r_rs + j * r_cs (memory only).
  T const* const r_data = flip ? a.memory.data : b.data;
  std::int64_t const r_rs = flip ? a.memory.cs : b.rs, r_cs = flip ? a.memory.rs : b.cs,
                     r_bs = flip ? a.memory.bs : b.bs;
  bool const along_rows = !produced && r_cs == 1;  // else dot products along k
  auto const& caches = cache_sizes();
  // A strip of nw columns: along rows, the rows x nw block of C and 4 rows of B share half of
  // L1; as dot products, a produced strip of A^T (nw x k) fills at most half of L2, and one
  // read in place is just the epilogue's block (each column is read once, at any width).
  std::int64_t strip = along_rows ? caches.l1d / 2 / ((rows + 4) * std::int64_t(sizeof(T)))
                       : produced ? caches.l2 / 2 / (k * std::int64_t(sizeof(T)))
                                  : 256;
  strip = std::max<std::int64_t>(W, strip / W * W);

  Scratch<T> left(slot_b, groups * rows * k);
  SOLDER_OMP(parallel if(parallel)) {
    int const threads = team_size();
    // L, gathered: rows of A (filled by the producer, or read in place), or columns of B.
    SOLDER_OMP(for schedule(static))
    for (std::int64_t gr = 0; gr < groups * rows; ++gr) {
      std::int64_t const g = gr / rows, r = gr % rows;
      T* const dst = left.get() + gr * k;
      if (flip) {
        for (std::int64_t q = 0; q < k; ++q) dst[q] = b.at(g, q, r);
      } else {
        std::int64_t const bi = g * per + r / p.m, i = r % p.m;
        if (a.producer.fill)
          a.producer.fill(a.producer.ctx, bi, i, 0, 1, k, dst, k);
        else
          for (std::int64_t q = 0; q < k; ++q) dst[q] = a.memory.at(bi, i, q);
      }
    }
    // Tasks: groups x chunks of the wide dim; one chunk per group when the groups split evenly.
    std::int64_t const chunks = groups % threads == 0 ? 1 : threads;
    std::int64_t const units = ceil_div(wide, W);  // chunks are whole vectors
    Scratch<T> c(slot_c, rows * strip), ct(slot_a, flip ? rows * strip : 0),
        fill(slot_fill, produced ? strip * k : 0);
    SOLDER_OMP(for schedule(static))
    for (std::int64_t task = 0; task < groups * chunks; ++task) {
      std::int64_t const g = task / chunks;
      auto const [u0, u1] = part(units, chunks, task % chunks);
      T const* const l = left.get() + g * rows * k;
      for (std::int64_t j0 = u0 * W, j1 = std::min(wide, u1 * W); j0 < j1; j0 += strip) {
        std::int64_t const nw = std::min(strip, j1 - j0);
        if (produced) {  // A^T's strip: rows j0 .. j0 + nw of A, contiguous along k
          a.producer.fill(a.producer.ctx, g, j0, 0, nw, k, fill.get(), k);
          skinny_dot_kernel(rows, k, l, k, fill.get(), k, nw, c.get(), nw);
        } else {
          T const* const r = r_data + g * r_bs + j0 * r_cs;
          if (along_rows)
            skinny_rows_kernel(rows, k, l, k, r, r_rs, nw, c.get(), nw);
          else
            skinny_dot_kernel(rows, k, l, k, r, r_cs, nw, c.get(), nw);
        }
        if (flip) {  // back to C's orientation: nw rows of C x n columns
          for (std::int64_t i = 0; i < nw; ++i)
            for (std::int64_t j = 0; j < rows; ++j) ct.get()[i * rows + j] = c.get()[j * nw + i];
          out.store(out.ctx, g, j0, 0, nw, rows, ct.get(), rows);
        } else {
          for (std::int64_t bb = 0; bb < per; ++bb)
            out.store(out.ctx, g * per + bb, 0, j0, p.m, nw, c.get() + bb * p.m * nw, nw);
        }
      }
    }
  }
}

// ---- the blocked path -----------------------------------------------------------------------

// The blocked path's geometry. Groups: batches that share one B (all of them when B's batch
// stride is 0). B is packed for the whole k, a round of columns at a time; the threads split
// each round's rows (row panels of all the group's batches) x columns in a tm x tn grid, or,
// when there are enough groups, take whole groups each ("independent"). A thread packs A a
// chunk of at most mcp row panels at a time, for the whole k, and runs it against its columns
// in sub-blocks of at most ncp panels: the C block, mcp x ncp panels, that goes to the epilogue.
// With few rows per B ("jit": A's kc-slice and a C block 4 panels wide, for all of them, fit
// half of L2), B is not packed in rounds: the thread that runs a micro-panel packs it just
// before, into L1; the threads split the columns and share A, packed once for all its rows.
struct Plan {
  std::int64_t kc, npc;              // k blocks: npc of kc (the last one shorter)
  std::int64_t groups, per, mp, rp;  // groups; batches per group; row panels per batch, group
  std::int64_t cp, rounds, rpn;      // column panels; rounds of at most rpn panels
  std::int64_t tm, tn;               // thread grid (1 x 1 when independent)
  std::int64_t mcp, ncp;             // a thread's C block: at most mcp x ncp panels
  bool independent, jit, share_a;   // share_a: when jit, A packed once by all threads
};

// Choices of the blocked path that tests lower or turn off, so that small products take every
// path (as stream_min_bytes in executor.hpp):
//   round_bytes  a round of packed B takes at most this much memory (scratch kept between
//                calls): A is then packed once per 16 MiB / (k sizeof(T)) columns or more, a
//                cost below 1% of the flops;
//   jit          whether products with few rows may pack B just in time.
struct Limits {
  std::int64_t round_bytes = std::int64_t(16) << 20;
  bool jit = true;
};
inline Limits& limits() {
  static Limits l;
  return l;
}

// A configuration of the blocked path other than the heuristic's, which max_autotune times
// (runtime/autotune.hpp). Each field left at its default keeps the heuristic's choice.
struct Choice {
  std::int8_t jit = -1;      // 0: B packed in rounds; 1: just in time (when one group)
  std::int8_t tm = 0;        // rows of the thread grid (when B is packed in rounds)
  std::int8_t mc_shift = 0;  // a thread's C block: the heuristic's rows times 2^mc_shift
  bool serial = false;       // on the calling thread
  friend bool operator==(Choice const&, Choice const&) = default;
};

// What sd::compile's max_autotune installs on the thread of a call: given a product's key and
// the choices that apply to it, it returns the one to run, timing each (`time` runs the product
// with a choice and returns seconds) the first time it sees the key.
struct Tuner {
  virtual Choice choose(std::string const& key, std::vector<Choice> const& choices,
                        std::function<double(Choice)> const& time) = 0;

 protected:
  ~Tuner() = default;
};
inline Tuner*& tuner() {
  thread_local Tuner* t = nullptr;
  return t;
}

// The k blocks of the blocked path: {kc, npc}, npc blocks of kc (the last one shorter). kc:
// B's micro-panel (kc x NR) and A's (MR x kc) fill L1 but for one way of it, which the C tile
// and the stack share (BLIS's model, Low et al.). On a 48 KiB 12-way L1: kc = 256 floats, B's
// panel in 8 ways; 192 to 320 measured alike.
template <class T>
std::array<std::int64_t, 2> k_blocks(std::int64_t k) {
  auto const& caches = cache_sizes();
  std::int64_t const l1 = caches.l1d - caches.l1d / caches.l1d_ways;
  std::int64_t const kc_max =
      std::max<std::int64_t>(16, l1 / ((Tile<T>::mr + nr_of<T>) * std::int64_t(sizeof(T))));
  std::int64_t const npc = ceil_div(k, kc_max);
  return {ceil_div(k, npc), npc};
}

// B packed ahead of time for the blocked path, every group's (one when B's batch stride is 0,
// else one per batch), prepacked_size apart: k block pc at pc * kc * cp * NR, its column panel
// jp at jp * kcur * NR (cp micro-panels of NR columns, zeros past n).
template <class T>
std::int64_t prepacked_size(Problem const& p) {
  return p.k * ceil_div(p.n, nr_of<T>) * nr_of<T>;
}
template <class T>
std::shared_ptr<T const> prepack_b(Problem const& p, Strided<T> const& b) {
  constexpr std::int64_t NR = nr_of<T>;
  std::int64_t const groups = b.bs == 0 ? 1 : p.batch, cp = ceil_div(p.n, NR), size = prepacked_size<T>(p);
  auto const blocks = k_blocks<T>(p.k);  // (no structured binding: clang 14 cannot share one with OpenMP)
  std::int64_t const kc = blocks[0], npc = blocks[1];
  auto const bytes = static_cast<std::size_t>(std::max<std::int64_t>(groups * size, 1)) * sizeof(T);
  std::shared_ptr<T> packed(static_cast<T*>(::operator new(bytes, std::align_val_t{64})),
                            [](T* q) { ::operator delete(q, std::align_val_t{64}); });
  SOLDER_OMP(parallel for collapse(2) schedule(static) if(groups * size >= parallel_min_work / 16))
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t jp = 0; jp < cp; ++jp)
      for (std::int64_t pc = 0; pc < npc; ++pc) {
        std::int64_t const k0 = pc * kc, kcur = std::min(kc, p.k - k0);
        pack_b_panel(b, p.n, g, k0, kcur, jp * NR, packed.get() + g * size + k0 * cp * NR + jp * kcur * NR);
      }
  return packed;
}

// `prepacked`: B is packed ahead of time (prepack_b): one round of all its columns.
template <class T>
Plan make_plan(Problem const& p, Strided<T> const& b, int threads, Choice const& c = {}, bool prepacked = false) {
  constexpr std::int64_t MR = Tile<T>::mr, NR = nr_of<T>, size = sizeof(T);
  auto const& caches = cache_sizes();
  Plan pl{};
  auto const kb = k_blocks<T>(p.k);
  pl.kc = kb[0], pl.npc = kb[1];
  pl.per = b.bs == 0 ? p.batch : 1;
  pl.groups = p.batch / pl.per;
  pl.mp = ceil_div(p.m, MR);
  pl.rp = pl.per * pl.mp;
  pl.cp = ceil_div(p.n, NR);
  pl.independent = threads == 1 || pl.groups % threads == 0 || pl.groups >= 4 * threads;
  // Just in time: B goes from memory to L1 once, instead of being written to a round and read
  // back per chunk of rows (measured on 2 threads, rounds against this: [512, 768] x [768,
  // 3072], 0.86; [32, 4096] x [4096, 4096], 0.84, and less when memory is busy).
  pl.jit = c.jit >= 0 ? c.jit == 1 && pl.per == 1
                     : limits().jit && pl.per == 1 && pl.mp * MR * (pl.kc + 4 * NR) * size <= caches.l2 / 2;
  pl.tm = pl.tn = 1;
  if (pl.jit && !pl.independent) pl.tn = threads;
  // Sharing A costs the threads a barrier (microseconds, with passive waiting a sleep and a
  // wake-up): worth it when A's packing takes longer, from about L2 / 8 of A.
  pl.share_a = pl.jit && !pl.independent && p.m * p.k * size > caches.l2 / 8;
  if (!pl.independent && !pl.jit) {
    // The grid whose busiest thread has the least work: its flops (2 per multiply-add) and the
    // packing of its rows of A (each packed element costs about 16 flops' time), per k.
    double best = 0;
    for (std::int64_t tm = threads; tm >= 1; --tm) {
      if (threads % tm != 0) continue;
      std::int64_t const tn = threads / tm;
      double const rows = double(ceil_div(pl.rp, tm) * MR), cols = double(ceil_div(pl.cp, tn) * NR);
      double const cost = 2 * rows * cols + 16 * rows;
      if (best == 0 || cost < best) best = cost, pl.tm = tm, pl.tn = tn;
    }
    if (c.tm > 0 && threads % c.tm == 0) pl.tm = c.tm, pl.tn = threads / c.tm;
  }
  std::int64_t const round_panels =
      pl.jit || prepacked ? pl.cp : std::max(pl.tn, limits().round_bytes / (p.k * NR * size));
  pl.rounds = ceil_div(pl.cp, round_panels);
  pl.rpn = ceil_div(pl.cp, pl.rounds);
  // The C block (mc x nc, nc = 4 mc) and A's kc-slice of it (mc x kc) fill a quarter of L2:
  // the streaming B panels and, on a core with two hardware threads, the other thread use the
  // rest (measured with a 2 MiB L2: a quarter to an eighth ran alike, half about 5% slower).
  // nc = 4 mc: B is read once per mc rows, A once per nc columns.
  double const l2 = double(caches.l2) / 4 / size;
  double const mc = std::ldexp((std::sqrt(double(pl.kc * pl.kc) + 16 * l2) - double(pl.kc)) / 8, c.mc_shift);
  pl.mcp = pl.jit ? pl.mp : std::clamp<std::int64_t>(std::int64_t(mc) / MR, 1, pl.mp);
  pl.ncp = std::max<std::int64_t>(1, std::int64_t(4 * mc) / NR);
  if (pl.jit)  // all rows at once: the C block takes what A's slice leaves of half of L2
    pl.ncp =
        std::clamp<std::int64_t>((caches.l2 / 2 / (pl.mp * MR * size) - pl.kc) / NR, 4, pl.ncp);
  return pl;
}

template <class T>
struct Blocked {
  static constexpr std::int64_t MR = Tile<T>::mr, NR = nr_of<T>;
  Problem const& p;
  Left<T> const& a;
  Strided<T> const& b;
  Epilogue<T> const& out;
  T const* prepacked;  // B packed ahead of time (prepack_b), or null
  Plan pl;

  // Packs items [item0, item1) of round `round` of group g into packed: item = (k block pc,
  // panel j of the round), stored at pc * kc * rpn * NR + j * kcur * NR.
  void pack_b(std::int64_t g, std::int64_t round, std::int64_t item0, std::int64_t item1,
              T* packed) const {
    std::int64_t const panels = std::min(pl.rpn, pl.cp - round * pl.rpn);
    for (std::int64_t item = item0; item < item1; ++item) {
      std::int64_t const pc = item / panels, jp = item % panels;
      std::int64_t const k0 = pc * pl.kc, kcur = std::min(pl.kc, p.k - k0);
      pack_b_panel(b, p.n, g, k0, kcur, (round * pl.rpn + jp) * NR,
                   packed + k0 * pl.rpn * NR + jp * kcur * NR);
    }
  }

  // Packs panels [p0, p1) of rows [i0, i0 + mt) of batch bi, all of k, into `packed` (k block
  // pc at pc * kc * panels * MR, its panel i at i * kcur * MR, for the chunk's panels). A
  // producer fills a block at a time first.
  void pack_a(std::int64_t bi, std::int64_t i0, std::int64_t mt, std::int64_t p0, std::int64_t p1,
              T* packed, T* fill) const {
    std::int64_t const panels = ceil_div(mt, MR), r0 = p0 * MR, rows = std::min(mt, p1 * MR) - r0;
    if (rows <= 0) return;
    for (std::int64_t pc = 0; pc < pl.npc; ++pc) {
      std::int64_t const k0 = pc * pl.kc, kcur = std::min(pl.kc, p.k - k0);
      T const* src = fill;
      std::int64_t rs = kcur, cs = 1;
      if (a.producer.fill) {
        a.producer.fill(a.producer.ctx, bi, i0 + r0, k0, rows, kcur, fill, kcur);
      } else {
        src = a.memory.data + bi * a.memory.bs + (i0 + r0) * a.memory.rs + k0 * a.memory.cs;
        rs = a.memory.rs, cs = a.memory.cs;
      }
      for (std::int64_t ip = p0; ip < p1; ++ip)
        pack_panel<MR>(src + (ip - p0) * MR * rs, rs, cs, std::min(MR, mt - ip * MR), kcur,
                       packed + k0 * panels * MR + ip * kcur * MR);
    }
  }

  struct Buffers {
    Scratch<T> a, b, c, fill;
  };

  // Row panels [r0, r1) of group g (across its batches) x column panels [c0, c1) of round
  // `round`: per chunk of rows, A packed, then per sub-block of columns, micro-kernels into the
  // C block, which then goes to the epilogue. `packed`: the round's B (null when jit);
  // `shared_a`: A already packed, all its rows in one chunk (or null).
  void compute(std::int64_t g, std::int64_t round, std::int64_t r0, std::int64_t r1,
               std::int64_t c0, std::int64_t c1, T const* packed, T const* shared_a,
               Buffers& s) const {
    if (r0 >= r1 || c0 >= c1) return;
    if (!s.c.get()) {
      if (!shared_a) s.a.take(slot_a, pl.mcp * MR * p.k);
      s.c.take(slot_c, pl.mcp * MR * pl.ncp * NR);
      if (!shared_a && a.producer.fill) s.fill.take(slot_fill, pl.mcp * MR * pl.kc);
      if (pl.jit && !prepacked) s.b.take(slot_panel, pl.kc * NR);
    }
    std::int64_t const col_blocks = ceil_div(c1 - c0, pl.ncp);
    for (std::int64_t r = r0; r < r1;) {
      // This batch's part of the range, in chunks of at most mcp panels, balanced.
      std::int64_t const bb = r / pl.mp, end = std::min(r1, (bb + 1) * pl.mp);
      std::int64_t const chunks = ceil_div(end - r, pl.mcp);
      for (std::int64_t ch = 0; ch < chunks; ++ch) {
        auto const [q0, q1] = part(end - r, chunks, ch);
        std::int64_t const bi = g * pl.per + bb, i0 = (r + q0 - bb * pl.mp) * MR;
        std::int64_t const mt = std::min(p.m, (r + q1 - bb * pl.mp) * MR) - i0, panels = q1 - q0;
        T const* const apacked = shared_a ? shared_a : s.a.get();
        if (!shared_a) pack_a(bi, i0, mt, 0, panels, s.a.get(), s.fill.get());
        for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
          auto const [d0, d1] = part(c1 - c0, col_blocks, cb);
          std::int64_t const ldc = (d1 - d0) * NR, jp0 = c0 + d0;
          for (std::int64_t pc = 0; pc < pl.npc; ++pc) {
            std::int64_t const k0 = pc * pl.kc, kcur = std::min(pl.kc, p.k - k0);
            T const* ap = apacked + k0 * panels * MR;
            for (std::int64_t jp = 0; jp < d1 - d0; ++jp) {
              T const* bp = s.b.get();
              if (prepacked)  // (one round: jp0 + jp counts all of B's panels)
                bp = prepacked + g * prepacked_size<T>(p) + k0 * pl.cp * NR + (jp0 + jp) * kcur * NR;
              else if (pl.jit)
                pack_b_panel(b, p.n, g, k0, kcur, (jp0 + jp) * NR, s.b.get());
              else
                bp = packed + k0 * pl.rpn * NR + (jp0 + jp) * kcur * NR;
              for (std::int64_t ip = 0; ip < panels; ++ip)
                micro_kernel<T>(kcur, ap + ip * MR * kcur, bp, s.c.get() + ip * MR * ldc + jp * NR,
                                ldc, pc > 0);
            }
          }
          std::int64_t const j0 = (round * pl.rpn + jp0) * NR;
          out.store(out.ctx, bi, i0, j0, mt, std::min(p.n - j0, ldc), s.c.get(), ldc);
        }
      }
      r = end;
    }
  }

  // This thread's share, in a parallel region (or alone): whole groups when independent, else
  // for each round (or A, when jit), a part of the packing, then its block of the grid.
  // `shared`: that packed operand.
  void run(T* shared) const {
    int const threads = team_size(), t = team_rank();
    Buffers s;
    if (pl.jit && pl.independent) {
      auto const [g0, g1] = part(pl.groups, threads, t);
      for (std::int64_t g = g0; g < g1; ++g) compute(g, 0, 0, pl.rp, 0, pl.cp, nullptr, nullptr, s);
      return;
    }
    if (pl.jit) {  // `shared`: A, packed by all, each a part of its panels (or null: by each)
      if (shared && a.producer.fill) s.fill.take(slot_fill, pl.mp * MR * pl.kc);
      auto const [p0, p1] = part(pl.mp, threads, t);
      auto const [c0, c1] = part(pl.cp, threads, t);
      for (std::int64_t g = 0; g < pl.groups; ++g) {
        if (shared) {
          if (g > 0) {
            SOLDER_OMP(barrier)  // the previous group is done with A
          }
          pack_a(g, 0, p.m, p0, p1, shared, s.fill.get());
          SOLDER_OMP(barrier)
        }
        compute(g, 0, 0, pl.rp, c0, c1, nullptr, shared, s);
      }
      return;
    }
    if (pl.independent) {
      Scratch<T> own(slot_b, prepacked ? 0 : p.k * pl.rpn * NR);
      auto const [g0, g1] = part(pl.groups, threads, t);
      for (std::int64_t g = g0; g < g1; ++g)
        for (std::int64_t round = 0; round < pl.rounds; ++round) {
          std::int64_t const panels = std::min(pl.rpn, pl.cp - round * pl.rpn);
          if (!prepacked) pack_b(g, round, 0, pl.npc * panels, own.get());
          compute(g, round, 0, pl.rp, 0, panels, own.get(), nullptr, s);
        }
      return;
    }
    auto const [r0, r1] = part(pl.rp, pl.tm, t / pl.tn);
    for (std::int64_t g = 0; g < pl.groups; ++g)
      for (std::int64_t round = 0; round < pl.rounds; ++round) {
        std::int64_t const panels = std::min(pl.rpn, pl.cp - round * pl.rpn);
        auto const [c0, c1] = part(panels, pl.tn, t % pl.tn);
        if (prepacked) {
          compute(g, round, r0, r1, c0, c1, nullptr, nullptr, s);
          continue;
        }
        auto const [i0, i1] = part(pl.npc * panels, threads, t);
        pack_b(g, round, i0, i1, shared);
        SOLDER_OMP(barrier)
        compute(g, round, r0, r1, c0, c1, shared, nullptr, s);
        if (g + 1 < pl.groups || round + 1 < pl.rounds) {
          SOLDER_OMP(barrier)  // before the next packing
        }
      }
  }
};

// Blocks of zeros for k == 0, a few rows at a time.
template <class T>
void run_empty(Problem const& p, Epilogue<T> const& out) {
  std::int64_t const rows = std::max<std::int64_t>(1, 4096 / p.n);
  Scratch<T> zeros(slot_c, std::min(rows, p.m) * p.n);
  std::fill(zeros.get(), zeros.get() + std::min(rows, p.m) * p.n, T(0));
  for (std::int64_t bi = 0; bi < p.batch; ++bi)
    for (std::int64_t i = 0; i < p.m; i += rows)
      out.store(out.ctx, bi, i, 0, std::min(rows, p.m - i), p.n, zeros.get(), p.n);
}

// A product's key in max_autotune's cache: element type, shape, and how the operands are read.
template <class T>
std::string tuning_key(Problem const& p, Left<T> const& a, Strided<T> const& b, bool prepacked) {
  std::ostringstream os;
  os << "gemm " << dtype_name<T>() << " batch=" << p.batch << " m=" << p.m << " n=" << p.n << " k=" << p.k
     << " a=" << (a.producer.fill ? "produced" : a.memory.cs == 1 ? "rows" : "columns")
     << " b=" << (b.bs == 0 ? "shared," : "") << (prepacked ? "prepacked" : b.cs == 1 ? "rows" : "columns")
     << " threads=" << get_num_threads();
  return os.str();
}

// The configurations max_autotune times for a product: the heuristic's, B packed the other way,
// each thread grid, a C block half and twice as tall, and on one thread.
template <class T>
std::vector<Choice> choices(Problem const& p, Strided<T> const& b, bool parallel) {
  std::vector<Choice> c{{}};
  Plan const heuristic = make_plan(p, b, parallel ? get_num_threads() : 1);
  if (heuristic.jit || (b.bs != 0 || p.batch == 1)) c.push_back({.jit = std::int8_t(heuristic.jit ? 0 : 1)});
  if (parallel && !heuristic.independent && !heuristic.jit)
    for (int tm = 1; tm <= get_num_threads(); ++tm)
      if (get_num_threads() % tm == 0 && tm != heuristic.tm) c.push_back({.tm = std::int8_t(tm)});
  if (!heuristic.jit) {
    c.push_back({.mc_shift = -1});
    c.push_back({.mc_shift = 1});
  }
  if (parallel) c.push_back({.serial = true});
  return c;
}

// Batches of A that lie one after another against one B, run as one product of batch * m rows:
// its blocks are cut at the batches' bounds for the epilogue. Apart, each batch's rows round up
// to whole micro-panels: ViT-B/16's 197 tokens took the work of 204 (with MR = 12).
template <class T>
struct Unbatched {
  Epilogue<T> out;
  std::int64_t m;
  static void store(void* ctx, std::int64_t, std::int64_t i0, std::int64_t j0, std::int64_t mt, std::int64_t nt,
                    T const* c, std::int64_t ldc) {
    auto const& u = *static_cast<Unbatched const*>(ctx);
    for (std::int64_t i = i0; i < i0 + mt;) {
      std::int64_t const r = i % u.m, rows = std::min(u.m - r, i0 + mt - i);
      u.out.store(u.out.ctx, i / u.m, r, j0, rows, nt, c + (i - i0) * ldc, ldc);
      i += rows;
    }
  }
};

template <class T>
void run(Problem p, Left<T> const& a, Strided<T> const& b, Epilogue<T> const& out, Prepacked<T> const& pre = {}) {
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  if (p.k == 0) return run_empty(p, out);
  if (p.batch > 1 && b.bs == 0 && !a.producer.fill && a.memory.bs == p.m * a.memory.rs && p.m % Tile<T>::mr != 0) {
    Unbatched<T> u{out, p.m};
    Left<T> flat = a;
    flat.memory.bs = 0;
    return run<T>({1, p.batch * p.m, p.n, p.k}, flat, b, {&Unbatched<T>::store, &u}, pre);
  }
  bool const parallel = p.batch * p.m * p.n * p.k >= parallel_min_work && get_num_threads() > 1;
  // Skinny: few rows of C per B, B read in place along n or along k; or few columns, A read in
  // place (or produced) along m or k.
  std::int64_t const rows = b.bs == 0 ? p.batch * p.m : p.m;
  if (rows <= skinny_rows && (b.cs == 1 || b.rs == 1))
    return run_skinny(p, a, b, out, false, parallel);
  if (p.n <= skinny_rows && (a.producer.fill || a.memory.rs == 1 || a.memory.cs == 1))
    return run_skinny(p, a, b, out, true, parallel);
  T const* const prepacked = pre.get ? pre.get(pre.ctx, p, b) : nullptr;
  auto blocked = [&](Choice const& c) {
    // The plan follows the team OpenMP gives (one thread when run from a parallel region).
    Scratch<T> shared;  // the calling thread's (thread 0 of the team)
    SOLDER_OMP(parallel if(parallel && !c.serial)) {
      Blocked<T> const run{p, a, b, out, prepacked, make_plan(p, b, team_size(), c, prepacked != nullptr)};
      Plan const& pl = run.pl;
      // A packed operand the threads share: A (jit) or a round of B.
      if (!pl.independent && (pl.jit ? pl.share_a : !prepacked)) {
        if (team_rank() == 0)
          shared.take(slot_b, pl.jit ? pl.mp * Tile<T>::mr * p.k : p.k * pl.rpn * nr_of<T>);
        SOLDER_OMP(barrier)
      }
      run.run(shared.get());
    }
  };
  if (Tuner* t = tuner()) return blocked(t->choose(tuning_key(p, a, b, prepacked != nullptr), choices(p, b, parallel), [&](Choice c) {
    auto const start = std::chrono::steady_clock::now();
    blocked(c);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }));
  blocked({});
}

}  // namespace solder::detail::host::gemm

#if defined(__CUDACC__)
#pragma nv_diag_default 1675
#endif
