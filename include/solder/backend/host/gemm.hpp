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
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/threads.hpp"

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

// One block of C rows at a time per thread; each row of the block accumulates over the whole k
// in a fixed order.
template <class T>
void run(Problem p, Left<T> const& a, Strided<T> const& b, Epilogue<T> const& out) {
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  constexpr std::int64_t rows = 8;
  std::int64_t const row_blocks = (p.m + rows - 1) / rows, tasks = p.batch * row_blocks;
  bool const parallel = p.batch * p.m * p.n * std::max<std::int64_t>(p.k, 1) > 65536;
  SOLDER_OMP(parallel for schedule(static) if(parallel))
  for (std::int64_t t = 0; t < tasks; ++t) {
    std::int64_t const bi = t / row_blocks, i0 = t % row_blocks * rows;
    std::int64_t const mt = std::min(rows, p.m - i0);
    std::vector<T> as(static_cast<std::size_t>(mt * p.k)), c(static_cast<std::size_t>(mt * p.n), T(0));
    if (a.producer.fill) {
      if (p.k > 0) a.producer.fill(a.producer.ctx, bi, i0, 0, mt, p.k, as.data(), p.k);
    } else {
      for (std::int64_t r = 0; r < mt; ++r)
        for (std::int64_t q = 0; q < p.k; ++q) as[r * p.k + q] = a.memory.at(bi, i0 + r, q);
    }
    for (std::int64_t r = 0; r < mt; ++r)
      for (std::int64_t q = 0; q < p.k; ++q) {
        T const v = as[r * p.k + q];
        for (std::int64_t j = 0; j < p.n; ++j) c[r * p.n + j] += v * b.at(bi, q, j);
      }
    out.store(out.ctx, bi, i0, 0, mt, p.n, c.data(), p.n);
  }
}

}  // namespace solder::detail::host::gemm
