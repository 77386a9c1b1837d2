// The node protocol, and the leaves of every expression (a tensor, a scalar).
//
// Every node has: value_type, rank, static_extents, shape() (computed and checked when the
// node is built, so a bad shape throws at the line that wrote it), a name for explain(), and
// the three things every walk over an expression reads (DESIGN.md §2, expr/):
//   kind          NodeKind: what the planner makes of it (leaf, scalar, map, reduce, view,
//                 shared, contract)
//   child_types   types<C...>: its children, in order; child<I>() returns the I-th
//   rebuild(c...) the same node over other children (the same op, dims, view; the same id)
// A walk dispatches on kind and handles every kind it can meet; a kind it does not handle is
// a compile error (detail::unhandled_kind, whose instantiation context names the node and the
// walk), never a silent leaf.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/tensor.hpp"

namespace solder {

namespace detail {
struct ExprTag {};  // base of every expression node, so concepts can recognise them
}  // namespace detail

template <class E>
concept Expr = std::is_base_of_v<detail::ExprTag, std::remove_cvref_t<E>>;

enum class NodeKind {
  leaf,    // a tensor
  scalar,  // a C++ number
  map,     // element-wise maths over its children (rule 1)
  reduce,  // a reduction: a kernel anchor with an id (rule 2)
  view,    // a view (reshape, permute, ...) of an expression that holds an anchor
  shared,  // a subexpression used more than once, materialized once (sd::share)
  contract,  // a matrix product: a kernel anchor with an id whose consumers are its epilogue (rule 3)
};

template <class... C>
struct types {
  static constexpr std::size_t size = sizeof...(C);
};

namespace detail {

template <class N>
inline constexpr bool always_false = false;
// The else-branch of every walk: a node kind it does not handle stops the build here, and the
// instantiation context names the node.
template <class N>
constexpr void unhandled_kind(char const*) {
  static_assert(always_false<N>,
                "solder: a walk over an expression met a node kind it does not handle (see the "
                "node type in the instantiation context)");
}

// The identity of a kernel anchor (a reduction, a contraction, a shared subexpression) across the copies of
// the expressions that hold it: one node used twice is computed once (rule 4).
inline std::uint64_t next_node_id() {
  static std::atomic<std::uint64_t> n{0};
  return ++n;
}

template <class N>
inline constexpr std::size_t child_count = N::child_types::size;

template <std::size_t I, class L>
struct type_at;
template <std::size_t I, class H, class... T>
struct type_at<I, types<H, T...>> : type_at<I - 1, types<T...>> {};
template <class H, class... T>
struct type_at<0, types<H, T...>> {
  using type = H;
};
// The type of child I of node N (a reduction's or a view's input: child_t<N>).
template <class N, std::size_t I = 0>
using child_t = typename type_at<I, typename N::child_types>::type;

// f(child) for each child of n, in order; index sequences, not std::apply: a recursive walk
// then costs few template instantiation levels per node, so deep expressions compile.
template <class N, class F, std::size_t... I>
void for_each_child_in(N const& n, F& f, std::index_sequence<I...>) {
  (f(n.template child<I>()), ...);
}
template <class N, class F>
void for_each_child(N const& n, F&& f) {
  for_each_child_in(n, f, std::make_index_sequence<child_count<N>>{});
}
template <class N, class F, std::size_t... I>
void for_each_child_mut_in(N& n, F& f, std::index_sequence<I...>) {
  (f(n.template child<I>()), ...);
}
template <class N, class F>
void for_each_child_mut(N& n, F&& f) {  // for walks that update nodes in place (ids)
  for_each_child_mut_in(n, f, std::make_index_sequence<child_count<N>>{});
}
// Whether f(child) holds for any child (evaluated in order, stopping at the first).
template <class N, class F, std::size_t... I>
bool any_child_in(N const& n, F& f, std::index_sequence<I...>) {
  return (false || ... || f(n.template child<I>()));
}
template <class N, class F>
bool any_child(N const& n, F&& f) {
  return any_child_in(n, f, std::make_index_sequence<child_count<N>>{});
}
// n rebuilt over f(child) for each child.
template <class N, class F, std::size_t... I>
auto map_children_in(N const& n, F& f, std::index_sequence<I...>) {
  return n.rebuild(f(n.template child<I>())...);
}
template <class N, class F>
auto map_children(N const& n, F&& f) {
  return map_children_in(n, f, std::make_index_sequence<child_count<N>>{});
}

// The one child of a reduction or a view (its input), and the protocol's access to it.
template <class C>
struct OneInput {
  C input;
  template <std::size_t I>
    requires(I == 0)
  C const& child() const {
    return input;
  }
  template <std::size_t I>
    requires(I == 0)
  C& child() {
    return input;
  }
};

}  // namespace detail

template <class T, auto E, class Device = Host>
struct Leaf : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::leaf;
  using child_types = types<>;
  using value_type = T;
  using device_type = Device;
  static constexpr int rank = rank_of<E>;
  static constexpr auto static_extents = E;
  BasicTensor<T, E, Device> tensor;  // shares the storage: an expression keeps its inputs alive

  explicit Leaf(BasicTensor<T, E, Device> t) : tensor(std::move(t)) {}
  Index<rank> const& shape() const { return tensor.shape(); }
  static std::string name() { return "input"; }
};

// A C++ number in an expression: a "wrapped number" for type promotion (core/dtype.hpp).
template <class T>
struct Scalar : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::scalar;
  using child_types = types<>;
  using value_type = T;
  using device_type = void;  // passed by value to a kernel on any device
  static constexpr int rank = 0;
  static constexpr auto static_extents = Extents<0>{};
  T value;
  explicit Scalar(T v) : value(v) {}
  Index<0> shape() const { return {}; }
  static std::string name() { return "scalar"; }
};

namespace detail {

// The device an expression runs on: that of its tensors (void for a lone number). Mixing
// devices in one expression is a compile error (expr/map.hpp).
template <class... D>
struct device_join {
  using type = void;
};
template <class D0, class... D>
struct device_join<D0, D...> {
  using type = std::conditional_t<std::is_void_v<D0>, typename device_join<D...>::type, D0>;
};
template <class... D>
constexpr bool devices_agree() {
  using J = typename device_join<D...>::type;
  return (true && ... && (std::is_void_v<D> || std::is_same_v<D, J>));
}

}  // namespace detail

// Anything an op accepts: an expression node, a tensor, or a C++ number.
template <class X>
concept Operand = Expr<X> || TensorType<X> || Element<std::remove_cvref_t<X>>;
template <class X>
concept Lazy = Expr<X> || TensorType<X>;  // at least one of these makes an op lazy

// Turns any operand into a node.
template <class X>
decltype(auto) as_node(X const& x) {
  if constexpr (Expr<X>) return x;  // by reference: no copy of the tree
  else if constexpr (TensorType<X>)
    return Leaf<typename X::value_type, X::static_extents, typename X::device_type>(x);
  else return Scalar<X>(x);
}

template <class X>
using node_t = std::remove_cvref_t<decltype(as_node(std::declval<X const&>()))>;

}  // namespace solder
