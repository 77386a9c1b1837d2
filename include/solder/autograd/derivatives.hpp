// Reverse-mode derivation over expression types: given an expression and the gradient of a
// loss with respect to its value (an expression of its shape, or one that broadcasts to it), the
// gradient with respect to each of its nodes, down to its leaves. Every rule builds expressions,
// so the backward is planned and fused by the same rules as the forward (DESIGN.md §3): the
// gradient that reaches a tensor through a chain of element-wise ops is one expression, one
// kernel where the tensor takes it.
//   * map: each operand gets g * the op's partial derivative in it (Vjp below; the derivative
//     stands beside the op's value in expr/ops.hpp). where routes g to the branch it took, a
//     cast casts g back, comparisons and integer maths carry no gradient.
//   * reduce: sum and mean broadcast g back over the dims they folded; max and min send it to
//     the elements equal to the result, shared evenly among ties (as torch.amax); the row
//     maximum that softmax and log_softmax subtract carries none (they do not depend on it).
//   * view: g is taken back through the view's strides (the view of a gradient buffer of the
//     child's shape, summed where the view repeats an element).
//   * matmul, mm, bmm, linear: g @ b^T and a^T @ g, batch dims summed where they broadcast.
//   * embedding: a scatter-add of g's rows into the weight's, deterministic.
//   * shared: its child, once per use.
// A value the backward reads again (a contraction's operand, a reduction's result) is the
// forward's own node: where the forward stored it in the same scope, it is read, not computed
// again (backend/eval.hpp: Materialized).
#pragma once
#include <type_traits>

#include "../backend/assign.hpp"
#include "../expr/embedding.hpp"
#include "../expr/rows.hpp"

namespace solder {

namespace ops {
// The vector-Jacobian product of a differentiable element-wise op in its operand I: the
// incoming gradient times the op's partial derivative there, at the forward's operands.
template <class Op, int I>
struct Vjp : std::conditional_t<std::is_base_of_v<Heavy, Op>, Transcendental, Floating> {
  static constexpr char const* name = "backward";
  Op op;
  template <class T, class... A>
  SOLDER_HD SOLDER_INLINE constexpr T operator()(T g, A... a) const {
    return g * op.template derivative<I>(a...);
  }
};
}  // namespace ops

namespace detail::autograd {

template <class Op>
concept differentiable_op = requires(Op const& op) { op.template derivative<0>(1.0f); } ||
                            requires(Op const& op) { op.template derivative<0>(1.0f, 1.0f); };

template <class N>
inline constexpr bool floating_node = is_floating_v<typename N::value_type>;

template <class Op>
inline constexpr bool is_cast_op = false;
template <class U>
inline constexpr bool is_cast_op<ops::Cast<U>> = true;

template <class N>
inline constexpr bool is_embedding = false;
template <class I, class W>
inline constexpr bool is_embedding<Embedding<I, W>> = true;

// The reduced result g of reduction n, with the folded dims back as dims of extent 1.
// (A number broadcasts as it is; a tensor is viewed, not copied.)
template <class N, class G>
auto keepdim_form(N const& n, G const& g) {
  if constexpr (N::keepdim || node_t<G>::rank == 0) {
    return as_node(g);
  } else {
    constexpr int F = child_t<N>::rank;
    std::array<std::int64_t, F> keep = n.input.shape();
    for (int a : n.axes) keep[a] = 1;
    if constexpr (node_t<G>::kind == NodeKind::leaf) return as_node(reshape(as_node(g).tensor, keep));
    else return as_node(reshape(g, keep));
  }
}

template <class N, class G, class Ctx>
void backward(N const& n, G const& g, Ctx& ctx);

// The expression with every matrix product shared: stored once by the forward, then read by the
// backward's rules (which need the product itself, where the forward fused it into its
// epilogue and kept only what followed) instead of computed again. A product's element-wise
// rest then runs as a kernel of its own in the forward.
template <class N>
auto saving_products(N const& n) {
  if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar) {
    return n;
  } else {
    auto rebuilt = map_children(n, [](auto const& c) { return saving_products(c); });
    using R = decltype(rebuilt);
    if constexpr (is_matmul<N>) return Shared<R>(std::move(rebuilt), "a product the backward reads: stored once");
    else return rebuilt;
  }
}

// The operands of map n: operand I gets its vector-Jacobian product.
template <class N, class G, class Ctx, std::size_t... I>
void map_operands(N const& n, G const& g, Ctx& ctx, std::index_sequence<I...>) {
  using Op = std::remove_cvref_t<decltype(n.op)>;
  auto one = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    using C = child_t<N, K>;
    if constexpr (C::kind != NodeKind::scalar && floating_node<C>)
      backward(n.template child<K>(), make_map(ops::Vjp<Op, static_cast<int>(K)>{{}, n.op}, g, n.template child<I>()...), ctx);
  };
  (one(std::integral_constant<std::size_t, I>{}), ...);
}

template <class N, class G, class Ctx>
void map_backward(N const& n, G const& g, Ctx& ctx) {
  using Op = std::remove_cvref_t<decltype(n.op)>;
  if constexpr (!floating_node<N>) {
    return;  // comparisons, integer maths: no gradient
  } else if constexpr (std::is_same_v<Op, ops::Where>) {
    using T = typename N::value_type;
    auto const& c = n.template child<0>();
    if constexpr (floating_node<child_t<N, 1>>) backward(n.template child<1>(), where(c, g, T(0)), ctx);
    if constexpr (floating_node<child_t<N, 2>>) backward(n.template child<2>(), where(c, T(0), g), ctx);
  } else if constexpr (is_cast_op<Op>) {
    using C = child_t<N>;
    if constexpr (floating_node<C>) backward(n.template child<0>(), cast<canonical_t<typename C::value_type>>(g), ctx);
  } else {
    static_assert(differentiable_op<Op>, "solder: backward: this element-wise op has no derivative");
    map_operands(n, g, ctx, std::make_index_sequence<child_count<N>>{});
  }
}

// g, of the node's shape, broadcast to it, or of a shape the node's value was broadcast to
// (then summed), as a tensor of exactly that shape.
template <class T, class Device, class G, std::size_t R, class Ctx>
auto exact(G const& g, std::array<std::int64_t, R> const& shape, Ctx& ctx) {
  auto t = zeros<T, Device>(Shape<dynamic_extents<static_cast<int>(R)>()>{shape});
  ctx.accumulate(t, g);
  return t;
}

// The gradient that reaches a node may have the shape of the map that broadcast the node's
// value: for element-wise nodes that is summed where it reaches a tensor (the sum commutes with
// them), but a reduction (or a product, or a view) first needs it summed to its own shape:
// broadcast back over the reduced dims, g must be one value per output.
template <class N, class G, class Ctx>
void reduce_backward(N const& n, G const& g_in, Ctx& ctx) {
  using Op = typename N::op_type;
  using T = typename N::value_type;
  if constexpr (std::is_same_v<Op, ops::RowMax>) {
    return;  // softmax's shift: the result does not depend on it
  } else {
    static_assert(std::is_same_v<Op, ops::Sum> || std::is_same_v<Op, ops::Mean> || std::is_same_v<Op, ops::Max> ||
                      std::is_same_v<Op, ops::Min>,
                  "solder: backward: no derivative for this reduction yet (prod, argmax)");
    auto const g = [&] {
      if constexpr (node_t<G>::rank == 0) return as_node(g_in);  // one number: nothing to sum
      else return exact<canonical_t<T>, typename N::device_type>(g_in, n.shape(), ctx);
    }();
    if constexpr (std::is_same_v<Op, ops::Sum>) {
      backward(n.input, keepdim_form(n, g), ctx);
    } else if constexpr (std::is_same_v<Op, ops::Mean>) {
      backward(n.input, keepdim_form(n, g) * (T(1) / static_cast<T>(n.count)), ctx);
    } else {  // max, min: to the elements equal to the result, shared evenly among ties
      auto const hit = cast<T>(n.input == keepdim_form(n, n));
      std::array<std::int64_t, N::naxes> dims{};
      for (int i = 0; i < N::naxes; ++i) dims[i] = n.axes[i];
      backward(n.input, keepdim_form(n, g) * hit / make_reduce<ops::Sum, true>(hit, dims), ctx);
    }
  }
}

template <class N, class G, class Ctx>
void view_backward(N const& n, G const& g, Ctx& ctx) {
  using C = child_t<N>;
  using T = canonical_t<typename C::value_type>;
  if constexpr (floating_node<C>) {
    auto const gv = exact<canonical_t<typename N::value_type>, typename N::device_type>(g, n.shape(), ctx);
    typename N::input_tensor gc = zeros<T, typename N::device_type>(Shape<dynamic_extents<C::rank>()>{n.input.shape()});
    ctx.accumulate(n.apply(gc), gv);  // back through the view's strides
    backward(n.input, gc, ctx);
  }
}

// a @ b with torch.matmul's shapes: vectors taken as a row (a) or a column (b) of a matrix.
template <class N, class G, class Ctx>
void matmul_backward(N const& n, G const& g, Ctx& ctx) {
  using A = std::remove_cvref_t<decltype(n.a)>;
  using B = std::remove_cvref_t<decltype(n.b)>;
  using T = canonical_t<typename N::value_type>;
  auto const gn = exact<T, typename N::device_type>(g, n.shape(), ctx);
  auto const a = [&] {
    if constexpr (A::rank == 1) return unsqueeze(n.a, 0);
    else return n.a;
  }();
  auto const b = [&] {
    if constexpr (B::rank == 1) return unsqueeze(n.b, -1);
    else return n.b;
  }();
  auto const g2 = [&] {
    if constexpr (A::rank == 1 && B::rank == 1) return reshape(gn, std::array<std::int64_t, 2>{1, 1});
    else if constexpr (A::rank == 1) return unsqueeze(gn, -2);
    else if constexpr (B::rank == 1) return unsqueeze(gn, -1);
    else return gn;
  }();
  if constexpr (floating_node<A>) {
    auto ga = matmul(g2, transpose(b, -1, -2));
    if constexpr (A::rank == 1) backward(n.a, squeeze(ga, -2), ctx);
    else backward(n.a, ga, ctx);
  }
  if constexpr (floating_node<B>) {
    auto gb = matmul(transpose(a, -1, -2), g2);
    if constexpr (B::rank == 1) backward(n.b, squeeze(gb, -1), ctx);
    else backward(n.b, gb, ctx);
  }
}

// embedding(indices, w): each row of g added to the row of w its index picked (a scatter-add,
// deterministic: backend/host/embedding.hpp). On the host so far.
template <class N, class G, class Ctx>
void embedding_backward(N const& n, G const& g, Ctx& ctx) {
  using W = std::remove_cvref_t<decltype(n.weight)>;
  using T = canonical_t<typename N::value_type>;
  using Device = typename N::device_type;
  static_assert(std::is_same_v<Device, Host>, "solder: backward: embedding's derivative runs on the host so far");
  if constexpr (floating_node<W>) {
    auto const gn = exact<T, Device>(g, n.shape(), ctx);
    auto const index = eval(cast<std::int64_t>(n.indices));
    std::int64_t const entries = n.weight.shape()[0], dim = n.weight.shape()[1];
    auto gw = zeros<T, Device>(Shape<dynamic_extents<2>()>{{entries, dim}});
    host::add_rows_at(index.data(), index.numel(), gn.data(), dim, gw.data(), entries);
    backward(n.weight, gw, ctx);
  }
}

template <class N, class G, class Ctx>
void backward(N const& n, G const& g, Ctx& ctx) {
  ctx.keep(g);
  if constexpr (N::kind == NodeKind::leaf) {
    if constexpr (floating_node<N>) ctx.leaf(n.tensor, g);
  } else if constexpr (N::kind == NodeKind::scalar) {
    return;
  } else if constexpr (N::kind == NodeKind::shared) {
    backward(*n.input, g, ctx);
  } else if constexpr (N::kind == NodeKind::map) {
    map_backward(n, g, ctx);
  } else if constexpr (N::kind == NodeKind::reduce) {
    reduce_backward(n, g, ctx);
  } else if constexpr (N::kind == NodeKind::view) {
    view_backward(n, g, ctx);
  } else if constexpr (is_matmul<N>) {
    matmul_backward(n, g, ctx);
  } else if constexpr (is_embedding<N>) {
    embedding_backward(n, g, ctx);
  } else {
    static_assert(sizeof(N) == 0,
                  "solder: backward: no derivative for this node yet (conv2d, the pools and attention have "
                  "none so far)");
  }
}

}  // namespace detail::autograd

}  // namespace solder
