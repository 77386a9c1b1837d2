// embedding on sd::Cuda tensors (expr/embedding.hpp): one gather kernel, a thread per output
// value, neighbouring threads reading neighbouring values of a weight's row. An index outside
// [0, num_embeddings) is never read through: the kernel skips it and keeps the first such
// position (in the order of the output's rows), which is read back after the kernel (a wait for
// the GPU), and the index there is named in the host's sd::Error. With an element-wise rest,
// run_contraction (contract.hpp) stores the gathered rows first.
#pragma once
#include <climits>

#include "../../expr/embedding.hpp"
#include "contract.hpp"

namespace solder::detail::cuda {

// Output value i of [..., dim]: weight[index, i % dim], the index read at the output's row
// (ist: the indices' strides in the output's index space, 0 along dim). bad: the first row whose
// index is out of range, atomically.
template <class T, class I, class OutT, int D>
__global__ void __launch_bounds__(block_threads)
    embedding_kernel(T const* weight, std::int64_t rows, std::int64_t ws0, std::int64_t ws1, I const* indices,
                     Index<D> ist, OutT* out, Index<D> ost, Index<D> dom, std::int64_t n,
                     unsigned long long* bad) {
  std::int64_t const step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    Index<D> idx;
    unravel_all<D>(i, dom, idx);
    auto const row = static_cast<std::int64_t>(indices[dot<D>(idx, ist)]);
    if (row < 0 || row >= rows) {
      atomicMin(bad, static_cast<unsigned long long>(i / dom[D - 1]));
      continue;
    }
    out[dot<D>(idx, ost)] = static_cast<OutT>(weight[row * ws0 + idx[D - 1] * ws1]);
  }
}

// Writes the gathered rows into out, whatever its layout and element type (always true), or
// throws sd::Error for an index out of range, as the host does.
template <class I, class W>
struct AnchorEngine<Embedding<I, W>> {
  template <class OutT, auto E>
  static bool run(Embedding<I, W> const& anchor, BasicTensor<OutT, E, Cuda>& out) {
    using T = canonical_t<typename Embedding<I, W>::value_type>;
    using Ix = canonical_t<typename I::value_type>;
    constexpr int D = rank_of<E>, RI = I::rank;
    auto const ids = in_memory(anchor.indices);
    auto const w = in_memory(anchor.weight);
    Index<D> ist{};  // (the output's dims but its last are the indices')
    for (int a = 0; a < RI; ++a) ist[a] = ids.strides()[a];
    std::int64_t const rows = w.shape()[0], n = numel_of<D>(out.shape());
    auto const bad = cuda_allocate<unsigned long long>(1);
    cudaStream_t const s = solder::cuda::stream();
    SOLDER_CUDA_CHECK(cudaMemsetAsync(bad.get(), 0xff, sizeof(unsigned long long), s));  // none: ULLONG_MAX
    embedding_kernel<T, Ix, OutT, D><<<grid_for(n), block_threads, 0, s>>>(w.data(), rows, w.strides()[0], w.strides()[1],
                                                                   ids.data(), ist, out.data(), out.strides(),
                                                                   out.shape(), n, bad.get());
    SOLDER_CUDA_CHECK(cudaGetLastError());
    unsigned long long first = 0;
    cuda_copy(&first, bad.get(), sizeof first);
    if (first != ULLONG_MAX) {
      Index<RI> at{};  // the index at that position, read back to be named
      auto p = static_cast<std::int64_t>(first);
      for (int a = RI - 1; a >= 0; --a) at[a] = p % ids.shape()[a], p /= ids.shape()[a];
      Ix v{};
      cuda_copy(&v, ids.data() + dot<RI>(at, ids.strides()), sizeof v);
      fail("embedding: index ", static_cast<std::int64_t>(v), " is out of range for a weight of shape ",
           shape_string<2>(w.shape()), " (indices must be in [0, ", rows, "))");
    }
    return true;
  }
};

}  // namespace solder::detail::cuda
