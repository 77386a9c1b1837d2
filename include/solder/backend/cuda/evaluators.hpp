// The CUDA reduction evaluator: a fused reduction is computed by a whole thread block for the
// line it belongs to (every thread folds a strided share, then CUB's block reduction folds the
// shares in a fixed tree), so one block computes softmax's max and sum, or layer norm's mean
// and variance, and then writes the line. Leaves and element-wise nodes are the shared
// evaluators of backend/eval.hpp, the same structs the host runs.
#pragma once
#include <cub/block/block_reduce.cuh>

#include "../eval.hpp"

namespace solder::detail::cuda {

inline constexpr int block_threads = 256;

template <class Op>
struct MergeOp {
  template <class A>
  __device__ SOLDER_INLINE A operator()(A const& a, A const& b) const {
    return Op::merge(a, b);
  }
};

// Called by every thread of the block with its share; every thread gets the block's total.
template <class Op, class A>
__device__ SOLDER_INLINE A block_fold(A share) {
  using Reduce = cub::BlockReduce<A, block_threads>;
  __shared__ typename Reduce::TempStorage scratch;
  __shared__ A total;
  A r = Reduce(scratch).Reduce(share, MergeOp<Op>{});
  if (threadIdx.x == 0) total = r;
  __syncthreads();
  r = total;
  __syncthreads();  // the next fold of this type reuses scratch and total
  return r;
}

// Rule 4 (a reduction used twice is computed once) is the host's Links; here each use is
// computed by its own fold, which re-reads the line from cache.
template <class Op, class Child, int D, int F, int NA>
struct ReduceEval {
  using In = element_of<Child>;
  using A = typename Op::template acc<In>;
  // Inside a kernel a reduction's value stays in the compute type: a 16-bit float result is
  // rounded only where a kernel stores it.
  using R = compute_t<typename Op::template result<In>>;
  Child child;
  Index<F> fdom;             // the input's index space
  std::array<int, F> src{};  // the output axis feeding each input axis; -1 if reduced
  std::array<int, NA> axes{};
  Index<D> out{};            // the output's shape: axes of extent 1 read index 0
  std::int64_t count = 1;
  bool block = false;        // reduced axes are trailing and contiguous: one run
  std::uint64_t id = 0;
  // f = take * p: the input's line start from the output index, as arithmetic on constant
  // indices (an index read from src[] would make the compiler keep the arrays in local memory).
  std::array<std::array<std::int64_t, D>, F> take{};
  R value{};

  void derive() {
    for (int k = 0; k < F; ++k)
      for (int o = 0; o < D; ++o) take[k][o] = (src[k] == o && out[o] != 1) ? 1 : 0;
  }

  // Every thread of the block calls this for the same line p (block_fold synchronizes).
  SOLDER_HD SOLDER_INLINE void prepare(Index<D> const& p) {
#if defined(__CUDA_ARCH__)
    // Every index below is a compile-time constant once the loops unroll, so the evaluator
    // stays in registers.
    Index<F> f{};
    SOLDER_UNROLL
    for (int k = 0; k < F; ++k) {
      SOLDER_UNROLL
      for (int o = 0; o < D; ++o) f[k] += take[k][o] * p[o];
    }
    child.prepare(f);
    A acc = Op::template identity<A>();
    if (block) {
      child.begin_line(f);
      for (std::int64_t n = threadIdx.x; n < count; n += blockDim.x)
        acc = Op::step(acc, child.line(n), n);
    } else {
      for (std::int64_t n = threadIdx.x; n < count; n += blockDim.x) {
        Index<F> g = f;
        std::int64_t r = n;
        SOLDER_UNROLL
        for (int k = F - 1; k >= 0; --k) {
          if (src[k] >= 0) continue;  // not a reduced axis
          g[k] = r % fdom[k];
          r /= fdom[k];
        }
        acc = Op::step(acc, child.at(g), n);
      }
    }
    value = static_cast<R>(Op::finalize(block_fold<Op>(acc), count));
#else
    static_cast<void>(p);
#endif
  }
  SOLDER_HD SOLDER_INLINE void begin_line(Index<D> const&) {}
  SOLDER_HD SOLDER_INLINE R line(std::int64_t) const { return value; }
  SOLDER_HD SOLDER_INLINE R at(Index<D> const&) const { return value; }
  bool contiguous(int, Index<D> const&) const { return true; }  // constant along its lines
};

}  // namespace solder::detail::cuda

namespace solder::detail {
template <>
struct reduce_eval_for<Cuda> {
  template <class Op, class Child, int D, int F, int NA>
  using type = cuda::ReduceEval<Op, Child, D, F, NA>;
};
}  // namespace solder::detail
