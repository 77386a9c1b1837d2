// scaled_dot_product_attention on sd::Cuda tensors (expr/attention.hpp): one kernel, the forward
// pass of flash attention, which never stores the [L, S] scores. A block takes block_rows query
// rows of one batch (a warp warp_rows of them) and walks the keys in tiles of block_keys: each
// tile's keys and values go through shared memory, where all the block's rows read them. Per
// tile, lane j of a warp computes the scores of key j for the warp's rows, the warp folds each
// row's max and sum with shuffles, and every lane adds the weighted values of the tile's keys to
// the value dims it holds (lane + 32 u). Each row keeps a running max m, a running sum l and its
// output O, rescaled by exp(m_old - m_new) when the max grows, exactly as the host's engine
// (backend/host/attention.hpp), whose maths it shares: solder's exp, the masks and the causal
// rule applied in the same order, and a row that no key takes part in gives 0 (PyTorch 2.5 and
// later). Everything is computed in float for float and 16-bit operands, in double for double.
// Operands are read with their strides (transposed keys, heads split by views, broadcast batch
// dims); the output is written with its own, converted to its element type. With an
// element-wise rest, run_contraction (contract.hpp) stores the attention first.
#pragma once
#include <limits>

#include "../../core/math.hpp"
#include "../../expr/attention.hpp"
#include "contract.hpp"

namespace solder::detail::cuda {

namespace attention {
inline constexpr int warps = 4;
inline constexpr int threads = warps * warp_threads;
inline constexpr int warp_rows = 4;                   // query rows of a warp
inline constexpr int block_rows = warps * warp_rows;  // query rows of a block: each tile serves them all
inline constexpr int block_keys = warp_threads;       // keys of a tile: a lane each for the scores
inline constexpr int value_steps = 8;                 // value dims of a row a lane holds
inline constexpr std::int64_t max_value_dim = value_steps * warp_threads;
}  // namespace attention

// What the kernel reads and writes. Each operand is seen in the output's index space, its batch
// dims right-aligned with the output's (stride 0 where broadcast: leaf_eval) and its matrix's
// rows and columns along the last two dims.
template <class T, class MaskT, class OutT, int D>
struct AttentionArgs {
  LeafEval<T, D> q, k, v;
  LeafEval<MaskT, D> mask;  // base null: no mask; bool: false masks out; else added to the scores
  OutT* out;
  Index<D> ost, dom;  // the output's strides and shape [..., L, Ev]
  std::int64_t batches, tiles, S, E;  // tiles: blocks of block_rows query rows per batch
  compute_t<T> scale;
  bool causal;
  bool empty_rows_nan;  // a row no key takes part in: NaN (Attention::empty_rows_nan), else 0
};

// The matrix of batch index b (its last two dims 0) of an operand.
template <int D, class T>
__device__ SOLDER_INLINE T const* matrix_of(LeafEval<T, D> const& m, Index<D> const& b) {
  return m.base + dot<D>(b, m.st);
}

// Every lane gets the warp's max (as the host folds it: a NaN is kept only where it comes first)
// or sum.
template <class C>
__device__ SOLDER_INLINE C warp_max(C x) {
  SOLDER_UNROLL
  for (int o = warp_threads / 2; o > 0; o /= 2) {
    C const y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}
template <class C>
__device__ SOLDER_INLINE C warp_sum(C x) {
  SOLDER_UNROLL
  for (int o = warp_threads / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Shared memory: the block's query rows [block_rows][E], a tile's keys [block_keys][E + 1] (a
// lane's key row one bank from the next lane's) and values [block_keys][Ev], in compute_t<T>.
template <class T, class MaskT, class OutT, int D>
__global__ void __launch_bounds__(attention::threads) attention_kernel(AttentionArgs<T, MaskT, OutT, D> a) {
  using namespace attention;
  using C = compute_t<T>;
  constexpr C neg_inf = -std::numeric_limits<C>::infinity();
  constexpr int R = warp_rows, U = value_steps;
  std::int64_t const L = a.dom[D - 2], Ev = a.dom[D - 1], S = a.S, E = a.E;
  int const lane = static_cast<int>(threadIdx.x) % warp_threads, warp = static_cast<int>(threadIdx.x) / warp_threads;
  C* const q_tile = reinterpret_cast<C*>(dynamic_shared());
  C* const k_tile = q_tile + block_rows * E;
  C* const v_tile = k_tile + block_keys * (E + 1);
  for (std::int64_t task = blockIdx.x; task < a.batches * a.tiles; task += gridDim.x) {
    Index<D> b{};
    std::int64_t rest = task / a.tiles;
    for (int d = D - 3; d >= 0; --d) b[d] = rest % a.dom[d], rest /= a.dom[d];
    std::int64_t const i0 = task % a.tiles * block_rows;
    T const *q = matrix_of<D>(a.q, b), *k = matrix_of<D>(a.k, b), *v = matrix_of<D>(a.v, b);
    MaskT const* mask = a.mask.base ? matrix_of<D>(a.mask, b) : nullptr;
    __syncthreads();  // the last task's tiles are read
    for (std::int64_t t = threadIdx.x; t < block_rows * E; t += blockDim.x) {
      std::int64_t const r = t / E, e = t % E;
      q_tile[t] = i0 + r < L ? static_cast<C>(q[(i0 + r) * a.q.st[D - 2] + e * a.q.st[D - 1]]) : C(0);
    }
    C m[R], l[R], o[R][U];
    SOLDER_UNROLL
    for (int r = 0; r < R; ++r) {
      m[r] = neg_inf, l[r] = 0;
      SOLDER_UNROLL
      for (int u = 0; u < U; ++u) o[r][u] = 0;
    }
    // Causal: key j takes part in row i for j <= i; keys past the block's last row in none.
    std::int64_t const keys = a.causal ? std::min<std::int64_t>(S, i0 + block_rows) : S;
    for (std::int64_t j0 = 0; j0 < keys; j0 += block_keys) {
      int const nk = static_cast<int>(std::min<std::int64_t>(block_keys, keys - j0));
      __syncthreads();  // the last tile is read (and the query rows are written)
      for (std::int64_t t = threadIdx.x; t < nk * E; t += blockDim.x) {
        std::int64_t const j = t / E, e = t % E;
        k_tile[j * (E + 1) + e] = static_cast<C>(k[(j0 + j) * a.k.st[D - 2] + e * a.k.st[D - 1]]);
      }
      for (std::int64_t t = threadIdx.x; t < nk * Ev; t += blockDim.x) {
        std::int64_t const j = t / Ev, c = t % Ev;
        v_tile[t] = static_cast<C>(v[(j0 + j) * a.v.st[D - 2] + c * a.v.st[D - 1]]);
      }
      __syncthreads();
      C s[R] = {};  // this lane's key against the warp's rows
      if (lane < nk) {
        for (std::int64_t e = 0; e < E; ++e) {
          C const kv = k_tile[lane * (E + 1) + e];
          SOLDER_UNROLL
          for (int r = 0; r < R; ++r) s[r] += q_tile[(warp * R + r) * E + e] * kv;
        }
      }
      C p[R];  // this lane's key's weight in each row, relative to the row's max so far
      SOLDER_UNROLL
      for (int r = 0; r < R; ++r) {
        std::int64_t const i = i0 + warp * R + r, j = j0 + lane;
        C x = s[r] * a.scale;
        if (lane >= nk || (a.causal && j > i)) {
          x = neg_inf;
        } else if (mask && i < L) {
          auto const mv = mask[i * a.mask.st[D - 2] + j * a.mask.st[D - 1]];
          if constexpr (std::is_same_v<MaskT, bool>) x = mv ? x : neg_inf;
          else x = x + static_cast<C>(mv);
        }
        C const mx = warp_max(x > m[r] ? x : m[r]);
        // A row masked out so far keeps m = -inf; its p and alpha are then exp(-inf) = 0.
        C const shift = mx == neg_inf ? C(0) : mx;
        C const alpha = solder::math::exp(m[r] - shift);
        p[r] = solder::math::exp(x - shift);
        l[r] = l[r] * alpha + warp_sum(p[r]);
        m[r] = mx;
        SOLDER_UNROLL
        for (int u = 0; u < U; ++u) o[r][u] *= alpha;
      }
      for (int jj = 0; jj < nk; ++jj) {
        C pj[R];
        SOLDER_UNROLL
        for (int r = 0; r < R; ++r) pj[r] = __shfl_sync(0xffffffffu, p[r], jj);
        SOLDER_UNROLL
        for (int u = 0; u < U; ++u) {
          std::int64_t const c = lane + u * warp_threads;
          if (c >= Ev) break;
          C const vv = v_tile[jj * Ev + c];
          SOLDER_UNROLL
          for (int r = 0; r < R; ++r) o[r][u] += pj[r] * vv;
        }
      }
    }
    SOLDER_UNROLL
    for (int r = 0; r < R; ++r) {
      std::int64_t const i = i0 + warp * R + r;
      if (i >= L) break;
      SOLDER_UNROLL
      for (int u = 0; u < U; ++u) {
        std::int64_t const c = lane + u * warp_threads;
        if (c >= Ev) break;
        a.out[dot<D>(b, a.ost) + i * a.ost[D - 2] + c * a.ost[D - 1]] =
            static_cast<OutT>(l[r] != C(0) ? o[r][u] / l[r]
                              : a.empty_rows_nan ? std::numeric_limits<C>::quiet_NaN() : C(0));
      }
    }
  }
}

// The kernel's launch: its shared memory, checked against the device's, and a grid that the GPU
// holds at once (the blocks then take the tasks in turn).
template <class T, class MaskT, class OutT, int D>
void launch_attention(AttentionArgs<T, MaskT, OutT, D> const& a) {
  using namespace attention;
  using C = compute_t<T>;
  std::int64_t const Ev = a.dom[D - 1];
  check(Ev <= max_value_dim, "scaled_dot_product_attention on sd::Cuda: the value's last dim (Ev) is ", Ev,
        ", at most ", max_value_dim, " is supported");
  auto const bytes = static_cast<std::size_t>(block_rows * a.E + block_keys * (a.E + 1) + block_keys * Ev) * sizeof(C);
  auto const kernel = attention_kernel<T, MaskT, OutT, D>;
  if (bytes > 48 * 1024) {  // more than a block gets without asking
    int most = 0;
    SOLDER_CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, current_device()));
    check(bytes <= static_cast<std::size_t>(most), "scaled_dot_product_attention on sd::Cuda: head dims E = ", a.E,
          " and Ev = ", Ev, " need ", bytes, " bytes of shared memory a block, the device has ", most);
    SOLDER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
  std::int64_t const tasks = a.batches * a.tiles;
  std::int64_t const held = std::int64_t(device_info().sm_count) * (device_info().max_threads_per_sm / threads);
  kernel<<<static_cast<unsigned>(std::min(tasks, held)), threads, bytes, solder::cuda::stream()>>>(a);
  SOLDER_CUDA_CHECK(cudaGetLastError());
}

// Writes attention into out, whatever its layout and element type: always true.
template <class Q, class K, class V, class... M>
struct AnchorEngine<Attention<Q, K, V, M...>> {
  template <class OutT, auto E>
  static bool run(Attention<Q, K, V, M...> const& anchor, BasicTensor<OutT, E, Cuda>& out) {
    using T = canonical_t<typename Attention<Q, K, V, M...>::value_type>;
    constexpr int D = rank_of<E>;
    auto const q = in_memory(anchor.template child<0>());
    auto const k = in_memory(anchor.template child<1>());
    auto const v = in_memory(anchor.template child<2>());
    Index<D> const& dom = out.shape();
    std::int64_t const L = dom[D - 2], S = k.shape()[K::rank - 2];
    auto seen = [&](auto const& t, std::int64_t rows, std::int64_t cols) {  // in the output's index space
      Index<D> d = dom;
      d[D - 2] = rows, d[D - 1] = cols;
      return leaf_eval<D>(t, d);
    };
    std::int64_t const Ed = q.shape()[Q::rank - 1];
    std::int64_t batches = 1;
    for (int d = 0; d < D - 2; ++d) batches *= dom[d];
    auto args = [&](auto mask) {
      using MaskT = std::remove_cvref_t<decltype(*mask.base)>;
      return AttentionArgs<T, MaskT, OutT, D>{seen(q, L, Ed), seen(k, S, Ed), seen(v, S, dom[D - 1]), mask,
                                              out.data(), out.strides(), dom, batches,
                                              (L + attention::block_rows - 1) / attention::block_rows, S, Ed,
                                              static_cast<compute_t<T>>(anchor.scale), anchor.is_causal,
                                              anchor.empty_rows_nan};
    };
    if constexpr (sizeof...(M) == 1) {
      auto const m = in_memory(anchor.template child<3>());
      launch_attention(args(seen(m, L, S)));
    } else {
      launch_attention(args(LeafEval<bool, D>{nullptr, {}}));
    }
    return true;
  }
};

}  // namespace solder::detail::cuda
