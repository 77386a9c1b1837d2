// The element-wise vocabulary users write: operators and PyTorch-named functions. Each builds
// a Map node; nothing runs until the expression is assigned or evaluated.
#pragma once
#include "map.hpp"

namespace solder {

#define SOLDER_BINARY_OPERATOR(sym, Op)                        \
  template <Operand A, Operand B>                              \
    requires(Lazy<A> || Lazy<B>)                               \
  auto operator sym(A const& a, B const& b) {                  \
    return make_map(ops::Op{}, a, b);                          \
  }
SOLDER_BINARY_OPERATOR(+, Add)
SOLDER_BINARY_OPERATOR(-, Sub)
SOLDER_BINARY_OPERATOR(*, Mul)
SOLDER_BINARY_OPERATOR(/, Div)
SOLDER_BINARY_OPERATOR(==, Eq)
SOLDER_BINARY_OPERATOR(!=, Ne)
SOLDER_BINARY_OPERATOR(<, Lt)
SOLDER_BINARY_OPERATOR(<=, Le)
SOLDER_BINARY_OPERATOR(>, Gt)
SOLDER_BINARY_OPERATOR(>=, Ge)
#undef SOLDER_BINARY_OPERATOR

#define SOLDER_BINARY_FUNCTION(fn, Op)      \
  template <Operand A, Operand B>           \
    requires(Lazy<A> || Lazy<B>)            \
  auto fn(A const& a, B const& b) {         \
    return make_map(ops::Op{}, a, b);       \
  }
SOLDER_BINARY_FUNCTION(add, Add)
SOLDER_BINARY_FUNCTION(sub, Sub)
SOLDER_BINARY_FUNCTION(mul, Mul)
SOLDER_BINARY_FUNCTION(div, Div)
SOLDER_BINARY_FUNCTION(pow, Pow)
SOLDER_BINARY_FUNCTION(maximum, Maximum)
SOLDER_BINARY_FUNCTION(minimum, Minimum)
SOLDER_BINARY_FUNCTION(eq, Eq)
SOLDER_BINARY_FUNCTION(ne, Ne)
SOLDER_BINARY_FUNCTION(lt, Lt)
SOLDER_BINARY_FUNCTION(le, Le)
SOLDER_BINARY_FUNCTION(gt, Gt)
SOLDER_BINARY_FUNCTION(ge, Ge)
SOLDER_BINARY_FUNCTION(logical_and, LogicalAnd)
SOLDER_BINARY_FUNCTION(logical_or, LogicalOr)
SOLDER_BINARY_FUNCTION(logical_xor, LogicalXor)
#undef SOLDER_BINARY_FUNCTION

// torch.max(a, b) / torch.min(a, b) with two tensors are element-wise; with a dim they reduce
// (expr/reduce.hpp).
template <Lazy A, Lazy B>
auto max(A const& a, B const& b) {
  return maximum(a, b);
}
template <Lazy A, Lazy B>
auto min(A const& a, B const& b) {
  return minimum(a, b);
}

#define SOLDER_UNARY_FUNCTION(fn, Op) \
  template <Lazy X>                   \
  auto fn(X const& x) {               \
    return make_map(ops::Op{}, x);    \
  }
SOLDER_UNARY_FUNCTION(neg, Neg)
SOLDER_UNARY_FUNCTION(abs, Abs)
SOLDER_UNARY_FUNCTION(relu, Relu)
SOLDER_UNARY_FUNCTION(exp, Exp)
SOLDER_UNARY_FUNCTION(expm1, Expm1)
SOLDER_UNARY_FUNCTION(log, Log)
SOLDER_UNARY_FUNCTION(log1p, Log1p)
SOLDER_UNARY_FUNCTION(sqrt, Sqrt)
SOLDER_UNARY_FUNCTION(rsqrt, Rsqrt)
SOLDER_UNARY_FUNCTION(tanh, Tanh)
SOLDER_UNARY_FUNCTION(sigmoid, Sigmoid)
SOLDER_UNARY_FUNCTION(erf, Erf)
SOLDER_UNARY_FUNCTION(sin, Sin)
SOLDER_UNARY_FUNCTION(cos, Cos)
SOLDER_UNARY_FUNCTION(silu, Silu)
SOLDER_UNARY_FUNCTION(logical_not, LogicalNot)
#undef SOLDER_UNARY_FUNCTION

template <Lazy X>
auto operator-(X const& x) {
  return neg(x);
}
template <Lazy X>
auto operator!(X const& x) {
  return logical_not(x);
}

// gelu(x) is the exact (erf) form; gelu(x, sd::tanh_approximation) is approximate="tanh".
struct TanhApproximation {};
inline constexpr TanhApproximation tanh_approximation{};
template <Lazy X>
auto gelu(X const& x) {
  return make_map(ops::Gelu{}, x);
}
template <Lazy X>
auto gelu(X const& x, TanhApproximation) {
  return make_map(ops::GeluTanh{}, x);
}

template <Lazy X>
auto leaky_relu(X const& x, double negative_slope = 0.01) {
  return make_map(ops::LeakyRelu{{}, negative_slope}, x);
}
template <Lazy X>
auto softplus(X const& x, double beta = 1, double threshold = 20) {
  return make_map(ops::Softplus{{}, beta, threshold}, x);
}

// clamp(x, lo, hi) = min(max(x, lo), hi): promotes like PyTorch and keeps NaN.
template <Lazy X, Operand L, Operand H>
auto clamp(X const& x, L const& lo, H const& hi) {
  return minimum(maximum(x, lo), hi);
}

template <Operand C, Operand A, Operand B>
  requires(Lazy<C> || Lazy<A> || Lazy<B>)
auto where(C const& cond, A const& a, B const& b) {
  static_assert(std::is_same_v<typename node_t<C>::value_type, bool>,
                "solder: where(cond, a, b): the condition must be a bool expression");
  return make_map(ops::Where{}, cond, a, b);
}

// cast<U>(x): x's values converted to U (bool: x != 0).
template <Element U, Lazy X>
auto cast(X const& x) {
  return make_map(ops::Cast<U>{}, x);
}

}  // namespace solder
