// Extents: per-axis sizes that are either known at compile time (sd::fix<N>) or dynamic
// (sd::dyn). Static extents are checked by the compiler and fold away (DESIGN.md §4).
#pragma once
#include <array>
#include <type_traits>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>

#include "error.hpp"

namespace solder {

inline constexpr std::int64_t dyn = -1;

// A compile-time extent, usable where a size is expected: sd::shape(sd::fix<3>, n).
template <std::int64_t N>
struct Fix {
  static_assert(N >= 0, "solder: a static extent must be non-negative");
  static constexpr std::int64_t value = N;
  constexpr operator std::int64_t() const { return N; }
};
template <std::int64_t N>
inline constexpr Fix<N> fix{};

// Structural, so it can be a template argument: Tensor<float, sd::ext<3, sd::dyn>>.
template <int R>
struct Extents {
  static constexpr int rank = R;
  std::int64_t e[R > 0 ? R : 1];
  constexpr std::int64_t operator[](int i) const { return e[i]; }
};

template <std::int64_t... E>
inline constexpr Extents<sizeof...(E)> ext{{E...}};

// The rank of an Extents template argument. Not decltype(E)::rank: nvcc's front end hands the
// host compiler decltype(E) of a class-type template parameter as a const reference.
template <auto E>
inline constexpr int rank_of = std::remove_cvref_t<decltype(E)>::rank;

template <int R>
constexpr Extents<R> dynamic_extents() {
  Extents<R> x{};
  for (int i = 0; i < (R > 0 ? R : 1); ++i) x.e[i] = dyn;
  return x;
}

namespace detail {

template <class T>
struct is_extents : std::false_type {};
template <int R>
struct is_extents<Extents<R>> : std::true_type {};

// Tensor<float, 2> means two dynamic extents; Tensor<float, sd::ext<3, 4>> two static ones.
template <auto S>
constexpr auto as_extents() {
  if constexpr (is_extents<std::remove_cvref_t<decltype(S)>>::value) return S;
  else return dynamic_extents<static_cast<int>(S)>();
}

}  // namespace detail

template <int R>
using Index = std::array<std::int64_t, R>;

// A shape as text, formatted only when printed: checks pass it along for free, and only a
// failing check pays for the string.
template <int R>
struct ShapeText {
  Index<R> dims;
  friend std::ostream& operator<<(std::ostream& os, ShapeText const& s) {
    os << '[';
    for (int i = 0; i < R; ++i) os << (i ? ", " : "") << s.dims[i];
    return os << ']';
  }
  operator std::string() const {
    std::ostringstream os;
    os << *this;
    return os.str();
  }
};

template <int R>
ShapeText<R> shape_string(Index<R> const& s) {
  return {s};
}

// a == b, one compare per axis: std::array's == becomes a call to memcmp in some inlining
// contexts, a tenth of the cost of a small assignment (bench_overhead).
template <int R>
bool same_index(Index<R> const& a, Index<R> const& b) {
  bool same = true;
  for (int i = 0; i < R; ++i) same = same && a[i] == b[i];
  return same;
}

template <int R>
std::int64_t numel_of(Index<R> const& s) {
  std::int64_t n = 1;
  for (int i = 0; i < R; ++i) n *= s[i];
  return n;
}

template <int R>
Index<R> contiguous_strides(Index<R> const& s) {
  Index<R> st{};
  std::int64_t acc = 1;
  for (int i = R - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

// Normalizes a PyTorch-style dim (negative counts from the end) or throws naming the op.
inline int wrap_dim(std::int64_t d, int rank, char const* op) {
  std::int64_t w = d < 0 ? d + rank : d;
  detail::check(w >= 0 && w < rank, op, ": dim ", d, " out of range for a tensor of rank ", rank);
  return static_cast<int>(w);
}
// The same, naming the shape too.
template <std::size_t N>
int wrap_dim(std::int64_t d, std::array<std::int64_t, N> const& shape, char const* op) {
  constexpr int rank = static_cast<int>(N);
  std::int64_t w = d < 0 ? d + rank : d;
  detail::check(w >= 0 && w < rank, op, ": dim ", d, " out of range for shape ",
                shape_string<rank>(shape));
  return static_cast<int>(w);
}

namespace detail {

// NumPy broadcasting of compile-time extents. A static extent other than 1 is the result's
// whatever the other side is (a dynamic one must be 1 or the same, checked at run time: a
// softmax's x of [dyn, 1024] against its max of [dyn, dyn] is [dyn, 1024]); dyn otherwise.
// a and b are the same extents, each known at compile time.
template <int RA, int RB>
constexpr bool same_static_extents(Extents<RA> a, Extents<RB> b) {
  if (RA != RB) return false;
  for (int i = 0; i < RA; ++i)
    if (a.e[i] == dyn || a.e[i] != b.e[i]) return false;
  return true;
}

template <int RA, int RB>
constexpr Extents<(RA > RB ? RA : RB)> broadcast_extents(Extents<RA> a, Extents<RB> b) {
  constexpr int R = RA > RB ? RA : RB;
  Extents<R> r{};
  for (int i = 0; i < R; ++i) {
    int ia = i - (R - RA), ib = i - (R - RB);
    std::int64_t x = ia >= 0 ? a.e[ia] : 1, y = ib >= 0 ? b.e[ib] : 1;
    r.e[i] = x == 1 ? y : y == 1 ? x : x == dyn ? y : x;
  }
  return r;
}

template <int RA, int RB>
constexpr bool broadcastable(Extents<RA> a, Extents<RB> b) {
  constexpr int R = RA > RB ? RA : RB;
  for (int i = 0; i < R; ++i) {
    int ia = i - (R - RA), ib = i - (R - RB);
    std::int64_t x = ia >= 0 ? a.e[ia] : 1, y = ib >= 0 ? b.e[ib] : 1;
    if (x != dyn && y != dyn && x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// Static extents a value of extents `from` may be stored into (dyn matches anything).
template <int R>
constexpr bool assignable(Extents<R> to, Extents<R> from) {
  for (int i = 0; i < R; ++i)
    if (to.e[i] != dyn && from.e[i] != dyn && to.e[i] != from.e[i]) return false;
  return true;
}

}  // namespace detail
}  // namespace solder
