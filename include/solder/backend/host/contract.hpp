// The host executor of a kernel anchored by a contraction (plan.hpp: has_anchor): the GEMM
// engine (gemm.hpp) computes the product, and each finished block of it runs through the
// kernel's element-wise rest (its epilogue) straight into the output: relu(x @ w + b) stores
// once, from the cache. The epilogue is a function of the kernel's type; the engine's loops
// are not, so a new epilogue compiles only itself.
#pragma once
#include <utility>

#include "../../expr/contract.hpp"
#include "executor.hpp"
#include "gemm.hpp"

namespace solder::detail::host {

// Where an anchor's output blocks lie: a block's rows and columns run along the output axes row
// and col (-1 where the anchor has none: a vector operand), its batch number over the batch
// axes before them.
template <int D>
struct BlockLayout {
  int batch_dims = 0, row = -1, col = -1;
  std::int64_t batch = 1;  // the product of the batch axes' extents
  Index<D> shape{};
  // Unravels batch number b into the output's batch axes of idx.
  void batch_index(std::int64_t b, Index<D>& idx) const {
    for (int i = batch_dims - 1; i >= 0; --i) idx[i] = b % shape[i], b /= shape[i];
  }
};

// A matrix product's blocks: M and N of torch.matmul's rules, and the operands' strides.
template <int D>
struct ProductLayout : BlockLayout<D> {
  using BlockLayout<D>::batch_dims;
  std::int64_t m = 1, n = 1, k = 1;
  std::int64_t a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0;
  Index<D> a_bs{}, b_bs{};  // per output batch axis, 0 where broadcast

  template <class TA, class TB>
  ProductLayout(TA const& a, TB const& b, Index<D> const& out) {
    constexpr int RA = TA::rank, RB = TB::rank;
    auto const &sa = a.shape(), &ta = a.strides();  // (apart from b's: nvcc refuses one auto
    auto const &sb = b.shape(), &tb = b.strides();  // declaration of two types)
    this->shape = out;
    batch_dims = D - (RA > 1) - (RB > 1);
    k = sa[RA - 1];
    a_cs = ta[RA - 1];
    b_rs = tb[RB > 1 ? RB - 2 : 0];
    if constexpr (RA > 1) m = sa[RA - 2], a_rs = ta[RA - 2], this->row = batch_dims;
    if constexpr (RB > 1) n = sb[RB - 1], b_cs = tb[RB - 1], this->col = D - 1;
    for (int i = 0; i < batch_dims; ++i) {
      this->batch *= out[i];
      int ia = i - (batch_dims - (RA - 2)), ib = i - (batch_dims - (RB - 2));
      if (RA > 2 && ia >= 0 && sa[ia] != 1) a_bs[i] = ta[ia];
      if (RB > 2 && ib >= 0 && sb[ib] != 1) b_bs[i] = tb[ib];
    }
  }
  // The operands' offsets for batch number b.
  std::array<std::int64_t, 2> offsets(std::int64_t b) const {
    Index<D> idx{};
    this->batch_index(b, idx);
    std::int64_t oa = 0, ob = 0;
    for (int i = 0; i < batch_dims; ++i) oa += idx[i] * a_bs[i], ob += idx[i] * b_bs[i];
    return {oa, ob};
  }
  // Whether batch b starts at b times batch 1's offsets for both operands: one engine call.
  bool batch_linear() const {
    auto const one = offsets(1);
    for (std::int64_t b = 2; b < this->batch; ++b) {
      auto const o = offsets(b);
      if (o[0] != b * one[0] || o[1] != b * one[1]) return false;
    }
    return true;
  }
};

// Places the anchor's TileEval on a block of the product: c[r * ldc + q] holds the product at
// (row origin[row] + r, col origin[col] + q) of the batch in origin.
template <class T, int D>
struct BlockSetter {
  T const* c;
  std::int64_t ldc;
  int row, col;
  Index<D> const& origin;
  void tile(TileEval<T, D>& t) const {
    t.base = c;
    t.st = {};
    if (row >= 0) t.st[row] = ldc;
    if (col >= 0) t.st[col] = 1;
    t.step = 1;
    t.off = dot<D>(origin, t.st);
  }
};

template <class Ev, class OutT, int D>
struct EpilogueRun {
  Ev const* ev;
  OutT* out;
  Index<D> ost;
  BlockLayout<D> const* layout;
  std::int64_t b0;  // the batch number of the engine's batch 0
  bool lines;       // rows of a block are written as contiguous runs (write_run)
};

// The left operand computed while the engine packs it (plan.hpp: fused_prologue): its
// evaluator over its own shape, written a block at a time.
template <class Ev, int RA, int D>
struct Prologue {
  Ev ev;
  Index<RA> shape;
  BlockLayout<D> const* layout;
  std::int64_t const* b0;  // the batch number of the engine's batch 0 (EpilogueRun's)
  bool lines;              // rows of A are contiguous runs for every input
};
// Writes A[i0 .. i0 + mc) x [k0 .. k0 + kc) of batch b into dst (leading dimension ld).
template <class Ev, int RA, int D, class T>
void fill_block(void const* ctx, std::int64_t b, std::int64_t i0, std::int64_t k0, std::int64_t mc,
                std::int64_t kc, T* dst, std::int64_t ld) {
  auto const& p = *static_cast<Prologue<Ev, RA, D> const*>(ctx);
  auto const& l = *p.layout;
  Index<RA> idx{};
  if constexpr (RA > 2) {  // A's batch dims: the output's last ones, broadcast where A has 1
    Index<D> out{};
    l.batch_index(*p.b0 + b, out);
    for (int i = 0; i < RA - 2; ++i) {
      int o = l.batch_dims - (RA - 2) + i;
      idx[i] = p.shape[i] == 1 ? 0 : out[o];
    }
  }
  auto e = p.ev;
  for (std::int64_t r = 0; r < mc; ++r) {
    if constexpr (RA > 1) idx[RA - 2] = i0 + r;
    idx[RA - 1] = k0;
    T* d = dst + r * ld;
    if (p.lines) {
      e.begin_line(idx);
      write_run<Read::plain>(d, e, 0, kc);
    } else {
      for (std::int64_t q = 0; q < kc; ++q) {
        idx[RA - 1] = k0 + q;
        d[q] = static_cast<T>(e.at(idx));
      }
    }
  }
}

// The epilogue the engine calls with each finished block: the kernel's expression over it,
// stored into the output a row of the block at a time.
template <class Ev, class OutT, class T, int D>
void store_block(void* ctx, std::int64_t b, std::int64_t i0, std::int64_t j0, std::int64_t mt,
                 std::int64_t nt, T const* c, std::int64_t ldc) {
  auto const& r = *static_cast<EpilogueRun<Ev, OutT, D> const*>(ctx);
  auto const& l = *r.layout;
  Index<D> idx{};
  l.batch_index(r.b0 + b, idx);
  if (l.row >= 0) idx[l.row] = i0;
  if (l.col >= 0) idx[l.col] = j0;
  Ev e = *r.ev;
  BlockSetter<T, D> block{c, ldc, l.row, l.col, idx};
  e.link(block);
  for (std::int64_t i = 0; i < mt; ++i) {
    if (l.row >= 0) idx[l.row] = i0 + i;
    if (r.lines) {
      idx[l.col] = j0;
      e.begin_line(idx);
      write_run<Read::plain>(r.out + dot<D>(idx, r.ost), e, 0, nt);
    } else {
      for (std::int64_t q = 0; q < nt; ++q) {
        if (l.col >= 0) idx[l.col] = j0 + q;
        r.out[dot<D>(idx, r.ost)] = static_cast<OutT>(e.at(idx));
      }
    }
  }
}

// The epilogue of a kernel whose anchor hands over blocks laid out as l: ev set to read them,
// and whether a block's rows can be written as contiguous runs.
template <class T, class Ev, class OutTensor, int D>
EpilogueRun<Ev, typename OutTensor::value_type, D> epilogue_run(Ev& ev, OutTensor& out,
                                                                BlockLayout<D> const& l) {
  Index<D> const zero{};
  BlockSetter<T, D> strides{nullptr, 0, l.row, l.col, zero};  // for the check below
  ev.link(strides);
  Index<D> const& dom = out.shape();
  bool const lines = l.col >= 0 && l.col == D - 1 && (dom[D - 1] == 1 || out.strides()[D - 1] == 1) &&
                     ev.contiguous(D - 1, dom);
  return {&ev, out.data(), out.strides(), &l, 0, lines};
}

// gemm::Prepacked from a node's PackCache (expr/pack_cache.hpp): B packed on its first product
// and kept while its storage, its layout and the engine's blocks stay the same.
struct PackSource {
  PackCache* cache;
  std::shared_ptr<void const> storage;
};
template <class T>
T const* cached_pack(void* ctx, gemm::Problem const& p, gemm::Strided<T> const& b) {
  auto const& s = *static_cast<PackSource const*>(ctx);
  PackCache::Key const key{reinterpret_cast<std::intptr_t>(b.data), b.bs == 0 ? 1 : p.batch, p.n, p.k, b.rs, b.cs,
                           b.bs, gemm::k_blocks<T>(p.k)[0], std::int64_t(sizeof(T)), gemm::nr_of<T>};
  return static_cast<T const*>(
      s.cache->get(key, s.storage, [&] { return std::shared_ptr<void const>(gemm::prepack_b(p, b)); }));
}
template <class T>
gemm::Prepacked<T> prepacked(PackSource& s) {
  if (!s.cache) return {};
  return {&cached_pack<T>, &s};
}

// f(t) for tasks t in [0, tasks), shared out statically, each on one thread: a GEMM engine
// called inside runs on it alone and untuned (a tuner would run a task once per choice, its
// blocks reaching the epilogue as often). The epilogue sums (channel_sums.hpp,
// product_sums.hpp) run their products so: the blocks an epilogue sees within a task, and
// their order, then depend on the shapes alone, not on the thread count. `work`: the
// multiply-adds, which decide whether threads are used.
template <class F>
void run_fixed_tasks(std::int64_t tasks, std::int64_t work, F const& f) {
  [[maybe_unused]] bool const parallel = tasks > 1 && get_num_threads() > 1 && work >= parallel_threshold;
  SOLDER_OMP(parallel if(parallel)) {
    solder::set_num_threads(1);  // (this thread's own setting: nested regions take one thread)
    gemm::Tuner* const tuning = std::exchange(gemm::tuner(), nullptr);
    SOLDER_OMP(for schedule(static))
    for (std::int64_t t = 0; t < tasks; ++t) f(t);
    gemm::tuner() = tuning;
  }
}

// How each kind of anchor computes its blocks: run(anchor, out, ev, temps) hands every block
// of the anchor's result to the kernel's epilogue (epilogue_run, store_block).
template <class Anchor>
struct AnchorEngine;

// A matrix product, on the GEMM engine.
template <class A, class B>
struct AnchorEngine<Contract<A, B>> {
  template <class OutTensor, class Ev>
  static void run(Contract<A, B> const& anchor, OutTensor& out, Ev& ev, Temps& temps) {
    constexpr int D = OutTensor::rank;
    using T = typename Contract<A, B>::value_type;
    constexpr int RA = A::rank;
    constexpr bool produced = fused_prologue<A, Host>();
    auto const a = [&] {  // (a produced operand: only its shape, for the layout)
      if constexpr (produced) return shape_probe<T, RA, Host>(anchor.a.shape());
      else return in_memory(anchor.a);
    }();
    auto const b = in_memory(anchor.b);
    ProductLayout<D> l(a, b, out.shape());
    if constexpr (produced) l.a_bs = {};  // a producer is told batch numbers, not offsets
    auto run = epilogue_run<T>(ev, out, l);
    gemm::Epilogue<T> const epilogue{&store_block<Ev, typename OutTensor::value_type, T, D>, &run};
    gemm::Left<T> left;
    auto const pro = [&] {
      if constexpr (produced) {
        auto pe = make_eval<RA, false, false, void>(anchor.a, anchor.a.shape(), temps);
        return Prologue<decltype(pe), RA, D>{pe, anchor.a.shape(), &l, &run.b0,
                                             pe.contiguous(RA - 1, anchor.a.shape())};
      } else {
        return 0;
      }
    }();
    if constexpr (produced) left.producer = {&fill_block<decltype(pro.ev), RA, D, T>, &pro};
    gemm::Problem p{l.batch, l.m, l.n, l.k};
    if (l.batch == 1 || l.batch_linear()) {
      auto const one = l.batch > 1 ? l.offsets(1) : std::array<std::int64_t, 2>{};
      left.memory = {a.data(), l.a_rs, l.a_cs, one[0]};
      PackSource source{anchor.b_pack.get(), b.storage()};
      gemm::run<T>(p, left, {b.data(), l.b_rs, l.b_cs, one[1]}, epilogue, prepacked<T>(source));
      return;
    }
    p.batch = 1;  // batch dims that do not flatten to one stride: one call per batch
    for (std::int64_t bi = 0; bi < l.batch; ++bi) {
      auto const o = l.offsets(bi);
      run.b0 = bi;
      left.memory = {a.data() + o[0], l.a_rs, l.a_cs, 0};
      gemm::run<T>(p, left, {b.data() + o[1], l.b_rs, l.b_cs, 0}, epilogue);
    }
  }
};

// Runs the kernel rooted at `root`, whose anchor is a contraction, into `out`.
template <class OutTensor, class N>
void run_contraction(OutTensor& out, N const& root) {
  constexpr int D = N::rank;
  Index<D> const& dom = out.shape();
  KernelConfig<D> const config = configure(root);
  Temps temps;
  auto ev = make_eval<D, false, false, N>(root, dom, temps);
  with_anchor<D>(root, [&](auto const& anchor) {
    using Anchor = std::remove_cvref_t<decltype(anchor)>;
    using T = typename Anchor::value_type;
    if (config.split == RunTimeBreak::broadcast_anchor) {  // stored, then read as a tensor
      auto const product = materialize_once(anchor);
      StoredSetter<T, D> stored{leaf_eval<D>(product, dom)};
      ev.link(stored);
      run_eval<!heavy_maths<N, D, false>(), LineKind::runs>(out, ev, Lines<D>{}, config.work);
      return;
    }
    AnchorEngine<Anchor>::run(anchor, out, ev, temps);
  });
}

}  // namespace solder::detail::host
