// The leaves of every expression (a tensor, a scalar) and the traits the planner folds over.
// Every node has: value_type, rank, static_extents, shape() (computed and checked when the
// node is built, so a bad shape throws at the line that wrote it) and a name for explain().
#pragma once
#include <string>
#include <type_traits>

#include "../core/tensor.hpp"

namespace solder {

template <class T, auto E, class Device = Host>
struct Leaf : detail::ExprTag {
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

template <class N>
struct is_leaf : std::false_type {};
template <class T, auto E, class D>
struct is_leaf<Leaf<T, E, D>> : std::true_type {};
template <class N>
struct is_scalar : std::false_type {};
template <class T>
struct is_scalar<Scalar<T>> : std::true_type {};

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
