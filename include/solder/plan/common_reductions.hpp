// Common reductions: rule 4 for reductions written apart. Two reductions of one type that
// compute the same value (the same op over the same dims of the same tensors, through the same
// element-wise ops) get one id, so a kernel folds it once and a break materializes it once.
// Batch norm written as (x - mean(x, 0, keepdim)) * rsqrt(var(x, 0, keepdim) + eps) has two
// such means: var builds its own.
//
// The comparison is exact and conservative: tensors match by data pointer, shape and strides
// (expressions are lazy, so equal views read equal values), numbers bit for bit, ops that carry
// state only when they compare equal. Only an expression whose type holds two reductions of one
// type pays for it (a copy of the tree and the comparisons), once per assignment.
#pragma once
#include <array>
#include <cstring>
#include <tuple>
#include <utility>

#include "plan.hpp"

namespace solder::detail {

template <class N>
bool same_value(N const& a, N const& b) {
  if constexpr (N::kind == NodeKind::leaf) {
    return a.tensor.data() == b.tensor.data() && a.tensor.shape() == b.tensor.shape() &&
           a.tensor.strides() == b.tensor.strides();
  } else if constexpr (N::kind == NodeKind::scalar) {
    return std::memcmp(&a.value, &b.value, sizeof a.value) == 0;
  } else if constexpr (N::kind == NodeKind::map) {
    bool same_op = false;
    if constexpr (std::is_empty_v<decltype(a.op)>) same_op = true;
    else if constexpr (requires { bool(a.op == b.op); }) same_op = bool(a.op == b.op);
    return same_op && [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (true && ... && same_value(a.template child<I>(), b.template child<I>()));
    }(std::make_index_sequence<child_count<N>>{});
  } else if constexpr (N::kind == NodeKind::reduce) {
    return a.id == b.id || (a.axes == b.axes && same_value(a.input, b.input));
  } else if constexpr (N::kind == NodeKind::view) {
    return false;  // its function's arguments cannot be compared: never merged
  } else if constexpr (N::kind == NodeKind::shared || N::kind == NodeKind::contract) {
    return a.id == b.id;
  } else {
    unhandled_kind<N>("common reductions");
    return false;
  }
}

// How many nodes of type R the tree of N holds, and how many reductions. Not those behind a
// shared node: it is evaluated on its own, and its child is not copied with the tree.
template <class R, class N>
constexpr int occurrences();
template <class R, class... C>
constexpr int occurrences_in(types<C...>) {
  return (0 + ... + occurrences<R, C>());
}
template <class R, class N>
constexpr int occurrences() {
  if constexpr (N::kind == NodeKind::shared) return 0;
  else return (std::is_same_v<R, N> ? 1 : 0) + occurrences_in<R>(typename N::child_types{});
}
template <class N>
constexpr int reductions_in();
template <class... C>
constexpr int reductions_in_all(types<C...>) {
  return (0 + ... + reductions_in<C>());
}
template <class N>
constexpr int reductions_in() {
  if constexpr (N::kind == NodeKind::shared) return 0;
  else return (N::kind == NodeKind::reduce ? 1 : 0) + reductions_in_all(typename N::child_types{});
}
// Whether the tree of Root holds two reductions of one type (N walks it).
template <class Root, class N = Root>
constexpr bool repeats_a_reduction();
template <class Root, class... C>
constexpr bool repeats_in(types<C...>) {
  return (false || ... || repeats_a_reduction<Root, C>());
}
template <class Root, class N>
constexpr bool repeats_a_reduction() {
  if constexpr (N::kind == NodeKind::shared) return false;
  else if constexpr (N::kind == NodeKind::reduce && occurrences<N, Root>() > 1) return true;
  else return repeats_in<Root>(typename N::child_types{});
}

struct SeenReduction {
  void const* type;
  void const* node;
  std::uint64_t id;
};
template <int Capacity>
struct SeenReductions {
  std::array<SeenReduction, Capacity> at;
  int n = 0;
};
// Gives each reduction the id of an earlier one of its type with the same value. Inner
// reductions first, so outer ones compare them by id.
template <class N, int Capacity>
void unify_reductions(N& n, SeenReductions<Capacity>& seen) {
  if constexpr (N::kind != NodeKind::shared) {  // (a shared node's child is not copied)
    for_each_child_mut(n, [&](auto& c) -> void { unify_reductions(c, seen); });
    if constexpr (N::kind == NodeKind::reduce) {
      for (int k = 0; k < seen.n; ++k) {
        SeenReduction const& s = seen.at[static_cast<std::size_t>(k)];
        if (s.type == type_key<N>() && same_value(*static_cast<N const*>(s.node), n)) {
          n.id = s.id;
          return;
        }
      }
      seen.at[static_cast<std::size_t>(seen.n++)] = {type_key<N>(), &n, n.id};
    }
  }
}

// f(root), where equal reductions share one id: a copy of root when its type can hold such.
template <class N, class F>
decltype(auto) with_common_reductions(N const& root, F&& f) {
  if constexpr (repeats_a_reduction<N>()) {
    N copy = root;
    SeenReductions<reductions_in<N>()> seen;
    unify_reductions(copy, seen);
    return f(std::as_const(copy));
  } else {
    return f(root);
  }
}

}  // namespace solder::detail
