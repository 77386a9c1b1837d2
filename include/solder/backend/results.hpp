// Storing several results from one kernel (expr/results.hpp): the executor writes a Pack at
// each point through OutPointers, which store its values into their tensors at one offset. The
// tensors share one shape and one set of strides (else the kernel writes contiguous temporaries,
// copied out after it), and every value of a point is computed before any is stored, so an
// input that is exactly one of the outputs (an in-place update: m = b1 * m + (1 - b1) * g) is
// read before it is written, as in a kernel with one result.
#pragma once
#include <tuple>

#include "../expr/results.hpp"
#include "assign.hpp"

namespace solder::detail {

// The element pointers of several outputs of one shape and strides, moved together (on the
// host and in CUDA kernels).
template <class... T>
struct OutPointers {
  std::tuple<T*...> p;

  struct Point {
    std::tuple<T*...> p;
    SOLDER_HD SOLDER_INLINE void operator=(Pack<T...> const& v) const {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((*std::get<I>(p) = std::get<I>(v.values)), ...);
      }(std::index_sequence_for<T...>{});
    }
  };
  SOLDER_HD SOLDER_INLINE OutPointers operator+(std::int64_t o) const {
    return {[&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<T*...>(std::get<I>(p) + o...);
    }(std::index_sequence_for<T...>{})};
  }
  SOLDER_HD SOLDER_INLINE Point operator[](std::int64_t j) const { return {(*this + j).p}; }
};
template <class... T>
struct out_value<OutPointers<T...>> {
  using type = Pack<T...>;
};
// The host executor's prefetch of an output run, for each output.
template <class... T>
void prefetch_run(OutPointers<T...> const& out, std::int64_t n, bool write) {
  std::apply([&](T*... q) { (solder::detail::prefetch_run(q, n, write), ...); }, out.p);
}

// What the planned kernels write into: the tensors of several results, seen as one output
// (rank, shape, strides, device) whose elements are packs.
template <int R, class Device, class... Dst>
class ResultTensors {
 public:
  static constexpr int rank = R;
  static constexpr auto static_extents = dynamic_extents<R>();
  using value_type = Pack<typename Dst::value_type...>;
  using device_type = Device;

  explicit ResultTensors(Dst&... d) : dst_(d...) {}
  Index<R> const& shape() const { return std::get<0>(dst_).shape(); }
  Index<R> const& strides() const { return std::get<0>(dst_).strides(); }
  OutPointers<typename Dst::value_type...> data() const {
    return {std::apply([](Dst&... d) { return std::tuple<typename Dst::value_type*...>(d.data()...); }, dst_)};
  }

 private:
  std::tuple<Dst&...> dst_;
};

// Whether two tensors' memory may intersect (their first to last element's bytes).
template <class A, class B>
bool may_intersect(A const& a, B const& b) {
  if (!same_storage(a.storage(), b.storage()) || a.numel() == 0 || b.numel() == 0) return false;
  auto const sa = byte_span(a), sb = byte_span(b);
  return sa[0] < sb[1] && sb[0] < sa[1];
}

// Stores the results node into the tensors `dst`, one kernel (and the kernels of its breaks).
template <class N, class... Dst>
void assign_results(N const& node, Dst&... dst) {
  constexpr int R = N::rank;
  static_assert(is_results<N>);
  static_assert((true && ... && (Dst::rank == R)),
                "solder: assign: the number of tensors and their ranks must match the results");
  using Device = typename N::device_type;
  static_assert((true && ... && std::is_same_v<typename Dst::device_type, Device>),
                "solder: assign: results are stored into tensors on the device the expressions run on");
  static_assert(!has_anchor<N>(),
                "solder: assign: a contraction cannot be one of several results yet (materialize it "
                "first, or assign it on its own)");
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    using Values = types<typename child_t<N, I>::value_type...>;
    static_assert((true && ... && can_store<typename Dst::value_type, typename type_at<I, Values>::type>),
                  "solder: assign: cannot store a result's element type in its tensor without a "
                  "narrowing cast (use sd::cast<T>)");
    static_assert((true && ... && assignable(Dst::static_extents, child_t<N, I>::static_extents)),
                  "solder: assign: static extents of a result and its tensor differ");
  }(std::index_sequence_for<Dst...>{});
  ((check(same_index<R>(node.shape(), dst.shape()), "assign: results of shape ", shape_string<R>(node.shape()),
          " into a tensor of shape ", shape_string<R>(dst.shape())),
    check_no_internal_overlap(dst, "assign")),
   ...);
  auto const all = std::forward_as_tuple(dst...);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto distinct = [&]<std::size_t A>(std::integral_constant<std::size_t, A>) {
      ((check(A >= I || !may_intersect(std::get<A>(all), std::get<I>(all)), "assign: results ", A, " and ", I,
              " are stored into tensors that share memory")),
       ...);
    };
    (distinct(std::integral_constant<std::size_t, I>{}), ...);
  }(std::index_sequence_for<Dst...>{});
  with_common_reductions(node, [&](auto const& n) {
    auto const& first = std::get<0>(all);
    bool const direct = (true && ... && same_index<R>(dst.strides(), first.strides())) &&
                        !(false || ... || overlaps<R, false>(n, dst));
    if (direct) {
      ResultTensors<R, Device, Dst...> out(dst...);
      run_plan(out, n);
      return;
    }
    // Other strides, or an input that overlaps an output other than as its very view: every
    // value is computed into contiguous tensors first, then copied out.
    std::tuple<BasicTensor<typename Dst::value_type, dynamic_extents<R>(), Device>...> tmp{
        BasicTensor<typename Dst::value_type, dynamic_extents<R>(), Device>(node.shape())...};
    std::apply(
        [&](auto&... t) {
          ResultTensors<R, Device, std::remove_cvref_t<decltype(t)>...> out(t...);
          run_plan(out, n);
        },
        tmp);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (run_kernel(dst, Leaf<typename Dst::value_type, dynamic_extents<R>(), Device>(std::get<I>(tmp))), ...);
    }(std::index_sequence_for<Dst...>{});
  });
}

}  // namespace solder::detail

namespace solder {

namespace detail {
// The tensor sd::eval(x) makes for x, on its device.
template <class X>
using result_tensor = BasicTensor<canonical_t<typename node_t<X>::value_type>, node_t<X>::static_extents,
                                  typename node_t<X>::device_type>;
}  // namespace detail

// sd::assign(std::tie(a, b), ea, eb): ea into a and eb into b, as one kernel (one pass over the
// inputs they read). The expressions have one shape; every value of a point is computed before
// any is stored, so an expression may read a tensor that it or another one writes, at the same
// point (an optimizer's in-place update).
template <class... Dst, Lazy... X>
  requires(sizeof...(Dst) == sizeof...(X) && sizeof...(X) >= 2)
void assign(std::tuple<Dst&...> dst, X const&... x) {
  auto const node = results(x...);
  std::apply([&](Dst&... d) { detail::assign_results(node, d...); }, dst);
}

// sd::eval(ea, eb, ...): the results as new tensors, from one kernel.
template <Lazy X, Lazy... Xs>
  requires(sizeof...(Xs) >= 1)
auto eval(X const& x, Xs const&... xs) {
  auto const node = results(x, xs...);
  auto out = std::make_tuple(detail::result_tensor<X>(node.shape()), detail::result_tensor<Xs>(node.shape())...);
  std::apply([&](auto&... t) { detail::assign_results(node, t...); }, out);
  return out;
}

}  // namespace solder
