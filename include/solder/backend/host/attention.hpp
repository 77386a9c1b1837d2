// The host engine of scaled_dot_product_attention (expr/attention.hpp), flash-attention style:
// for each batch and block of bq query rows (the tasks the threads share, statically), the keys
// are visited in blocks of bk with an online softmax — per row a running max m, a running sum l
// and an accumulator O, rescaled by exp(m_old - m_new) when the max grows — so the [L, S] scores
// are never stored: a thread's memory is O(bq * (E + bk + Ev) + bk * (E + Ev)). Each finished block
// of output rows goes to the kernel's epilogue (contract.hpp: store_block), as a GEMM block does.
//
// A task copies its query rows, and each key and value block, into small contiguous buffers
// (any strides: transposed keys, heads split by views), then runs two register-tiled products
// over them: scores = Q K^T (rows x keys) and O += P V (rows x value dims), the tiles kept in
// vector registers (GCC vector extensions: the vectorizer keeps such tiles in memory; g++
// contracts their a * b + c into FMAs). The softmax between them is vectorized loops over the
// key block with solder's exp (core/math.hpp).
// Every output row is computed in the same order whatever the thread count: deterministic.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../../core/math.hpp"
#include "../../expr/attention.hpp"
#include "contract.hpp"
#include "simd.hpp"

namespace solder::detail::host {

namespace attention {

// The vector registers the tiles live in (simd.hpp), and how many of them a tile row holds
// (AVX2 and narrower have 16 registers: half the tile of AVX-512's 32).
using simd::lanes, simd::load, simd::Pack, simd::pack_bytes, simd::store;
inline constexpr int tile_packs = pack_bytes == 64 ? 4 : 2;

inline constexpr int tile_rows = 4;                     // query rows of a tile
// bq, the query rows of a task: each key and value block it copies serves that many rows (with
// 32, [8, 12, 512, 64] took 20% longer than with 128), fewer where the tasks would not keep
// every thread busy.
inline constexpr std::int64_t max_block_rows = 128, min_block_rows = 16;
inline constexpr std::int64_t block_keys = 64;          // bk: keys of a block
inline constexpr std::int64_t parallel_work = 1 << 18;  // multiply-adds: below, one thread

// s[r][0 .. NV packs) = sum over e < n of a[r * lda + e] * b[e * ldb + ...] for tile_rows rows:
// the accumulators stay in registers for the whole sum.
template <int NV, class T>
SOLDER_INLINE void tile_product(T const* a, std::int64_t lda, T const* b, std::int64_t ldb, std::int64_t n, T* s,
                                std::int64_t lds, bool accumulate) {
  constexpr int P = lanes<T>;
  Pack<T> acc[tile_rows][NV];
  for (int r = 0; r < tile_rows; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load(s + r * lds + v * P) : Pack<T>{};
  for (std::int64_t e = 0; e < n; ++e) {
    Pack<T> bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load(b + e * ldb + v * P);
    for (int r = 0; r < tile_rows; ++r) {
      Pack<T> const x = Pack<T>{} + a[r * lda + e];
      for (int v = 0; v < NV; ++v) acc[r][v] = x * bv[v] + acc[r][v];
    }
  }
  for (int r = 0; r < tile_rows; ++r)
    for (int v = 0; v < NV; ++v) store(s + r * lds + v * P, acc[r][v]);
}

// A thread's buffers, for tasks of up to max_block_rows rows: its query rows [bq, E], a key block
// transposed [E, bk], a value block [bk, ev], the scores [bq, bk], O [bq, ev], m and l. Each
// starts on a whole vector, and the rows of all but the first are whole vectors long.
template <class T>
struct Buffers {
  std::int64_t ev;  // Ev rounded up to whole vectors (the padding stays zero)
  std::vector<T> store;
  T *q, *kt, *v, *s, *o, *m, *l;
  Buffers(std::int64_t e, std::int64_t ev_) : ev(ev_) {
    std::int64_t const P = lanes<T>, rows = max_block_rows;
    std::int64_t sizes[] = {rows * e, e * block_keys, block_keys * ev, rows * block_keys, rows * ev, rows, rows};
    std::int64_t total = P;
    for (auto n : sizes) total += (n + P - 1) / P * P;
    store.assign(static_cast<std::size_t>(total), T(0));
    T* p = store.data();
    p += (P - reinterpret_cast<std::uintptr_t>(p) / sizeof(T) % P) % P;  // to a whole vector
    T** parts[] = {&q, &kt, &v, &s, &o, &m, &l};
    for (int i = 0; i < 7; ++i) *parts[i] = p, p += (sizes[i] + P - 1) / P * P;
  }
};

// Where the engine reads: element (r, c) of the matrix of batch b at data[off[b] + r * rs + c * cs].
template <class T>
struct Operand {
  using element_type = T;
  T const* data;
  std::int64_t rs, cs;
  std::int64_t const* off;
};

template <class T, class MaskT>
struct Problem {
  std::int64_t batch, L, S, E, Ev;
  Operand<T> q, k, v;
  Operand<MaskT> mask;  // MaskT void: none; bool: false masks out; T: added to the scores
  T scale;
  bool causal;
  bool empty_rows_nan;  // a row no key takes part in: NaN (Attention::empty_rows_nan), else 0
};

// Receives output rows [i0, i0 + mt) x [j0, j0 + nt) of batch b, value (r, c) at c[r * ldc + c]
// (contract.hpp: store_block).
template <class T>
struct Sink {
  void (*store)(void* ctx, std::int64_t b, std::int64_t i0, std::int64_t j0, std::int64_t mt, std::int64_t nt,
                T const* c, std::int64_t ldc);
  void* ctx;
};

// Copies rows [r0, r0 + n) x [0, cols) of x (batch offset base) into dst (row length ld),
// transposed when `transpose` (dst[c * ld + r]).
template <class T>
void gather(Operand<T> const& x, std::int64_t base, std::int64_t r0, std::int64_t n, std::int64_t cols, T* dst,
            std::int64_t ld, bool transpose) {
  T const* src = x.data + base + r0 * x.rs;
  if (!transpose && x.cs == 1) {
    for (std::int64_t r = 0; r < n; ++r) std::copy(src + r * x.rs, src + r * x.rs + cols, dst + r * ld);
  } else if (transpose && x.rs == 1) {
    for (std::int64_t c = 0; c < cols; ++c) std::copy(src + c * x.cs, src + c * x.cs + n, dst + c * ld);
  } else if (transpose) {
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < cols; ++c) dst[c * ld + r] = src[r * x.rs + c * x.cs];
  } else {
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < cols; ++c) dst[r * ld + c] = src[r * x.rs + c * x.cs];
  }
}

// Query rows [i0, i0 + mt) of batch b: their output rows, into the sink.
template <class T, class MaskT>
void run_task(Problem<T, MaskT> const& p, Buffers<T>& w, std::int64_t b, std::int64_t i0, std::int64_t mt,
              Sink<T> const& out) {
  constexpr int P = lanes<T>, NV = tile_packs, W = NV * P;
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  std::int64_t const E = p.E, ev = w.ev, bk = block_keys;
  std::int64_t const rows = (mt + tile_rows - 1) / tile_rows * tile_rows;  // whole tiles
  gather(p.q, p.q.off[b], i0, mt, E, w.q, E, false);
  std::fill(w.q + mt * E, w.q + rows * E, T(0));
  std::fill(w.o, w.o + rows * ev, T(0));
  std::fill(w.m, w.m + mt, neg_inf);
  std::fill(w.l, w.l + mt, T(0));
  // Causal: key j takes part in row i for j <= i; keys past the block's last row in none.
  std::int64_t const keys = p.causal ? std::min(p.S, i0 + mt) : p.S;
  for (std::int64_t j0 = 0; j0 < keys; j0 += bk) {
    std::int64_t const nk = std::min(bk, keys - j0), wk = (nk + W - 1) / W * W;
    gather(p.k, p.k.off[b], j0, nk, E, w.kt, bk, true);
    if (nk < wk)
      for (std::int64_t e = 0; e < E; ++e) std::fill(w.kt + e * bk + nk, w.kt + e * bk + wk, T(0));
    gather(p.v, p.v.off[b], j0, nk, p.Ev, w.v, ev, false);
    for (std::int64_t r = 0; r < rows; r += tile_rows)
      for (std::int64_t c = 0; c < wk; c += W)
        tile_product<NV>(w.q + r * E, E, w.kt + c, bk, E, w.s + r * bk + c, bk, false);
    for (std::int64_t r = 0; r < mt; ++r) {
      T* s = w.s + r * bk;
      std::int64_t const i = i0 + r;
      T const scale = p.scale;
      if constexpr (std::is_void_v<MaskT>) {
        SOLDER_SIMD
        for (std::int64_t j = 0; j < nk; ++j) s[j] *= scale;
      } else {
        MaskT const* mk = p.mask.data + p.mask.off[b] + i * p.mask.rs + j0 * p.mask.cs;
        std::int64_t const cs = p.mask.cs;
        if constexpr (std::is_same_v<MaskT, bool>) {
          SOLDER_SIMD
          for (std::int64_t j = 0; j < nk; ++j) s[j] = mk[j * cs] ? s[j] * scale : neg_inf;
        } else {
          SOLDER_SIMD
          for (std::int64_t j = 0; j < nk; ++j) s[j] = s[j] * scale + mk[j * cs];
        }
      }
      if (p.causal && j0 + nk - 1 > i) std::fill(s + std::max<std::int64_t>(i + 1 - j0, 0), s + nk, neg_inf);
      T mx = w.m[r];
      SOLDER_OMP(simd reduction(max : mx))
      for (std::int64_t j = 0; j < nk; ++j) mx = s[j] > mx ? s[j] : mx;  // (std::max does not vectorize)
      // A row masked out so far keeps m = -inf; its p and alpha are then exp(-inf) = 0.
      T const shift = mx == neg_inf ? T(0) : mx;
      T const alpha = math::exp(w.m[r] - shift);
      T sum = 0;
      SOLDER_OMP(simd reduction(+ : sum))
      for (std::int64_t j = 0; j < nk; ++j) {
        T const e = math::exp(s[j] - shift);
        s[j] = e;
        sum += e;
      }
      w.l[r] = w.l[r] * alpha + sum;
      w.m[r] = mx;
      if (alpha != T(1)) {
        T* o = w.o + r * ev;
        SOLDER_SIMD
        for (std::int64_t c = 0; c < ev; ++c) o[c] *= alpha;
      }
    }
    for (std::int64_t r = 0; r < rows; r += tile_rows) {
      std::int64_t c = 0;
      for (; c + W <= ev; c += W) tile_product<NV>(w.s + r * bk, bk, w.v + c, ev, nk, w.o + r * ev + c, ev, true);
      for (; c < ev; c += P) tile_product<1>(w.s + r * bk, bk, w.v + c, ev, nk, w.o + r * ev + c, ev, true);
    }
  }
  // A row that no key takes part in gives 0, as PyTorch (2.5 and later), or NaN, as softmax.
  for (std::int64_t r = 0; r < mt; ++r) {
    T* o = w.o + r * ev;
    T const l = w.l[r];
    if (l == T(0)) {
      std::fill(o, o + p.Ev, p.empty_rows_nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
    } else {
      SOLDER_SIMD
      for (std::int64_t c = 0; c < p.Ev; ++c) o[c] /= l;
    }
  }
  out.store(out.ctx, b, i0, 0, mt, p.Ev, w.o, ev);
}

// Every output row of the problem, into the sink; threads share the (batch, query block) tasks.
template <class T, class MaskT>
void run(Problem<T, MaskT> const& p, Sink<T> const& out) {
  if (p.batch == 0 || p.L == 0 || p.Ev == 0) return;
  bool const parallel = p.batch * p.L > 1 && p.batch * p.L * p.S * (p.E + p.Ev) >= parallel_work;
  std::int64_t const threads = parallel ? get_num_threads() : 1;
  std::int64_t bq = max_block_rows;
  while (bq > min_block_rows && p.batch * ((p.L + bq - 1) / bq) < 4 * threads) bq /= 2;
  std::int64_t const blocks = (p.L + bq - 1) / bq, tasks = p.batch * blocks;
  std::int64_t const evp = (p.Ev + lanes<T> - 1) / lanes<T> * lanes<T>;
  SOLDER_OMP(parallel if (parallel)) {
    Buffers<T> w(p.E, evp);
    SOLDER_OMP(for schedule(static))
    for (std::int64_t t = 0; t < tasks; ++t) {
      std::int64_t const b = t / blocks, i0 = t % blocks * bq;
      run_task(p, w, b, i0, std::min(bq, p.L - i0), out);
    }
  }
}

// The offsets of an operand's matrices for each batch number of layout l: its batch dims are
// right-aligned with the output's, stride 0 where it has extent 1 or no such dim. `core`: its
// trailing dims that are not batch dims.
template <int D, class TT>
std::vector<std::int64_t> batch_offsets(TT const& t, BlockLayout<D> const& l, int core) {
  constexpr int R = TT::rank;
  int const own = std::max(R - core, 0);
  std::vector<std::int64_t> off(static_cast<std::size_t>(l.batch));
  Index<D> idx{};
  for (std::int64_t b = 0; b < l.batch; ++b) {
    l.batch_index(b, idx);
    std::int64_t o = 0;
    for (int i = 0; i < own; ++i) {
      int const a = l.batch_dims - own + i;
      if (t.shape()[i] != 1) o += idx[a] * t.strides()[i];
    }
    off[static_cast<std::size_t>(b)] = o;
  }
  return off;
}

// Row and column strides of the matrices of an operand (0 where broadcast: extent 1, or absent).
template <class TT, class T = typename TT::value_type>
Operand<T> operand(TT const& t, std::vector<std::int64_t> const& off) {
  constexpr int R = TT::rank;
  auto stride = [&](int a) { return a >= 0 && t.shape()[a] != 1 ? t.strides()[a] : 0; };
  return {t.data(), stride(R - 2), stride(R - 1), off.data()};
}

}  // namespace attention

// Attention on the engine above: the operands from memory, the output rows to the epilogue.
template <class Q, class K, class V, class... M>
struct AnchorEngine<Attention<Q, K, V, M...>> {
  template <class OutTensor, class Ev>
  static void run(Attention<Q, K, V, M...> const& anchor, OutTensor& out, Ev& ev, Temps&) {
    constexpr int D = OutTensor::rank;
    using T = typename Attention<Q, K, V, M...>::value_type;
    auto const q = in_memory(anchor.template child<0>());
    auto const k = in_memory(anchor.template child<1>());
    auto const v = in_memory(anchor.template child<2>());
    BlockLayout<D> l;
    l.shape = out.shape();
    l.batch_dims = D - 2;
    l.row = D - 2;
    l.col = D - 1;
    for (int i = 0; i < D - 2; ++i) l.batch *= l.shape[i];
    auto run = epilogue_run<T>(ev, out, l);
    attention::Sink<T> const sink{&store_block<Ev, typename OutTensor::value_type, T, D>, &run};
    auto const qo = attention::batch_offsets(q, l, 2), ko = attention::batch_offsets(k, l, 2),
               vo = attention::batch_offsets(v, l, 2);
    auto problem = [&](auto mask) {
      return attention::Problem<T, typename decltype(mask)::element_type>{
          l.batch, q.shape()[Q::rank - 2], k.shape()[K::rank - 2], q.shape()[Q::rank - 1], v.shape()[V::rank - 1],
          attention::operand(q, qo), attention::operand(k, ko), attention::operand(v, vo), mask,
          static_cast<T>(anchor.scale), anchor.is_causal, anchor.empty_rows_nan};
    };
    if constexpr (sizeof...(M) == 1) {
      auto const m = in_memory(anchor.template child<3>());
      auto const mo = attention::batch_offsets(m, l, 2);
      attention::run(problem(attention::operand(m, mo)), sink);
    } else {
      attention::run(problem(attention::Operand<void>{}), sink);
    }
  }
};

}  // namespace solder::detail::host
