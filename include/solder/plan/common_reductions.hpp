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
  if constexpr (is_leaf<N>::value) {
    return a.tensor.data() == b.tensor.data() && a.tensor.shape() == b.tensor.shape() &&
           a.tensor.strides() == b.tensor.strides();
  } else if constexpr (is_scalar<N>::value) {
    return std::memcmp(&a.value, &b.value, sizeof a.value) == 0;
  } else if constexpr (is_map<N>::value) {
    bool same_op = false;
    if constexpr (std::is_empty_v<decltype(a.op)>) same_op = true;
    else if constexpr (requires { bool(a.op == b.op); }) same_op = bool(a.op == b.op);
    return same_op && [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (true && ... && same_value(std::get<I>(a.children), std::get<I>(b.children)));
    }(std::make_index_sequence<std::tuple_size_v<decltype(a.children)>>{});
  } else if constexpr (is_reduce<N>::value) {
    return a.id == b.id || (a.axes == b.axes && same_value(a.child, b.child));
  } else {
    return false;
  }
}

// How many nodes of type R the tree of N holds.
template <class R, class N>
constexpr int occurrences() {
  int here = std::is_same_v<R, N> ? 1 : 0;
  if constexpr (is_map<N>::value)
    return here + over_children<N>([](auto c) { return occurrences<R, typename decltype(c)::type>(); });
  else if constexpr (is_reduce<N>::value) return here + occurrences<R, decltype(N::child)>();
  else return here;
}
// How many reductions the tree of N holds.
template <class N>
constexpr int reductions_in() {
  if constexpr (is_map<N>::value)
    return over_children<N>([](auto c) { return reductions_in<typename decltype(c)::type>(); });
  else if constexpr (is_reduce<N>::value) return 1 + reductions_in<decltype(N::child)>();
  else return 0;
}
// Whether the tree of Root holds two reductions of one type (N walks it).
template <class Root, class N = Root>
constexpr bool repeats_a_reduction() {
  if constexpr (is_map<N>::value)
    return over_children<N>([](auto c) { return repeats_a_reduction<Root, typename decltype(c)::type>(); }) > 0;
  else if constexpr (is_reduce<N>::value)
    return occurrences<N, Root>() > 1 || repeats_a_reduction<Root, decltype(N::child)>();
  else return false;
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
  if constexpr (is_map<N>::value) {
    std::apply([&](auto&... c) { (unify_reductions(c, seen), ...); }, n.children);
  } else if constexpr (is_reduce<N>::value) {
    unify_reductions(n.child, seen);
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
