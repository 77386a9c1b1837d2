// max_pool2d, avg_pool2d and adaptive_avg_pool2d on sd::Cuda tensors (expr/conv.hpp): one
// kernel, a thread per output value, which reads its window straight from the input (any
// strides) and writes the output (any strides, any element type it converts to). Each value is
// computed as the host's engine computes it (backend/host/conv.hpp): the window's taps row by
// row, NaN winning a max, an average's sum divided by PyTorch's divisor, so float and double
// results are the host's bit for bit; 16-bit floats compute in float. With an element-wise
// rest, run_contraction (contract.hpp) stores the pool first.
#pragma once
#include <limits>

#include "../host/conv.hpp"
#include "contract.hpp"

namespace solder::detail::cuda {

// The value of output (n, c, y, x) of a pool of kind K over x.
template <PoolKind K, class T>
__device__ SOLDER_INLINE compute_t<T> pooled(host::conv::Planes<T> const& in, PoolParams const& p, std::int64_t n,
                                             std::int64_t c, std::int64_t y, std::int64_t x, std::int64_t oh,
                                             std::int64_t ow) {
  using C = compute_t<T>;
  T const* src = in.data + n * in.sn + c * in.sc;
  auto value = [&](std::int64_t iy, std::int64_t ix) { return static_cast<C>(src[iy * in.sh + ix * in.sw]); };
  if constexpr (K == PoolKind::adaptive_avg) {
    // Rows [y * H / OH, ceil((y + 1) * H / OH)), and the columns likewise.
    std::int64_t const r0 = y * in.h / oh, r1 = ((y + 1) * in.h + oh - 1) / oh;
    std::int64_t const c0 = x * in.w / ow, c1 = ((x + 1) * in.w + ow - 1) / ow;
    C sum = 0;
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t q = c0; q < c1; ++q) sum += value(r, q);
    return sum / static_cast<C>((r1 - r0) * (c1 - c0));
  } else {
    Window2d const& w = p.win;
    std::int64_t const y0 = y * w.sh - w.ph, x0 = x * w.sw - w.pw;
    C acc = K == PoolKind::max ? -std::numeric_limits<C>::infinity() : C(0);
    for (std::int64_t a = 0; a < w.kh; ++a) {
      std::int64_t const iy = y0 + a * w.dh;
      if (iy < 0 || iy >= in.h) continue;
      for (std::int64_t b = 0; b < w.kw; ++b) {
        std::int64_t const ix = x0 + b * w.dw;
        if (ix < 0 || ix >= in.w) continue;
        C const v = value(iy, ix);
        if constexpr (K == PoolKind::max) acc = (v > acc) | (v != v) ? v : acc;  // NaN wins
        else acc += v;
      }
    }
    if constexpr (K == PoolKind::avg) {
      // PyTorch's divisor: the window clipped to the padded input, or to the input itself.
      std::int64_t const y1 = std::min(y0 + w.kh, in.h + w.ph), x1 = std::min(x0 + w.kw, in.w + w.pw);
      std::int64_t const rows = p.count_include_pad ? y1 - y0 : std::min(y1, in.h) - std::max<std::int64_t>(y0, 0);
      std::int64_t const cols = p.count_include_pad ? x1 - x0 : std::min(x1, in.w) - std::max<std::int64_t>(x0, 0);
      acc /= static_cast<C>(p.divisor ? p.divisor : rows * cols);
    }
    return acc;
  }
}

// A thread per output value (grid-stride); out: [N, C, OH, OW] with strides ost.
template <PoolKind K, class T, class OutT>
__global__ void __launch_bounds__(block_threads)
    pooling_kernel(host::conv::Planes<T> in, PoolParams p, OutT* out, Index<4> ost, std::int64_t oh, std::int64_t ow) {
  std::int64_t const n = in.n * in.c * oh * ow, step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    std::int64_t const x = i % ow, y = i / ow % oh, plane = i / (ow * oh), c = plane % in.c, b = plane / in.c;
    out[b * ost[0] + c * ost[1] + y * ost[2] + x * ost[3]] = static_cast<OutT>(pooled<K>(in, p, b, c, y, x, oh, ow));
  }
}

// Writes the pool into out, whatever its layout and element type: always true.
template <PoolKind K, class X>
struct AnchorEngine<Pool2d<K, X>> {
  template <class OutT, auto E>
  static bool run(Pool2d<K, X> const& anchor, BasicTensor<OutT, E, Cuda>& out) {
    using T = canonical_t<typename Pool2d<K, X>::value_type>;
    constexpr int D = rank_of<E>;
    auto const x = in_memory(anchor.x);
    host::conv::Planes<T> const in = host::conv::planes(x);
    auto const& os = out.shape();
    auto const& st = out.strides();
    Index<4> const ost{D == 4 ? st[0] : 0, st[D - 3], st[D - 2], st[D - 1]};
    std::int64_t const n = numel_of<D>(os);
    pooling_kernel<K, T><<<grid_for(n), block_threads, 0, solder::cuda::stream()>>>(in, anchor.params, out.data(), ost,
                                                                                    os[D - 2], os[D - 1]);
    SOLDER_CUDA_CHECK(cudaGetLastError());
    return true;
  }
};

}  // namespace solder::detail::cuda
