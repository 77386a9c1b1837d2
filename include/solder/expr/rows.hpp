// Row operations, written as compositions of element-wise maps and keepdim reductions over
// the same dim. The planner fuses each into one kernel (rule 2): per row, the reductions are
// prepared, then the row is written.
#pragma once
#include "functions.hpp"
#include "reduce.hpp"

namespace solder {

namespace detail {
// Why a matrix product under a row op is stored first (explain: "materialized because ...").
inline constexpr char const* read_by_row_op =
    "the row op reading it (softmax, log_softmax, var, layer_norm or rms_norm) reads it twice, its statistics "
    "then each value, and a matrix product is computed once, not once per read";

// Row ops check their dim themselves, so an error names the op the user wrote.
template <class X>
std::int64_t row_dim(X const& x, std::int64_t dim, char const* op) {
  return wrap_dim(dim, as_node(x).shape(), op);
}
}  // namespace detail

namespace ops {
// The row maximum softmax shifts by. A row over an empty dim has no outputs to shift, so, unlike
// max(x, dim), it is no error: softmax over an empty dim is an empty tensor, as in PyTorch.
struct RowMax : Max {
  static constexpr bool needs_elements = false;
};
}  // namespace ops

namespace detail {
template <bool Trailing = false, class X>
auto row_max(X const& x, std::int64_t dim) {
  return make_reduce<ops::RowMax, true>(x, std::array<std::int64_t, 1>{dim},
                                        std::bool_constant<Trailing>{});
}
template <int Dim, class X>
constexpr bool is_last_dim() {
  constexpr int R = node_t<X>::rank;
  static_assert(Dim >= -R && Dim < R, "solder: softmax / log_softmax: the static dim is out of range");
  return Dim == -1 || Dim == R - 1;
}
}  // namespace detail

// softmax(x, dim) = exp(x - max) / sum(exp(x - max)): the max keeps exp from overflowing.
template <Lazy X>
auto softmax(X const& in, std::int64_t dim) {
  dim = detail::row_dim(in, dim, "softmax");
  decltype(auto) x = detail::read_twice(in, detail::read_by_row_op);
  auto shifted = exp(x - detail::row_max(x, dim));
  return make_map(ops::SoftmaxScale{}, shifted, 1.f / sum(shifted, dim, keepdim));
}

template <Lazy X>
auto log_softmax(X const& in, std::int64_t dim) {
  dim = detail::row_dim(in, dim, "log_softmax");
  decltype(auto) x = detail::read_twice(in, detail::read_by_row_op);
  auto shifted = x - detail::row_max(x, dim);
  return shifted - log(sum(exp(shifted), dim, keepdim));
}

// softmax<Dim>(x), log_softmax<Dim>(x): the dim known at compile time. Over the last dim the
// kernel needs no run-time break variant: less to compile, the same code run.
template <int Dim, Lazy X>
auto softmax(X const& in) {
  constexpr bool last = detail::is_last_dim<Dim, X>();
  decltype(auto) x = detail::read_twice(in, detail::read_by_row_op);
  auto shifted = exp(x - detail::row_max<last>(x, Dim));
  return make_map(ops::SoftmaxScale{}, shifted, 1.f / sum<Dim>(shifted, keepdim));
}
template <int Dim, Lazy X>
auto log_softmax(X const& in) {
  constexpr bool last = detail::is_last_dim<Dim, X>();
  decltype(auto) x = detail::read_twice(in, detail::read_by_row_op);
  auto shifted = x - detail::row_max<last>(x, Dim);
  return shifted - log(sum<Dim>(exp(shifted), keepdim));
}

// var(x, dims, correction = 1): sum((x - mean)^2) / max(0, n - correction), as torch.var: NaN
// over an empty dim (0 / 0), and where n <= correction.
namespace detail {
template <bool Keep, class X, std::size_t N>
auto variance(X const& in, std::array<std::int64_t, N> const& dims, double correction) {
  decltype(auto) x = read_twice(in, detail::read_by_row_op);
  auto centered = x - make_reduce<ops::Mean, true>(x, dims);
  auto sq = make_reduce<ops::Sum, Keep>(centered * centered, dims);
  using T = typename decltype(sq)::value_type;
  double divisor = std::max(0.0, static_cast<double>(sq.count) - correction);
  return sq / static_cast<compute_t<T>>(divisor);
}
template <bool Keep, class X>
auto variance(X const& x, std::int64_t dim, double correction) {
  return variance<Keep>(x, std::array<std::int64_t, 1>{row_dim(x, dim, "var")}, correction);
}
}  // namespace detail
template <Lazy X>
auto var(X const& x) {  // over every dim
  return detail::variance<false>(x, detail::all_dims<node_t<X>::rank>(), 1);
}
template <Lazy X>
auto var(X const& x, std::int64_t dim, double correction = 1) {
  return detail::variance<false>(x, dim, correction);
}
template <Lazy X>
auto var(X const& x, std::int64_t dim, KeepDim, double correction = 1) {
  return detail::variance<true>(x, dim, correction);
}
template <Lazy X, std::size_t N>
auto var(X const& x, int const (&dims)[N], double correction = 1) {
  return detail::variance<false>(x, detail::dims_of(dims), correction);
}
template <Lazy X, std::size_t N>
auto var(X const& x, int const (&dims)[N], KeepDim, double correction = 1) {
  return detail::variance<true>(x, detail::dims_of(dims), correction);
}

namespace detail {
template <int R>
std::array<std::int64_t, R> trailing_dims() {
  std::array<std::int64_t, R> d{};
  for (int i = 0; i < R; ++i) d[i] = -R + i;
  return d;
}

// gamma's (and beta's) shape must be the trailing dims of x's, the normalized shape, as
// PyTorch checks: it must not broadcast into them.
template <class X, class P>
void check_normalized(char const* op, char const* param, X const& x, P const& p) {
  constexpr int R = node_t<X>::rank, K = node_t<P>::rank;
  static_assert(K >= 1 && K <= R,
                "solder: layer_norm / rms_norm: the weights must have 1 to rank(x) dims");
  Index<R> const xs = as_node(x).shape();  // (copies: a tensor's node is a temporary)
  Index<K> const ps = as_node(p).shape();
  bool same = true;
  for (int i = 0; i < K; ++i) same = same && ps[i] == xs[R - K + i];
  detail::check(same, op, ": ", param, " of shape ", shape_string<K>(ps),
                " does not match the trailing dims of the input of shape ", shape_string<R>(xs));
}
}  // namespace detail

// layer_norm over the trailing dims that gamma and beta cover (torch.nn.functional.layer_norm
// with normalized_shape = gamma.shape): biased variance, as PyTorch.
template <Lazy X, Lazy G, Lazy B>
auto layer_norm(X const& in, G const& gamma, B const& beta, double eps = 1e-5) {
  constexpr int K = node_t<G>::rank;
  using T = typename node_t<X>::value_type;
  static_assert(is_floating_v<T>, "solder: layer_norm: the input must be floating point");
  static_assert(node_t<B>::rank == K, "solder: layer_norm: gamma and beta must have the same rank");
  detail::check_normalized("layer_norm", "gamma", in, gamma);
  detail::check_normalized("layer_norm", "beta", in, beta);
  decltype(auto) x = detail::read_twice(in, detail::read_by_row_op);
  auto mu = detail::make_reduce<ops::Mean, true>(x, detail::trailing_dims<K>(), std::true_type{});
  auto centered = x - mu;
  auto v = detail::make_reduce<ops::Mean, true>(centered * centered, detail::trailing_dims<K>(),
                                                std::true_type{});
  return centered * rsqrt(v + static_cast<compute_t<T>>(eps)) * gamma + beta;
}

// rms_norm(x, gamma, eps) = x / sqrt(mean(x^2) + eps) * gamma over gamma's trailing dims;
// eps defaults to the dtype's epsilon, as torch.nn.functional.rms_norm.
template <Lazy X, Lazy G>
auto rms_norm(X const& in, G const& gamma,
              double eps = std::numeric_limits<typename node_t<X>::value_type>::epsilon()) {
  constexpr int K = node_t<G>::rank;
  using T = typename node_t<X>::value_type;
  static_assert(is_floating_v<T>, "solder: rms_norm: the input must be floating point");
  detail::check_normalized("rms_norm", "gamma", in, gamma);
  decltype(auto) x = detail::read_twice(in, detail::read_by_row_op);
  auto ms = detail::make_reduce<ops::Mean, true>(x * x, detail::trailing_dims<K>(), std::true_type{});
  return x * rsqrt(ms + static_cast<compute_t<T>>(eps)) * gamma;
}

}  // namespace solder
