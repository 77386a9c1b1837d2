// The planner: a compile-time fold over an expression's type that cuts it into kernels
// (DESIGN.md §3), plus the run-time half that only shapes can decide (which axes a fused
// reduction's consumers run along). Backends build their evaluators from these answers.
#pragma once
#include <algorithm>
#include <array>
#include <string>
#include <type_traits>

#include "../expr/reduce.hpp"

namespace solder {

namespace detail {

// A key that tells types apart at run time (no RTTI): the address of a static per type.
template <class T>
void const* type_key() {
  static char const key = 0;
  return &key;
}

template <class N>
struct is_reduce : std::false_type {};
template <class Op, class C, int NA, bool K>
struct is_reduce<Reduce<Op, C, NA, K>> : std::true_type {};
template <class N>
struct is_map : std::false_type {};
template <class Op, class... C>
struct is_map<Map<Op, C...>> : std::true_type {};

// f(std::type_identity<C>{}) summed over the children C of the map node N (a bool counts 1).
template <class N, class F>
constexpr int over_children(F f) {
  return [&]<class... C>(std::tuple<C...> const*) {
    return (0 + ... + static_cast<int>(f(std::type_identity<C>{})));
  }(static_cast<decltype(N::children) const*>(nullptr));
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
template <class N, int D, bool InReduce, bool Split = false>
constexpr bool is_break() {
  if constexpr (is_reduce<N>::value)
    return Split || (InReduce ? !(N::keepdim && N::rank == D) : N::rank != D);
  else return false;
}

template <class N, int D, bool InReduce>
std::string break_reason() {
  if constexpr (InReduce)
    return std::string(N::name()) +
           " inside another reduction's input is not keepdim over the same index space";
  else
    return std::string(N::name()) + " result (rank " + std::to_string(N::rank) +
           ") is broadcast into a kernel of rank " + std::to_string(D);
}

// Kernels that the breaks below N add to the kernel N belongs to.
template <class N, int D, bool InReduce>
constexpr int kernels_below();

template <class N>
constexpr int kernels_of() {
  if constexpr (is_reduce<N>::value)
    return 1 + kernels_below<decltype(N::child), decltype(N::child)::rank, true>();
  else return 1 + kernels_below<N, N::rank, false>();
}

template <class N, int D, bool InReduce>
constexpr int kernels_below() {
  if constexpr (is_break<N, D, InReduce>()) {
    return kernels_of<N>();
  } else if constexpr (is_reduce<N>::value) {
    return kernels_below<decltype(N::child), decltype(N::child)::rank, true>();
  } else if constexpr (is_map<N>::value) {
    return over_children<N>([](auto c) {
      return kernels_below<typename decltype(c)::type, D, InReduce>();
    });
  } else {
    return 0;
  }
}

// Whether the kernel N belongs to (evaluated in an index space of rank D) has an op whose maths
// costs more than moving its operands (ops::Heavy). Breaks are kernels of their own.
template <class N, int D, bool InReduce>
constexpr bool heavy_maths() {
  if constexpr (is_break<N, D, InReduce>())
    return false;
  else if constexpr (is_reduce<N>::value)
    return heavy_maths<decltype(N::child), decltype(N::child)::rank, true>();
  else if constexpr (is_map<N>::value)
    return std::is_base_of_v<ops::Heavy, decltype(N::op)> || over_children<N>([](auto c) {
             return heavy_maths<typename decltype(c)::type, D, InReduce>();
           }) > 0;
  else return false;
}

}  // namespace detail

// How many kernels evaluating E takes: a compile-time constant (DESIGN.md §1).
template <class E>
inline constexpr int kernel_count = detail::kernels_of<node_t<E>>();

namespace detail {

// Whether hit(type_identity<M>) holds for Root or a node below it through map nodes: the
// kernel's output path, outside reductions. (Only reductions are breaks.)
template <class Root, class Hit>
constexpr bool on_output_path(Hit hit) {
  if constexpr (std::is_void_v<Root>) return false;
  else if constexpr (is_map<Root>::value)
    return hit(std::type_identity<Root>{}) || over_children<Root>([hit](auto c) {
             return on_output_path<typename decltype(c)::type>(hit);
           }) > 0;
  else return hit(std::type_identity<Root>{});
}
// Element-wise values that a kernel would compute twice: a map node that a fused reduction on
// the output path folds and that the output path also uses outside any reduction (softmax's
// exp(x - max), in the sum and in the quotient). The host computes them once per line: the
// reduction records its input and the other use reads it back, when run-time checks find both
// on the same line (backend/host/evaluators.hpp). Root is the kernel's root; void: none.
template <class N, int D, class Root>
constexpr bool shared_input() {  // floating point: what is worth keeping (exp, not x > 0)
  if constexpr (is_map<N>::value && is_floating_v<typename N::value_type>) {
    constexpr bool folded = on_output_path<Root>([](auto m) {
      using M = typename decltype(m)::type;
      if constexpr (is_reduce<M>::value && !is_break<M, D, false>())
        return std::is_same_v<decltype(M::child), N>;
      else return false;
    });
    constexpr bool used = on_output_path<Root>([](auto m) {
      return std::is_same_v<typename decltype(m)::type, N>;
    });
    return folded && used;
  } else {
    return false;
  }
}
// Whether a reduction is fused below N (N evaluated in an index space of rank D).
template <class N, int D, bool InReduce>
constexpr bool has_fused_reduce() {
  if constexpr (is_break<N, D, InReduce>()) return false;
  else if constexpr (is_reduce<N>::value) return true;
  else if constexpr (is_map<N>::value)
    return over_children<N>([](auto c) {
      return has_fused_reduce<typename decltype(c)::type, D, InReduce>();
    }) > 0;
  else return false;
}

// Visits the shared inputs on the output path of the kernel rooted at Root.
template <int D, class Root, class N, class F>
void for_each_shared(N const& n, F&& f) {
  if constexpr (shared_input<N, D, Root>())
    f(n);
  else if constexpr (is_map<N>::value)
    std::apply([&](auto const&... c) { (for_each_shared<D, Root>(c, f), ...); }, n.children);
}

// The run-time half: the axes of the kernel's index space along which fused reductions are
// broadcast ("lines"). Each line is computed as: prepare the reductions, then the outputs.
// Empty: every output point is its own line (reduction kernels) or there is no reduction.
template <int D>
struct Lines {
  std::array<bool, D> axis{};  // axis[i]: i runs inside a line
  bool any() const { return std::find(axis.begin(), axis.end(), true) != axis.end(); }
};

// Visits the fused reductions on the path from a kernel's output, skipping breaks.
template <int D, bool InReduce, class N, class F>
void for_each_fused_reduce(N const& n, F&& f) {
  if constexpr (is_break<N, D, InReduce>()) {
    return;
  } else if constexpr (is_reduce<N>::value) {
    f(n);
  } else if constexpr (is_map<N>::value) {
    std::apply([&](auto const&... c) { (for_each_fused_reduce<D, InReduce>(c, f), ...); },
               n.children);
  }
}

// Reductions fused into another's input are computed once per output of the outer one:
// their results must not vary along the dims the outer one reduces.
template <class R>
bool nested_reductions_agree(R const& r) {
  constexpr int F = decltype(r.child)::rank;
  auto const& fdom = r.child.shape();
  bool ok = true;
  for_each_fused_reduce<F, true>(r.child, [&](auto const& inner) {
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
  for_each_fused_reduce<decltype(r.child)::rank, true>(r.child, [&](auto const& inner) {
    leading = leading || folds_leading_dims(inner);
  });
  return leading;
}
template <class R>
bool folds_leading_dims(R const& r) {
  return r.axes[0] != decltype(r.child)::rank - R::naxes || nested_fold_leading_dims(r);
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
  // on the GPU, a kernel with few lines folds a long input (softmax over [4, 10^7], the var of
  // a vector, sqrt(mean(x * x))): a block per line would leave most of the GPU idle, so each
  // reduction runs on its own, over all of the GPU (device-wide when it folds all dims, in
  // chunks otherwise), and the rest reads their results.
  few_long_lines,
};

// What few long lines are for that break: fewer lines than this, with a fold of at least
// long_line_min values (a block per line would use fewer than 1 in 16 of an H100's blocks).
inline constexpr std::int64_t few_lines = 64;
inline constexpr std::int64_t long_line_min = 1 << 16;

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
  if constexpr (!InReduce && std::is_same_v<typename N::device_type, Cuda>) {
    std::int64_t longest = 0, outer = 1;
    for_each_fused_reduce<D, false>(root, [&](auto const& r) { longest = std::max(longest, r.count); });
    for (int i = 0; i < D; ++i)
      if (!lines.axis[i]) outer *= domain[i];
    if (outer < few_lines && longest >= long_line_min) split = RunTimeBreak::few_long_lines;
  }
  return lines;
}

}  // namespace detail
}  // namespace solder
