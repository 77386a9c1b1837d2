// Several results from one kernel (DESIGN.md §3, rule 6): expressions over one iteration space,
// assigned together (sd::assign(std::tie(a, b), ea, eb)) or evaluated together
// (sd::eval(ea, eb)), are the children of one element-wise node whose value at each point is
// the pack of theirs. The planner plans that node as it plans any other, so the expressions
// fuse into one kernel: an element-wise update of several tensors reads each input once, a
// mean and a variance of one tensor fold it in one pass. The executor stores each value of the
// pack into its own tensor (backend/results.hpp).
#pragma once
#include <array>
#include <string>
#include <tuple>

#include "map.hpp"

namespace solder {

// The values of one point of a kernel with several results, one per result.
template <class... T>
struct Pack {
  std::tuple<T...> values;

  Pack() = default;
  SOLDER_HD SOLDER_INLINE constexpr explicit Pack(T... v) : values(v...) {}
  // Each value converted to the type of the tensor it is stored in (assign checks that none
  // narrows).
  template <class... U>
    requires(sizeof...(U) == sizeof...(T))
  SOLDER_HD SOLDER_INLINE constexpr explicit Pack(Pack<U...> const& p)
      : values(std::apply([](U const&... u) { return std::tuple<T...>(static_cast<T>(u)...); }, p.values)) {}

  static std::string dtype_label() {  // (core/dtype.hpp)
    std::string s;
    ((s += (s.empty() ? "" : ", ") + std::string(dtype_name<T>())), ...);
    return s;
  }
};

namespace ops {
// The functor of the node: packs its operands' values, each keeping its own type.
template <class... T>
struct Results {
  static constexpr char const* name = "results";
  static constexpr int value_args_from = static_cast<int>(sizeof...(T)) - 1;  // (none promoted)
  template <class P>
  using compute = P;
  template <class P>
  using result = Pack<T...>;
  template <class... A>
  SOLDER_HD SOLDER_INLINE constexpr Pack<T...> operator()(A... a) const {
    return Pack<T...>(static_cast<T>(a)...);
  }
};
}  // namespace ops

namespace detail {

template <class N>
inline constexpr bool is_results = false;
template <class... T, class... C>
inline constexpr bool is_results<Map<ops::Results<T...>, C...>> = true;

// Whether static extents agree wherever both are static (several results: one shape, no
// broadcasting between them).
template <auto A, auto B, int R>
constexpr bool static_extents_agree() {
  for (int i = 0; i < R; ++i)
    if (A[i] != dyn && B[i] != dyn && A[i] != B[i]) return false;
  return true;
}

}  // namespace detail

// The lazy node of several results over one iteration space: every expression has the same
// rank and shape (results are not broadcast against each other). kernel_count and explain
// read it as any expression; sd::assign(std::tie(...), e...) and sd::eval(e...) evaluate it.
template <Lazy X, Lazy... Xs>
auto results(X const& x, Xs const&... xs) {
  static_assert(sizeof...(Xs) >= 1, "solder: results: give two expressions or more");
  constexpr int R = node_t<X>::rank;
  static_assert((true && ... && (node_t<Xs>::rank == R)),
                "solder: results: the expressions' ranks differ (several results are one iteration "
                "space, of one shape)");
  if constexpr ((true && ... && (node_t<Xs>::rank == R))) {
    static_assert((true && ... &&
                   detail::static_extents_agree<node_t<X>::static_extents, node_t<Xs>::static_extents, R>()),
                  "solder: results: static extents of the expressions differ (several results are "
                  "one iteration space, of one shape)");
    auto node = make_map(ops::Results<detail::canonical_t<typename node_t<X>::value_type>,
                                      detail::canonical_t<typename node_t<Xs>::value_type>...>{},
                         x, xs...);
    std::apply(
        [&](auto const&... c) {
          bool const same = (true && ... && same_index<R>(c.shape(), node.shape()));
          if (!same) {
            std::string shapes;
            ((shapes += (shapes.empty() ? "" : " and ") + std::string(shape_string<R>(c.shape()))), ...);
            detail::fail("results: expressions of shapes ", shapes,
                         ": several results are one iteration space, of one shape (they are not "
                         "broadcast against each other)");
          }
        },
        node.children);
    return node;
  }
}

}  // namespace solder
