// Evaluators: the run-time image of one planned kernel, shared by the backends. make_eval
// walks the expression with the planner's answers (plan/plan.hpp): fused nodes become
// evaluators inlined into one loop, breaks are evaluated first (their own kernels) and read
// back as inputs. Each backend brings its own ReduceEval (evals_for<Device>); leaves and
// element-wise nodes are the same structs on the host and in CUDA kernels.
//
// Every evaluator offers the same calls, so one loop drives them all:
//   prepare(i)       compute the fused reductions for the line that starts at index i
//   begin_line(i)    point the inputs at that line (contiguous lines only)
//   line(j)          the value at element j of the line: a plain load per input, vectorizable
//   line<R>(j)       the same, read another way (Read, below)
//   line_vec<V>(j)   values j .. j+V-1 of the line as one Vec (CUDA's vector loads)
//   at(i)            the value at any index: the general strided/broadcast path
//   prefetch_line(i, len)  asks the cache for the contiguous line at i (host)
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../plan/plan.hpp"

namespace solder::detail {

using Temps = std::vector<std::shared_ptr<void const>>;  // breaks' results, alive for a kernel

template <int D>
SOLDER_HD SOLDER_INLINE std::int64_t dot(Index<D> const& i, Index<D> const& st) {
  std::int64_t o = 0;
  SOLDER_UNROLL
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
// True when the trailing axes [from, D) all have stride 0: a run of them repeats one value.
template <int D>
bool constant_from(int from, Index<D> const& st, Index<D> const& dom) {
  for (int i = from; i < D; ++i)
    if (dom[i] != 1 && st[i] != 0) return false;
  return true;
}

// How a loop reads the lines of a kernel's inputs. Each is a compiled variant of the loop; the
// executor picks one at run time.
//   plain    one load per input and element
//   shared   the line's records of shared inputs (host): a RecordEval keeps the values it
//            gives, a RecallEval reads them back (the CUDA kernels always read their records)
//   repeat   some inputs are broadcast along the line and repeat one value in it (a
//            per-channel [1, C, 1, 1] over the H, W of [N, C, H, W]): the host runs the plain
//            loop a chunk of the line at a time, such inputs reading a buffer that holds their
//            value (host::RepeatInputs). (A run-time choice per input inside the loop would
//            cost every kernel its vectorized code.)
enum class Read { plain, shared, repeat };

// Links of one evaluator copy, rebuilt for each copy:
// * its reductions, in the order the kernel prepares them, so that a reduction used twice finds
//   the first use and reads its value (rule 4);
// * its shared inputs (plan.hpp: shared_input): the reductions that record their input on the
//   line the copy writes (sources, a backend's RecordEval) and the uses that read those records
//   back (users, RecallEval). resolve() pairs them once everything is linked.
struct Links {
  static constexpr int capacity = 16;
  std::uint64_t id[capacity];
  void const* type[capacity];
  void* eval[capacity];
  int n = 0;
  void* find(std::uint64_t i, void const* t) const {
    for (int k = 0; k < n; ++k)
      if (id[k] == i && type[k] == t) return eval[k];
    return nullptr;
  }
  void add(std::uint64_t i, void const* t, void* e) {
    if (n < capacity) id[n] = i, type[n] = t, eval[n] = e, ++n;
  }

  std::int64_t line_len = -1;         // the length of the contiguous lines written; -1: none
  std::int64_t const* dom = nullptr;  // the kernel's index space (with line_len)
  int rank = 0;
  // The copy writes contiguous lines of `len` values over the index space `d`.
  template <std::size_t D>
  void set_line(std::int64_t len, std::array<std::int64_t, D> const& d) {
    line_len = len, dom = d.data(), rank = static_cast<int>(D);
  }
  struct Source {
    void const* type;
    void* eval;
  };
  struct User {
    void const* type;
    void* eval;
    bool (*attach)(void* user, void* source, Links& links);
  };
  Source source[capacity];
  User user[capacity];
  int nsource = 0, nuser = 0;
  bool overflow = false;  // a use that did not fit: it computes its values
  // Whether a reduction's input line is the line the copy writes: one run of the same length,
  // in the same index space.
  template <std::size_t F>
  bool is_line(bool run, std::int64_t count, std::array<std::int64_t, F> const& fdom) const {
    return run && count == line_len && static_cast<int>(F) == rank &&
           std::equal(fdom.begin(), fdom.end(), dom);
  }
  void add_source(void const* t, void* e) {
    if (nsource < capacity) source[nsource++] = {t, e};
  }
  void add_user(User u) {
    if (nuser < capacity) user[nuser++] = u;
    else overflow = true;
  }
  // Whether every use found its record.
  bool resolve() {
    int found = 0;
    for (int u = 0; u < nuser; ++u)
      for (int k = 0; k < nsource; ++k)
        if (source[k].type == user[u].type && user[u].attach(user[u].eval, source[k].eval, *this)) {
          ++found;
          break;
        }
    return nuser > 0 && found == nuser && !overflow;
  }
};

// Where a kernel writes, on either backend: a pointer to its output's elements, or the pointers
// of several outputs that one kernel writes (OutPointers, backend/results.hpp). out_value_t:
// what one point stores.
template <class Out>
struct out_value {
  using type = std::remove_pointer_t<Out>;
};
template <class Out>
using out_value_t = typename out_value<Out>::type;

// Asks the cache for the n values at p ahead of their use (host lines, executor.hpp): one
// request per 64-byte line, to read or to write. x86-64 gets the instructions themselves: g++
// 12 folds a loop of __builtin_prefetch into a single prefetch.
template <class T>
void prefetch_run(T const* p, std::int64_t n, bool write) {
  for (std::int64_t j = 0; j < n; j += 64 / static_cast<std::int64_t>(sizeof(T))) {
#if defined(__x86_64__)
    if (write) asm volatile("prefetchw %0" : : "m"(p[j]));
    else asm volatile("prefetcht0 %0" : : "m"(p[j]));
#else
    __builtin_prefetch(p + j, write ? 1 : 0, 3);
#endif
  }
}

// V consecutive values, aligned so that one load or store moves them all.
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};
// A Vec of V copies of x: the line_vec of a value constant along its lines.
template <int V, class T>
SOLDER_HD SOLDER_INLINE Vec<T, V> splat(T x) {
  Vec<T, V> r;
  for (int k = 0; k < V; ++k) r.v[k] = x;
  return r;
}
// Whether p can be read or written as Vecs of V values.
template <class T, int V>
SOLDER_HD SOLDER_INLINE bool aligned_for(T const* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(Vec<T, V>) == 0;
}

template <class T, int D>
struct LeafEval {
  T const* base;
  Index<D> st;             // 0 on broadcast axes
  std::int64_t step = 1;   // along a line read with Read::repeat: 0 if it repeats one value
  T const* lp = nullptr;
  SOLDER_HD SOLDER_INLINE void prepare(Index<D> const&) {}
  SOLDER_HD SOLDER_INLINE void begin_line(Index<D> const& i) { lp = base + dot<D>(i, st); }
  template <Read = Read::plain>
  SOLDER_HD SOLDER_INLINE T line(std::int64_t j) const {
    return lp[j];
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE Vec<T, V> line_vec(std::int64_t j) const {
    return *reinterpret_cast<Vec<T, V> const*>(lp + j);
  }
  SOLDER_HD SOLDER_INLINE T at(Index<D> const& i) const { return base[dot<D>(i, st)]; }
  bool contiguous(int from, Index<D> const& dom) const { return contiguous_from<D>(from, st, dom); }
  // Whether [from, D) is a run that Read::repeat can walk: consecutive, or one value repeated.
  bool runs(int from, Index<D> const& dom) const {
    return contiguous(from, dom) || constant_from<D>(from, st, dom);
  }
  bool same(LeafEval const& o) const { return base == o.base && st == o.st; }
  void prefetch_line(Index<D> const& i, std::int64_t len) const {  // contiguous lines only
    if constexpr (D > 0)
      if (st[D - 1] == 1) prefetch_run(base + dot<D>(i, st), len, false);
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE bool vec_aligned() const {  // after begin_line
    return aligned_for<T, V>(lp);
  }
  void set_split(bool) {}
  template <class L>
  void link(L&) {}
  // f(leaf) for each input this evaluator's own loop reads (not those of a fused reduction).
  template <class F>
  void for_each_leaf(F&& f) {
    f(*this);
  }
};

// A tensor seen from a kernel's index space of rank D: right-aligned, broadcast axes stride 0.
template <int D, class T, auto E, class Device>
LeafEval<T, D> leaf_eval(BasicTensor<T, E, Device> const& t, Index<D> const& dom) {
  constexpr int R = rank_of<E>;
  LeafEval<T, D> ev{t.data(), {}};
  for (int i = 0; i < R; ++i) {
    int d = D - R + i;
    ev.st[d] = (t.shape()[i] == 1 && dom[d] != 1) ? 0 : t.strides()[i];
  }
  if constexpr (D > 0) {  // the innermost axis walked decides: a run is never broadcast in part
    int inner = D - 1;
    while (inner > 0 && dom[inner] == 1) --inner;
    if (dom[inner] != 1 && ev.st[inner] == 0) ev.step = 0;
  }
  return ev;
}

// A contraction's output in the kernel that is its epilogue (plan.hpp: has_anchor): the block
// of it the engine hands over, or all of it where it is broadcast into the kernel. The executor
// sets the geometry through link() (a setter with tile(TileEval&)): the value at index i is
// base[dot(i, st) - off], off placing the block's first element.
template <class T, int D>
struct TileEval : LeafEval<T, D> {
  std::int64_t off = 0;
  SOLDER_HD SOLDER_INLINE void begin_line(Index<D> const& i) {
    this->lp = this->base + (dot<D>(i, this->st) - off);
  }
  SOLDER_HD SOLDER_INLINE T at(Index<D> const& i) const { return this->base[dot<D>(i, this->st) - off]; }
  void prefetch_line(Index<D> const&, std::int64_t) const {}  // in cache: just computed
  bool same(TileEval const&) const { return false; }
  template <class L>
  void link(L& l) {
    if constexpr (requires { l.tile(*this); }) l.tile(*this);
  }
};

template <class T, int D>
struct ScalarEval {
  T value;
  SOLDER_HD SOLDER_INLINE void prepare(Index<D> const&) {}
  SOLDER_HD SOLDER_INLINE void begin_line(Index<D> const&) {}
  template <Read R = Read::plain>
  SOLDER_HD SOLDER_INLINE T line(std::int64_t) const {
    return value;
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE Vec<T, V> line_vec(std::int64_t) const {
    return splat<V>(value);
  }
  SOLDER_HD SOLDER_INLINE T at(Index<D> const&) const { return value; }
  bool contiguous(int, Index<D> const&) const { return true; }
  bool runs(int, Index<D> const&) const { return true; }
  bool same(ScalarEval const& o) const { return std::memcmp(&value, &o.value, sizeof(T)) == 0; }
  template <class F>
  void for_each_leaf(F&&) {}
  void prefetch_line(Index<D> const&, std::int64_t) const {}
  template <int V>
  SOLDER_HD SOLDER_INLINE bool vec_aligned() const {
    return true;
  }
  void set_split(bool) {}
  template <class L>
  void link(L&) {}
};

template <class Op, class Compute, int D, class... E>
struct MapEval {
  Op op;
  std::tuple<E...> c;
  static constexpr int from = value_args_from<Op>();

  template <std::size_t I, class V>
  SOLDER_HD SOLDER_INLINE static auto arg(V v) {
    if constexpr (static_cast<int>(I) < from) return v;
    else return static_cast<Compute>(v);
  }
  // Index-sequence helpers, not lambdas: a lambda is not always inlined, and one call per
  // element keeps the loop from vectorizing.
  using Seq = std::index_sequence_for<E...>;
  SOLDER_HD_ANY_CALLEE
  template <std::size_t... I>
  SOLDER_HD SOLDER_INLINE void prepare_all(Index<D> const& i, std::index_sequence<I...>) {
    (std::get<I>(c).prepare(i), ...);
  }
  SOLDER_HD_ANY_CALLEE
  template <std::size_t... I>
  SOLDER_HD SOLDER_INLINE void begin_all(Index<D> const& i, std::index_sequence<I...>) {
    (std::get<I>(c).begin_line(i), ...);
  }
  SOLDER_HD_ANY_CALLEE
  template <Read R, std::size_t... I>
  SOLDER_HD SOLDER_INLINE auto line_of(std::int64_t j, std::index_sequence<I...>) const {
    return op(arg<I>(std::get<I>(c).template line<R>(j))...);
  }
  SOLDER_HD_ANY_CALLEE
  template <std::size_t... I>
  SOLDER_HD SOLDER_INLINE auto at_of(Index<D> const& i, std::index_sequence<I...>) const {
    return op(arg<I>(std::get<I>(c).at(i))...);
  }
  template <int V, std::size_t... I, class... In>
  SOLDER_HD SOLDER_INLINE auto apply_vec(std::index_sequence<I...>, In const&... in) const {
    Vec<decltype(op(arg<I>(in.v[0])...)), V> r;
    for (int k = 0; k < V; ++k) r.v[k] = op(arg<I>(in.v[k])...);
    return r;
  }
  template <int V, std::size_t... I>
  SOLDER_HD SOLDER_INLINE auto line_vec_of(std::int64_t j, std::index_sequence<I...> s) const {
    return apply_vec<V>(s, std::get<I>(c).template line_vec<V>(j)...);
  }
  SOLDER_HD SOLDER_INLINE void prepare(Index<D> const& i) { prepare_all(i, Seq{}); }
  SOLDER_HD SOLDER_INLINE void begin_line(Index<D> const& i) { begin_all(i, Seq{}); }
  template <Read R = Read::plain>
  SOLDER_HD SOLDER_INLINE auto line(std::int64_t j) const {
    return line_of<R>(j, Seq{});
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE auto line_vec(std::int64_t j) const {
    return line_vec_of<V>(j, Seq{});
  }
  SOLDER_HD SOLDER_INLINE auto at(Index<D> const& i) const { return at_of(i, Seq{}); }
  // The run-time queries below visit the children through index sequences, not std::apply,
  // whose noexcept test would instantiate the whole tree below in one nested chain.
  template <std::size_t... I>
  bool contiguous_of(int from_axis, Index<D> const& dom, std::index_sequence<I...>) const {
    return (true && ... && std::get<I>(c).contiguous(from_axis, dom));
  }
  bool contiguous(int from_axis, Index<D> const& dom) const { return contiguous_of(from_axis, dom, Seq{}); }
  template <std::size_t... I>
  bool runs_of(int from_axis, Index<D> const& dom, std::index_sequence<I...>) const {
    return (true && ... && std::get<I>(c).runs(from_axis, dom));
  }
  bool runs(int from_axis, Index<D> const& dom) const { return runs_of(from_axis, dom, Seq{}); }
  template <std::size_t... I>
  void prefetch_of(Index<D> const& i, std::int64_t len, std::index_sequence<I...>) const {
    (std::get<I>(c).prefetch_line(i, len), ...);
  }
  void prefetch_line(Index<D> const& i, std::int64_t len) const { prefetch_of(i, len, Seq{}); }
  // Whether o computes the same values: the same op (with the same parameters) on the same inputs.
  bool same(MapEval const& o) const {
    bool same_op = std::is_empty_v<Op> || std::memcmp(&op, &o.op, sizeof(Op)) == 0;
    return same_op && same_children(o, Seq{});
  }
  template <std::size_t... I>
  bool same_children(MapEval const& o, std::index_sequence<I...>) const {
    return (true && ... && std::get<I>(c).same(std::get<I>(o.c)));
  }
  SOLDER_HD_ANY_CALLEE
  template <int V, std::size_t... I>
  SOLDER_HD SOLDER_INLINE bool vec_aligned_of(std::index_sequence<I...>) const {
    return (true && ... && std::get<I>(c).template vec_aligned<V>());
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE bool vec_aligned() const {
    return vec_aligned_of<V>(Seq{});
  }
  template <std::size_t... I>
  void set_split_of(bool s, std::index_sequence<I...>) {
    (std::get<I>(c).set_split(s), ...);
  }
  void set_split(bool s) { set_split_of(s, Seq{}); }
  template <class L, std::size_t... I>
  void link_of(L& l, std::index_sequence<I...>) {
    (std::get<I>(c).link(l), ...);
  }
  template <class L>
  void link(L& l) {
    link_of(l, Seq{});
  }
  template <class F, std::size_t... I>
  void for_each_leaf_of(F& f, std::index_sequence<I...>) {
    (std::get<I>(c).for_each_leaf(f), ...);
  }
  template <class F>
  void for_each_leaf(F&& f) {
    for_each_leaf_of(f, Seq{});
  }
};

// What every backend's reduction evaluator knows of its node, filled in by make_reduce_eval.
template <class Child, int D, int F, int NA>
struct ReduceSetup {
  Child child;
  Index<F> fdom;             // the input's index space
  std::array<int, F> src{};  // the output axis feeding each input axis; -1 if reduced
  std::array<int, NA> axes{};
  Index<D> out{};            // the output's shape: axes of extent 1 read index 0
  std::int64_t count = 1;
  bool block = false;        // reduced axes are trailing and contiguous: one run
  std::uint64_t id = 0;      // the node: a reduction used twice has one id (rule 4)
};

// Each backend names its own evaluators in evals_for<Device>:
// * reduce<Op, Child, D, F, NA>: its reduction evaluator, derived from ReduceSetup<Child, D, F,
//   NA>. It reads its input type from Child (element_of), not from the node: the host code nvcc
//   generates would spell the node's member alias through the node type, whose class-type
//   template arguments (Extents) g++ cannot parse back;
// * record<Ev> and recall<Ev>: the wrappers of a shared input (plan.hpp: shared_input), made
//   only when Root is set, in the reduction that folds it and in its other use (SharedInput
//   below, the rest of their fields default).
template <class Ev>
using element_of = std::remove_cvref_t<decltype(std::declval<Ev const&>().line(0))>;
template <class Device>
struct evals_for;

template <int D, bool InReduce, bool Split, class Root = void, class N>
auto make_eval(N const& n, Index<D> const& dom, Temps& temps);

template <class Root>
using evals_of = evals_for<typename Root::device_type>;  // those of the kernel rooted at Root
template <class Wrapper, class Ev>
Wrapper wrap_shared(Ev const& e) {
  Wrapper w{};
  w.ev = e;
  return w;
}

// What a backend's RecordEval and RecallEval pass through to the evaluator they wrap.
template <class Ev>
struct SharedInput {
  using T = element_of<Ev>;
  Ev ev;
  template <class I>
  SOLDER_HD SOLDER_INLINE void prepare(I const& i) {
    ev.prepare(i);
  }
  template <class I>
  SOLDER_HD SOLDER_INLINE void begin_line(I const& i) {
    ev.begin_line(i);
  }
  template <class I>
  SOLDER_HD SOLDER_INLINE T at(I const& i) const {
    return ev.at(i);
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE bool vec_aligned() const {
    return ev.template vec_aligned<V>();
  }
  template <class I>
  bool contiguous(int from, I const& dom) const {
    return ev.contiguous(from, dom);
  }
  template <class I>
  bool runs(int from, I const& dom) const {
    return ev.runs(from, dom);
  }
  template <class I>
  void prefetch_line(I const& i, std::int64_t len) const {
    ev.prefetch_line(i, len);
  }
  void set_split(bool sp) { ev.set_split(sp); }
  template <class F>
  void for_each_leaf(F&& f) {
    ev.for_each_leaf(f);
  }
};

// A backend's RecordEval derives from Records, so that the reduction folding it can tell.
struct Records {};
template <class Ev>
inline constexpr bool is_record = std::is_base_of_v<Records, Ev>;

// Evaluates a node into a new tensor on its device (a break; backend/assign.hpp), of this type.
template <class N>
using materialized_t = BasicTensor<canonical_t<typename N::value_type>, dynamic_extents<N::rank>(),
                                   typename N::device_type>;
template <class N>
materialized_t<N> materialize(N const& n);

// The results materialized while one assignment runs: those of its plan's kernels, stored
// before its last kernel runs (backend/assign.hpp: run_plan), and the anchors computed on the
// way (a run-time break's reductions), so that a node read by several breaks is computed once
// (rule 4): twice in one kernel (the mean in var's (x - mean) * (x - mean)), or by several
// kernels of a run-time break (softmax's max, read by its sum's kernel and by the output's). The
// outermost kernel of an assignment opens the scope (MaterializedScope, assign.hpp); the kernels
// its breaks run share it. (Host-side code: it runs where kernels are launched, never inside
// one.)
//
// A node is found by its id where it has one (an anchor: copies of it share the id), else by its
// address. Results are stored under an address only where it stays the node's for the whole
// scope: by the plan, for nodes of the assignment's expression, and for a shared node's child (a
// heap object). A node met on the way may be a temporary (the attention rewrite's), whose
// address a later one could take.
struct Materialized {
  struct Entry {
    std::uint64_t id;   // 0: found by address
    void const* node;
    void const* type;
    std::shared_ptr<void const> tensor;  // a copy of the tensor object: shares its storage
  };
  std::vector<Entry> entries;
  static Materialized*& current() {
    thread_local Materialized* scope = nullptr;
    return scope;
  }
  template <class N>
  materialized_t<N> const* find(N const& n) const {
    for (auto const& e : entries) {
      bool same = e.id == 0 && e.node == &n;
      if constexpr (has_id<N>) same = e.id == n.id;
      if (same && e.type == type_key<materialized_t<N>>())
        return static_cast<materialized_t<N> const*>(e.tensor.get());
    }
    return nullptr;
  }
  template <class N>
  void add(N const& n, materialized_t<N> const& t) {
    std::uint64_t id = 0;
    if constexpr (has_id<N>) id = n.id;
    entries.push_back({id, &n, type_key<materialized_t<N>>(), std::make_shared<materialized_t<N> const>(t)});
  }
};

// A break's tensor: one the plan stored, or one already materialized in this assignment, is
// read again. Kept for the rest of the assignment: an anchor's (by id), and a shared node's
// child's (by address: the heap object that every copy of the Shared node points to, alive as
// long as the assignment's expression).
template <class N>
materialized_t<N> materialize_kept(N const& n, bool keep) {
  Materialized* scope = Materialized::current();
  if (scope)
    if (auto const* t = scope->find(n)) return *t;
  materialized_t<N> t = materialize(n);
  if (scope && keep) scope->add(n, t);
  return t;
}
template <class N>
materialized_t<N> materialize_once(N const& n) {
  if constexpr (N::kind == NodeKind::shared) return materialize_kept(*n.input, true);
  else return materialize_kept(n, has_id<N>);
}

// An operand of a contraction in memory, for the engines that read it there: a tensor as it
// is, a view of its child's result (no copy), anything else materialized (its own kernels).
template <class C>
auto in_memory(C const& c) {
  if constexpr (C::kind == NodeKind::leaf) return c.tensor;
  else if constexpr (C::kind == NodeKind::view) return c.apply(materialize_once(c.input));
  else return materialize_once(c);
}

// Places a kernel's TileEval on the whole product, stored: read as any tensor broadcast into
// the kernel (the host's run-time break, and the GPU's element-wise rest after cuBLAS).
template <class T, int D>
struct StoredSetter {
  LeafEval<T, D> leaf;
  void tile(TileEval<T, D>& t) const {
    static_cast<LeafEval<T, D>&>(t) = leaf;
    t.off = 0;
  }
};

// A reduction fused into the kernel: its input is evaluated in the input's own index space.
template <int D, bool Split, class Root = void, bool InReduce = false, class N>
auto make_reduce_eval(N const& n, Temps& temps) {
  using C = decltype(n.input);
  constexpr int F = C::rank;
  Index<F> const& fdom = n.input.shape();
  auto ce = [&] {
    auto e = make_eval<F, true, Split, Root>(n.input, fdom, temps);
    if constexpr (!InReduce && shared_input<C, D, Root>())
      return wrap_shared<typename evals_of<Root>::template record<decltype(e)>>(e);
    else return e;
  }();
  using Ev = typename evals_for<typename N::device_type>::template reduce<
      typename N::op_type, decltype(ce), D, F, N::naxes>;
  Ev ev{{ce, fdom}};
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
  if constexpr (requires { ev.derive(); }) ev.derive();  // a backend's own fields from these
  return ev;
}

// A materialized result read as an input of the kernel (kept alive while the kernel runs).
template <int D, class TT>
auto read_materialized(TT const& t, Index<D> const& dom, Temps& temps) {
  temps.push_back(t.storage());
  return leaf_eval<D>(t, dom);
}

// An element-wise node's evaluator over its children's. (Braces: the children's evaluators are
// made left to right, so breaks run in the order explain() numbers them.)
template <int D, bool InReduce, bool Split, class Root, class N, std::size_t... I>
auto make_map_eval(N const& n, Index<D> const& dom, Temps& temps, std::index_sequence<I...>) {
  return MapEval<std::remove_cvref_t<decltype(n.op)>, typename N::compute_type, D,
                 decltype(make_eval<D, InReduce, Split, Root>(n.template child<I>(), dom, temps))...>{
      n.op, {make_eval<D, InReduce, Split, Root>(n.template child<I>(), dom, temps)...}};
}

// A node's evaluator in a kernel over the index space dom, by the node's kind: breaks and
// views read a materialized result, leaves and numbers read themselves, maps and fused
// reductions evaluate their children, the kernel's anchor reads the contraction's blocks. Shared: a shared input's use outside the reduction that
// folds it, wrapped by make_eval.
template <int D, bool InReduce, bool Split, class Root, bool Shared, class N>
auto make_node_eval(N const& n, Index<D> const& dom, Temps& temps) {
  if constexpr (Shared) {
    auto e = make_node_eval<D, InReduce, Split, Root, false>(n, dom, temps);
    return wrap_shared<typename evals_of<Root>::template recall<decltype(e)>>(e);
  } else if constexpr (is_anchor<N, D, InReduce, Root>()) {
    return TileEval<canonical_t<typename N::value_type>, D>{};  // (canonical: see dtype.hpp)
  } else if constexpr (is_break<N, D, InReduce, Split>() || N::kind == NodeKind::shared) {
    return read_materialized<D>(materialize_once(n), dom, temps);
  } else if constexpr (N::kind == NodeKind::leaf) {
    return leaf_eval<D>(n.tensor, dom);
  } else if constexpr (N::kind == NodeKind::scalar) {
    return ScalarEval<typename N::value_type, D>{n.value};
  } else if constexpr (N::kind == NodeKind::map) {
    return make_map_eval<D, InReduce, Split, Root>(n, dom, temps,
                                                   std::make_index_sequence<child_count<N>>{});
  } else if constexpr (N::kind == NodeKind::reduce) {
    return make_reduce_eval<D, Split, Root, InReduce>(n, temps);
  } else if constexpr (N::kind == NodeKind::view) {
    return read_materialized<D>(n.apply(materialize_once(n.input)), dom, temps);
  } else {
    unhandled_kind<N>("make_eval");
  }
}

// (One function between a node and its children's: deep expressions stay within the
// compiler's instantiation depth.)
template <int D, bool InReduce, bool Split, class Root, class N>
auto make_eval(N const& n, Index<D> const& dom, Temps& temps) {
  return make_node_eval<D, InReduce, Split, Root, !InReduce && shared_input<N, D, Root>()>(n, dom,
                                                                                            temps);
}

}  // namespace solder::detail
