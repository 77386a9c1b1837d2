// The leaves of every expression (a tensor, a scalar) and the traits the planner folds over.
// Every node has: value_type, rank, static_extents, shape() (computed and checked when the
// node is built, so a bad shape throws at the line that wrote it) and a name for explain().
#pragma once
#include <string>
#include <type_traits>

#include "../core/tensor.hpp"

namespace solder {

template <class T, auto E>
struct Leaf : detail::ExprTag {
  using value_type = T;
  static constexpr int rank = rank_of<E>;
  static constexpr auto static_extents = E;
  BasicTensor<T, E, Host> tensor;  // shares the storage: an expression keeps its inputs alive

  explicit Leaf(BasicTensor<T, E, Host> t) : tensor(std::move(t)) {}
  Index<rank> const& shape() const { return tensor.shape(); }
  static std::string name() { return "input"; }
};

// A C++ number in an expression: a "wrapped number" for type promotion (core/dtype.hpp).
template <class T>
struct Scalar : detail::ExprTag {
  using value_type = T;
  static constexpr int rank = 0;
  static constexpr auto static_extents = Extents<0>{};
  T value;
  explicit Scalar(T v) : value(v) {}
  Index<0> shape() const { return {}; }
  static std::string name() { return "scalar"; }
};

namespace detail {

template <class N>
struct is_leaf : std::false_type {};
template <class T, auto E>
struct is_leaf<Leaf<T, E>> : std::true_type {};
template <class N>
struct is_scalar : std::false_type {};
template <class T>
struct is_scalar<Scalar<T>> : std::true_type {};

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
  else if constexpr (TensorType<X>) return Leaf<typename X::value_type, X::static_extents>(x);
  else return Scalar<X>(x);
}

template <class X>
using node_t = std::remove_cvref_t<decltype(as_node(std::declval<X const&>()))>;

}  // namespace solder
