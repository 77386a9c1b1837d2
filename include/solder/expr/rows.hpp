// Row operations, written as compositions of element-wise maps and keepdim reductions over
// the same dim. The planner fuses each into one kernel (rule 2): per row, the reductions are
// prepared, then the row is written.
#pragma once
#include "functions.hpp"
#include "reduce.hpp"

namespace solder {

namespace detail {
// Row ops check their dim themselves, so an error names the op the user wrote.
template <class X>
std::int64_t row_dim(X const& x, std::int64_t dim, char const* op) {
  return wrap_dim(dim, as_node(x).shape(), op);
}
}  // namespace detail

// softmax(x, dim) = exp(x - max) / sum(exp(x - max)): the max keeps exp from overflowing.
template <Lazy X>
auto softmax(X const& x, std::int64_t dim) {
  dim = detail::row_dim(x, dim, "softmax");
  auto shifted = exp(x - max(x, dim, keepdim));
  return shifted * (1.f / sum(shifted, dim, keepdim));
}

template <Lazy X>
auto log_softmax(X const& x, std::int64_t dim) {
  dim = detail::row_dim(x, dim, "log_softmax");
  auto shifted = x - max(x, dim, keepdim);
  return shifted - log(sum(exp(shifted), dim, keepdim));
}

// var(x, dim, correction = 1): sum((x - mean)^2) / (n - correction), as torch.var.
namespace detail {
template <bool Keep, class X>
auto variance(X const& x, std::int64_t dim, double correction) {
  dim = row_dim(x, dim, "var");
  auto centered = x - mean(x, dim, keepdim);
  auto sq = make_reduce<ops::Sum, Keep>(centered * centered, std::array<std::int64_t, 1>{dim});
  using T = typename decltype(sq)::value_type;
  return sq / static_cast<compute_t<T>>(static_cast<double>(sq.count) - correction);
}
}  // namespace detail
template <Lazy X>
auto var(X const& x, std::int64_t dim, double correction = 1) {
  return detail::variance<false>(x, dim, correction);
}
template <Lazy X>
auto var(X const& x, std::int64_t dim, KeepDim, double correction = 1) {
  return detail::variance<true>(x, dim, correction);
}

namespace detail {
template <int R>
std::array<std::int64_t, R> trailing_dims() {
  std::array<std::int64_t, R> d{};
  for (int i = 0; i < R; ++i) d[i] = -R + i;
  return d;
}
}  // namespace detail

// layer_norm over the trailing dims that gamma and beta cover (torch.nn.functional.layer_norm
// with normalized_shape = gamma.shape): biased variance, as PyTorch.
template <Lazy X, Lazy G, Lazy B>
auto layer_norm(X const& x, G const& gamma, B const& beta, double eps = 1e-5) {
  constexpr int K = node_t<G>::rank;
  using T = typename node_t<X>::value_type;
  static_assert(is_floating_v<T>, "solder: layer_norm: the input must be floating point");
  auto mu = detail::make_reduce<ops::Mean, true>(x, detail::trailing_dims<K>());
  auto centered = x - mu;
  auto v = detail::make_reduce<ops::Mean, true>(centered * centered, detail::trailing_dims<K>());
  return centered * rsqrt(v + static_cast<compute_t<T>>(eps)) * gamma + beta;
}

// rms_norm(x, gamma, eps) = x / sqrt(mean(x^2) + eps) * gamma over gamma's trailing dims;
// eps defaults to the dtype's epsilon, as torch.nn.functional.rms_norm.
template <Lazy X, Lazy G>
auto rms_norm(X const& x, G const& gamma,
              double eps = std::numeric_limits<typename node_t<X>::value_type>::epsilon()) {
  constexpr int K = node_t<G>::rank;
  using T = typename node_t<X>::value_type;
  static_assert(is_floating_v<T>, "solder: rms_norm: the input must be floating point");
  auto ms = detail::make_reduce<ops::Mean, true>(x * x, detail::trailing_dims<K>());
  return x * rsqrt(ms + static_cast<compute_t<T>>(eps)) * gamma;
}

}  // namespace solder
