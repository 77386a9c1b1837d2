// The CUDA reduction evaluator. A fused reduction is computed by the group of threads that works
// on its line: a warp when there are many lines (softmax over the rows of a matrix), the whole
// block when there are few long ones. Every thread folds a strided share, 16 bytes at a time
// where the line is aligned, a float sum in a cascade of chunks as the host folds it
// (ThreadFold), then a warp's butterfly or CUB's block reduction folds the shares in a fixed
// tree. So one group computes softmax's max and sum, or layer norm's mean and variance, and then
// writes the line. Leaves and element-wise nodes are the shared evaluators of backend/eval.hpp,
// the same structs the host runs.
#pragma once
#include <cub/block/block_reduce.cuh>
#include <cub/util_ptx.cuh>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../cascade.hpp"
#include "../eval.hpp"

namespace solder::detail::cuda {

inline constexpr int block_threads = 256;
inline constexpr int warp_threads = 32;

// Values per thread per step of a vector walk: 16 bytes, at most 4 values (the expression is
// unrolled that many times: more costs registers and compile time, not speed).
template <class T>
inline constexpr int vec_width = sizeof(T) >= 4 ? static_cast<int>(16 / sizeof(T)) : 4;

// The longest run a vector walk takes in one go: its indices are then 32-bit, so an address is
// one multiply-add from its pointer and a loop counter one register (a multiple of every vector
// width, so that a later run starts as aligned as the first).
inline constexpr std::int64_t max_run = std::int64_t(1) << 30;

// f(i) for i = first, first + step, ... below end, U at a time in one basic block, so that their
// loads are in flight together; in the same order as one at a time. (I: the index type.)
template <int U, class I, class F>
__device__ SOLDER_INLINE void for_steps(I first, I end, I step, F&& f) {
  I i = first;
  if constexpr (U > 1) {
    for (; i + (U - 1) * step < end; i += U * step) {
      SOLDER_UNROLL
      for (int u = 0; u < U; ++u) f(i + u * step);
    }
  }
  for (; i < end; i += step) f(i);
}
// f(first + s * step) for s = 0 .. S-1, a count known at compile time (lines of a static
// length, lines_kernel): U steps at a time in one basic block, in a loop of S / U passes of a
// constant count (one pass, no loop, where U == S), then the rest; no thread tests the line's
// bound.
template <int S, int U, class I, class F>
__device__ SOLDER_INLINE void for_count(I first, I step, F&& f) {
  constexpr int whole = S / U * U;
  SOLDER_NO_UNROLL
  for (int s = 0; s < whole; s += U) {
    SOLDER_UNROLL
    for (int u = 0; u < U; ++u) f(first + (s + u) * step);
  }
  SOLDER_UNROLL
  for (int s = whole; s < S; ++s) f(first + s * step);
}

// A thread's fold of a long series of terms, in the host's order and with its error bound
// (Cascade, backend/cascade.hpp): cascade_fan terms a chunk, the chunks passed up its levels. A
// float sum of m terms then errs by about 16 log16(m) eps, where one accumulator errs by m eps
// (10^7 terms of 0.1f: 1000000.125, not 1087937). Registers only, and levels only for a fold
// that rounds (Cascade::rounds). (Host code too, where test_cuda_host checks it against the
// host's order.)
template <class Op, class A>
struct ThreadFold : Cascade<Op, A> {
  static constexpr int chunk_len = cascade_fan;
  // fold(b, e) folds into chunk() the terms at b, b + step, ... below e, per_step of them at
  // each index (a vector step); called for the indices from first to end a chunk at a time, so
  // that its own loop, unrolled or not, has no test for the chunk's end.
  SOLDER_HD_ANY_CALLEE
  template <int per_step = 1, class I, class F>
  SOLDER_HD SOLDER_INLINE void in_chunks(I first, I end, I step, F&& fold) {
    static_assert(chunk_len % per_step == 0);
    if constexpr (!Cascade<Op, A>::rounds) {
      fold(first, end);
    } else {
      I const span = step * (chunk_len / per_step);
      for (I b = first; b < end; b += span) {
        fold(b, end - b > span ? b + span : end);
        this->end_chunk();
      }
    }
  }
};

template <class Op>
struct MergeOp {
  template <class A>
  __device__ SOLDER_INLINE A operator()(A const& a, A const& b) const {
    return Op::merge(a, b);
  }
};

// The group of `g` threads (a warp or the block, a power of two) that works on one line, and
// this thread's place in it (a shift, not a division: g is only known at run time).
__device__ SOLDER_INLINE int group_rank(int g) { return static_cast<int>(threadIdx.x) & (g - 1); }
__device__ SOLDER_INLINE int group_index(int g) {
  return static_cast<int>(threadIdx.x) >> __popc(static_cast<unsigned>(g - 1));
}
__device__ SOLDER_INLINE void group_sync(int g) {
  if (g == warp_threads) __syncwarp();
  else __syncthreads();
}

// Called by every thread of the group with its share; every thread gets the group's total.
// A warp folds as a butterfly: each thread merges its value with the one o lanes away, for
// o = 16, 8, ..., 1, so every thread ends with the total without a broadcast (Op::merge is
// commutative, but for the sign of a zero that a double max or min keeps from either side).
template <class Op, class A>
__device__ SOLDER_INLINE A group_fold(A share, int g) {
  if (g == warp_threads) {
    int const lane = static_cast<int>(threadIdx.x) & (warp_threads - 1);
    SOLDER_UNROLL
    for (int o = warp_threads / 2; o > 0; o /= 2) {
      A other;
      if constexpr (std::is_same_v<A, float>) other = __shfl_xor_sync(0xffffffffu, share, o);
      else other = cub::ShuffleIndex<warp_threads>(share, lane ^ o, 0xffffffffu);
      share = Op::merge(share, other);
    }
    return share;
  }
  using Block = cub::BlockReduce<A, block_threads>;
  __shared__ typename Block::TempStorage scratch;
  __shared__ A total;
  A r = Block(scratch).Reduce(share, MergeOp<Op>{});
  if (threadIdx.x == 0) total = r;
  __syncthreads();
  r = total;
  __syncthreads();  // the next fold of this type reuses scratch and total
  return r;
}

// Rule 4 on the device: the first use of a reduction that the kernel uses twice publishes its
// value, with the line it belongs to, in a slot of this table (one row per line group); a later
// use for the same line reads it instead of folding again.
struct Published {
  unsigned char value[8];
  std::int64_t line;
};
inline constexpr int reuse_slots = 8;
__device__ SOLDER_INLINE Published* reuse_table(int g) {
  __shared__ Published table[block_threads / warp_threads][reuse_slots];
  return table[group_index(g)];
}

// What linking tells a kernel's reductions (host side, before the launch): the group size,
// which of them publish or reuse a value, and where the records of shared inputs go.
// A use whose record holds the whole line never reads the input it wraps, so that input's
// reductions are not computed for it (softmax's numerator then needs no max: the sum's input
// has one). Whether a record holds the whole line is known once everything is linked, so the
// kernel links again (Skip, executor.hpp: launch):
//   mark  the first time: each use whose record holds the whole line skips its input from now on;
//   keep  again, with those uses skipped: every use must find its record and each skipped one
//         still the whole line (records are placed in the same order, and no more of them);
//   none  if not: again, with no use skipped (as before there were skips).
struct GroupLinks : Links {
  enum class Skip { mark, keep, none };
  int group = block_threads;
  int slots = 0;
  int record_bytes = 0;  // dynamic shared memory per block for records
  Skip skip = Skip::mark;
  bool relink = false;  // mark: a use was found covered; keep: a skipped one no longer is
  bool folds_lines = true;  // every reduction folds one run of line_len values
};

// Records of shared inputs (plan.hpp: shared_input) take at most this much shared memory per
// block: with the rest, four blocks still fit on an SM of sm_80 (164 KiB) and sm_90 (228 KiB).
inline constexpr int record_budget = 32 << 10;

__device__ SOLDER_INLINE unsigned char* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char bytes[];
  return bytes;
}

// The record of one shared input for the current group: values [0, cap) of its line, at their
// place. Each record has cap values for every group of the block, from byte `base` on.
template <class T>
struct RecordPlace {
  int base = 0;
  int cap = 0;  // a multiple of 16 values; 0: no record
  int group = block_threads;
  __device__ SOLDER_INLINE T* values() const {
    return reinterpret_cast<T*>(dynamic_shared() + base +
                                group_index(group) * cap * static_cast<int>(sizeof(T)));
  }
};

// What RecordEval and RecallEval share: the evaluator they wrap, where the record is, and the
// record of the current group once a line begins (P: a pointer to the values).
template <class Ev, class P>
struct RecordView : SharedInput<Ev> {
  RecordPlace<element_of<Ev>> place{};
  P rec = nullptr;
  template <class I>
  SOLDER_HD SOLDER_INLINE void begin_line(I const& i) {
    this->ev.begin_line(i);
#if defined(__CUDA_ARCH__)
    rec = place.values();
#endif
  }
};

// Rule 4 for values on the device: a fused reduction's input that the kernel also writes out
// (softmax's exp(x - max)) is computed once per element. While the group folds the line, each
// thread keeps the values it computes in shared memory, at their place in the line; the writes
// read them back (the kernel synchronizes the group in between). Past the record's room, a
// long line computes the rest again.
template <class Ev>
struct RecordEval : RecordView<Ev, element_of<Ev>*>, Records {
  using T = element_of<Ev>;
  using RecordView<Ev, T*>::place, RecordView<Ev, T*>::rec;
  template <Read = Read::plain>
  SOLDER_HD SOLDER_INLINE T line(std::int64_t j) const {
    T v = this->ev.line(j);
    if (j < place.cap) rec[j] = v;
    return v;
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE Vec<T, V> line_vec(std::int64_t j) const {
    Vec<T, V> v = this->ev.template line_vec<V>(j);
    if (j < place.cap) *reinterpret_cast<Vec<T, V>*>(rec + j) = v;  // cap: a multiple of V
    return v;
  }
  bool same(RecordEval const& o) const { return this->ev.same(o.ev); }
  void link(GroupLinks& l) {
    place = {};
    this->ev.link(l);
  }
};

template <class Ev>
struct RecallEval : RecordView<Ev, element_of<Ev> const*> {
  using T = element_of<Ev>;
  using RecordView<Ev, T const*>::place, RecordView<Ev, T const*>::rec;
  bool skip = false;  // the record holds the whole line: ev is not linked, prepared or read
  template <class I>
  SOLDER_HD SOLDER_INLINE void prepare(I const& i) {
    if (!skip) this->ev.prepare(i);
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE bool vec_aligned() const {
    return skip || this->ev.template vec_aligned<V>();
  }
  template <Read = Read::plain>
  SOLDER_HD SOLDER_INLINE T line(std::int64_t j) const {
    return j < place.cap ? rec[j] : this->ev.line(j);
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE Vec<T, V> line_vec(std::int64_t j) const {
    return j < place.cap ? *reinterpret_cast<Vec<T, V> const*>(rec + j)
                         : this->ev.template line_vec<V>(j);
  }
  bool same(RecallEval const& o) const { return this->ev.same(o.ev); }
  void link(GroupLinks& l) {
    place = {};
    if (l.skip == GroupLinks::Skip::none) skip = false;
    if (!skip) this->ev.link(l);
    l.add_user({type_key<RecordEval<Ev>>(), this, &attach});
  }
  // Gives the record its room (host side): as much of the line as the budget leaves.
  static bool attach(void* user, void* source, Links& links) {
    auto& me = *static_cast<RecallEval*>(user);
    auto& src = *static_cast<RecordEval<Ev>*>(source);
    auto& l = static_cast<GroupLinks&>(links);
    if (!me.ev.same(src.ev)) return false;
    if (src.place.cap == 0) {
      int groups = block_threads / l.group;
      std::int64_t room = (record_budget - l.record_bytes) / (groups * sizeof(T)) / 16 * 16;
      std::int64_t cap = std::min(room, (l.line_len + 15) / 16 * 16);
      if (cap <= 0) return false;
      src.place = {l.record_bytes, static_cast<int>(cap), l.group};
      l.record_bytes += static_cast<int>(cap * sizeof(T)) * groups;
    }
    me.place = src.place;
    bool const whole = me.place.cap >= l.line_len;
    if (l.skip == GroupLinks::Skip::mark && whole) me.skip = l.relink = true;
    if (me.skip && !whole) l.relink = true;
    return true;
  }
};

// Loads per value of an evaluator's line: its leaves (a fused reduction folds its own input).
template <class Ev>
inline constexpr int line_loads = 0;
template <class T, int D>
inline constexpr int line_loads<LeafEval<T, D>> = 1;
template <class T, int D>
inline constexpr int line_loads<TileEval<T, D>> = 1;
template <class Op, class C, int D, class... E>
inline constexpr int line_loads<MapEval<Op, C, D, E...>> = (0 + ... + line_loads<E>);
template <class Ev>
inline constexpr int line_loads<RecordEval<Ev>> = line_loads<Ev>;
template <class Ev>
inline constexpr int line_loads<RecallEval<Ev>> = line_loads<Ev>;

// Steps of a row kernel's walk whose loads a thread issues together: one at a time, it waits
// out the memory's latency at every step (row kernels are bound by it, not by bandwidth). Four
// steps gained 5 to 7% on an H100 (softmax, layer norm over [4096, 1024]); at most 8 vector
// loads in flight, so that no kernel spills under its 64 registers (12 did, on sm_80), and a
// step of four or more loads alone (two steps of `a * b + c * d`'s four spilled on sm_90; four
// 16-byte loads a thread, at 32 warps an SM, still keep three times the bytes in flight that
// an H100's bandwidth needs).
template <class Ev>
inline constexpr int steps_in_flight =
    line_loads<Ev> >= 4 ? 1 : std::min(4, 8 / std::max(1, line_loads<Ev>));
// Steps of the static-length variant's walk taken together (for_count): all S of them, but a
// step of four or more loads goes alone, as above (the 8 steps of a row of 1024 floats of
// `a * b + c * d`, all together, spilled under the 64 registers on sm_80 and sm_90).
template <class Ev, int S>
inline constexpr int static_steps = steps_in_flight<Ev> == 1 ? 1 : S;

// The inputs an evaluator's own loop reads (not those of a fused reduction), in order, as a
// tuple type.
template <class Ev>
struct leaves_of {
  using type = std::tuple<>;
};
template <class T, int D>
struct leaves_of<LeafEval<T, D>> {
  using type = std::tuple<LeafEval<T, D>>;
};
template <class Op, class C, int D, class... E>
struct leaves_of<MapEval<Op, C, D, E...>> {
  using type = decltype(std::tuple_cat(std::declval<typename leaves_of<E>::type>()...));
};
template <class Leaves>
struct has_repeats;
template <class... L>
struct has_repeats<std::tuple<L...>> {
  template <class X>
  static constexpr int count = (0 + ... + int(std::is_same_v<X, L>));
  static constexpr bool value = (false || ... || (count<L> > 1));
};
// Whether two inputs have one type, and so may be one tensor read twice (x * x, the variance's
// (x - mean) * (x - mean)).
template <class Ev>
inline constexpr bool repeated_leaf = has_repeats<typename leaves_of<Ev>::type>::value;

// Whether every two inputs of one type are one tensor seen the same way, and so read the same
// memory on every line (host side).
template <class Ev>
bool leaves_shared(Ev& ev) {
  bool all = true;
  ev.for_each_leaf([&](auto const& a) {
    ev.for_each_leaf([&](auto const& b) {
      if constexpr (std::is_same_v<decltype(a), decltype(b)>) all = all && a.same(b);
    });
  });
  return all;
}

// Copies the first input of type L in ev into `first`; false if there is none.
template <class L, class Ev>
__device__ SOLDER_INLINE bool first_leaf(Ev const& ev, L& first);
template <class L, class Ev, std::size_t... I>
__device__ SOLDER_INLINE bool first_leaf_in(Ev const& ev, L& first, std::index_sequence<I...>) {
  return (false || ... || first_leaf<L>(std::get<I>(ev.c), first));
}
template <class L, class Ev>
__device__ SOLDER_INLINE bool first_leaf(Ev const& ev, L& first) {
  if constexpr (std::is_same_v<Ev, L>) {
    first = ev;
    return true;
  } else if constexpr (requires { typename Ev::Seq; }) {
    return first_leaf_in<L>(ev, first, typename Ev::Seq{});
  } else {
    return false;
  }
}
// Makes every input of ev (a copy of root) the first input of its type in root: where they read
// the same memory anyway (leaves_shared), the compiler then loads each value once.
template <class Root, class Ev>
__device__ SOLDER_INLINE void share_leaves(Root const& root, Ev& ev);
template <class Root, class Ev, std::size_t... I>
__device__ SOLDER_INLINE void share_leaves_in(Root const& root, Ev& ev, std::index_sequence<I...>) {
  (share_leaves(root, std::get<I>(ev.c)), ...);
}
template <class Root, class Ev>
__device__ SOLDER_INLINE void share_leaves(Root const& root, Ev& ev) {
  if constexpr (requires { typename Ev::Seq; }) share_leaves_in(root, ev, typename Ev::Seq{});
  else if constexpr (requires { ev.lp; }) first_leaf(root, ev);
}
// A copy of ev whose inputs of each type are all its first one (where leaves_shared(ev)).
template <class Ev>
__device__ SOLDER_INLINE Ev sharing_leaves(Ev const& ev) {
  Ev c = ev;
  share_leaves(ev, c);
  return c;
}

// p, a pointer into the tensor at base, as a value the compiler cannot see through (an empty
// asm hides its offset), so that the loops over a line keep p itself: 2 registers. Without it
// NVVM computed each input's line start again in front of each loop of lines_kernel's line (the
// vector walk, then its scalar rest), as base + dot(index, strides), so the line's index and
// every stride stayed live across the vector loop: relu(x * scale + shift + residual), four
// inputs of rank 4, spilled past the kernel's 64 registers on sm_90. The offset is hidden, not
// the pointer: derived from base (a kernel argument), p is still known to be global (LDG, not
// generic loads); and in bytes, so that a loop steps p in one instruction, not three. (Not in
// the static-length variant, whose line is one loop: pinned, its rms_norm of a * b + c * d
// spilled on sm_90.)
template <class T>
__device__ SOLDER_INLINE T* pin_line(T* base, T* p) {
  using Byte = std::conditional_t<std::is_const_v<T>, char const, char>;
  std::int64_t bytes = reinterpret_cast<Byte*>(p) - reinterpret_cast<Byte*>(base);
  asm("" : "+l"(bytes));
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(base) + bytes);
}
// pin_line for the line start of every input that ev's own loop reads (after begin_line).
template <class Ev>
__device__ SOLDER_INLINE void pin_lines(Ev& ev);
template <class Ev, std::size_t... I>
__device__ SOLDER_INLINE void pin_lines_in(Ev& ev, std::index_sequence<I...>) {
  (pin_lines(std::get<I>(ev.c)), ...);
}
template <class Ev>
__device__ SOLDER_INLINE void pin_lines(Ev& ev) {
  if constexpr (requires { typename Ev::Seq; }) pin_lines_in(ev, typename Ev::Seq{});
  else if constexpr (requires { ev.lp; }) ev.lp = pin_line(ev.base, ev.lp);
  else if constexpr (requires { ev.ev; }) pin_lines(ev.ev);  // a record's input
}

// ev.prepare(p) in a kernel whose reductions all fold one run of L values, a warp each (L > 0,
// lines_kernel's static-length variant): each fold's bounds are then compile-time constants.
// (The shared evaluators' prepare knows no L, so this walks them itself; defined below.)
template <int L, class Ev, class P>
__device__ SOLDER_INLINE void prepare_line(Ev& ev, P const& p);

template <class Op, class Child, int D, int F, int NA>
struct ReduceEval : ReduceSetup<Child, D, F, NA> {
  using Setup = ReduceSetup<Child, D, F, NA>;
  using Setup::child, Setup::fdom, Setup::src, Setup::axes, Setup::out, Setup::count, Setup::block,
      Setup::id;
  using op_type = Op;
  using In = element_of<Child>;
  using A = typename Op::template acc<In>;
  // Inside a kernel a reduction's value stays in the compute type: a 16-bit float result is
  // rounded only where a kernel stores it.
  using R = compute_t<typename Op::template result<In>>;
  static_assert(sizeof(R) <= sizeof(Published::value));
  // take[k][o]: input axis k starts at output index o. The line start f is computed from
  // these with constant indices (an index read from src[] would make the compiler keep the
  // arrays in local memory).
  std::array<std::array<bool, D>, F> take{};
  // outermost[k]: k is the outermost reduced axis, whose index in a walk of the line is what
  // is left of the step number (a flag per axis, for the same reason).
  std::array<bool, F> outermost{};
  int group = block_threads;  // threads per line
  int slot = -1;              // rule 4: where this reduction's value is published or read
  bool publish = false, reuse = false;
  bool shared = false;  // the child's inputs of one type are one tensor (leaves_shared)
  R value{};

  void derive() {
    for (int k = 0; k < F; ++k)
      for (int o = 0; o < D; ++o) take[k][o] = src[k] == o && out[o] != 1;
    outermost[axes[0]] = true;  // axes are sorted
    if constexpr (repeated_leaf<Child>) shared = leaves_shared(child);
  }
  void link(GroupLinks& l) {
    group = l.group;
    l.folds_lines = l.folds_lines && block && count == l.line_len;
    if (auto* first = static_cast<ReduceEval*>(l.find(id, type_key<ReduceEval>()))) {
      if (first->slot < 0 && l.slots < reuse_slots) first->slot = l.slots++;
      first->publish = first->slot >= 0;
      slot = first->slot;
      reuse = slot >= 0;
    } else {  // the first use (again, if linked before)
      slot = -1;
      publish = reuse = false;
      l.add(id, type_key<ReduceEval>(), this);
      if constexpr (is_record<Child>)
        if (l.is_line(block, count, fdom)) l.add_source(type_key<Child>(), &child);
    }
    child.link(l);
  }
  bool same(ReduceEval const& o) const { return id == o.id; }
  template <class Fn>
  void for_each_leaf(Fn&&) {}  // its inputs are read by its own fold

  // Where the line of output index p starts in the input.
  __device__ SOLDER_INLINE Index<F> line_start(Index<D> const& p) const {
    // Every index below is a compile-time constant once the loops unroll, so the evaluator
    // stays in registers. With keepdim (D == F) input axis k can only start at output index k.
    Index<F> f{};
    SOLDER_UNROLL
    for (int k = 0; k < F; ++k) {
      SOLDER_UNROLL
      for (int o = 0; o < D; ++o)
        if ((D != F || o == k) && take[k][o]) f[k] += p[o];
    }
    return f;
  }
  // Every thread of the group calls this for the same line p (the folds synchronize it).
  // L > 0: the line is a run of L values and the group a warp (prepare_line).
  template <int L = 0>
  SOLDER_HD SOLDER_INLINE void prepare(Index<D> const& p) {
#if defined(__CUDA_ARCH__)
    int const g = L > 0 ? warp_threads : group;
    std::int64_t const n = L > 0 ? L : count;
    Index<F> const f = line_start(p);
    std::int64_t line = 0;  // which line f starts, for rule 4
    if (reuse || publish) {
      SOLDER_UNROLL
      for (int k = 0; k < F; ++k) line = line * fdom[k] + f[k];
    }
    if (reuse) {
      group_sync(g);  // the first use's value is visible
      Published const& e = reuse_table(g)[slot];
      if (e.line == line) {  // the same for the whole group
        std::memcpy(&value, e.value, sizeof(R));
        return;
      }
    }
    prepare_line<L>(child, f);
    A const share = fold_share<L>(f, 0, n, group_rank(g), g);
    value = static_cast<R>(Op::finalize(group_fold<Op>(share, g), n));
    if (publish) {
      group_sync(g);  // every earlier reader of the slot is done with it
      if (group_rank(g) == 0) {
        Published& e = reuse_table(g)[slot];
        std::memcpy(e.value, &value, sizeof(R));
        e.line = line;
      }
    }
#else
    static_cast<void>(p);
#endif
  }
  // The group's fold of values [begin, end) of the line of output index p, not finalized: a
  // chunk of a line that several groups fold (chunk_kernel, executor.hpp). begin: a multiple
  // of 16 values, so that the chunk is as aligned as the line.
  __device__ SOLDER_INLINE A fold_chunk(Index<D> const& p, std::int64_t begin, std::int64_t end) {
    Index<F> const f = line_start(p);
    child.prepare(f);
    return group_fold<Op>(fold_share(f, begin, end, group_rank(group), group), group);
  }
  // This thread's fold, alone, of values begin + rank, begin + rank + step, ... below end of
  // the line of output index p, walked by index (a reduction over leading dims, never one run:
  // columns_kernel, executor.hpp).
  __device__ SOLDER_INLINE A fold_steps(Index<D> const& p, std::int64_t begin, std::int64_t end,
                                        int rank, int step) {
    Index<F> const f = line_start(p);
    child.prepare(f);
    return fold_by_index(f, begin, end, rank, step);
  }
  // This thread's share of the fold over values [begin, end) of the line that starts at f: the
  // rank-th of every `step` of them (vectors of them where the line is contiguous), in chunks
  // (ThreadFold). L > 0: the line is one run of L values (begin 0, end L) and the step a warp.
  template <int L = 0>
  __device__ SOLDER_INLINE A fold_share(Index<F> f, std::int64_t begin, std::int64_t end, int rank,
                                        int step) {
    if (L > 0 || block) {
      ThreadFold<Op, A> acc;
      child.begin_line(f);
      constexpr int V = vec_width<In>;
      std::int64_t done = begin;
      if (end <= max_run && child.template vec_aligned<V>()) {
        auto const last = static_cast<std::int32_t>(begin + (end - begin) / V * V);
        auto const first = static_cast<std::int32_t>(begin + rank * V);
        auto const stride = static_cast<std::int32_t>(step * V);
        auto fold = [&](Child const& c) {
          auto each = [&](std::int32_t n) {
            auto v = c.template line_vec<V>(n);
            SOLDER_UNROLL
            for (int k = 0; k < V; ++k) acc.chunk() = Op::step(acc.chunk(), v.v[k], n + k);
          };
          constexpr int S = L > 0 && L % (warp_threads * V) == 0 ? L / (warp_threads * V) : 0;
          if constexpr (S > 0) {  // as many steps for every thread: chunks of C steps, unrolled
            constexpr int C = ThreadFold<Op, A>::rounds ? ThreadFold<Op, A>::chunk_len / V : S;
            [&]<int... G>(std::integer_sequence<int, G...>) {
              ((for_count<(C < S - G * C ? C : S - G * C), static_steps<Child, (C < S - G * C ? C : S - G * C)>>(
                    first + G * C * stride, stride, each),
                acc.end_chunk()),
               ...);
            }(std::make_integer_sequence<int, (S + C - 1) / C>{});
          } else {
            acc.template in_chunks<V>(first, last, stride, [&](std::int32_t b, std::int32_t e) {
              for_steps<steps_in_flight<Child>>(b, e, stride, each);
            });
          }
        };
        if constexpr (repeated_leaf<Child>) {
          if (shared) fold(sharing_leaves(child));  // one load where the variance reads x twice
          else fold(child);
        } else {
          fold(child);
        }
        done = last;
      }
      auto rest = [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t n = b; n < e; n += step) acc.chunk() = Op::step(acc.chunk(), child.line(n), n);
      };
      if constexpr (L > 0) rest(done + rank, end);  // at most L / 32 terms: one chunk
      else acc.in_chunks(done + rank, end, std::int64_t(step), rest);
      return acc.result();
    }
    return fold_by_index(f, begin, end, rank, step);
  }
  // fold_share where the line is not one run: each value's index in the input, from n.
  __device__ SOLDER_INLINE A fold_by_index(Index<F> f, std::int64_t begin, std::int64_t end,
                                           int rank, int step) {
    ThreadFold<Op, A> acc;
    acc.in_chunks(begin + rank, end, std::int64_t(step), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t n = b; n < e; n += step) {
        Index<F> g = f;
        std::int64_t r = n;
        SOLDER_UNROLL
        for (int k = F - 1; k >= 0; --k) {
          if (src[k] >= 0) continue;  // not a reduced axis
          if (outermost[k]) {  // what is left of n: no division
            g[k] = r;
          } else {
            g[k] = r % fdom[k];
            r /= fdom[k];
          }
        }
        acc.chunk() = Op::step(acc.chunk(), child.at(g), n);
      }
    });
    return acc.result();
  }
  SOLDER_HD SOLDER_INLINE void begin_line(Index<D> const&) {}
  template <Read = Read::plain>
  SOLDER_HD SOLDER_INLINE R line(std::int64_t) const {
    return value;
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE Vec<R, V> line_vec(std::int64_t) const {
    return splat<V>(value);
  }
  template <int V>
  SOLDER_HD SOLDER_INLINE bool vec_aligned() const {
    return true;
  }
  SOLDER_HD SOLDER_INLINE R at(Index<D> const&) const { return value; }
  bool contiguous(int, Index<D> const&) const { return true; }  // constant along its lines
};

template <class Ev>
inline constexpr bool is_reduce_eval = false;
template <class Op, class Child, int D, int F, int NA>
inline constexpr bool is_reduce_eval<ReduceEval<Op, Child, D, F, NA>> = true;
template <class Ev>
inline constexpr bool is_recall_eval = false;
template <class Ev>
inline constexpr bool is_recall_eval<RecallEval<Ev>> = true;

template <int L, class Ev, class P, std::size_t... I>
__device__ SOLDER_INLINE void prepare_line_in(Ev& ev, P const& p, std::index_sequence<I...>) {
  (prepare_line<L>(std::get<I>(ev.c), p), ...);
}
template <int L, class Ev, class P>
__device__ SOLDER_INLINE void prepare_line(Ev& ev, P const& p) {
  if constexpr (L == 0) {
    ev.prepare(p);
  } else if constexpr (is_reduce_eval<Ev>) {
    ev.template prepare<L>(p);
  } else if constexpr (requires { typename Ev::Seq; }) {  // a map: its operands
    prepare_line_in<L>(ev, p, typename Ev::Seq{});
  } else if constexpr (is_recall_eval<Ev>) {
    if (!ev.skip) prepare_line<L>(ev.ev, p);
  } else if constexpr (is_record<Ev>) {
    prepare_line<L>(ev.ev, p);
  }  // a leaf or a number: nothing to prepare
}

}  // namespace solder::detail::cuda

namespace solder::detail {
template <>
struct evals_for<Cuda> {
  template <class Op, class Child, int D, int F, int NA>
  using reduce = cuda::ReduceEval<Op, Child, D, F, NA>;
  template <class Ev>
  using record = cuda::RecordEval<Ev>;
  template <class Ev>
  using recall = cuda::RecallEval<Ev>;
};
}  // namespace solder::detail
