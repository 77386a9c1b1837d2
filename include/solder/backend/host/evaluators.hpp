// The host's reduction evaluator (OpenMP, lane-blocked, deterministic). A reduction used twice in
// one kernel is computed once (rule 4): a later use links to the first (Links, backend/eval.hpp)
// and reads its value. A value that a reduction folds and the kernel uses again is kept for the
// line (RecordEval, RecallEval). Leaves and element-wise nodes use the evaluators of eval.hpp.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "../../core/threads.hpp"
#include "../cascade.hpp"
#include "../eval.hpp"

namespace solder::detail::host {

// Lines of prefetch_min to prefetch_max bytes have the next one requested ahead (executor.hpp).
inline constexpr std::int64_t prefetch_min = 1024, prefetch_max = 16384;

// The inputs of a run read with Read::repeat: some step through it, some repeat one value
// along it (a per-channel [1, C, 1, 1] over the H, W of [N, C, H, W]). A loop that read each
// with a step known only at run time would build its loads one element at a time; instead the
// plain loop runs a chunk at a time, a repeating input reading a buffer that holds its value
// `capacity` times (or fewer, for a shorter run), the others moved on by a chunk each time.
struct RepeatInputs {
  static constexpr std::int64_t capacity = 8192;  // elements: the longest host reduction block
  std::int64_t run;                               // the longest run read (sizes the buffers)
  // The inputs e's own loop reads (Ev::for_each_leaf), over runs of up to `longest`.
  template <class Ev>
  RepeatInputs(Ev& e, std::int64_t longest) : run(std::min(longest, capacity)) {
    e.for_each_leaf([&](auto& leaf) { add(leaf); });
  }
  struct Input {
    void* eval;
    void (*fill)(void* eval, void* buffer, std::int64_t n);  // the buffer: n copies of the value
    void (*advance)(void* eval, std::int64_t n);
    std::unique_ptr<double[]> buffer;  // (double: aligned for any element type)
  };
  std::vector<Input> inputs;
  template <class T, int D>
  void add(LeafEval<T, D>& e) {
    static_assert(sizeof(T) <= sizeof(double));
    auto fill = [](void* ev, void* buf, std::int64_t n) {
      auto& leaf = *static_cast<LeafEval<T, D>*>(ev);
      std::fill_n(static_cast<T*>(buf), n, *leaf.lp);
      leaf.lp = static_cast<T const*>(buf);
    };
    auto advance = [](void* ev, std::int64_t n) { static_cast<LeafEval<T, D>*>(ev)->lp += n; };
    if (e.step != 0) {
      inputs.push_back({&e, nullptr, advance, nullptr});
      return;
    }
    auto doubles = static_cast<std::size_t>((run * std::int64_t(sizeof(T)) + 7) / 8);
    inputs.push_back({&e, fill, nullptr, std::make_unique_for_overwrite<double[]>(doubles)});
  }
  // After begin_line: the repeating inputs read their buffers, holding n copies of their value.
  void begin(std::int64_t n) {
    for (auto& in : inputs)
      if (in.fill) in.fill(in.eval, in.buffer.get(), std::min(n, run));
  }
  void advance(std::int64_t n) {
    for (auto& in : inputs)
      if (in.advance) in.advance(in.eval, n);
  }
};

// What one copy of an evaluator builds for itself when linked (it points into that copy): a
// copy of the evaluator starts without it.
template <class T>
struct PerCopy {
  std::unique_ptr<T> p;
  PerCopy() = default;
  PerCopy(PerCopy const&) {}
  PerCopy& operator=(PerCopy const&) {
    p.reset();
    return *this;
  }
};

// A fused reduction's input that the kernel also uses outside the reduction. While a RecallEval
// reads it back, the values of the current line are kept as the reduction folds them.
template <class Ev>
struct RecordEval : SharedInput<Ev>, Records {
  using T = element_of<Ev>;
  std::vector<T> buf;
  T* rec = nullptr;  // buf.data() once a RecallEval attached
  template <Read R = Read::plain>  // shared: keep the value
  SOLDER_INLINE T line(std::int64_t j) const {
    T v = this->ev.template line<R == Read::shared ? Read::plain : R>(j);
    if constexpr (R == Read::shared) rec[j] = v;
    return v;
  }
  bool same(RecordEval const& o) const { return this->ev.same(o.ev); }
  void link(Links& l) { this->ev.link(l); }
};

// The other use: reads the line recorded by a reduction that folds the same values, or computes
// them itself when there is none (no contiguous line, another index space, a split reduction).
template <class Ev>
struct RecallEval : SharedInput<Ev> {
  using T = element_of<Ev>;
  T const* rec = nullptr;
  template <Read R = Read::plain>  // shared: read the kept value back
  SOLDER_INLINE T line(std::int64_t j) const {
    if constexpr (R == Read::shared) return rec[j];
    else return this->ev.template line<R>(j);
  }
  bool same(RecallEval const& o) const { return this->ev.same(o.ev); }
  void link(Links& l) {
    rec = nullptr;
    this->ev.link(l);
    l.add_user({type_key<RecordEval<Ev>>(), this, &attach});
  }
  static bool attach(void* user, void* source, Links& l) {
    auto& me = *static_cast<RecallEval*>(user);
    auto& src = *static_cast<RecordEval<Ev>*>(source);
    if (!me.ev.same(src.ev)) return false;
    src.buf.resize(static_cast<std::size_t>(l.line_len));
    src.rec = src.buf.data();
    me.rec = src.rec;
    return true;
  }
};

// Lane-blocked reduction of values(j) for j in [begin, end): W independent accumulators the
// compiler keeps in vector registers, folded in a fixed order every block, the blocks then in a
// cascade (backend/cascade.hpp), so the result is deterministic and float sums are as accurate
// as PyTorch's over long rows.
// Four 64-byte vectors of lanes: enough independent chains to hide the add/max latency. (Bools,
// for max and min, take as many lanes as 4-byte types: a block then fits RepeatInputs.)
template <class A>
inline constexpr int reduce_vector =
    sizeof(A) >= 16 ? 4 : static_cast<int>(64 / std::max<std::size_t>(sizeof(A), 4));
template <class A>
inline constexpr int reduce_lanes = 4 * reduce_vector<A>;
template <class A>
inline constexpr std::int64_t reduce_block_len = reduce_lanes<A> * 128;

// One block [b, e) of a line, e - b <= reduce_block_len<A>: its W lanes folded in a fixed
// order. `values` is the evaluator of the reduction's input, already at the line's start,
// read the way R says (Read::shared: it keeps the values it gives, a RecordEval). A fold that
// rounds takes each lane's terms cascade_fan at a time into a chunk, added to the lane.
template <class Op, class A, Read R = Read::plain, class Ev>
SOLDER_INLINE A reduce_lane_block(Ev const& values, std::int64_t b, std::int64_t e) {
  constexpr int W = reduce_lanes<A>;
  constexpr std::int64_t chunk_len = W * (Cascade<Op, A>::rounds ? cascade_fan : reduce_block_len<A> / W);
  A lanes[W];
  for (int k = 0; k < W; ++k) lanes[k] = Op::template identity<A>();
  for (std::int64_t c = b; c < e; c += chunk_len) {
    std::int64_t const ce = c + chunk_len < e ? c + chunk_len : e;
    A chunk[W];
    for (int k = 0; k < W; ++k) chunk[k] = Op::template identity<A>();
    std::int64_t j = c;
    for (; j + W <= ce; j += W) {
      SOLDER_SIMD
      for (int k = 0; k < W; ++k)
        chunk[k] = Op::step(chunk[k], values.template line<R>(j + k), j + k);
    }
    for (int k = 0; j < ce; ++j, ++k)
      chunk[k] = Op::step(chunk[k], values.template line<R>(j), j);
    SOLDER_SIMD
    for (int k = 0; k < W; ++k) lanes[k] = Op::merge(lanes[k], chunk[k]);
  }
  // Fold whole vectors of lanes into the first (vectorized), then that vector pairwise.
  constexpr int V = W < reduce_vector<A> ? W : reduce_vector<A>;
  for (int g = V; g < W; g += V) {
    SOLDER_SIMD  // (forces the vectorizer: unrolled, the NaN-aware max becomes branches)
    for (int k = 0; k < V; ++k) lanes[k] = Op::merge(lanes[k], lanes[g + k]);
  }
  for (int w = V / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) lanes[k] = Op::merge(lanes[k], lanes[k + w]);
  return lanes[0];
}

// The blocks' partials, each a term of a cascade. Every other host path folds its terms one by
// one in a Cascade (a reduction that is not one run: columns, strided inputs).
template <class Op, class A, Read R = Read::plain, class Ev>
SOLDER_INLINE A reduce_range(Ev const& values, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t block = reduce_block_len<A>;
  Cascade<Op, A> total;
  for (std::int64_t b = begin; b < end; b += block) {
    std::int64_t e = b + block < end ? b + block : end;
    total.chunk() = Op::merge(total.chunk(), reduce_lane_block<Op, A, R>(values, b, e));
    total.next();
  }
  return total.result();
}

template <class Op, class Child, int D, int F, int NA>
struct ReduceEval : ReduceSetup<Child, D, F, NA> {
  using Setup = ReduceSetup<Child, D, F, NA>;
  using Setup::child, Setup::fdom, Setup::src, Setup::axes, Setup::out, Setup::count,
      Setup::block, Setup::id;
  using In = element_of<Child>;
  using A = typename Op::template acc<In>;
  // Inside a kernel a reduction's value stays in the compute type: a 16-bit float result is
  // rounded only where a kernel stores it.
  using R = compute_t<typename Op::template result<In>>;
  bool split = false;                 // a lone output: its reduction is split across threads
  // Not one block, but the reduced axes end in a run of the input, [run_from, F) (the H, W of
  // a per-channel statistic over {0, 2, 3} of [N, C, H, W]): each run is folded as a block, the
  // runs in order. 0: no such run. repeat: the run is read with Read::repeat.
  std::int64_t run = 0;
  int run_from = F;
  bool repeat = false;
  PerCopy<RepeatInputs> run_inputs{};  // with repeat: this copy's, once linked
  ReduceEval const* first = nullptr;  // the same reduction, earlier in this kernel
  Index<F> at_f{};                     // where `value` was computed
  R value{};

  Index<F> input_line(Index<D> const& p) const {  // where the input line of output p starts
    Index<F> f{};
    for (int k = 0; k < F; ++k) f[k] = (src[k] >= 0 && out[src[k]] != 1) ? p[src[k]] : 0;
    return f;
  }
  void prefetch_line(Index<D> const& p, std::int64_t) const {
    constexpr std::int64_t in_size = sizeof(In);
    if (block && !first && count * in_size <= prefetch_max)
      child.prefetch_line(input_line(p), count);
  }
  SOLDER_INLINE void prepare(Index<D> const& p) {
    Index<F> f = input_line(p);
    if (first && first->at_f == f) {
      value = first->value;
      return;
    }
    at_f = f;
    child.prepare(f);
    A acc;
    if (block) {
      acc = split ? reduce_split(f) : reduce_block(child, f, 0, count);
    } else if (run > 0 && (!repeat || run_inputs.p)) {  // (an unlinked copy: index by index)
      Cascade<Op, A> fold;  // the runs' partials: many short runs must not fold one by one
      for (std::int64_t first_of_run = 0; first_of_run < count; first_of_run += run) {
        A part = repeat ? reduce_repeating(f) : reduce_block(child, f, 0, run);
        if constexpr (requires { part.index; })  // argmax: an index into all reduced elements
          if (part.index >= 0) part.index += first_of_run;
        fold.chunk() = Op::merge(fold.chunk(), part);
        fold.next();
        for (int a = NA - 1; a >= 0; --a) {  // the next run: the reduced axes before it
          if (axes[a] >= run_from) continue;
          if (++f[axes[a]] < fdom[axes[a]]) break;
          f[axes[a]] = 0;
        }
      }
      acc = fold.result();
    } else {  // term by term, in the order write_columns folds them (the same results)
      Cascade<Op, A> fold;
      if (count > 0) {
        for (std::int64_t n = 0;; ++n) {
          fold.chunk() = Op::step(fold.chunk(), child.at(f), n);
          fold.next();
          int a = NA - 1;
          for (; a >= 0; --a) {
            if (++f[axes[a]] < fdom[axes[a]]) break;
            f[axes[a]] = 0;
          }
          if (a < 0) break;
        }
      }
      acc = fold.result();
    }
    value = static_cast<R>(Op::finalize(acc, count));
  }
  template <Read Rd = Read::plain>
  static A reduce_block(Child& c, Index<F> const& f, std::int64_t b, std::int64_t e) {
    c.begin_line(f);
    if constexpr (Rd == Read::plain && is_record<Child>)
      if (c.rec) return reduce_range<Op, A, Read::shared>(c, b, e);
    return reduce_range<Op, A, Rd>(c, b, e);
  }
  // reduce_range over one run whose inputs repeat (RepeatInputs): the same blocks with the
  // plain loop, each block one chunk of the inputs, so the same result.
  A reduce_repeating(Index<F> const& f) {
    constexpr std::int64_t len = reduce_block_len<A>;
    static_assert(len <= RepeatInputs::capacity);
    child.begin_line(f);
    run_inputs.p->begin(run);
    Cascade<Op, A> total;
    for (std::int64_t b = 0; b < run; b += len) {
      A part = reduce_lane_block<Op, A>(child, 0, std::min(len, run - b));
      if constexpr (requires { part.index; })  // argmax: an index into the run
        if (part.index >= 0) part.index += b;
      total.chunk() = Op::merge(total.chunk(), part);
      total.next();
      run_inputs.p->advance(len);
    }
    return total.result();
  }
  // Threads share out whole blocks of reduce_range; the blocks' partials are then folded in
  // their cascade, exactly as reduce_block folds them: the result does not depend on the thread
  // count.
  A reduce_split(Index<F> const& f) {
    constexpr std::int64_t len = reduce_block_len<A>;
    std::int64_t nb = (count + len - 1) / len;
    auto part = std::make_unique<A[]>(static_cast<std::size_t>(nb));  // (not vector<bool>)
    SOLDER_OMP(parallel) {
      Child c = child;
      c.begin_line(f);
      SOLDER_OMP(for schedule(static))
      for (std::int64_t k = 0; k < nb; ++k) {
        std::int64_t b = k * len, e = b + len < count ? b + len : count;
        part[static_cast<std::size_t>(k)] = reduce_lane_block<Op, A>(c, b, e);
      }
    }
    Cascade<Op, A> acc;
    for (std::int64_t k = 0; k < nb; ++k) {
      acc.chunk() = Op::merge(acc.chunk(), part[static_cast<std::size_t>(k)]);
      acc.next();
    }
    return acc.result();
  }
  // run, run_from and repeat (make_reduce_eval calls it): the longest run of reduced axes at the
  // end of the input that the input walks as one run, of consecutive values or, read with
  // Read::repeat, also of repeated ones (batch norm's variance reads its materialized mean).
  void derive() {
    auto run_start = [&](auto walks) {
      int from = F;
      for (int k = NA - 1; k >= 0 && axes[k] == from - 1 && walks(from - 1); --k) from = axes[k];
      return from;
    };
    int plain = run_start([&](int a) { return child.contiguous(a, fdom); });
    int any = run_start([&](int a) { return child.runs(a, fdom); });
    int from = std::min(plain, any);
    std::int64_t len = 1;
    for (int a = from; a < F; ++a) len *= fdom[a];
    if (!block && from < F && len >= 16) run = len, run_from = from, repeat = any < plain;
  }
  SOLDER_INLINE void begin_line(Index<D> const&) {}
  template <Read = Read::plain>
  SOLDER_INLINE R line(std::int64_t) const {
    return value;
  }
  SOLDER_INLINE R at(Index<D> const&) const { return value; }
  bool contiguous(int, Index<D> const&) const { return true; }  // constant along its lines
  bool runs(int, Index<D> const&) const { return true; }
  void set_split(bool s) { split = s; }
  bool same(ReduceEval const& o) const { return id == o.id; }

  // Column form (executor.hpp: write_columns): the input's axes after the last reduced one are
  // kept and are one contiguous run (the columns); the axes before it, reduced or kept, are
  // walked a row at a time. Column sums, sum(x, 1) of [B, T, C]. Returns the number of outputs,
  // or -1.
  std::int64_t columns() const {
    int after = axes[NA - 1] + 1;
    if (block || after == F || !child.contiguous(after, fdom)) return -1;
    std::int64_t m = 1;
    for (int k = 0; k < F; ++k)
      if (src[k] >= 0) m *= fdom[k];
    return m;
  }
  // One input row into the tile's accumulators. (A function of its own: inlined into the row
  // loop, g++ 12 loses track of the inputs' pointers and gathers every value.)
  [[gnu::noinline]] static void fold_row(A* __restrict acc, Child const& c, std::int64_t n,
                                         std::int64_t r) {
    SOLDER_SIMD
    for (std::int64_t k = 0; k < n; ++k) acc[k] = Op::step(acc[k], c.line(k), r);
  }
  // Level `from` of each output merged into the level above it, `into`, and cleared.
  static void pass_up(A* __restrict from, A* __restrict into, std::int64_t n) {
    SOLDER_SIMD
    for (std::int64_t k = 0; k < n; ++k) {
      into[k] = Op::merge(into[k], from[k]);
      from[k] = Op::template identity<A>();
    }
  }
  // Outputs [b, e) of the column form into out[b, e): a tile of outputs within one run of
  // columns is folded side by side, one input row at a time, each output taking its terms in
  // the order prepare() does (Cascade: the rows in chunks, passed up its levels). Level l of
  // output k is level[l * tile + k].
  template <class OutT>
  void write_columns(OutT* out, std::int64_t b, std::int64_t e) const {
    using Fold = Cascade<Op, A>;
    constexpr std::int64_t tile = 1024;
    std::int64_t cols = 1;  // the run of columns
    for (int k = axes[NA - 1] + 1; k < F; ++k) cols *= fdom[k];
    Child c = child;
    A lv[Fold::levels * tile];  // (on the stack: a heap block per call cost more than the fold of a small input)
    for (std::int64_t t0 = b, n; t0 < e; t0 += n) {
      n = std::min({tile, e - t0, cols - t0 % cols});
      for (int l = 0; l < Fold::levels; ++l)
        for (std::int64_t k = 0; k < n; ++k) lv[l * tile + k] = Op::template identity<A>();
      Index<F> f{};
      std::int64_t o = t0;
      for (int a = F - 1; a >= 0; --a)
        if (src[a] >= 0) f[a] = o % fdom[a], o /= fdom[a];
      for (std::int64_t r = 0; r < count; ++r) {
        c.begin_line(f);
        fold_row(lv, c, n, r);
        if constexpr (Fold::rounds)
          if ((r + 1) % cascade_fan == 0) {  // Cascade::end_chunk, for each output: the same merges
            std::uint64_t chunks = static_cast<std::uint64_t>((r + 1) / cascade_fan);
            int top = 1;
            for (; top + 1 < Fold::levels && chunks % cascade_fan == 0; ++top) chunks /= cascade_fan;
            for (int l = 0; l < top; ++l) pass_up(lv + l * tile, lv + (l + 1) * tile, n);  // level l into l + 1
          }
        for (int a = NA - 1; a >= 0; --a) {  // the next reduced index
          if (++f[axes[a]] < fdom[axes[a]]) break;
          f[axes[a]] = 0;
        }
      }
      for (std::int64_t k = 0; k < n; ++k) {
        A acc = lv[k];  // Cascade::result
        for (int l = 1; l < Fold::levels; ++l) acc = Op::merge(lv[l * tile + k], acc);
        out[t0 + k] = static_cast<OutT>(static_cast<R>(Op::finalize(acc, count)));
      }
    }
  }
  void link(Links& l) {
    first = static_cast<ReduceEval const*>(l.find(id, type_key<ReduceEval>()));
    if (!first) l.add(id, type_key<ReduceEval>(), this);
    if constexpr (is_record<Child>) {
      child.rec = nullptr;
      if (!first && l.is_line(block && !split, count, fdom)) l.add_source(type_key<Child>(), &child);
    }
    if (repeat) run_inputs.p = std::make_unique<RepeatInputs>(child, run);
    child.link(l);
  }
  template <class Fn>
  void for_each_leaf(Fn&&) {}  // its input's leaves are read by its own loop
};

}  // namespace solder::detail::host

namespace solder::detail {
template <>
struct evals_for<Host> {
  template <class Op, class Child, int D, int F, int NA>
  using reduce = host::ReduceEval<Op, Child, D, F, NA>;
  template <class Ev>
  using record = host::RecordEval<Ev>;
  template <class Ev>
  using recall = host::RecallEval<Ev>;
};
}  // namespace solder::detail
