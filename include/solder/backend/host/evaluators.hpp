// Host evaluators: the run-time image of one planned kernel. make_eval walks the expression
// with the planner's answers (plan/plan.hpp): fused nodes become evaluators inlined into one
// loop, breaks are evaluated first (their own kernels) and read back as inputs.
//
// Every evaluator offers the same four calls, so one loop drives them all:
//   prepare(i)     compute the fused reductions for the line that starts at index i
//   begin_line(i)  point the inputs at that line (contiguous lines only)
//   line(j)        the value at element j of the line: a plain load per input, vectorizable
//   at(i)          the value at any index: the general strided/broadcast path
#pragma once
#include <memory>
#include <tuple>
#include <vector>

#include "../../core/threads.hpp"
#include "../../plan/plan.hpp"

namespace solder::detail::host {

using Temps = std::vector<std::shared_ptr<void const>>;  // breaks' results, alive for a kernel

// The reductions of one evaluator copy, so a reduction used twice reads the first one's
// value instead of computing it again (rule 4). Rebuilt for each per-thread copy.
struct Links {
  static constexpr int capacity = 16;
  std::uint64_t id[capacity];
  void const* type[capacity];
  void const* eval[capacity];
  int n = 0;
  void const* find(std::uint64_t i, void const* t) const {
    for (int k = 0; k < n; ++k)
      if (id[k] == i && type[k] == t) return eval[k];
    return nullptr;
  }
  void add(std::uint64_t i, void const* t, void const* e) {
    if (n < capacity) id[n] = i, type[n] = t, eval[n] = e, ++n;
  }
};
template <class T>
void const* type_key() {
  static char const key = 0;
  return &key;
}

template <int D>
SOLDER_INLINE std::int64_t dot(Index<D> const& i, Index<D> const& st) {
  std::int64_t o = 0;
  for (int k = 0; k < D; ++k) o += i[k] * st[k];
  return o;
}

// True when the trailing axes [from, D) can be walked as one run of consecutive elements.
template <int D>
bool contiguous_from(int from, Index<D> const& st, Index<D> const& dom) {
  std::int64_t acc = 1;
  for (int i = D - 1; i >= from; --i) {
    if (dom[i] != 1 && st[i] != acc) return false;
    acc *= dom[i];
  }
  return true;
}

template <class T, int D>
struct LeafEval {
  T const* base;
  Index<D> st;  // 0 on broadcast axes
  T const* lp = nullptr;
  SOLDER_INLINE void prepare(Index<D> const&) {}
  SOLDER_INLINE void begin_line(Index<D> const& i) { lp = base + dot<D>(i, st); }
  SOLDER_INLINE T line(std::int64_t j) const { return lp[j]; }
  SOLDER_INLINE T at(Index<D> const& i) const { return base[dot<D>(i, st)]; }
  bool contiguous(int from, Index<D> const& dom) const { return contiguous_from<D>(from, st, dom); }
  void set_split(bool) {}
  void link(Links&) {}
};

// A tensor seen from a kernel's index space of rank D: right-aligned, broadcast axes stride 0.
template <int D, class T, auto E>
LeafEval<T, D> leaf_eval(BasicTensor<T, E, Host> const& t, Index<D> const& dom) {
  constexpr int R = rank_of<E>;
  LeafEval<T, D> ev{t.data(), {}};
  for (int i = 0; i < R; ++i) {
    int d = D - R + i;
    ev.st[d] = (t.shape()[i] == 1 && dom[d] != 1) ? 0 : t.strides()[i];
  }
  return ev;
}

template <class T, int D>
struct ScalarEval {
  T value;
  SOLDER_INLINE void prepare(Index<D> const&) {}
  SOLDER_INLINE void begin_line(Index<D> const&) {}
  SOLDER_INLINE T line(std::int64_t) const { return value; }
  SOLDER_INLINE T at(Index<D> const&) const { return value; }
  bool contiguous(int, Index<D> const&) const { return true; }
  void set_split(bool) {}
  void link(Links&) {}
};

template <class Op, class Compute, int D, class... E>
struct MapEval {
  Op op;
  std::tuple<E...> c;
  static constexpr int from = value_args_from<Op>();

  template <std::size_t I, class V>
  SOLDER_INLINE static auto arg(V v) {
    if constexpr (static_cast<int>(I) < from) return v;
    else return static_cast<Compute>(v);
  }
  // Index-sequence helpers, not lambdas: a lambda is not always inlined, and one call per
  // element keeps the loop from vectorizing.
  using Seq = std::index_sequence_for<E...>;
  template <std::size_t... I>
  SOLDER_INLINE void prepare_all(Index<D> const& i, std::index_sequence<I...>) {
    (std::get<I>(c).prepare(i), ...);
  }
  template <std::size_t... I>
  SOLDER_INLINE void begin_all(Index<D> const& i, std::index_sequence<I...>) {
    (std::get<I>(c).begin_line(i), ...);
  }
  template <std::size_t... I>
  SOLDER_INLINE auto line_of(std::int64_t j, std::index_sequence<I...>) const {
    return op(arg<I>(std::get<I>(c).line(j))...);
  }
  template <std::size_t... I>
  SOLDER_INLINE auto at_of(Index<D> const& i, std::index_sequence<I...>) const {
    return op(arg<I>(std::get<I>(c).at(i))...);
  }
  SOLDER_INLINE void prepare(Index<D> const& i) { prepare_all(i, Seq{}); }
  SOLDER_INLINE void begin_line(Index<D> const& i) { begin_all(i, Seq{}); }
  SOLDER_INLINE auto line(std::int64_t j) const { return line_of(j, Seq{}); }
  SOLDER_INLINE auto at(Index<D> const& i) const { return at_of(i, Seq{}); }
  bool contiguous(int from_axis, Index<D> const& dom) const {
    return std::apply([&](auto const&... e) { return (true && ... && e.contiguous(from_axis, dom)); }, c);
  }
  void set_split(bool s) {
    std::apply([&](auto&... e) { (e.set_split(s), ...); }, c);
  }
  void link(Links& l) {
    std::apply([&](auto&... e) { (e.link(l), ...); }, c);
  }
};

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

template <class Op, class In, class Child, int D, int F, int NA>
struct ReduceEval {
  using A = typename Op::template acc<In>;
  using R = typename Op::template result<In>;
  Child child;
  Index<F> fdom;              // the input's index space
  std::array<int, F> src{};   // the output axis feeding each input axis; -1 if reduced
  std::array<int, NA> axes{};
  Index<D> out{};             // the output's shape: axes of extent 1 read index 0
  std::int64_t count = 1;
  bool block = false;         // reduced axes are trailing and contiguous: one run
  bool split = false;         // a lone output: its reduction is split across threads
  std::uint64_t id = 0;
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

template <int D, bool InReduce, bool Split, class N>
auto make_eval(N const& n, Index<D> const& dom, Temps& temps);

// Evaluates a node into a new tensor (used for breaks; defined in executor.hpp).
template <class N>
auto materialize(N const& n);

// A reduction fused into the kernel: its input is evaluated in the input's own index space.
template <int D, bool Split, class N>
auto make_reduce_eval(N const& n, Temps& temps) {
  using C = decltype(n.child);
  constexpr int F = C::rank;
  Index<F> const& fdom = n.child.shape();
  auto ce = make_eval<F, true, Split>(n.child, fdom, temps);
  ReduceEval<typename N::op_type, typename N::input_type, decltype(ce), D, F, N::naxes> ev{ce, fdom};
  ev.axes = n.axes;
  ev.out = n.shape();
  ev.count = n.count;
  ev.id = n.id;
  int o = 0;
  for (int k = 0; k < F; ++k) {
    bool reduced = std::find(n.axes.begin(), n.axes.end(), k) != n.axes.end();
    ev.src[k] = reduced ? -1 : o;
    if (!reduced || N::keepdim) ++o;
  }
  bool trailing = n.axes[0] == F - N::naxes;  // sorted and distinct, so the rest follow
  ev.block = trailing && ce.contiguous(F - N::naxes, fdom);
  return ev;
}

template <int D, bool InReduce, bool Split, class N>
auto make_eval(N const& n, Index<D> const& dom, Temps& temps) {
  if constexpr (is_break<N, D, InReduce, Split>()) {
    auto t = materialize(n);
    temps.push_back(t.storage());
    return leaf_eval<D>(t, dom);
  } else if constexpr (is_leaf<N>::value) {
    return leaf_eval<D>(n.tensor, dom);
  } else if constexpr (is_scalar<N>::value) {
    return ScalarEval<typename N::value_type, D>{n.value};
  } else if constexpr (is_map<N>::value) {
    return std::apply(
        [&](auto const&... ch) {
          using Op = std::remove_cvref_t<decltype(n.op)>;
          return MapEval<Op, typename N::compute_type, D,
                         decltype(make_eval<D, InReduce, Split>(ch, dom, temps))...>{
              n.op, {make_eval<D, InReduce, Split>(ch, dom, temps)...}};
        },
        n.children);
  } else {
    static_assert(is_reduce<N>::value, "solder: host backend: unknown node type");
    return make_reduce_eval<D, Split>(n, temps);
  }
}

}  // namespace solder::detail::host
