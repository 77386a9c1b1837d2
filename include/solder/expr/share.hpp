// sd::share(e): a subexpression used more than once (rule 4). Cheap element-wise maths is
// recomputed where it is used (share returns it unchanged); anything else becomes a Shared
// node, materialized once per assignment and read by every use. The node holds its child by
// pointer, so `h + f(h)` holds h once however deep the chain of such blocks: expression types
// and objects grow linearly with a model's depth, never exponentially.
//
// The same node caps the size of a fused kernel: an element-wise or reduction node whose
// operand already fuses max_fusion_size nodes reads it materialized (as Inductor's
// max_fusion_size), so a kernel, and the code the compiler makes of it, stays bounded.
#pragma once
#include <memory>

#include "node.hpp"

namespace solder {

template <class C>
struct Shared : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::shared;
  using child_types = types<C>;
  using value_type = typename C::value_type;
  using device_type = typename C::device_type;
  static constexpr int rank = C::rank;
  static constexpr auto static_extents = C::static_extents;

  std::shared_ptr<C const> input;  // by pointer: copies of the node share one child
  std::uint64_t id = detail::next_node_id();
  char const* why;  // for explain()

  Shared(C c, char const* reason) : input(std::make_shared<C const>(std::move(c))), why(reason) {}
  Index<rank> const& shape() const { return input->shape(); }
  static std::string name() { return "shared"; }
  // The value of a one-element expression (torch's .item()): evaluates it first.
  auto item() const { return eval(*this).item(); }
  template <std::size_t I>
    requires(I == 0)
  C const& child() const {
    return *input;
  }
  template <class K>
  auto rebuild(K const& k) const {
    Shared<node_t<K>> s(as_node(k), why);
    s.id = id;
    return s;
  }
};

namespace detail {

// Nodes a kernel would fuse for N: its maps, reductions and contraction, not those behind a
// Shared node or a view, or a contraction's operands (kernels of their own). (A tree count: a subexpression written twice counts twice.)
template <class N>
constexpr int fused_size();
template <class... C>
constexpr int fused_size_all(types<C...>) {
  return (0 + ... + fused_size<C>());
}
template <class N>
constexpr int fused_size() {
  if constexpr (N::kind == NodeKind::map || N::kind == NodeKind::reduce)
    return 1 + fused_size_all(typename N::child_types{});
  else if constexpr (N::kind == NodeKind::contract)
    return 1;  // its operands are read from memory
  else if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar ||
                     N::kind == NodeKind::view || N::kind == NodeKind::shared)
    return 0;
  else return unhandled_kind<N>("fused_size"), 0;
}

// Element-wise maths over tensors and numbers, no larger than this, is recomputed by each use.
inline constexpr int recompute_max = 16;
inline constexpr int max_fusion_size = 64;

// Whether N is element-wise all through: only maps over tensors and numbers.
template <class N>
constexpr bool elementwise_only();
template <class... C>
constexpr bool elementwise_children(types<C...>) {
  return (true && ... && elementwise_only<C>());
}
template <class N>
constexpr bool elementwise_only() {
  if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar) return true;
  else if constexpr (N::kind == NodeKind::map) return elementwise_children(typename N::child_types{});
  else if constexpr (N::kind == NodeKind::reduce || N::kind == NodeKind::view ||
                     N::kind == NodeKind::shared || N::kind == NodeKind::contract)
    return false;
  else return unhandled_kind<N>("elementwise_only"), false;
}

// An operand of a new node: read materialized where it alone fills a kernel.
template <class C>
decltype(auto) capped(C const& c) {
  if constexpr (fused_size<C>() >= max_fusion_size)
    return Shared<C>(c, "its consumer would fuse more than max_fusion_size (64) nodes");
  else return (c);
}

// What an assignment of n computes: a shared root is its child, stored straight into the tensor.
template <class N>
auto const& stored(N const& n) {
  if constexpr (N::kind == NodeKind::shared) return *n.input;
  else return n;
}

// Whether N holds a contraction other than behind a shared node.
template <class N>
constexpr bool holds_contraction();
template <class... C>
constexpr bool holds_contraction_in(types<C...>) {
  return (false || ... || holds_contraction<C>());
}
template <class N>
constexpr bool holds_contraction() {
  if constexpr (N::kind == NodeKind::contract) return true;
  else if constexpr (N::kind == NodeKind::shared) return false;
  else return holds_contraction_in(typename N::child_types{});
}

}  // namespace detail

template <Lazy X>
auto share(X const& x) {
  using N = node_t<X>;
  if constexpr (detail::elementwise_only<N>() && detail::fused_size<N>() <= detail::recompute_max)
    return N(as_node(x));
  else if constexpr (N::kind == NodeKind::shared)
    return N(x);
  else
    return Shared<N>(as_node(x), "it is shared (sd::share): computed once, read by every use");
}

namespace detail {
// The input of an op that reads it more than once (softmax, var, layer_norm): shared when it
// holds a contraction, which is never computed twice (rule 4); anything else fuses into each
// read, as it did. `why` says so for explain, naming the op (the user shared nothing).
template <class X>
decltype(auto) read_twice(X const& x, char const* why) {
  using N = node_t<X>;
  if constexpr (holds_contraction<N>() && N::kind != NodeKind::shared) return Shared<N>(as_node(x), why);
  else return (x);
}
}  // namespace detail

}  // namespace solder
