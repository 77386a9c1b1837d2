// Map<Op, Children...>: an element-wise node (unary, binary, ternary) with NumPy broadcasting.
// Never a kernel of its own: it is inlined into whichever kernel consumes it (rule 1).
#pragma once
#include <algorithm>
#include <tuple>

#include "node.hpp"
#include "ops.hpp"
#include "share.hpp"

namespace solder {

namespace detail {

template <class Op>
constexpr int value_args_from() {
  if constexpr (requires { Op::value_args_from; }) return Op::value_args_from;
  else return 0;
}

// PyTorch's result_type over the value operands: tensors first, then wrapped numbers.
template <class Acc, class... C>
struct tensor_promotion {
  using type = Acc;
};
template <class Acc, class C, class... Rest>
struct tensor_promotion<Acc, C, Rest...> {
  using v = typename C::value_type;
  using next = typename std::conditional_t<
      C::kind == NodeKind::scalar, std::type_identity<Acc>,
      std::conditional_t<std::is_void_v<Acc>, std::type_identity<v>, promote<Acc, v>>>::type;
  using type = typename tensor_promotion<next, Rest...>::type;
};
template <class Acc, class... C>
struct with_scalars {
  using type = Acc;
};
template <class Acc, class C, class... Rest>
struct with_scalars<Acc, C, Rest...> {
  using next = typename std::conditional_t<C::kind == NodeKind::scalar,
                                           promote_with_scalar<Acc, typename C::value_type>,
                                           std::type_identity<Acc>>::type;
  using type = typename with_scalars<next, Rest...>::type;
};
template <class... C>
struct value_promotion {
  using t = typename tensor_promotion<void, C...>::type;
  using base = std::conditional_t<std::is_void_v<t>, promote_t<typename C::value_type...>, t>;
  using type = typename with_scalars<base, C...>::type;
};

template <class Tuple, std::size_t From, class Seq>
struct drop_front;
template <class... C, std::size_t From, std::size_t... I>
struct drop_front<std::tuple<C...>, From, std::index_sequence<I...>> {
  using type = typename value_promotion<std::tuple_element_t<From + I, std::tuple<C...>>...>::type;
};

// The first message of a static shape error names the op and both extents (DESIGN.md §5).
template <class Op, auto A, auto B>
constexpr void check_broadcast() {
  static_assert(broadcastable(A, B),
                "solder: element-wise op: operand shapes cannot be broadcast together");
}

template <class... C>
constexpr auto map_extents() {
  constexpr int R = std::max({0, C::rank...});
  Extents<R> r{};
  for (int i = 0; i < R; ++i) r.e[i] = 1;
  ((r = broadcast_extents(r, C::static_extents)), ...);
  return r;
}

template <class Op, class First, class... C>
constexpr bool check_all_broadcast() {
  (check_broadcast<Op, First::static_extents, C::static_extents>(), ...);
  return true;
}

// Folds one operand's shape into the broadcast shape; false if they are incompatible.
template <int R, std::size_t N>
bool broadcast_into(Index<R>& acc, std::array<std::int64_t, N> const& s) {
  constexpr int RC = static_cast<int>(N);
  for (int i = 0; i < RC; ++i) {
    std::int64_t& a = acc[R - RC + i];
    if (a == 1) a = s[i];
    else if (s[i] != 1 && s[i] != a) return false;
  }
  return true;
}

}  // namespace detail

template <class Op, class... C>
struct Map : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::map;
  using child_types = types<C...>;
  using promoted =
      typename detail::drop_front<std::tuple<C...>, detail::value_args_from<Op>(),
                                  std::make_index_sequence<sizeof...(C) -
                                                           detail::value_args_from<Op>()>>::type;
  using compute_type = compute_t<typename Op::template compute<promoted>>;
  using value_type = typename Op::template result<promoted>;
  using device_type = typename detail::device_join<typename C::device_type...>::type;
  static constexpr int rank = std::max({0, C::rank...});
  static_assert(detail::devices_agree<typename C::device_type...>(),
                "solder: element-wise op: operands live on different devices (sd::Host and "
                "sd::Cuda): move one with .to<sd::Cuda>() or .to<sd::Host>()");
  static_assert(sizeof...(C) < 2 || detail::check_all_broadcast<Op, C...>());
  static constexpr auto static_extents = detail::map_extents<C...>();

  Op op;
  std::tuple<C...> children;
  Index<rank> shape_;

  Map(Op o, C... c) : op(o), children(std::move(c)...) {
    shape_.fill(1);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      if ((true && ... && detail::broadcast_into<rank>(shape_, child<I>().shape()))) return;
      std::string shapes;
      ((shapes += (I ? " and " : "") + std::string(shape_string<C::rank>(child<I>().shape()))), ...);
      detail::fail(Op::name, ": shapes ", shapes, " cannot be broadcast together");
    }(std::index_sequence_for<C...>{});
  }
  Index<rank> const& shape() const { return shape_; }
  static std::string name() { return Op::name; }
  // The value of a one-element expression (torch's .item()): evaluates it first.
  auto item() const { return eval(*this).item(); }
  template <std::size_t I>
  auto const& child() const {
    return std::get<I>(children);
  }
  template <std::size_t I>
  auto& child() {
    return std::get<I>(children);
  }
  template <class... K>
  auto rebuild(K const&... k) const;  // the same op over other operands (make_map, below)
};

namespace detail {
template <class Op, class... C>
auto map_of(Op op, C const&... c) {
  return Map<Op, std::remove_cvref_t<C>...>(op, c...);
}
}  // namespace detail

template <class Op, class... X>
auto make_map(Op op, X const&... x) {
  return detail::map_of(op, detail::capped(as_node(x))...);
}

template <class Op, class... C>
template <class... K>
auto Map<Op, C...>::rebuild(K const&... k) const {
  return make_map(op, k...);
}

}  // namespace solder
