// Storing several results from one kernel (expr/results.hpp): the executor writes a Pack at
// each point through OutPointers, which store its values into their tensors at one offset. The
// tensors share one shape and one set of strides (else the kernel writes contiguous temporaries,
// copied out after it), and every value of a point is computed before any is stored, so an
// input that is exactly one of the outputs (an in-place update: m = b1 * m + (1 - b1) * g) is
// read before it is written, as in a kernel with one result.
#pragma once
#include <tuple>

#include "../expr/memory_format.hpp"
#include "../expr/results.hpp"
#include "assign.hpp"
#include "host/channel_sums.hpp"
#include "host/product_sums.hpp"

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

// ---- Sums in a contraction's epilogue ------------------------------------------------------
//
// sd::assign(std::tie(y, s, ss), c, sd::sum(c, {0, 2, 3}), sd::sum(c * c, {0, 2, 3})), c a
// convolution (or sd::share of one): y takes c (or an element-wise expression over it), s and
// ss its per-channel sums, folded while the convolution's blocks are written
// (host/channel_sums.hpp). A product of matrices the same way, with sums per column (over every
// dim but the last) or per row (host/product_sums.hpp). One kernel; the contraction is computed
// once.

// n with a shared contraction read as the contraction itself: in this kernel it is the anchor,
// whose blocks every use reads.
template <class N>
auto unshare_anchor(N const& n) {
  if constexpr (N::kind == NodeKind::shared) {
    if constexpr (child_t<N>::kind == NodeKind::contract) return *n.input;
    else return n;
  } else if constexpr (N::kind == NodeKind::map) {
    return map_children(n, [](auto const& c) { return unshare_anchor(c); });
  } else {
    return n;
  }
}
template <class X>
using unshared_t = decltype(unshare_anchor(std::declval<node_t<X> const&>()));

// Whether the expressions are a contraction's output (on the first one's element-wise path)
// and reductions of it: the epilogue form, not the one-shape form of results().
template <class X, class... Xs>
constexpr bool sums_in_epilogue() {
  using U = unshared_t<X>;
  if constexpr (U::kind == NodeKind::reduce) return false;
  else return anchors_on_path<U, U::rank>() >= 1 && (false || ... || (node_t<Xs>::kind == NodeKind::reduce));
}

template <class N>
inline constexpr bool is_sum_or_mean = false;
template <class C, int NA, bool K, bool Tr>
inline constexpr bool is_sum_or_mean<Reduce<ops::Sum, C, NA, K, Tr>> = true;
template <class C, int NA, bool K, bool Tr>
inline constexpr bool is_sum_or_mean<Reduce<ops::Mean, C, NA, K, Tr>> = true;

// Whether N, in an epilogue over anchor A, is element-wise over A and materialized inputs: no
// reduction and no other contraction on its element-wise path.
template <class N, class A>
constexpr bool epilogue_over();
template <class A, class... C>
constexpr bool epilogue_over_all(types<C...>) {
  return (true && ... && epilogue_over<C, A>());
}
template <class N, class A>
constexpr bool epilogue_over() {
  if constexpr (N::kind == NodeKind::map) return epilogue_over_all<A>(typename N::child_types{});
  else if constexpr (N::kind == NodeKind::contract) return std::is_same_v<N, A>;
  else if constexpr (N::kind == NodeKind::reduce) return false;
  else if constexpr (N::kind == NodeKind::leaf || N::kind == NodeKind::scalar || N::kind == NodeKind::view ||
                     N::kind == NodeKind::shared)
    return true;
  else return unhandled_kind<N>("epilogue_over"), false;
}

template <class N>
inline constexpr bool is_conv2d = false;
template <class X, class W>
inline constexpr bool is_conv2d<Conv2d<X, W>> = true;
// A product of two matrices (or batches of them): what column and row sums fold over.
template <class N>
inline constexpr bool is_matrix_product = false;
template <class A, class B>
inline constexpr bool is_matrix_product<Contract<A, B>> = A::rank >= 2 && B::rank >= 2;

// Whether the kernel rooted at N is a conv2d with an element-wise epilogue (N's rest): what
// BatchNorm2d's training forward sums in the convolution's epilogue.
template <class N>
constexpr bool anchor_is_conv2d() {
  if constexpr (N::kind == NodeKind::contract) return is_conv2d<N>;
  else if constexpr (N::kind == NodeKind::map)
    return []<class... C>(types<C...>) { return (false || ... || anchor_is_conv2d<C>()); }(typename N::child_types{});
  else return false;
}
template <class N>
constexpr bool conv_anchored() {
  if constexpr (N::kind == NodeKind::reduce || !has_anchor<N>()) return false;
  else return anchor_is_conv2d<N>() && std::is_same_v<typename N::device_type, Host>;
}

// Whether every anchor-typed node on n's element-wise path is the node `id`.
template <int D, class N>
bool reads_only_anchor(N const& n, std::uint64_t id) {
  bool same = true;
  with_anchor<D>(n, [&](auto const& a) { same = same && a.id == id; });
  return same;
}

template <class Y, class... S, class X, class... R>
void assign_epilogue_sums(std::tuple<Y&, S&...> dst, X const& x, R const&... r) {
  using U = unshared_t<X>;
  constexpr int D = U::rank;
  static_assert((true && ... && is_sum_or_mean<node_t<R>>),
                "solder: assign: after a contraction's output, the results are its sums or means (a "
                "convolution's over all dims but the channels, sd::sum(c, {0, 2, 3}); a product's over all "
                "but the last, or over the last), folded while the output is written");
  static_assert(std::is_same_v<typename Y::device_type, Host> && (true && ... && std::is_same_v<typename S::device_type, Host>),
                "solder: assign: sums in a contraction's epilogue run on sd::Host tensors only for now");
  static_assert(Y::rank == D, "solder: assign: the first tensor's rank differs from the contraction's output");
  static_assert(can_store<typename Y::value_type, typename U::value_type> &&
                    (true && ... && can_store<typename S::value_type, typename node_t<R>::value_type>),
                "solder: assign: cannot store a result's element type in its tensor without a narrowing "
                "cast (use sd::cast<T>)");
  static_assert((true && ... && (S::rank == node_t<R>::rank)),
                "solder: assign: a sum's tensor has another rank than the sum");
  if constexpr ((true && ... && is_sum_or_mean<node_t<R>>) && Y::rank == D) {
    Y& y = std::get<0>(dst);
    auto const reds = std::forward_as_tuple(r...);
    // f(reduction, its tensor) for each result after the first, in order.
    auto each = [&](auto const& f) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (f(std::get<I>(reds), std::get<I + 1>(dst)), ...);
      }(std::index_sequence_for<R...>{});
    };
    U const u = unshare_anchor(as_node(x));
    auto const f = std::make_tuple(unshare_anchor(as_node(r).input)...);
    bool done = false;
    with_anchor<D>(u, [&](auto const& anchor) {
      using A = std::remove_cvref_t<decltype(anchor)>;
      static_assert(is_conv2d<A> || is_matrix_product<A>,
                    "solder: assign: sums in a contraction's epilogue run over conv2d's output and a product "
                    "of matrices' (not a pool's, attention's, or a product with a vector)");
      static_assert(epilogue_over<U, A>() && (true && ... && epilogue_over<unshared_t<decltype(as_node(r).input)>, A>()),
                    "solder: assign: the output and the summed expressions must be element-wise over the one "
                    "contraction (another contraction or a reduction in them: sd::share it)");
      if (done) return;  // (the others were checked to be this node)
      done = true;
      check(reads_only_anchor<D>(u, anchor.id) &&
                std::apply([&](auto const&... e) { return (true && ... && reads_only_anchor<D>(e, anchor.id)); }, f),
            "assign: the output and the summed expressions must read one and the same ", anchor.name(),
            " (sd::share it, or use one node)");
      check(same_index<D>(y.shape(), u.shape()), "assign: ", anchor.name(), "'s output of shape ",
            shape_string<D>(u.shape()), " into a tensor of shape ", shape_string<D>(y.shape()));
      check_no_internal_overlap(y, "assign");
      check(!overlaps<D, false>(u, y) && !anchor_overlaps(u, y), "assign: the tensor that takes ", anchor.name(),
            "'s output shares memory with what it reads: write it into a tensor of its own");
      // Per summed expression: the product's column sums (every dim but the last) or row sums.
      std::array<host::SumAxes, sizeof...(R)> kinds{};
      std::int64_t k = 2;  // (the result's number: the output is the first)
      auto check_sum = [&](auto const& red, auto const& dst) {
        using Red = node_t<std::remove_cvref_t<decltype(red)>>;
        auto const& in = as_node(red).input;
        bool const same_space = decltype(as_node(red).input)::rank == D && same_index<D>(in.shape(), u.shape());
        // All dims but `kept`, in order.
        auto all_but = [&](int kept) {
          if constexpr (Red::naxes != D - 1) return false;
          else {
            for (int d = 0, o = 0; d < D; ++d)
              if (d != kept && as_node(red).axes[static_cast<std::size_t>(o++)] != d) return false;
            return true;
          }
        };
        if constexpr (is_conv2d<A>) {
          check(same_space && all_but(D - 3), "assign: result ", k, " (", red.name(),
                ") must reduce an expression of the output's shape ", shape_string<D>(u.shape()),
                " over every dim but the channels (dim ", D - 3, "), as BatchNorm's statistics: sd::", red.name(),
                "(c, {0, 2, 3}) of [N, C, H, W]");
        } else {
          bool const rows = Red::naxes == 1 && as_node(red).axes[0] == D - 1;
          check(same_space && (rows || all_but(D - 1)), "assign: result ", k, " (", red.name(),
                ") must reduce an expression of the output's shape ", shape_string<D>(u.shape()),
                " over every dim but the last (column sums: a linear layer's bias gradient, sd::", red.name(),
                "(p, 0) of [M, N]) or over the last (row sums, sd::", red.name(), "(p, -1))");
          kinds[static_cast<std::size_t>(k - 2)] = rows ? host::SumAxes::rows : host::SumAxes::columns;
        }
        check(same_index<std::remove_cvref_t<decltype(dst)>::rank>(dst.shape(), red.shape()), "assign: result ",
              k, " of shape ", shape_string<std::remove_cvref_t<decltype(dst)>::rank>(red.shape()),
              " into a tensor of shape ", shape_string<std::remove_cvref_t<decltype(dst)>::rank>(dst.shape()));
        check(!may_intersect(dst, y), "assign: result ", k, " is stored into a tensor that shares memory with "
              "the output's");
        check_no_internal_overlap(dst, "assign");
        ++k;
      };
      each(check_sum);
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        auto distinct = [&]<std::size_t B>(std::integral_constant<std::size_t, B>) {
          ((check(B >= I + 1 || !may_intersect(std::get<B>(dst), std::get<I + 1>(dst)), "assign: results ", B + 1,
                  " and ", I + 2, " are stored into tensors that share memory")),
           ...);
        };
        (distinct(std::integral_constant<std::size_t, I + 1>{}), ...);
      }(std::index_sequence_for<S...>{});
      // The kernel, counted and traced as run_kernel's are.
      ++kernels_run();
      Tracer* const traced = tracer();
      if (traced) [[unlikely]] traced->start();
      MaterializedScope scope;
      // Each sum's values, flat in the order of its result's elements.
      std::vector<std::vector<double>> const total = std::apply(
          [&](auto const&... e) {
            if constexpr (is_conv2d<A>) return host::conv2d_channel_sums(anchor, y, u, e...);
            else return host::product_sums(anchor, y, u, kinds, e...);
          },
          f);
      std::size_t i = 0;
      auto store = [&](auto const& red, auto& dst) {
        using Dst = std::remove_cvref_t<decltype(dst)>;
        using Red = node_t<std::remove_cvref_t<decltype(red)>>;
        constexpr int RD = Dst::rank;
        Index<RD> idx{};
        for (double v : total[i]) {
          if constexpr (std::is_same_v<typename Red::op_type, ops::Mean>) v /= static_cast<double>(red.count);
          dst.data()[dot<RD>(idx, dst.strides())] = static_cast<typename Dst::value_type>(v);
          for (int d = RD - 1; d >= 0 && ++idx[d] == dst.shape()[d]; --d) idx[d] = 0;  // the next, row-major
        }
        ++i;
      };
      each(store);
      if (traced) [[unlikely]] {  // the contraction's kind and flops; its output, and what it and the sums read
        KernelCost cost;
        anchor_cost(anchor, cost);
        std::vector<void const*> seen;
        cost.bytes = double(y.numel()) * sizeof(typename Y::value_type) + read_bytes(u, true, seen) +
                     std::apply([&](auto const&... e) { return (0.0 + ... + read_bytes(e, true, seen)); }, f);
        traced->kernel_cost(cost);
        traced->stop_kernel("contraction", anchor.name() + " with sums", shape_string<D>(u.shape()),
                            dtype_label<typename Y::value_type>());
      }
    });
  }
}

}  // namespace solder::detail

namespace solder {

namespace detail {
// The tensor sd::eval(x) makes for x, on its device.
template <class X>
using result_tensor = BasicTensor<canonical_t<typename node_t<X>::value_type>, node_t<X>::static_extents,
                                  typename node_t<X>::device_type>;
// A new tensor for x's value: channels-last where x reads a channels-last tensor.
template <class Y, class X>
Y make_like(X const& x) {
  if constexpr (Y::rank == 4)
    if (reads_channels_last(as_node(x))) return empty_channels_last<Y>(x.shape());
  return Y(x.shape());
}
}  // namespace detail

// sd::assign(std::tie(a, b), ea, eb): ea into a and eb into b, as one kernel (one pass over the
// inputs they read). The expressions have one shape; every value of a point is computed before
// any is stored, so an expression may read a tensor that it or another one writes, at the same
// point (an optimizer's in-place update).
template <class... Dst, Lazy... X>
  requires(sizeof...(Dst) == sizeof...(X) && sizeof...(X) >= 2)
void assign(std::tuple<Dst&...> dst, X const&... x) {
  if constexpr (detail::sums_in_epilogue<X...>()) {
    detail::assign_epilogue_sums(dst, x...);
  } else {
    auto const node = results(x...);
    std::apply([&](Dst&... d) { detail::assign_results(node, d...); }, dst);
  }
}

// sd::eval(ea, eb, ...): the results as new tensors, from one kernel.
template <Lazy X, Lazy... Xs>
  requires(sizeof...(Xs) >= 1)
auto eval(X const& x, Xs const&... xs) {
  if constexpr (detail::sums_in_epilogue<X, Xs...>()) {
    // The output in its input's format (channels-last stays so, as PyTorch's convolutions).
    using Y = BasicTensor<detail::canonical_t<typename node_t<X>::value_type>, dynamic_extents<node_t<X>::rank>(), Host>;
    auto out = std::make_tuple(detail::make_like<Y>(x), detail::result_tensor<Xs>(xs.shape())...);
    std::apply([&](auto&... t) { solder::assign(std::tie(t...), x, xs...); }, out);
    return out;
  } else {
    auto const node = results(x, xs...);
    auto out = std::make_tuple(detail::result_tensor<X>(node.shape()), detail::result_tensor<Xs>(node.shape())...);
    std::apply([&](auto&... t) { detail::assign_results(node, t...); }, out);
    return out;
  }
}

}  // namespace solder
