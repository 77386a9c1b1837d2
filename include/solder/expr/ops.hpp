// The maths of every element-wise op, once: each functor runs in the host loop, in CUDA
// kernels and in the eager baseline (DESIGN.md §5). A functor also says how it types its
// result: `compute<P>` is what operands are cast to (P = their promoted type), `result<P>`
// what it returns.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/dtype.hpp"
#include "../core/math.hpp"

namespace solder::ops {

// Signed integers wrap around (two's complement) on overflow, as in PyTorch: + - * and
// negation compute in the unsigned type, where wrapping is defined, and convert back (modular
// since C++20). Other types compute as they are.
template <class T>
inline constexpr bool wraps = std::is_integral_v<T> && std::is_signed_v<T>;
template <class T>
using wrap_t =
    typename std::conditional_t<wraps<T>, std::make_unsigned<T>, std::type_identity<T>>::type;
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T wrapping_add(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b));
}
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T wrapping_sub(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b));
}
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T wrapping_mul(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b));
}
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T wrapping_neg(T x) {
  if constexpr (wraps<T>) return wrapping_sub(T(0), x);
  else return static_cast<T>(-x);  // (0 - x would lose the sign of a float zero)
}

// Integer powers by squaring, wrapping, as PyTorch's powi: a negative exponent gives 1 for a
// base of 1, +-1 for -1 and 0 otherwise (a negative scalar exponent is refused where pow is
// called: expr/functions.hpp).
template <class T>
SOLDER_HD SOLDER_INLINE constexpr T integer_pow(T a, T b) {
  if (b < 0) return a == T(1) ? T(1) : a == T(-1) ? (b % 2 != 0 ? T(-1) : T(1)) : T(0);
  T r = 1;
  for (; b != 0; b /= 2) {
    if (b % 2 != 0) r = wrapping_mul(r, a);
    a = wrapping_mul(a, a);
  }
  return r;
}

struct Arith {  // + - * abs relu ...: same type in and out
  template <class P>
  using compute = P;
  template <class P>
  using result = P;
};
struct Floating {  // exp, log, true division ...: ints and bool compute in float32
  template <class P>
  using compute = floating_t<P>;
  template <class P>
  using result = floating_t<P>;
};
// Ops whose maths costs more than moving their operands (a polynomial or more per element): a
// kernel with one is bound by arithmetic, one without by memory (the host streams the large
// outputs of those past the caches: backend/host/executor.hpp).
struct Heavy {};
struct Transcendental : Floating, Heavy {};  // exp, tanh, erf ...
struct Predicate {  // comparisons and logic: bool out
  template <class P>
  using compute = P;
  template <class P>
  using result = bool;
};

// Each differentiable op states its derivative beside its value (the backward's vector-Jacobian
// product, autograd/derivatives.hpp, multiplies it by the incoming gradient): `d` in x for a
// unary op, `da` and `db` (the partials in a and in b) for a binary one. Floating types only.
#define SOLDER_UNARY(Name, Kind, label, expr)                     \
  struct Name : Kind {                                            \
    static constexpr char const* name = label;                    \
    template <class T>                                            \
    SOLDER_HD SOLDER_INLINE constexpr auto operator()(T x) const { \
      return expr;                                                \
    }                                                             \
  };
#define SOLDER_UNARY_D(Name, Kind, label, expr, d)                       \
  struct Name : Kind {                                                   \
    static constexpr char const* name = label;                           \
    template <class T>                                                   \
    SOLDER_HD SOLDER_INLINE constexpr auto operator()(T x) const {        \
      return expr;                                                       \
    }                                                                    \
    template <int I, class T>                                            \
    SOLDER_HD SOLDER_INLINE constexpr T derivative([[maybe_unused]] T x) const { \
      return d;                                                          \
    }                                                                    \
  };
#define SOLDER_BINARY(Name, Kind, label, expr)                         \
  struct Name : Kind {                                                 \
    static constexpr char const* name = label;                         \
    template <class T>                                                 \
    SOLDER_HD SOLDER_INLINE constexpr auto operator()(T a, T b) const { \
      return expr;                                                     \
    }                                                                  \
  };
#define SOLDER_BINARY_D(Name, Kind, label, expr, da, db)                   \
  struct Name : Kind {                                                     \
    static constexpr char const* name = label;                             \
    template <class T>                                                     \
    SOLDER_HD SOLDER_INLINE constexpr auto operator()(T a, T b) const {     \
      return expr;                                                         \
    }                                                                      \
    template <int I, class T>                                              \
    SOLDER_HD SOLDER_INLINE constexpr T derivative([[maybe_unused]] T a, [[maybe_unused]] T b) const { \
      if constexpr (I == 0) return da;                                     \
      else return db;                                                      \
    }                                                                      \
  };

SOLDER_BINARY_D(Add, Arith, "add", wrapping_add(a, b), T(1), T(1))
SOLDER_BINARY_D(Sub, Arith, "sub", wrapping_sub(a, b), T(1), T(-1))
SOLDER_BINARY_D(Mul, Arith, "mul", wrapping_mul(a, b), b, a)
SOLDER_BINARY_D(Div, Floating, "div", a / b, T(1) / b, -a / (b * b))
// softmax's last step, x * (1 / sum): a product the planner recognizes in the attention pattern
// written out by hand (expr/attention.hpp).
struct SoftmaxScale : Mul {};
// NaN-propagating, like torch.maximum / torch.minimum; at a tie each side gets half the
// gradient, as in PyTorch.
SOLDER_BINARY_D(Maximum, Arith, "maximum", (a > b || a != a) ? a : b, a > b ? T(1) : a == b ? T(0.5) : T(0),
                b > a ? T(1) : a == b ? T(0.5) : T(0))
SOLDER_BINARY_D(Minimum, Arith, "minimum", (a < b || a != a) ? a : b, a < b ? T(1) : a == b ? T(0.5) : T(0),
                b < a ? T(1) : a == b ? T(0.5) : T(0))
SOLDER_BINARY(Eq, Predicate, "eq", a == b)
SOLDER_BINARY(Ne, Predicate, "ne", a != b)
SOLDER_BINARY(Lt, Predicate, "lt", a < b)
SOLDER_BINARY(Le, Predicate, "le", a <= b)
SOLDER_BINARY(Gt, Predicate, "gt", a > b)
SOLDER_BINARY(Ge, Predicate, "ge", a >= b)
SOLDER_BINARY(LogicalAnd, Predicate, "logical_and", (a != T(0)) & (b != T(0)))
SOLDER_BINARY(LogicalOr, Predicate, "logical_or", (a != T(0)) | (b != T(0)))
SOLDER_BINARY(LogicalXor, Predicate, "logical_xor", (a != T(0)) != (b != T(0)))

struct Pow : Arith, Heavy {
  static constexpr char const* name = "pow";
  template <class T>
  SOLDER_HD SOLDER_INLINE constexpr T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return math::pow(a, b);
    else if constexpr (std::is_same_v<T, bool>) return a || !b;
    else return integer_pow(a, b);
  }
  // b a^(b-1); and a^b log a, 0 where a = 0 and b >= 0 (PyTorch's choice at the edge).
  template <int I, class T>
  SOLDER_HD SOLDER_INLINE constexpr T derivative(T a, T b) const {
    if constexpr (I == 0) return b == T(0) ? T(0) : b * math::pow(a, b - T(1));
    else return a == T(0) && b >= T(0) ? T(0) : math::pow(a, b) * math::log(a);
  }
};

SOLDER_UNARY_D(Neg, Arith, "neg", wrapping_neg(x), T(-1))
SOLDER_UNARY(LogicalNot, Predicate, "logical_not", x == T(0))
SOLDER_UNARY_D(Abs, Arith, "abs", x < T(0) ? wrapping_neg(x) : x,  // abs(INT_MIN) = INT_MIN
               x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0))
SOLDER_UNARY_D(Relu, Arith, "relu", x < T(0) ? T(0) : x, x > T(0) ? T(1) : T(0))  // NaN stays NaN
SOLDER_UNARY_D(Exp, Transcendental, "exp", math::exp(x), math::exp(x))
SOLDER_UNARY_D(Expm1, Transcendental, "expm1", math::expm1(x), math::exp(x))
SOLDER_UNARY_D(Log, Transcendental, "log", math::log(x), T(1) / x)
SOLDER_UNARY_D(Log1p, Transcendental, "log1p", math::log1p(x), T(1) / (T(1) + x))
SOLDER_UNARY_D(Sqrt, Floating, "sqrt", math::sqrt(x), T(0.5) / math::sqrt(x))
SOLDER_UNARY_D(Rsqrt, Floating, "rsqrt", math::rsqrt(x), T(-0.5) * math::rsqrt(x) / x)
SOLDER_UNARY_D(Tanh, Transcendental, "tanh", math::tanh(x), T(1) - math::tanh(x) * math::tanh(x))
SOLDER_UNARY_D(Sigmoid, Transcendental, "sigmoid", math::sigmoid(x), math::sigmoid(x) * (T(1) - math::sigmoid(x)))
// 2/sqrt(pi) exp(-x^2)
SOLDER_UNARY_D(Erf, Transcendental, "erf", math::erf(x), T(1.12837916709551257390) * math::exp(-x * x))
SOLDER_UNARY_D(Sin, Transcendental, "sin", math::sin(x), math::cos(x))
SOLDER_UNARY_D(Cos, Transcendental, "cos", math::cos(x), -math::sin(x))
SOLDER_UNARY_D(Silu, Transcendental, "silu", x * math::sigmoid(x),
               math::sigmoid(x) * (T(1) + x * (T(1) - math::sigmoid(x))))
// gelu(x) = x/2 (1 + erf(x/sqrt 2)), and PyTorch's approximate="tanh" form. Derivatives:
// Phi(x) + x phi(x), and PyTorch's gelu_backward for the tanh form.
SOLDER_UNARY_D(Gelu, Transcendental, "gelu",
               T(0.5) * x * (T(1) + math::erf(x * T(0.70710678118654752440))),
               T(0.5) * (T(1) + math::erf(x * T(0.70710678118654752440))) +
                   x * T(0.39894228040143267794) * math::exp(T(-0.5) * x * x))
SOLDER_UNARY_D(GeluTanh, Transcendental, "gelu_tanh",
               T(0.5) * x *
                   (T(1) + math::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x))),
               T(0.5) * (T(1) + math::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x))) +
                   T(0.5) * x *
                       (T(1) - math::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)) *
                                   math::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x))) *
                       T(0.79788456080286535588) * (T(1) + T(3 * 0.044715) * x * x))

#undef SOLDER_UNARY
#undef SOLDER_UNARY_D
#undef SOLDER_BINARY
#undef SOLDER_BINARY_D

struct LeakyRelu : Arith {
  static constexpr char const* name = "leaky_relu";
  double slope;
  template <class T>
  SOLDER_HD SOLDER_INLINE constexpr T operator()(T x) const {
    return x < T(0) ? static_cast<T>(x * static_cast<T>(slope)) : x;
  }
  template <int I, class T>
  SOLDER_HD SOLDER_INLINE constexpr T derivative(T x) const {
    return x > T(0) ? T(1) : static_cast<T>(slope);
  }
};

// torch.nn.functional.softplus: log(1 + exp(beta x)) / beta, linear above the threshold.
struct Softplus : Transcendental {
  static constexpr char const* name = "softplus";
  double beta = 1, threshold = 20;
  template <class T>
  SOLDER_HD SOLDER_INLINE constexpr T operator()(T x) const {
    T bx = x * static_cast<T>(beta);
    return bx > static_cast<T>(threshold) ? x : math::log1p(math::exp(bx)) / static_cast<T>(beta);
  }
  template <int I, class T>
  SOLDER_HD SOLDER_INLINE constexpr T derivative(T x) const {
    T bx = x * static_cast<T>(beta);
    return bx > static_cast<T>(threshold) ? T(1) : math::sigmoid(bx);
  }
};

// gelu with its form chosen at run time (nn.GELU's approximate="none" | "tanh"): one
// expression type for both. Both forms are computed and one is picked by a bit mask: GCC turns
// a branch or a ?: on the flag into control flow in the element loop, which then runs scalar,
// 15x slower (ViT-B/16's MLP epilogue took as long as its product).
struct GeluForm : Transcendental {
  static constexpr char const* name = "gelu";
  bool tanh_form = false;
  template <class T>
  SOLDER_HD SOLDER_INLINE constexpr T operator()(T x) const {
    return pick(static_cast<T>(GeluTanh{}(x)), static_cast<T>(Gelu{}(x)));
  }
  template <int I, class T>
  SOLDER_HD SOLDER_INLINE constexpr T derivative(T x) const {
    return pick(GeluTanh{}.derivative<0>(x), Gelu{}.derivative<0>(x));
  }
  // The tanh form's value (or derivative) or the exact one's, by the bit mask above.
  template <class T>
  SOLDER_HD SOLDER_INLINE constexpr T pick(T approximate, T exact) const {
    if constexpr (requires { typename math::detail::fp<T>::U; }) {
      using U = typename math::detail::fp<T>::U;
      U const mask = U(0) - U(tanh_form);
      return math::detail::from_bits<T>((math::detail::to_bits(approximate) & mask) |
                                        (math::detail::to_bits(exact) & ~mask));
    } else {
      return tanh_form ? approximate : exact;
    }
  }
};

template <class U>
struct Cast {
  static constexpr char const* name = "cast";
  template <class P>
  using compute = P;
  template <class P>
  using result = U;
  template <class T>
  SOLDER_HD SOLDER_INLINE constexpr U operator()(T x) const {
    if constexpr (std::is_same_v<U, bool>) return x != T(0);
    else return static_cast<U>(x);
  }
};

// where(cond, a, b): the condition is not promoted with the values (value_args_from = 1).
struct Where {
  static constexpr char const* name = "where";
  static constexpr int value_args_from = 1;
  template <class P>
  using compute = P;
  template <class P>
  using result = P;
  template <class T>
  SOLDER_HD SOLDER_INLINE constexpr T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};

}  // namespace solder::ops
