// Reduce<Op, Child, NAxes, Keepdim>: a reduction over chosen axes — a kernel anchor (rule 2).
// Element-wise producers fuse into it; element-wise consumers fuse too (expr/rows.hpp builds
// softmax and layer norm this way); plan/plan.hpp decides where it must materialize instead.
#pragma once
#include <algorithm>
#include <array>
#include <limits>

#include "map.hpp"

namespace solder {

namespace ops {

// Results: float sums stay float (lane-blocked, see backend/host), integer and bool sums widen
// to int64 as in PyTorch. Accumulators: the same, but float for the 16-bit floats.
template <class T>
using sum_t = std::conditional_t<is_floating_v<T>, T, std::int64_t>;
template <class T>
using sum_acc_t = compute_t<sum_t<T>>;

// What sum and prod share: the widened accumulator and result, and nothing to finish.
struct WideningFold {
  static constexpr bool needs_elements = false;
  template <class T>
  using acc = sum_acc_t<T>;
  template <class T>
  using result = sum_t<T>;
  template <class A>
  SOLDER_HD static constexpr A finalize(A a, std::int64_t) { return a; }
};

struct Sum : WideningFold {
  static constexpr char const* name = "sum";
  template <class A>
  SOLDER_HD static constexpr A identity() { return A(0); }
  template <class A, class V>
  SOLDER_HD SOLDER_INLINE static constexpr A step(A a, V v, std::int64_t) {
    return wrapping_add(a, A(v));  // integers wrap around, as in PyTorch
  }
  template <class A>
  SOLDER_HD SOLDER_INLINE static constexpr A merge(A a, A b) { return wrapping_add(a, b); }
};

struct Mean : Sum {
  static constexpr char const* name = "mean";
  template <class A>
  SOLDER_HD static constexpr A finalize(A a, std::int64_t n) { return a / A(n); }
};

struct Prod : WideningFold {
  static constexpr char const* name = "prod";
  template <class A>
  SOLDER_HD static constexpr A identity() { return A(1); }
  template <class A, class V>
  SOLDER_HD SOLDER_INLINE static constexpr A step(A a, V v, std::int64_t) {
    return wrapping_mul(a, A(v));
  }
  template <class A>
  SOLDER_HD SOLDER_INLINE static constexpr A merge(A a, A b) { return wrapping_mul(a, b); }
};

// max/min propagate NaN like torch.amax: once NaN, always NaN.
template <bool IsMax>
struct Extremum {
  static constexpr char const* name = IsMax ? "max" : "min";
  static constexpr bool needs_elements = true;
  template <class T>
  using acc = compute_t<T>;
  template <class T>
  using result = T;
  template <class A>
  SOLDER_HD static constexpr A identity() {
    if constexpr (std::is_floating_point_v<A>)
      return IsMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    else return IsMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  }
  template <class A>
  SOLDER_HD SOLDER_INLINE static constexpr A merge(A a, A b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<A, float>) {  // one instruction, not three (±0 may differ)
      float r;
      if constexpr (IsMax) asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
      else asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
      return r;
    }
#endif
    return ((IsMax ? b > a : b < a) | (b != b)) ? b : a;  // `|`: no branch, so it vectorizes
  }
  template <class A, class V>
  SOLDER_HD SOLDER_INLINE static constexpr A step(A a, V v, std::int64_t) { return merge(a, A(v)); }
  template <class A>
  SOLDER_HD static constexpr A finalize(A a, std::int64_t) { return a; }
};
using Max = Extremum<true>;
using Min = Extremum<false>;

template <class T>
struct ArgAcc {
  T value;
  std::int64_t index;  // -1: nothing seen yet
};

// argmax/argmin: the first index of the extreme value; a NaN counts as the extreme.
template <bool IsMax>
struct ArgExtremum {
  static constexpr char const* name = IsMax ? "argmax" : "argmin";
  static constexpr bool needs_elements = true;
  template <class T>
  using acc = ArgAcc<compute_t<T>>;
  template <class T>
  using result = std::int64_t;
  template <class A>
  SOLDER_HD static constexpr A identity() { return A{{}, -1}; }
  template <class A>
  SOLDER_HD SOLDER_INLINE static constexpr A merge(A a, A b) {
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    bool better = IsMax ? b.value > a.value : b.value < a.value;
    bool tie = (b.value == a.value) || (a_nan && b_nan);
    return (!a_nan && (b_nan || better)) || (tie && b.index < a.index) ? b : a;
  }
  template <class A, class V>
  SOLDER_HD SOLDER_INLINE static constexpr A step(A a, V v, std::int64_t i) {
    return merge(a, A{static_cast<decltype(a.value)>(v), i});
  }
  template <class A>
  SOLDER_HD static constexpr std::int64_t finalize(A a, std::int64_t) { return a.index; }
};
using Argmax = ArgExtremum<true>;
using Argmin = ArgExtremum<false>;

}  // namespace ops

struct KeepDim {};
inline constexpr KeepDim keepdim{};

// Trailing: the reduced dims are known at compile time to be the input's last NA (layer_norm,
// softmax<-1>, sum<-1>): the planner then knows its kernel needs no run-time break variant.
template <class Op, class C, int NA, bool Keep, bool Trailing = false>
struct Reduce : detail::ExprTag, detail::OneInput<C> {
  static constexpr NodeKind kind = NodeKind::reduce;
  using child_types = types<C>;
  using op_type = Op;
  using device_type = typename C::device_type;
  using input_type = typename C::value_type;
  using acc_type = typename Op::template acc<input_type>;
  using value_type = typename Op::template result<input_type>;
  static constexpr bool keepdim = Keep;
  static constexpr bool trailing = Trailing;
  static constexpr int naxes = NA;
  static constexpr int rank = Keep ? C::rank : C::rank - NA;
  static_assert(NA >= 1 && NA <= C::rank, "solder: reduction: more dims than the input has");
  static constexpr auto static_extents = [] {
    Extents<rank> e = dynamic_extents<rank>();
    if constexpr (NA == C::rank)  // a full reduction's shape is known: [] or [1, 1, ...]
      for (int i = 0; i < rank; ++i) e.e[i] = 1;
    return e;
  }();

  std::array<int, NA> axes;  // sorted, distinct, non-negative
  Index<rank> shape_;
  std::int64_t count = 1;  // elements folded into each output
  std::uint64_t id = detail::next_node_id();  // kept by copies: one node (rule 4)

  using detail::OneInput<C>::input;  // the child: the values folded

  Reduce(C c, std::array<std::int64_t, NA> const& dims) : detail::OneInput<C>{std::move(c)} {
    for (int i = 0; i < NA; ++i) axes[i] = wrap_dim(dims[i], input.shape(), Op::name);
    std::sort(axes.begin(), axes.end());
    for (int i = 1; i < NA; ++i)
      detail::check(axes[i] != axes[i - 1], Op::name, ": dim ", axes[i], " appears twice for shape ",
                    shape_string<C::rank>(input.shape()));
    auto const& s = input.shape();
    int o = 0;
    for (int d = 0; d < C::rank; ++d) {
      bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (reduced) count *= s[d];
      if (!reduced) shape_[o++] = s[d];
      else if (Keep) shape_[o++] = 1;
    }
    // PyTorch: max/min/argmax over an empty dim have no identity and are errors.
    if constexpr (Op::needs_elements)
      detail::check(count > 0 || numel_of<rank>(shape_) == 0, Op::name,
                    ": cannot reduce over an empty dim of shape ", shape_string<C::rank>(s));
  }
  Index<rank> const& shape() const { return shape_; }
  static std::string name() { return Op::name; }
  // The value of a one-element expression (torch's .item()): evaluates it first.
  auto item() const { return eval(*this).item(); }
  // The same reduction (op, dims, id) over another input of the same shape.
  template <class K>
  auto rebuild(K const& k) const {
    std::array<std::int64_t, NA> dims{};
    for (int i = 0; i < NA; ++i) dims[i] = axes[i];
    Reduce<Op, node_t<K>, NA, Keep, Trailing> r(as_node(k), dims);
    r.id = id;
    return r;
  }
};

namespace detail {

template <class Op, bool Keep, bool Trailing, class C, std::size_t N>
auto reduce_of(C const& input, std::array<std::int64_t, N> const& dims) {
  return Reduce<Op, C, static_cast<int>(N), Keep, Trailing>(input, dims);
}

template <class Op, bool Keep, class X, std::size_t N, bool Trailing = false>
auto make_reduce(X const& x, std::array<std::int64_t, N> const& dims,
                 std::bool_constant<Trailing> = {}) {
  using C = node_t<X>;
  static_assert(C::rank >= 1, "solder: reduction of a rank-0 value");
  if constexpr (std::is_same_v<Op, ops::Mean>)
    static_assert(is_floating_v<typename C::value_type>,
                  "solder: mean: the input must be floating point (use sd::cast<float>)");
  return reduce_of<Op, Keep, Trailing>(capped(as_node(x)), dims);
}

// f<Dim>(x): a dim known at compile time. The last one makes a trailing reduction.
template <class Op, bool Keep, int Dim, class X>
auto make_static_reduce(X const& x) {
  constexpr int R = node_t<X>::rank;
  static_assert(Dim >= -R && Dim < R, "solder: reduction: the static dim is out of range");
  return make_reduce<Op, Keep>(x, std::array<std::int64_t, 1>{Dim},
                               std::bool_constant<Dim == -1 || Dim == R - 1>{});
}

template <int R>
std::array<std::int64_t, R> all_dims() {
  std::array<std::int64_t, R> d{};
  for (int i = 0; i < R; ++i) d[i] = i;
  return d;
}

template <std::size_t N>
std::array<std::int64_t, N> dims_of(int const (&d)[N]) {
  std::array<std::int64_t, N> a{};
  for (std::size_t i = 0; i < N; ++i) a[i] = d[i];
  return a;
}

}  // namespace detail

// A dim must be an integer: max(x, 0.f) would otherwise convert 0.f to dim 0 and reduce. (After
// the one error, the input stands in for the result, so no other error follows.)
#define SOLDER_FLOATING_DIM_ERROR(fn)                                                       \
  static_assert(!std::is_floating_point_v<S>,                                              \
                "solder: " #fn "(x, dim): a dim must be an integer; for the element-wise "  \
                "maximum or minimum with a number write sd::maximum(x, v) or "              \
                "sd::minimum(x, v)");                                                      \
  return as_node(x);

// f(x) over everything (argmax: an index into the flattened input); f(x, dim); f<dim>(x), the
// dim known at compile time; each with an optional sd::keepdim.
#define SOLDER_DIM_REDUCTION(fn, Op)                                                        \
  template <Lazy X>                                                                        \
  auto fn(X const& x) {                                                                    \
    return detail::make_reduce<ops::Op, false>(x, detail::all_dims<node_t<X>::rank>());    \
  }                                                                                        \
  template <int Dim, Lazy X>                                                               \
  auto fn(X const& x) {                                                                    \
    return detail::make_static_reduce<ops::Op, false, Dim>(x);                             \
  }                                                                                        \
  template <int Dim, Lazy X>                                                               \
  auto fn(X const& x, KeepDim) {                                                           \
    return detail::make_static_reduce<ops::Op, true, Dim>(x);                              \
  }                                                                                        \
  template <Lazy X>                                                                        \
  auto fn(X const& x, std::int64_t dim) {                                                  \
    return detail::make_reduce<ops::Op, false>(x, std::array<std::int64_t, 1>{dim});       \
  }                                                                                        \
  template <Lazy X>                                                                        \
  auto fn(X const& x, std::int64_t dim, KeepDim) {                                         \
    return detail::make_reduce<ops::Op, true>(x, std::array<std::int64_t, 1>{dim});        \
  }                                                                                        \
  template <Lazy X, std::floating_point S>                                                 \
  auto fn(X const& x, S) {                                                                 \
    SOLDER_FLOATING_DIM_ERROR(fn)                                                          \
  }                                                                                        \
  template <Lazy X, std::floating_point S>                                                 \
  auto fn(X const& x, S, KeepDim) {                                                        \
    SOLDER_FLOATING_DIM_ERROR(fn)                                                          \
  }
// ... and the value reductions also over a list of dims: sum(x, {d0, d1} [, sd::keepdim]).
#define SOLDER_REDUCTION(fn, Op)                                                          \
  SOLDER_DIM_REDUCTION(fn, Op)                                                             \
  template <Lazy X, std::size_t N>                                                         \
  auto fn(X const& x, int const (&dims)[N]) {                                              \
    return detail::make_reduce<ops::Op, false>(x, detail::dims_of(dims));                  \
  }                                                                                        \
  template <Lazy X, std::size_t N>                                                         \
  auto fn(X const& x, int const (&dims)[N], KeepDim) {                                     \
    return detail::make_reduce<ops::Op, true>(x, detail::dims_of(dims));                   \
  }
SOLDER_REDUCTION(sum, Sum)
SOLDER_REDUCTION(mean, Mean)
SOLDER_REDUCTION(prod, Prod)
SOLDER_REDUCTION(max, Max)
SOLDER_REDUCTION(min, Min)
SOLDER_REDUCTION(amax, Max)
SOLDER_REDUCTION(amin, Min)
SOLDER_DIM_REDUCTION(argmax, Argmax)
SOLDER_DIM_REDUCTION(argmin, Argmin)
#undef SOLDER_REDUCTION
#undef SOLDER_DIM_REDUCTION
#undef SOLDER_FLOATING_DIM_ERROR

}  // namespace solder
