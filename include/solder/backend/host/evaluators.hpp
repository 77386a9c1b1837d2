// The host's reduction evaluator (OpenMP, lane-blocked, deterministic). A reduction used twice in
// one kernel is computed once (rule 4): a later use links to the first (Links, backend/eval.hpp)
// and reads its value. Leaves and element-wise nodes use the shared evaluators of eval.hpp.
#pragma once
#include <memory>
#include <vector>

#include "../../core/threads.hpp"
#include "../eval.hpp"

namespace solder::detail::host {

// Lane-blocked reduction of values(j) for j in [begin, end): W independent accumulators the
// compiler keeps in vector registers, folded in a fixed order every block, so the result is
// deterministic and float sums stay accurate over long rows.
// Four 64-byte vectors of lanes: enough independent chains to hide the add/max latency.
template <class A>
inline constexpr int reduce_vector = sizeof(A) >= 16 ? 4 : static_cast<int>(64 / sizeof(A));
template <class A>
inline constexpr int reduce_lanes = 4 * reduce_vector<A>;
template <class A>
inline constexpr std::int64_t reduce_block_len = reduce_lanes<A> * 128;

// One block [b, e) of a line, e - b <= reduce_block_len<A>: its W lanes folded in a fixed
// order. `values` is the evaluator of the reduction's input, already at the line's start.
template <class Op, class A, class Ev>
SOLDER_INLINE A reduce_lane_block(Ev const& values, std::int64_t b, std::int64_t e) {
  constexpr int W = reduce_lanes<A>;
  A lanes[W];
  for (int k = 0; k < W; ++k) lanes[k] = Op::template identity<A>();
  std::int64_t j = b;
  for (; j + W <= e; j += W) {
    SOLDER_SIMD
    for (int k = 0; k < W; ++k) lanes[k] = Op::step(lanes[k], values.line(j + k), j + k);
  }
  for (int k = 0; j < e; ++j, ++k) lanes[k] = Op::step(lanes[k], values.line(j), j);
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

template <class Op, class A, class Ev>
SOLDER_INLINE A reduce_range(Ev const& values, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t block = reduce_block_len<A>;
  A total = Op::template identity<A>();
  for (std::int64_t b = begin; b < end; b += block)
    total = Op::merge(total, reduce_lane_block<Op, A>(values, b, b + block < end ? b + block : end));
  return total;
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
  ReduceEval const* first = nullptr;  // the same reduction, earlier in this kernel
  Index<F> at_f{};                     // where `value` was computed
  R value{};

  SOLDER_INLINE void prepare(Index<D> const& p) {
    Index<F> f{};
    for (int k = 0; k < F; ++k) f[k] = (src[k] >= 0 && out[src[k]] != 1) ? p[src[k]] : 0;
    if (first && first->at_f == f) {
      value = first->value;
      return;
    }
    at_f = f;
    child.prepare(f);
    A acc;
    if (block) {
      acc = split ? reduce_split(f) : reduce_block(child, f, 0, count);
    } else {
      acc = Op::template identity<A>();
      std::int64_t n = 0;
      if (count > 0) {
        for (;;) {
          acc = Op::step(acc, child.at(f), n++);
          int a = NA - 1;
          for (; a >= 0; --a) {
            if (++f[axes[a]] < fdom[axes[a]]) break;
            f[axes[a]] = 0;
          }
          if (a < 0) break;
        }
      }
    }
    value = static_cast<R>(Op::finalize(acc, count));
  }
  static A reduce_block(Child& c, Index<F> const& f, std::int64_t b, std::int64_t e) {
    c.begin_line(f);
    return reduce_range<Op, A>(c, b, e);
  }
  // Threads share out whole blocks of reduce_range; the blocks' partials are then folded in
  // order, exactly as reduce_block folds them: the result does not depend on the thread count.
  A reduce_split(Index<F> const& f) {
    constexpr std::int64_t len = reduce_block_len<A>;
    std::int64_t nb = (count + len - 1) / len;
    std::vector<A> part(static_cast<std::size_t>(nb), Op::template identity<A>());
    SOLDER_OMP(parallel) {
      Child c = child;
      c.begin_line(f);
      SOLDER_OMP(for schedule(static))
      for (std::int64_t k = 0; k < nb; ++k) {
        std::int64_t b = k * len, e = b + len < count ? b + len : count;
        part[static_cast<std::size_t>(k)] =
            reduce_lane_block<Op, A>(c, b, e);
      }
    }
    A acc = Op::template identity<A>();
    for (auto const& p : part) acc = Op::merge(acc, p);
    return acc;
  }
  SOLDER_INLINE void begin_line(Index<D> const&) {}
  SOLDER_INLINE R line(std::int64_t) const { return value; }
  SOLDER_INLINE R at(Index<D> const&) const { return value; }
  bool contiguous(int, Index<D> const&) const { return true; }  // constant along its lines
  void set_split(bool s) { split = s; }
  void link(Links& l) {
    first = static_cast<ReduceEval const*>(l.find(id, type_key<ReduceEval>()));
    if (!first) l.add(id, type_key<ReduceEval>(), this);
    child.link(l);
  }
};

}  // namespace solder::detail::host

namespace solder::detail {
template <>
struct reduce_eval_for<Host> {
  template <class Op, class Child, int D, int F, int NA>
  using type = host::ReduceEval<Op, Child, D, F, NA>;
};
}  // namespace solder::detail
