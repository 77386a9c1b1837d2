// sd::eager(e): the same maths with one kernel per node and a temporary for every
// intermediate — PyTorch's eager mode, the baseline every benchmark and test compares with.
#pragma once
#include "plan.hpp"

namespace solder {

namespace detail {

template <class N>
auto eager_node(N const& n) {
  if constexpr (is_leaf<N>::value || is_scalar<N>::value) {
    return n;
  } else if constexpr (is_map<N>::value) {
    auto m = std::apply([&](auto const&... c) { return make_map(n.op, eager_node(c)...); },
                        n.children);
    return as_node(eval(m));
  } else {
    static_assert(is_reduce<N>::value);
    std::array<std::int64_t, N::naxes> dims{};
    for (int i = 0; i < N::naxes; ++i) dims[i] = n.axes[i];
    using Op = typename N::op_type;
    auto child = eager_node(n.child);
    return as_node(eval(Reduce<Op, decltype(child), N::naxes, N::keepdim>(child, dims)));
  }
}

template <class N>
constexpr int eager_kernels() {
  if constexpr (is_map<N>::value)
    return []<class... C>(std::tuple<C...> const*) {
      return (1 + ... + eager_kernels<C>());
    }(static_cast<decltype(N::children) const*>(nullptr));
  else if constexpr (is_reduce<N>::value) return 1 + eager_kernels<decltype(N::child)>();
  else return 0;
}

}  // namespace detail

// Kernels the eager baseline launches for E: one per element-wise or reduction node.
template <class E>
inline constexpr int eager_kernel_count = detail::eager_kernels<node_t<E>>();

template <Lazy X>
auto eager(X const& x) {
  auto r = detail::eager_node(as_node(x));
  if constexpr (detail::is_leaf<decltype(r)>::value) {
    if constexpr (TensorType<X>) return r.tensor.clone();  // a bare tensor: still a new one
    else return r.tensor;
  } else {
    return eval(r);
  }
}

}  // namespace solder
