// Views of expressions (transpose, permute, slice, narrow, select, unsqueeze, expand, reshape, view, squeeze,
// flatten). Two cases, decided from the expression's type:
// * element-wise all through (rule 1): the view is pushed down to every tensor it reads, after
//   broadcasting each to the expression's shape, so it stays one fused kernel;
// * holding a kernel anchor (a reduction), or a view that cannot be pushed down (reshape): a
//   View node. Its child is materialized by its own kernel(s), and the view is taken of that
//   result without a copy, then read by the consuming kernel like any tensor (rule 5: explain
//   names it as a break).
#pragma once
#include <array>
#include <cstdint>
#include <type_traits>

#include "../core/views.hpp"
#include "map.hpp"

namespace solder {

namespace detail {

// A tensor of `shape` that views take their shapes from: contiguous, as a materialized result
// is, over a placeholder that is never read (a view only computes with its address).
template <class T, int R, class Device>
auto shape_probe(Index<R> const& shape) {
  alignas(64) static unsigned char placeholder[64];
  using P = BasicTensor<T, dynamic_extents<R>(), Device>;
  return P::template make_view<R>(std::shared_ptr<T>(), reinterpret_cast<T*>(placeholder), shape,
                                  contiguous_strides<R>(shape));
}

}  // namespace detail

// View<C, F, KeepsOrder>: the tensor view F (a function from the materialized child to a view of
// it) of an expression C that holds a kernel anchor. KeepsOrder: F only regroups the child's
// elements in their order (squeeze, unsqueeze, flatten, reshape, view), so the child can be
// written straight into a contiguous tensor seen with the child's shape (backend/assign.hpp).
template <class C, class F, bool KeepsOrder = false>
struct View : detail::ExprTag, detail::OneInput<C> {
  static constexpr NodeKind kind = NodeKind::view;
  static constexpr bool keeps_order = KeepsOrder;
  using child_types = types<C>;
  using device_type = typename C::device_type;
  // The child's result, as materialize() makes it (backend/assign.hpp).
  using input_tensor = BasicTensor<detail::canonical_t<typename C::value_type>,
                                   dynamic_extents<C::rank>(), device_type>;
  using result_tensor = std::remove_cvref_t<std::invoke_result_t<F const&, input_tensor const&>>;
  using value_type = typename result_tensor::value_type;
  static constexpr int rank = result_tensor::rank;
  // What the view makes of a tensor with the child's static extents: a view whose dims are
  // known at compile time (transpose<0, 1>, t) carries them, so a contraction checks them.
  static constexpr auto static_extents =
      std::remove_cvref_t<std::invoke_result_t<F const&, BasicTensor<typename input_tensor::value_type, C::static_extents,
                                                                     device_type> const&>>::static_extents;

  using detail::OneInput<C>::input;
  F view;
  char const* op;  // the view the user wrote, for explain()
  Index<rank> shape_;

  View(C c, F f, char const* name)
      : detail::OneInput<C>{std::move(c)}, view(std::move(f)), op(name) {
    using T = typename input_tensor::value_type;
    shape_ = view(detail::shape_probe<T, C::rank, device_type>(input.shape())).shape();
  }
  Index<rank> const& shape() const { return shape_; }
  std::string name() const { return op; }
  // The value of a one-element expression (torch's .item()): evaluates it first.
  auto item() const { return eval(*this).item(); }
  // The view of the child's materialized result: no copy.
  result_tensor apply(input_tensor const& t) const { return view(t); }

  template <class K>
  auto rebuild(K const& k) const {
    return View<node_t<K>, F, KeepsOrder>(as_node(k), view, op);
  }
};

namespace detail {

// Applies a tensor view to every input of an element-wise expression of shape `full` (static
// extents Full), after broadcasting each input to that shape (so the view means the same for
// all). An input whose static extents are Full, all known, has that shape already: the view is
// taken of it as it is, and keeps what is static.
template <auto Full, class N, std::size_t R, class F>
auto push_view(N const& n, std::array<std::int64_t, R> const& full, F const& f) {
  if constexpr (N::kind == NodeKind::leaf) {
    if constexpr (same_static_extents(N::static_extents, Full))
      return as_node(f(n.tensor));
    else return as_node(f(expand(n.tensor, full)));
  } else if constexpr (N::kind == NodeKind::scalar) {
    return n;
  } else if constexpr (N::kind == NodeKind::map) {
    return map_children(n, [&](auto const& c) { return push_view<Full>(c, full, f); });
  } else {
    unhandled_kind<N>("push_view");
  }
}

// The view f (named `name`) of the expression x: pushed down where x is element-wise and
// `pushable` (a view that needs no copy of a broadcast input), else a View node; a view of a
// View composes with it, so the child is materialized once.
template <bool Pushable, bool KeepsOrder, class X, class F>
auto view_expr(X const& x, F f, char const* name) {
  using N = node_t<X>;
  if constexpr (Pushable && elementwise_only<N>()) {
    return push_view<N::static_extents>(x, x.shape(), f);
  } else if constexpr (N::kind == NodeKind::view) {
    auto both = [inner = x.view, f](auto const& t) { return f(inner(t)); };
    return View<std::remove_cvref_t<decltype(x.input)>, decltype(both), KeepsOrder && N::keeps_order>(
        x.input, both, name);
  } else {
    return View<N, F, KeepsOrder>(as_node(x), f, name);
  }
}

}  // namespace detail

template <Expr X>
auto transpose(X const& x, std::int64_t d0, std::int64_t d1) {
  return detail::view_expr<true, false>(x, [=](auto const& t) { return transpose(t, d0, d1); }, "transpose");
}
template <int D0, int D1, Expr X>
auto transpose(X const& x) {
  return detail::view_expr<true, false>(x, [](auto const& t) { return transpose<D0, D1>(t); }, "transpose");
}
// t(x): torch.t — a 2-d operand transposed, with its static extents; 0-d and 1-d as they are.
template <Expr X>
  requires(X::rank <= 2)
auto t(X const& x) {
  if constexpr (X::rank == 2) return transpose<0, 1>(x);
  else return x;
}
template <Expr X>
auto permute(X const& x, std::array<std::int64_t, X::rank> const& dims) {
  return detail::view_expr<true, false>(x, [=](auto const& t) { return permute(t, dims); }, "permute");
}
template <Expr X>
auto slice(X const& x, std::int64_t dim, std::int64_t start, std::int64_t end,
           std::int64_t step = 1) {
  return detail::view_expr<true, false>(
      x, [=](auto const& t) { return slice(t, dim, start, end, step); }, "slice");
}
template <Expr X>
auto narrow(X const& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  return detail::view_expr<true, false>(
      x, [=](auto const& t) { return narrow(t, dim, start, length); }, "narrow");
}
template <Expr X>
auto select(X const& x, std::int64_t dim, std::int64_t index) {
  return detail::view_expr<true, false>(x, [=](auto const& t) { return select(t, dim, index); }, "select");
}
template <Expr X>
auto unsqueeze(X const& x, std::int64_t dim) {
  return detail::view_expr<true, true>(x, [=](auto const& t) { return unsqueeze(t, dim); }, "unsqueeze");
}
template <Expr X>
auto squeeze(X const& x, std::int64_t dim) {
  return detail::view_expr<true, true>(x, [=](auto const& t) { return squeeze(t, dim); }, "squeeze");
}
template <Expr X, std::size_t N>
auto expand(X const& x, std::array<std::int64_t, N> const& shape) {
  return detail::view_expr<true, false>(x, [=](auto const& t) { return expand(t, shape); }, "expand");
}
// Reshapes: a broadcast input has no contiguous layout to reshape, so these always read the
// expression's materialized result.
template <Expr X, std::size_t N>
auto reshape(X const& x, std::array<std::int64_t, N> const& shape) {
  return detail::view_expr<false, true>(x, [=](auto const& t) { return reshape(t, shape); }, "reshape");
}
template <Expr X, std::size_t N>
auto view(X const& x, std::array<std::int64_t, N> const& shape) {
  return detail::view_expr<false, true>(x, [=](auto const& t) { return view(t, shape); }, "view");
}
// Sizes as a braced list, as PyTorch is called, on tensors and expressions: expand(x, {3, 4}),
// reshape(x, {2, -1}), view(x, {6}).
template <Lazy X, std::size_t N>
auto expand(X const& x, std::int64_t const (&shape)[N]) {
  return expand(x, std::to_array(shape));
}
template <Lazy X, std::size_t N>
auto reshape(X const& x, std::int64_t const (&shape)[N]) {
  return reshape(x, std::to_array(shape));
}
template <Lazy X, std::size_t N>
auto view(X const& x, std::int64_t const (&shape)[N]) {
  return view(x, std::to_array(shape));
}
template <int Start = 0, int End = -1, Expr X>
auto flatten(X const& x) {
  return detail::view_expr<false, true>(x, [](auto const& t) { return flatten<Start, End>(t); }, "flatten");
}

}  // namespace solder
