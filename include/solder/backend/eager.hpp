// sd::eager(e): the same maths with one kernel per node and a temporary for every
// intermediate — PyTorch's eager mode, the baseline every benchmark and test compares with.
#pragma once
#include "assign.hpp"

namespace solder {

namespace detail {

template <class N>
auto eager_node(N const& n);
// n over its children's eager results.
template <class N, std::size_t... I>
auto eager_children(N const& n, std::index_sequence<I...>) {
  return n.rebuild(eager_node(n.template child<I>())...);
}

// Each node evaluated on its own, its children first: a tensor (or a number) in its place. A
// shared node's child is evaluated once per eager() call (the scope of Materialized).
template <class N>
auto eager_node(N const& n) {
  if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar) {
    return n;
  } else if constexpr (N::kind == NodeKind::shared) {
    Materialized& scope = *Materialized::current();
    if (auto const* t = scope.find(*n.input)) return as_node(*t);
    materialized_t<N> t = eager_node(*n.input).tensor;
    scope.add(*n.input, t);
    return as_node(t);
  } else if constexpr (N::kind == NodeKind::map || N::kind == NodeKind::reduce ||
                       N::kind == NodeKind::contract) {
    return as_node(eval(eager_children(n, std::make_index_sequence<child_count<N>>{})));
  } else if constexpr (N::kind == NodeKind::view) {
    return as_node(n.apply(eager_node(n.input).tensor));  // a view: no kernel
  } else {
    unhandled_kind<N>("eager");
  }
}

}  // namespace detail

template <Lazy X>
auto eager(X const& x) {
  detail::MaterializedScope scope;
  auto r = detail::eager_node(as_node(x));
  if constexpr (decltype(r)::kind == NodeKind::leaf) {
    if constexpr (TensorType<X>) return r.tensor.clone();  // a bare tensor: still a new one
    else return r.tensor;
  } else {
    return eval(r);
  }
}

}  // namespace solder
