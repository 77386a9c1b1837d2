// The planner: a compile-time fold over an expression's type that cuts it into kernels
// (DESIGN.md §3), plus the run-time half that only shapes can decide (which axes a fused
// reduction's consumers run along). Backends build their evaluators from these answers.
#pragma once
#include <algorithm>
#include <array>
#include <string>
#include <type_traits>

#include "../expr/attention.hpp"
#include "../expr/reduce.hpp"

namespace solder {

namespace detail {

// A key that tells types apart at run time (no RTTI): the address of a static per type.
template <class T>
void const* type_key() {
  static char const key = 0;
  return &key;
}

// Where a node is evaluated: in a kernel whose index space has rank D, either on the path
// from the kernel's output (InReduce = false) or inside a fused reduction's input.
//
// Rule 2: a reduction fuses with its consumers when its result has the rank of the kernel's
// index space, so it only broadcasts along axes it reduced (keepdim, or it is the output).
// Inside another reduction's input it must be keepdim: it is then computed once per line of
// the outer reduction. Anything else is a break (rule 5) and materializes.
//
// Split: the run-time fallback when shapes keep fused reductions from sharing lines (see
// plan_lines) — every reduction below the kernel's root becomes a kernel of its own.
//
// Rule 3: a contraction is a break everywhere but in the one kernel it anchors (has_anchor): a
// kernel with no fused reduction and exactly one contraction of its rank on its output path
// runs as that contraction, with the rest of the kernel as its epilogue. The walks below treat
// every contraction as a break; the anchor's kernel is its own (plan_own, make_eval, explain).
template <class N, int D, bool InReduce, bool Split = false>
constexpr bool is_break() {
  if constexpr (N::kind == NodeKind::reduce)
    return Split || (InReduce ? !(N::keepdim && N::rank == D) : N::rank != D);
  else return N::kind == NodeKind::contract;
}

template <class N, int D, bool InReduce>
std::string break_reason() {
  if constexpr (N::kind == NodeKind::contract)
    return std::string("the contraction's result is ") +
           (InReduce ? "reduced" : N::rank != D ? "broadcast into a kernel of higher rank"
                                                : "read by a kernel with a reduction or another contraction") +
           ": it is stored first (only element-wise maths runs as its epilogue)";
  else if constexpr (InReduce)
    return std::string(N::name()) +
           " inside another reduction's input is not keepdim over the same index space";
  else
    return std::string(N::name()) + " result (rank " + std::to_string(N::rank) +
           ") is broadcast into a kernel of rank " + std::to_string(D);
}

// Whether a reduction is fused below N (N evaluated in an index space of rank D).
template <class N, int D, bool InReduce>
constexpr bool has_fused_reduce();
template <int D, bool InReduce, class... C>
constexpr bool has_fused_reduce_any(types<C...>) {
  return (false || ... || has_fused_reduce<C, D, InReduce>());
}
template <class N, int D, bool InReduce>
constexpr bool has_fused_reduce() {
  if constexpr (is_break<N, D, InReduce>()) return false;
  else if constexpr (N::kind == NodeKind::reduce) return true;
  else if constexpr (N::kind == NodeKind::map)
    return has_fused_reduce_any<D, InReduce>(typename N::child_types{});
  else if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar ||
                     N::kind == NodeKind::view || N::kind == NodeKind::shared)
    return false;
  else return unhandled_kind<N>("has_fused_reduce"), false;
}

// The contractions of rank D on N's output path (N itself, or below it through maps).
template <class N, int D>
constexpr int anchors_on_path();
template <int D, class... C>
constexpr int anchors_on_path_all(types<C...>) {
  return (0 + ... + anchors_on_path<C, D>());
}
template <class N, int D>
constexpr int anchors_on_path() {
  if constexpr (N::kind == NodeKind::contract) return N::rank == D ? 1 : 0;
  else if constexpr (N::kind == NodeKind::map) return anchors_on_path_all<D>(typename N::child_types{});
  else return 0;
}
// Whether the kernel rooted at N is a contraction with N's element-wise rest as its epilogue.
template <class N>
constexpr bool has_anchor() {
  if constexpr (N::kind == NodeKind::reduce) return false;
  else return !has_fused_reduce<N, N::rank, false>() && anchors_on_path<N, N::rank>() == 1;
}

// The kernel rooted at n with its anchor (a contraction of rank D on its output path) replaced
// by f(anchor).
template <int D, class N, class F>
auto map_anchor(N const& n, F const& f) {
  if constexpr (N::kind == NodeKind::contract && N::rank == D) return f(n);
  else if constexpr (N::kind == NodeKind::map) return map_children(n, [&](auto const& c) { return map_anchor<D>(c, f); });
  else return n;
}
// The attention pattern written out by hand (expr/attention.hpp: attention_pattern) is planned
// as the attention node it is rewritten to: the kernel rooted at `root` with its anchor
// rewritten. Where the rewrite does not apply to the run-time shapes (attention_applies), the
// kernel runs as written: more kernels than planned, as with a run-time break.
template <class N>
auto rewrite_attention(N const& root) {
  return map_anchor<N::rank>(root, [](auto const& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    if constexpr (attention_pattern<A>::value) return attention_pattern<A>::make(a);
    else return a;
  });
}
template <class N>
constexpr bool rewrites_attention() {
  if constexpr (!has_anchor<N>()) return false;
  else return !std::is_same_v<decltype(rewrite_attention(std::declval<N const&>())), N>;
}

// Whether N, met at that place of the kernel rooted at Root, is the kernel's anchor.
template <class N, int D, bool InReduce, class Root>
constexpr bool is_anchor() {
  if constexpr (N::kind != NodeKind::contract || InReduce || std::is_void_v<Root>) return false;
  else return has_anchor<Root>() && N::rank == D;
}

template <class Device>
struct device_rules;
// The device whose rules apply to N (a node over no tensor: the host's).
template <class N>
using rules_device =
    std::conditional_t<std::is_void_v<typename N::device_type>, Host, typename N::device_type>;
// Whether a contraction's left operand C is computed while the engine packs it (prologue
// fusion): element-wise maths over tensors, on a device whose engine does it.
template <class C, class Device>
constexpr bool fused_prologue() {
  if constexpr (C::kind != NodeKind::map) return false;
  else return device_rules<Device>::fuses_prologue && elementwise_only<C>();
}
// Whether the kernel rooted at N, anchored by a contraction (has_anchor), computes its
// element-wise rest as the contraction's epilogue, in one kernel; else the rest is a kernel of
// its own after the product (device_rules: the host's engine takes any epilogue, cuBLAS some).
template <class N>
constexpr bool fused_epilogue() {
  return device_rules<rules_device<N>>::template fuses_epilogue<N>();
}

template <class N>
constexpr bool keeps_order() {
  if constexpr (N::kind == NodeKind::view) return N::keeps_order;
  else return false;
}
// ---- The plan: the kernels of an assignment, a compile-time list in the order they run ------
//
// kernel_list<N> is types<PlannedKernel<Node, Path>...>: every kernel that evaluating N runs,
// producers before the kernels that read them, N's own last. Path leads from N to the kernel's
// root (child indices; rewrite_step: the attention pattern there runs as its attention node).
// kernel_count is its length; the executors run it (backend/assign.hpp: run_plan), storing every
// kernel but the last into one workspace block whose size the shapes give. A shared node's
// kernels appear once, where it is first read.
inline constexpr int rewrite_step = -1;
template <int... S>
struct Path {};
template <class P, int S>
struct extend_path;
template <int... S, int I>
struct extend_path<Path<S...>, I> {
  using type = Path<S..., I>;
};
template <class P, int S>
using extended = typename extend_path<P, S>::type;

// Nodes with an identity (their id): the anchors that copies of an expression share.
template <class N>
inline constexpr bool has_id = N::kind == NodeKind::reduce || N::kind == NodeKind::contract;

template <class Node, class P>
struct PlannedKernel {
  using node = Node;
  using path = P;
};

// The fold's state: the kernels so far and the Shared node types already planned.
template <class List, class Seen>
struct PlanState {
  using kernels = List;
  using seen = Seen;
};
template <class K, class... L, class Seen>
constexpr auto push(PlanState<types<L...>, Seen>) {
  return PlanState<types<L..., K>, Seen>{};
}
template <class List, class N>
inline constexpr bool has_type = false;
template <class... L, class N>
inline constexpr bool has_type<types<L...>, N> = (false || ... || std::is_same_v<L, N>);

template <class N>
using rewritten_t = decltype(rewrite_attention(std::declval<N const&>()));

// plan_own: the kernels of N evaluated on its own (an assignment's root, or a break).
// plan_below: those that the breaks below N add to the kernel N belongs to (rank D; InReduce:
// inside a fused reduction's input). Root: the kernel's root where its anchor is its kernel (a
// contraction with a fused epilogue), void otherwise.
template <class N, class P, class S>
constexpr auto plan_own(S s);
template <class N, int D, bool InReduce, class Root, class P, class S>
constexpr auto plan_below(S s);

// One step of a fold over the children of N, chained left to right by operator|.
template <class N, int D, bool InReduce, class Root, class P, std::size_t I>
struct BelowChild {};
template <class N, class P, std::size_t I>
struct OperandChild {};

template <class L, class Seen, class N, int D, bool InReduce, class Root, class P, std::size_t I>
constexpr auto operator|(PlanState<L, Seen> s, BelowChild<N, D, InReduce, Root, P, I>) {
  return plan_below<child_t<N, I>, D, InReduce, Root, extended<P, static_cast<int>(I)>>(s);
}
template <class N, int D, bool InReduce, class Root, class P, class S, std::size_t... I>
constexpr auto plan_children(S s, std::index_sequence<I...>) {
  return (s | ... | BelowChild<N, D, InReduce, Root, P, I>{});
}

// A Shared node: its child's kernels the first time it is met, nothing after.
template <class N, class P, class L, class... Seen>
constexpr auto plan_shared(PlanState<L, types<Seen...>> s) {
  if constexpr (has_type<types<Seen...>, N>) return s;
  else return plan_own<child_t<N>, extended<P, 0>>(PlanState<L, types<Seen..., N>>{});
}

// The operands of contraction N: in memory, computed first unless they are tensors, or a left
// operand the engine computes while packing it (fused_prologue). A view is taken of its child's
// result.
template <class L, class Seen, class N, class P, std::size_t I>
constexpr auto operator|(PlanState<L, Seen> s, OperandChild<N, P, I>) {
  using C = child_t<N, I>;
  using CP = extended<P, static_cast<int>(I)>;
  if constexpr (I == 0 && N::prologue && fused_prologue<C, typename N::device_type>()) return s;
  else if constexpr (C::kind == NodeKind::leaf) return s;
  else if constexpr (C::kind == NodeKind::shared) return plan_shared<C, CP>(s);
  else if constexpr (C::kind == NodeKind::view) return plan_own<child_t<C>, extended<CP, 0>>(s);
  else return plan_own<C, CP>(s);
}
template <class N, class P, class S, std::size_t... I>
constexpr auto plan_operands(S s, std::index_sequence<I...>) {
  return (s | ... | OperandChild<N, P, I>{});
}

template <class N, int D, bool InReduce, class Root, class P, class S>
constexpr auto plan_below(S s) {
  if constexpr (is_anchor<N, D, InReduce, Root>())  // the kernel's own anchor: its operands
    return plan_operands<N, P>(s, std::make_index_sequence<child_count<N>>{});
  else if constexpr (is_break<N, D, InReduce>()) return plan_own<N, P>(s);
  else if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar) return s;
  else if constexpr (N::kind == NodeKind::map)
    return plan_children<N, D, InReduce, Root, P>(s, std::make_index_sequence<child_count<N>>{});
  else if constexpr (N::kind == NodeKind::reduce)
    return plan_below<child_t<N>, child_t<N>::rank, true, Root, extended<P, 0>>(s);
  else if constexpr (N::kind == NodeKind::view) return plan_own<child_t<N>, extended<P, 0>>(s);
  else if constexpr (N::kind == NodeKind::shared) return plan_shared<N, P>(s);
  else return unhandled_kind<N>("the plan"), s;
}

// N's own kernel comes after those it reads. An attention pattern is planned as its attention
// node; a view that keeps its child's order as its child, whose kernels write straight into the
// (contiguous) result (backend/assign.hpp: store_through_view).
template <class N, class P, class S>
constexpr auto plan_own(S s) {
  if constexpr (rewrites_attention<N>()) {
    return plan_own<rewritten_t<N>, extended<P, rewrite_step>>(s);
  } else if constexpr (keeps_order<N>()) {
    return plan_own<child_t<N>, extended<P, 0>>(s);
  } else if constexpr (N::kind == NodeKind::reduce) {
    return push<PlannedKernel<N, P>>(plan_below<child_t<N>, child_t<N>::rank, true, void, extended<P, 0>>(s));
  } else if constexpr (N::kind == NodeKind::contract) {
    return push<PlannedKernel<N, P>>(plan_operands<N, P>(s, std::make_index_sequence<child_count<N>>{}));
  } else {
    using Root = std::conditional_t<has_anchor<N>() && fused_epilogue<N>(), N, void>;
    return push<PlannedKernel<N, P>>(plan_below<N, N::rank, false, Root, P>(s));
  }
}

// The plan of an assignment of N (a shared root is its child: assign() stores the child).
template <class N>
constexpr auto plan_assignment() {
  if constexpr (N::kind == NodeKind::shared) return plan_assignment<child_t<N>>();
  else return plan_own<N, Path<>>(PlanState<types<>, types<>>{});
}
template <class N>
using kernel_list = typename decltype(plan_assignment<N>())::kernels;

// Whether the kernel N belongs to (evaluated in an index space of rank D) has an op whose maths
// costs more than moving its operands (ops::Heavy). Breaks and views' children are kernels of
// their own.
template <class N, int D, bool InReduce>
constexpr bool heavy_maths();
template <int D, bool InReduce, class... C>
constexpr bool heavy_maths_any(types<C...>) {
  return (false || ... || heavy_maths<C, D, InReduce>());
}
template <class N, int D, bool InReduce>
constexpr bool heavy_maths() {
  if constexpr (is_break<N, D, InReduce>()) return false;
  else if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar ||
                     N::kind == NodeKind::view || N::kind == NodeKind::shared)
    return false;
  else if constexpr (N::kind == NodeKind::reduce)
    return heavy_maths<child_t<N>, child_t<N>::rank, true>();
  else if constexpr (N::kind == NodeKind::map)
    return std::is_base_of_v<ops::Heavy, decltype(N::op)> ||
           heavy_maths_any<D, InReduce>(typename N::child_types{});
  else return unhandled_kind<N>("heavy_maths"), false;
}

// The kernels of the eager baseline (backend/eager.hpp): one per element-wise op or reduction.
template <class N>
constexpr int eager_kernels();
template <class... C>
constexpr int eager_kernels_all(types<C...>) {
  return (0 + ... + eager_kernels<C>());
}
template <class N>
constexpr int eager_kernels() {  // (a shared node's, once: eager_assignment_kernels)
  if constexpr (N::kind == NodeKind::shared) return 0;
  constexpr int own =
      N::kind == NodeKind::map || N::kind == NodeKind::reduce || N::kind == NodeKind::contract ? 1 : 0;
  return own + eager_kernels_all(typename N::child_types{});
}
template <class... S>
constexpr int eager_shared_kernels(types<S...>) {
  return (0 + ... + eager_kernels<child_t<S>>());
}
template <class N>
constexpr int eager_assignment_kernels() {
  return eager_kernels<N>() + eager_shared_kernels(typename decltype(plan_assignment<N>())::seen{});
}

}  // namespace detail

// How many kernels evaluating E takes: a compile-time constant (DESIGN.md §1).
template <class E>
inline constexpr int kernel_count = static_cast<int>(detail::kernel_list<node_t<E>>::size);

// Kernels the eager baseline launches for E: one per element-wise or reduction node.
template <class E>
inline constexpr int eager_kernel_count = detail::eager_assignment_kernels<node_t<E>>();

namespace detail {

// The output path of a kernel: its root and the nodes below it through map nodes, outside
// reductions and views. on_output_path<N, M>: N is M or on M's output path; folded_on_path<N, M,
// D>: a reduction fused on M's output path (D: the kernel's rank) folds N.
template <class N, class M>
constexpr bool on_output_path();
template <class N, class... C>
constexpr bool on_output_path_any(types<C...>) {
  return (false || ... || on_output_path<N, C>());
}
template <class N, class M>
constexpr bool on_output_path() {
  if constexpr (std::is_same_v<N, M>) return true;
  else if constexpr (M::kind == NodeKind::map) return on_output_path_any<N>(typename M::child_types{});
  else if constexpr (M::kind == NodeKind::leaf || M::kind == NodeKind::scalar ||
                     M::kind == NodeKind::reduce || M::kind == NodeKind::view ||
                     M::kind == NodeKind::shared || M::kind == NodeKind::contract)
    return false;
  else return unhandled_kind<M>("on_output_path"), false;
}
template <class N, class M, int D>
constexpr bool folded_on_path();
template <class N, int D, class... C>
constexpr bool folded_on_path_any(types<C...>) {
  return (false || ... || folded_on_path<N, C, D>());
}
template <class N, class M, int D>
constexpr bool folded_on_path() {
  if constexpr (M::kind == NodeKind::map) return folded_on_path_any<N, D>(typename M::child_types{});
  else if constexpr (M::kind == NodeKind::reduce)
    return !is_break<M, D, false>() && std::is_same_v<child_t<M>, N>;
  else if constexpr (M::kind == NodeKind::leaf || M::kind == NodeKind::scalar ||
                     M::kind == NodeKind::view || M::kind == NodeKind::shared ||
                     M::kind == NodeKind::contract)
    return false;
  else return unhandled_kind<M>("folded_on_path"), false;
}

// Element-wise values that a kernel would compute twice: a map node that a fused reduction on
// the output path folds and that the output path also uses outside any reduction (softmax's
// exp(x - max), in the sum and in the quotient). The host computes them once per line: the
// reduction records its input and the other use reads it back, when run-time checks find both
// on the same line (backend/host/evaluators.hpp). Root is the kernel's root, or void where it
// has no fused reduction (shared_root: asked of every node, that answers at once).
template <class N, int D, class Root>
constexpr bool shared_input() {  // floating point: what is worth keeping (exp, not x > 0)
  if constexpr (std::is_void_v<Root>) {
    return false;
  } else if constexpr (N::kind == NodeKind::map) {
    if constexpr (is_floating_v<typename N::value_type>)
      return folded_on_path<N, Root, D>() && on_output_path<N, Root>();
    else return false;
  } else {
    return false;
  }
}

// The root type that make_eval is told of (void: none needed): a kernel with a fused reduction
// (its shared inputs) or with an anchor (the contraction its epilogue reads).
template <class N, int D>
using shared_root = std::conditional_t<has_fused_reduce<N, D, false>() || has_anchor<N>(), N, void>;

// Visits the shared inputs on the output path of the kernel rooted at Root.
template <int D, class Root, class N, class F>
void for_each_shared(N const& n, F&& f) {
  if constexpr (shared_input<N, D, Root>())
    f(n);
  else if constexpr (N::kind == NodeKind::map)
    for_each_child(n, [&](auto const& c) -> void { for_each_shared<D, Root>(c, f); });
}

// The run-time half: the axes of the kernel's index space along which fused reductions are
// broadcast ("lines"). Each line is computed as: prepare the reductions, then the outputs.
// Empty: every output point is its own line (reduction kernels) or there is no reduction.
template <int D>
struct Lines {
  std::array<bool, D> axis{};  // axis[i]: i runs inside a line
  bool any() const { return std::find(axis.begin(), axis.end(), true) != axis.end(); }
};

// Visits the fused reductions on the path from a kernel's output, skipping breaks (and views
// and shared nodes, whose children are kernels of their own).
template <int D, bool InReduce, class N, class F>
void for_each_fused_reduce(N const& n, F&& f) {
  if constexpr (is_break<N, D, InReduce>()) {
    return;
  } else if constexpr (N::kind == NodeKind::reduce) {
    f(n);
  } else if constexpr (N::kind == NodeKind::map) {
    for_each_child(n, [&](auto const& c) -> void { for_each_fused_reduce<D, InReduce>(c, f); });
  } else if constexpr (N::kind != NodeKind::leaf && N::kind != NodeKind::scalar &&
                       N::kind != NodeKind::view && N::kind != NodeKind::shared) {
    unhandled_kind<N>("for_each_fused_reduce");
  }
}

// Reductions fused into another's input are computed once per output of the outer one:
// their results must not vary along the dims the outer one reduces.
template <class R>
bool nested_reductions_agree(R const& r) {
  constexpr int F = decltype(r.input)::rank;
  auto const& fdom = r.input.shape();
  bool ok = true;
  for_each_fused_reduce<F, true>(r.input, [&](auto const& inner) {
    for (int a : r.axes) ok = ok && (fdom[a] == 1 || inner.shape()[a] == 1);
    ok = ok && nested_reductions_agree(inner);
  });
  return ok;
}

// Whether a reduction nested in r's input (at any depth) folds dims that are not its input's
// last ones; folds_leading_dims: r itself or one nested in it. (Axes are sorted and distinct:
// they are the last ones when the first is F - NA.)
template <class R>
bool folds_leading_dims(R const& r);
template <class R>
bool nested_fold_leading_dims(R const& r) {
  bool leading = false;
  for_each_fused_reduce<decltype(r.input)::rank, true>(r.input, [&](auto const& inner) {
    leading = leading || folds_leading_dims(inner);
  });
  return leading;
}
template <class R>
bool folds_leading_dims(R const& r) {
  return r.axes[0] != decltype(r.input)::rank - R::naxes || nested_fold_leading_dims(r);
}

// Why a kernel cannot run as planned for the shapes it is given. It then runs its other
// compiled variant (a run-time break): every reduction below its root is a kernel of its own,
// and the rest reads their results.
enum class RunTimeBreak {
  none,
  // two fused reductions are broadcast along different dims, or a nested one varies along
  // its outer one's dims: no lines serve them all;
  disagree,
  // a reduction below the root folds leading dims (batch norm's mean(x, 0), the mean inside
  // var(x, 0)): fused, each of its outputs would walk its column with a stride, one at a
  // time; on its own it is a column reduction, and what reads it walks rows.
  leading_dims,
  // a rule of the kernel's device (device_rules: the GPU's few long lines, backend/cuda)
  few_long_lines,
  // the anchor's result is broadcast in its epilogue ([1, N] into [M, N]): the contraction is
  // stored first, and the element-wise rest reads it
  broadcast_anchor,
};

// A device's own reasons to break a kernel at run time: none unless its backend says
// (backend/cuda/executor.hpp). The planner knows no device: this is where one plugs in.
template <class Device>
struct device_rules {
  static constexpr bool may_split = false;  // whether split() can break a kernel
  static constexpr bool fuses_prologue = true;  // see fused_prologue
  template <class N>
  static constexpr bool fuses_epilogue() {  // see fused_epilogue
    return true;
  }
  template <int D, class N>
  static RunTimeBreak split(N const&, Lines<D> const&, Index<D> const&) {
    return RunTimeBreak::none;
  }
};

// The lines of a kernel: every axis along which a fused reduction is broadcast. Each fused
// reduction must have extent 1 on all of them, or its value would vary inside a line. `split`
// says when the kernel breaks instead (RunTimeBreak): the executors do, and explain() says so.
template <int D, bool InReduce, class N>
Lines<D> plan_lines(N const& root, Index<D> const& domain, RunTimeBreak& split) {
  Lines<D> lines;
  bool agree = true, leading = false;
  for_each_fused_reduce<D, InReduce>(root, [&](auto const& r) {
    auto const& s = r.shape();
    for (int i = 0; i < D; ++i)
      if (s[i] == 1 && domain[i] != 1) lines.axis[i] = true;
  });
  for_each_fused_reduce<D, InReduce>(root, [&](auto const& r) {
    auto const& s = r.shape();
    for (int i = 0; i < D; ++i) agree = agree && (!lines.axis[i] || s[i] == 1);
    agree = agree && nested_reductions_agree(r);
    // The root may fold leading dims itself (sum(x, 0): a column reduction), not below it.
    bool root_itself = static_cast<void const*>(&r) == static_cast<void const*>(&root);
    leading = leading || (root_itself ? nested_fold_leading_dims(r) : folds_leading_dims(r));
  });
  split = !agree ? RunTimeBreak::disagree
          : leading ? RunTimeBreak::leading_dims
                    : RunTimeBreak::none;
  if constexpr (!InReduce && !std::is_void_v<typename N::device_type>)
    if (split == RunTimeBreak::none)
      split = device_rules<typename N::device_type>::template split<D>(root, lines, domain);
  return lines;
}

// Whether every reduction fused into a kernel (the root's included) folds, by its type, the last
// `naxes` dims of an input of rank K: then all are broadcast along the same lines and none folds
// leading dims, whatever the shapes.
template <class N, int K, int NAxes, bool InReduce>
constexpr bool trailing_alike();
template <int K, int NAxes, bool InReduce, class... C>
constexpr bool trailing_alike_all(types<C...>) {
  return (true && ... && trailing_alike<C, K, NAxes, InReduce>());
}
template <class N, int K, int NAxes, bool InReduce>
constexpr bool trailing_alike() {
  if constexpr (is_break<N, K, InReduce>()) return true;
  else if constexpr (N::kind == NodeKind::reduce)
    return N::trailing && N::naxes == NAxes && child_t<N>::rank == K &&
           trailing_alike<child_t<N>, K, NAxes, true>();
  else if constexpr (N::kind == NodeKind::map)
    return trailing_alike_all<K, NAxes, InReduce>(typename N::child_types{});
  else if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar ||
                     N::kind == NodeKind::view || N::kind == NodeKind::shared)
    return true;
  else return unhandled_kind<N>("trailing_alike"), false;
}
// The number of dims the first fused reduction of N folds (0: none).
template <class N, int D, bool InReduce>
constexpr int first_naxes();
template <int D, bool InReduce, class... C>
constexpr int first_naxes_of(types<C...>) {
  int n = 0;
  ((n = n ? n : first_naxes<C, D, InReduce>()), ...);
  return n;
}
template <class N, int D, bool InReduce>
constexpr int first_naxes() {
  if constexpr (is_break<N, D, InReduce>()) return 0;
  else if constexpr (N::kind == NodeKind::reduce) return N::naxes;
  else if constexpr (N::kind == NodeKind::map) return first_naxes_of<D, InReduce>(typename N::child_types{});
  else return 0;
}

// Whether the kernel rooted at N can break at run time (RunTimeBreak), so that its executor
// compiles the variant for it. On the host only a reduction fused below the root can, and not
// when all of them fold trailing dims alike by type (layer_norm, softmax<-1>). A device with
// rules of its own (the GPU's few long lines) may break any kernel with a fused reduction.
template <class N>
constexpr bool may_split() {
  constexpr int D = N::rank;
  using Device = rules_device<N>;
  if constexpr (!has_fused_reduce<N, D, false>()) {
    return false;
  } else if constexpr (device_rules<Device>::may_split) {
    return true;
  } else if constexpr (N::kind == NodeKind::reduce) {
    using C = child_t<N>;
    return has_fused_reduce<C, C::rank, true>() &&
           !(N::trailing && trailing_alike<C, C::rank, N::naxes, true>());
  } else {
    return !trailing_alike<N, D, first_naxes<N, D, false>(), false>();
  }
}

// The run-time half of one kernel's plan, computed once from the shapes of its root: the lines,
// whether it breaks at run time, and how much it reads (what decides its threads). The
// executors run it and explain() prints it; neither derives it again.
template <int D>
struct KernelConfig {
  Lines<D> lines;
  RunTimeBreak split = RunTimeBreak::none;
  std::int64_t work = 0;  // values read: the output's, or the largest fused reduction input's
};

// f(anchor) for the contraction a kernel with an anchor is (plan.hpp: has_anchor).
template <int D, class N, class F>
void with_anchor(N const& n, F&& f) {
  if constexpr (N::kind == NodeKind::contract) {
    if constexpr (N::rank == D) f(n);
  } else if constexpr (N::kind == NodeKind::map) {
    for_each_child(n, [&](auto const& c) -> void { with_anchor<D>(c, f); });
  }
}

// Whether the attention pattern that anchors the kernel rooted at `root` (rewrites_attention)
// is rewritten for these shapes.
template <class N>
bool attention_applies(N const& root) {
  bool applies = false;
  with_anchor<N::rank>(root, [&](auto const& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    if constexpr (attention_pattern<A>::value) applies = attention_pattern<A>::applies(a);
  });
  return applies;
}

template <class N>
KernelConfig<N::rank> configure(N const& root) {
  constexpr int D = N::rank;
  KernelConfig<D> c;
  c.lines = plan_lines<D, false>(root, root.shape(), c.split);
  c.work = numel_of<D>(root.shape());
  if constexpr (has_anchor<N>())
    with_anchor<D>(root, [&](auto const& a) {
      if (!same_index<D>(a.shape(), root.shape())) c.split = RunTimeBreak::broadcast_anchor;
    });
  if constexpr (N::kind == NodeKind::reduce) {
    c.work = numel_of<child_t<N>::rank>(root.input.shape());
  } else if (c.split == RunTimeBreak::none) {
    for_each_fused_reduce<D, false>(root, [&](auto const& r) {
      c.work = std::max(c.work, numel_of<decltype(r.input)::rank>(r.input.shape()));
    });
  }
  return c;
}

// ---- The plan's workspace: the results of its kernels but the last, in one block ---------

// f(node) for the node at path P below n; false where an attention rewrite on the way does not
// apply to these shapes (the pattern then runs as written).
template <class N, class F>
bool at_path(N const& n, Path<>, F& f) {
  f(n);
  return true;
}
template <class N, int S, int... R, class F>
bool at_path(N const& n, Path<S, R...>, F& f) {
  if constexpr (S == rewrite_step) return attention_applies(n) && at_path(rewrite_attention(n), Path<R...>{}, f);
  else return at_path(n.template child<static_cast<std::size_t>(S)>(), Path<R...>{}, f);
}
template <class P>
inline constexpr bool through_rewrite = false;
template <int... S>
inline constexpr bool through_rewrite<Path<S...>> = (false || ... || (S == rewrite_step));

// Whether planned kernel K is stored ahead of the assignment's last kernel: all are but a node
// without an id inside the rewritten attention node, a temporary (backend/eval.hpp:
// Materialized finds such nodes by their address).
template <class K>
inline constexpr bool stored_ahead = !through_rewrite<typename K::path> || has_id<typename K::node>;

inline constexpr std::size_t workspace_align = 64;  // each result starts on a cache line
template <class N>
std::size_t workspace_bytes(N const& n) {
  std::size_t const b = static_cast<std::size_t>(numel_of<N::rank>(n.shape())) *
                        sizeof(canonical_t<typename N::value_type>);
  return (b + workspace_align - 1) / workspace_align * workspace_align;
}
// The bytes that planned kernel I of List stores into the workspace (0: not stored ahead).
template <class List, std::size_t I, class N>
std::size_t planned_bytes(N const& root) {
  using K = typename type_at<I, List>::type;
  std::size_t b = 0;
  if constexpr (stored_ahead<K>) {
    auto size = [&](auto const& node) { b = workspace_bytes(node); };
    at_path(root, typename K::path{}, size);
  }
  return b;
}
// The workspace of an assignment of root: the bytes of one block that holds the results of every
// planned kernel but the last (kernel_list).
template <class N, std::size_t... I>
std::size_t plan_workspace(N const& root, std::index_sequence<I...>) {
  return (std::size_t{0} + ... + planned_bytes<kernel_list<N>, I>(root));
}
template <class N>
std::size_t plan_workspace(N const& root) {
  return plan_workspace(root, std::make_index_sequence<kernel_list<N>::size - 1>{});
}

}  // namespace detail
}  // namespace solder
