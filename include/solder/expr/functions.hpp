// The element-wise vocabulary users write: operators and PyTorch-named functions. Each builds
// a Map node; nothing runs until the expression is assigned or evaluated.
#pragma once
#include "map.hpp"

namespace solder {

// What the element-wise ops take: an Operand, or an integer of any width (x / v.size()).
template <class X>
concept Arg = Operand<X> || Number<std::remove_cvref_t<X>>;

namespace detail {
// An integer that is no Element (size_t, unsigned ...) as the int64 it enters an expression as.
template <class X>
decltype(auto) wrap_number(X const& x) {
  if constexpr (Operand<X>) return x;  // by reference: no copy of a tree
  else return static_cast<wrapped_t<X>>(x);
}
template <class Op, class... X>
auto make_op(Op op, X const&... x) {
  return make_map(op, wrap_number(x)...);
}
}  // namespace detail

#define SOLDER_BINARY_OPERATOR(sym, Op)                        \
  template <Arg A, Arg B>                                      \
    requires(Lazy<A> || Lazy<B>)                               \
  auto operator sym(A const& a, B const& b) {                  \
    return detail::make_op(ops::Op{}, a, b);                   \
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
  template <Arg A, Arg B>                   \
    requires(Lazy<A> || Lazy<B>)            \
  auto fn(A const& a, B const& b) {         \
    return detail::make_op(ops::Op{}, a, b); \
  }
SOLDER_BINARY_FUNCTION(add, Add)
SOLDER_BINARY_FUNCTION(sub, Sub)
SOLDER_BINARY_FUNCTION(mul, Mul)
SOLDER_BINARY_FUNCTION(div, Div)
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

// pow(a, b): floats as std::pow; integers exactly, by squaring, wrapping on overflow
// (pow(2, 40) in int64 is 2^40). As in PyTorch, an integer tensor to a negative integer number
// is an error; to a tensor's negative elements it is 0 (1 and -1 to the power as they are).
template <Arg A, Arg B>
  requires(Lazy<A> || Lazy<B>)
auto pow(A const& a, B const& b) {
  if constexpr (std::signed_integral<B>)
    if constexpr (!is_floating_v<typename node_t<A>::value_type>)
      detail::check(b >= 0, "pow: integers to negative integer powers are not allowed (exponent ",
                    b, ")");
  return detail::make_op(ops::Pow{}, a, b);
}

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
template <Lazy X, Arg L, Arg H>
auto clamp(X const& x, L const& lo, H const& hi) {
  return minimum(maximum(x, lo), hi);
}

template <Operand C, Arg A, Arg B>
  requires(Lazy<C> || Lazy<A> || Lazy<B>)
auto where(C const& cond, A const& a, B const& b) {
  static_assert(std::is_same_v<typename node_t<C>::value_type, bool>,
                "solder: where(cond, a, b): the condition must be a bool expression");
  return detail::make_op(ops::Where{}, cond, a, b);
}

// cast<U>(x): x's values converted to U (bool: x != 0).
template <Element U, Lazy X>
auto cast(X const& x) {
  return make_map(ops::Cast<U>{}, x);
}

}  // namespace solder
