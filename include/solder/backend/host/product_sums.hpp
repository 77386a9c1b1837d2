// Column and row sums of a matrix product's output folded in its epilogue (backend/results.hpp:
// sd::assign(std::tie(y, db), p, sd::sum(p, 0)) for p = sd::linear(x, w) of [M, N], or over
// every dim but the last of [..., M, N]: a linear layer's bias gradient; sd::sum(p, -1): each
// row's). As for a convolution (channel_sums.hpp): each block the GEMM engine hands over is
// stored by the kernel's epilogue (store_block), and each summed expression is evaluated over
// the same block, from the cache, into partial sums in double. One kernel; the product is
// computed once.
//
// Determinism: the product runs in chunks of rows of each batch fixed by the shapes, each chunk
// a product of its own on one thread (run_fixed_tasks; the engine otherwise shares rows out by
// the thread count). Column sums keep a partial per chunk, added up chunk by chunk after the
// engine; a row, within one chunk, takes its blocks in the engine's order, which the shapes fix.
// The same bits for any thread count. The left operand is read from memory (an expression is
// materialized first: its own kernel), not produced while packed as a lone product's may be.
#pragma once
#include <array>
#include <tuple>
#include <vector>

#include "channel_sums.hpp"
#include "contract.hpp"

namespace solder::detail::host {

// What a summed expression folds: every dim but the last (one sum per column) or the last (one
// per row).
enum class SumAxes { columns, rows };

template <class T, int D, class EvY, class OutT, class... EvF>
struct ProductSums {
  EpilogueRun<EvY, OutT, D>* y;
  std::tuple<EpilogueRun<EvF, OutT, D> const*...> f;
  std::array<SumAxes, sizeof...(EvF)> axes;
  std::vector<double>* partial;  // per summed expression: columns [chunk][N], rows [batch][M]
};

// One chunk of the product: rows [r0, ...) of batch b, task t.
template <class Sums>
struct ProductChunk {
  Sums const* sums;
  std::int64_t b, r0, t;
};

// Summed expression k over block [i0, i0 + mt) x [j0, j0 + nt) of the chunk (c[r * ldc + q]).
template <class T, int D, class Ev, class OutT>
void sum_block(EpilogueRun<Ev, OutT, D> const& r, SumAxes axes, std::vector<double>& partial, std::int64_t b,
               std::int64_t t, std::int64_t i0, std::int64_t j0, std::int64_t mt, std::int64_t nt, T const* c,
               std::int64_t ldc) {
  using V = eval_value_t<Ev, D>;
  auto const& l = *r.layout;
  Index<D> idx{};
  l.batch_index(b, idx);
  idx[l.row] = i0, idx[l.col] = j0;
  Ev e = *r.ev;
  BlockSetter<T, D> block{c, ldc, l.row, l.col, idx};
  e.link(block);
  V* buf = run_buffer<V>(nt);
  std::int64_t const m = l.shape[l.row], n = l.shape[l.col];
  for (std::int64_t i = 0; i < mt; ++i) {
    idx[l.row] = i0 + i;
    if (r.lines) {
      idx[l.col] = j0;
      e.begin_line(idx);
      write_run<Read::plain>(buf, e, 0, nt);
    } else {
      for (std::int64_t q = 0; q < nt; ++q) {
        idx[l.col] = j0 + q;
        buf[q] = e.at(idx);
      }
    }
    if (axes == SumAxes::columns) {
      double* s = partial.data() + t * n + j0;
      SOLDER_SIMD
      for (std::int64_t q = 0; q < nt; ++q) s[q] += static_cast<double>(buf[q]);
    } else {
      partial[static_cast<std::size_t>(b * m + i0 + i)] += lane_sum(buf, nt);
    }
  }
}

// gemm::Epilogue of a chunk: the block stored, then summed.
template <class T, int D, class EvY, class OutT, class... EvF>
void store_block_summed(void* ctx, std::int64_t, std::int64_t i0, std::int64_t j0, std::int64_t mt, std::int64_t nt,
                        T const* c, std::int64_t ldc) {
  auto const& chunk = *static_cast<ProductChunk<ProductSums<T, D, EvY, OutT, EvF...>> const*>(ctx);
  auto const& s = *chunk.sums;
  store_block<EvY, OutT, T, D>(s.y, chunk.b, chunk.r0 + i0, j0, mt, nt, c, ldc);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (sum_block<T, D>(*std::get<K>(s.f), s.axes[K], s.partial[K], chunk.b, chunk.t, chunk.r0 + i0, j0, mt, nt, c,
                     ldc),
     ...);
  }(std::index_sequence_for<EvF...>{});
}

// The context of a kernel's chunks, from the stored expression's epilogue and the summed ones'.
template <class T, int D, class EvY, class OutT, class... EvF>
ProductSums<T, D, EvY, OutT, EvF...> product_sums_of(EpilogueRun<EvY, OutT, D>& y,
                                                     std::tuple<EpilogueRun<EvF, OutT, D>...> const& f,
                                                     std::array<SumAxes, sizeof...(EvF)> const& axes,
                                                     std::vector<double>* partial) {
  return {&y, std::apply([](auto const&... r) { return std::make_tuple(&r...); }, f), axes, partial};
}
template <class T, int D, class EvY, class OutT, class... EvF>
gemm::Epilogue<T> summed_epilogue(ProductSums<T, D, EvY, OutT, EvF...> const&, void* chunk) {
  return {&store_block_summed<T, D, EvY, OutT, EvF...>, chunk};
}

// The kernel: the product `anchor` with `stored` (an element-wise expression over it, the
// anchor's node standing for its value) written into y, and for each summed expression f its
// sums in double, flat in the order of the sum's result: [N] for columns, [batch..., M] for rows.
template <class A, class B, class Y, class E, class... F>
std::vector<std::vector<double>> product_sums(Contract<A, B> const& anchor, Y& y, E const& stored,
                                              std::array<SumAxes, sizeof...(F)> const& axes, F const&... f) {
  constexpr int D = Y::rank;
  using P = Contract<A, B>;
  using T = typename P::value_type;
  static_assert(A::rank >= 2 && B::rank >= 2, "solder: sums in a product's epilogue: both operands are matrices");
  Temps temps;
  Index<D> const& dom = y.shape();
  auto ev = make_eval<D, false, false, P>(stored, dom, temps);  // (Root P: see conv2d_channel_sums)
  auto evs = std::make_tuple(make_eval<D, false, false, P>(f, dom, temps)...);
  auto const a = in_memory(anchor.a);
  auto const b = in_memory(anchor.b);
  ProductLayout<D> const l(a, b, dom);
  auto run = epilogue_run<T>(ev, y, l);
  auto runs = std::apply([&](auto&... e) { return std::make_tuple(epilogue_run<T>(e, y, l)...); }, evs);
  // Chunks of rows: 64 or more over the batches, for the threads to share.
  std::int64_t const per_batch = std::clamp<std::int64_t>((64 + l.batch - 1) / std::max<std::int64_t>(l.batch, 1), 1,
                                                          std::max<std::int64_t>((l.m + 63) / 64, 1));
  std::int64_t const rows = (l.m + per_batch - 1) / per_batch, tasks = l.batch * per_batch;
  std::array<std::vector<double>, sizeof...(F)> partial;
  for (std::size_t k = 0; k < sizeof...(F); ++k)
    partial[k].assign(static_cast<std::size_t>(axes[k] == SumAxes::columns ? tasks * l.n : l.batch * l.m), 0.0);
  auto const sums = product_sums_of<T>(run, runs, axes, partial.data());
  // B packed once where every batch reads the same (a linear layer's weight).
  bool shared_b = true;
  for (int i = 0; i < l.batch_dims; ++i) shared_b = shared_b && l.b_bs[i] == 0;
  PackSource source{shared_b ? anchor.b_pack.get() : nullptr, b.storage()};
  gemm::Prepacked<T> const pre = prepacked<T>(source);
  run_fixed_tasks(tasks, l.batch * l.m * l.n * l.k, [&](std::int64_t t) {
    std::int64_t const bi = t / per_batch, r0 = t % per_batch * rows, len = std::min(rows, l.m - r0);
    if (len <= 0) return;
    auto const o = l.offsets(bi);
    ProductChunk<std::remove_cvref_t<decltype(sums)>> chunk{&sums, bi, r0, t};
    gemm::Left<T> left;
    left.memory = {a.data() + o[0] + r0 * l.a_rs, l.a_rs, l.a_cs, 0};
    gemm::run<T>({1, len, l.n, l.k}, left, {b.data() + o[1], l.b_rs, l.b_cs, 0}, summed_epilogue(sums, &chunk), pre);
  });
  std::vector<std::vector<double>> total;
  for (std::size_t k = 0; k < sizeof...(F); ++k) {
    if (axes[k] == SumAxes::rows) {
      total.push_back(std::move(partial[k]));
      continue;
    }
    std::vector<double> s(static_cast<std::size_t>(l.n), 0.0);
    for (std::int64_t t = 0; t < tasks; ++t)
      for (std::int64_t q = 0; q < l.n; ++q) s[static_cast<std::size_t>(q)] += partial[k][static_cast<std::size_t>(t * l.n + q)];
    total.push_back(std::move(s));
  }
  return total;
}

}  // namespace solder::detail::host
