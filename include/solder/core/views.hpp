// Views: new shapes and strides over the same storage, no copies (as torch.Tensor.view &
// friends). On tensors they return tensors; expr/view.hpp gives them to expressions.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "tensor.hpp"

namespace solder {

namespace detail {
template <int R, class TT>
auto view_of(TT const& t, Index<R> const& s, Index<R> const& st, std::int64_t offset = 0) {
  return TT::template make_view<R>(t.storage(), t.data() + offset, s, st);
}
}  // namespace detail

template <TensorType TT>
auto transpose(TT const& t, std::int64_t d0, std::int64_t d1) {
  constexpr int R = TT::rank;
  int a = wrap_dim(d0, R, "transpose"), b = wrap_dim(d1, R, "transpose");
  Index<R> s = t.shape(), st = t.strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return detail::view_of<R>(t, s, st);
}

// transpose<D0, D1>(t): the dims known at compile time, so static extents follow them
// (mm(a, transpose<0, 1>(b)) checks b's static extents at compile time; with run-time dims any
// two axes may swap, so the view's extents are dynamic).
template <int D0, int D1, TensorType TT>
auto transpose(TT const& t) {
  constexpr int R = TT::rank;
  static_assert(D0 >= -R && D0 < R && D1 >= -R && D1 < R, "solder: transpose: a static dim is out of range");
  constexpr int a = D0 < 0 ? D0 + R : D0, b = D1 < 0 ? D1 + R : D1;
  constexpr auto E = [] {
    auto e = TT::static_extents;
    std::swap(e.e[a], e.e[b]);
    return e;
  }();
  return BasicTensor<typename TT::value_type, E, typename TT::device_type>(transpose(t, a, b));
}

// t(x): torch.t — a 2-d tensor transposed, with its static extents; 0-d and 1-d as they are.
template <TensorType TT>
  requires(TT::rank <= 2)
auto t(TT const& x) {
  if constexpr (TT::rank == 2) return transpose<0, 1>(x);
  else return x;
}

template <TensorType TT>
auto permute(TT const& t, std::array<std::int64_t, TT::rank> const& dims) {
  constexpr int R = TT::rank;
  Index<R> s{}, st{};
  std::array<bool, R> seen{};
  for (int i = 0; i < R; ++i) {
    int d = wrap_dim(dims[i], R, "permute");
    detail::check(!seen[d], "permute: dim ", dims[i], " appears twice");
    seen[d] = true;
    s[i] = t.shape()[d];
    st[i] = t.strides()[d];
  }
  return detail::view_of<R>(t, s, st);
}

// slice(t, dim, start, end, step): Python's t[..., start:end:step, ...] (bounds clamped).
template <TensorType TT>
auto slice(TT const& t, std::int64_t dim, std::int64_t start, std::int64_t end,
           std::int64_t step = 1) {
  constexpr int R = TT::rank;
  int d = wrap_dim(dim, R, "slice");
  detail::check(step > 0, "slice: step must be positive, got ", step);
  std::int64_t n = t.shape()[d];
  auto clampi = [n](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + n : i, 0, n); };
  std::int64_t b = clampi(start), e = std::max(clampi(end), b);
  Index<R> s = t.shape(), st = t.strides();
  s[d] = (e - b + step - 1) / step;
  st[d] *= step;
  return detail::view_of<R>(t, s, st, b * t.strides()[d]);
}

template <TensorType TT>
auto narrow(TT const& t, std::int64_t dim, std::int64_t start, std::int64_t length) {
  int d = wrap_dim(dim, TT::rank, "narrow");
  detail::check(start >= 0 && length >= 0 && start + length <= t.shape()[d], "narrow: [", start,
                ", ", start + length, ") out of range for dim ", d, " of shape ",
                shape_string<TT::rank>(t.shape()));
  return slice(t, d, start, start + length);
}

template <TensorType TT>
auto unsqueeze(TT const& t, std::int64_t dim) {
  constexpr int R = TT::rank;
  int d = wrap_dim(dim, R + 1, "unsqueeze");
  Index<R + 1> s{}, st{};
  for (int i = 0, j = 0; i < R + 1; ++i) {
    if (i == d) {
      s[i] = 1;
      st[i] = (j < R ? t.strides()[j] * t.shape()[j] : 1);
    } else {
      s[i] = t.shape()[j];
      st[i] = t.strides()[j];
      ++j;
    }
  }
  return detail::view_of<R + 1>(t, s, st);
}

template <TensorType TT>
auto squeeze(TT const& t, std::int64_t dim) {
  constexpr int R = TT::rank;
  static_assert(R >= 1, "solder: squeeze of a rank-0 tensor");
  int d = wrap_dim(dim, R, "squeeze");
  detail::check(t.shape()[d] == 1, "squeeze: dim ", d, " of shape ", shape_string<R>(t.shape()),
                " has size ", t.shape()[d], ", not 1");
  Index<R - 1> s{}, st{};
  for (int i = 0, j = 0; i < R; ++i)
    if (i != d) {
      s[j] = t.shape()[i];
      st[j] = t.strides()[i];
      ++j;
    }
  return detail::view_of<R - 1>(t, s, st);
}

// select(t, dim, index): Python's t[..., index, ...], the dim removed (a negative index counts
// from the end, as PyTorch's).
template <TensorType TT>
auto select(TT const& t, std::int64_t dim, std::int64_t index) {
  constexpr int R = TT::rank;
  static_assert(R >= 1, "solder: select of a rank-0 tensor");
  int d = wrap_dim(dim, R, "select");
  std::int64_t const n = t.shape()[d];
  detail::check(index >= -n && index < n, "select: index ", index, " out of range for dim ", d, " of shape ",
                shape_string<R>(t.shape()));
  return squeeze(narrow(t, d, index < 0 ? index + n : index, 1), d);
}

// expand / broadcast_to: size-1 axes (and new leading axes) repeat with stride 0.
template <TensorType TT, std::size_t N>
auto expand(TT const& t, std::array<std::int64_t, N> const& shape) {
  constexpr int R = TT::rank, R2 = static_cast<int>(N);
  static_assert(R2 >= R, "solder: expand: the target has fewer dims than the tensor");
  Index<R2> s{}, st{};
  for (int i = 0; i < R2; ++i) {
    int j = i - (R2 - R);
    std::int64_t want = shape[i];
    if (R2 > R && j < 0) {  // (R2 > R: g++ -O3 otherwise warns of t.shape()[j] below)
      detail::check(want >= 0, "expand: new dim ", i, " has size ", want);
      s[i] = want;
      st[i] = 0;
      continue;
    }
    std::int64_t have = t.shape()[j];
    if (want == -1) want = have;
    detail::check(have == want || have == 1, "expand: shape ", shape_string<R>(t.shape()),
                  " cannot be expanded to ", shape_string<R2>(Index<R2>(shape)));
    s[i] = want;
    st[i] = have == want ? t.strides()[j] : 0;
  }
  return detail::view_of<R2>(t, s, st);
}
template <TensorType TT, auto E>
auto broadcast_to(TT const& t, Shape<E> const& s) {
  return expand(t, s.dims);
}

namespace detail {
// The sizes of view(t, shape) and reshape(t, shape): one -1 inferred, the count checked; errors
// name `op`, the one the user called.
template <std::size_t N, std::size_t M>
Index<static_cast<int>(N)> new_shape(std::array<std::int64_t, N> shape,
                                      std::array<std::int64_t, M> const& input, char const* op) {
  constexpr int R2 = static_cast<int>(N), R = static_cast<int>(M);
  std::int64_t const numel = numel_of<R>(input);
  std::int64_t known = 1, infer = -1;
  for (int i = 0; i < R2; ++i) {
    if (shape[i] == -1) {
      check(infer < 0, op, ": only one dim can be -1");
      infer = i;
    } else {
      check(shape[i] >= 0, op, ": invalid size ", shape[i]);
      known *= shape[i];
    }
  }
  bool fits = infer < 0 ? known == numel : known != 0 && numel % known == 0;
  check(fits, op, ": shape ", shape_string<R2>(shape), " is invalid for an input of shape ",
        shape_string<R>(input), " (", numel, " elements)");
  if (infer >= 0) shape[infer] = numel / known;
  return shape;
}
}  // namespace detail

// view(t, shape): a new shape over contiguous storage (one extent may be -1); never copies.
// reshape(t, shape): the same, or a contiguous copy when t's strides do not allow a view.
template <TensorType TT, std::size_t N>
auto view(TT const& t, std::array<std::int64_t, N> const& shape) {
  constexpr int R2 = static_cast<int>(N);
  Index<R2> s = detail::new_shape(shape, t.shape(), "view");
  detail::check(t.is_contiguous(), "view: the tensor of shape ", shape_string<TT::rank>(t.shape()),
                " is not contiguous; use reshape (which copies)");
  return detail::view_of<R2>(t, s, contiguous_strides<R2>(s));
}
template <TensorType TT, auto E>
auto view(TT const& t, Shape<E> const& s) {
  return view(t, s.dims);
}

template <TensorType TT, std::size_t N>
auto reshape(TT const& t, std::array<std::int64_t, N> const& shape) {
  Index<static_cast<int>(N)> s = detail::new_shape(shape, t.shape(), "reshape");
  if (t.is_contiguous()) return view(t, s);
  return view(t.clone(), s);
}
template <TensorType TT, auto E>
auto reshape(TT const& t, Shape<E> const& s) {
  return reshape(t, s.dims);
}

// Sizes as a braced list, as PyTorch is called: broadcast_to(t, {3, 4}) (view, reshape and
// expand take one on tensors and expressions alike: expr/view.hpp).
template <TensorType TT, std::size_t N>
auto broadcast_to(TT const& t, std::int64_t const (&shape)[N]) {
  return expand(t, std::to_array(shape));
}

// flatten<Start, End>(t): dims Start..End merged into one. Template arguments, because they
// decide the result's rank, which is part of its type.
// The dims are template arguments, so static extents follow (a merged dim is static where all
// its dims are).
template <int Start = 0, int End = -1, TensorType TT>
auto flatten(TT const& t) {
  constexpr int R = TT::rank;
  constexpr int s = Start < 0 ? Start + R : Start, e = End < 0 ? End + R : End;
  static_assert(R == 0 || (0 <= s && s <= e && e < R), "solder: flatten: dims out of range");
  if constexpr (R == 0) {
    return reshape(t, std::array<std::int64_t, 1>{1});
  } else {
    constexpr auto E = [] {
      Extents<R - (e - s)> out{};
      for (int i = 0, j = 0; i < R; ++i) {
        std::int64_t const x = TT::static_extents.e[i];
        if (i > s && i <= e) out.e[j - 1] = out.e[j - 1] == dyn || x == dyn ? dyn : out.e[j - 1] * x;
        else out.e[j++] = x;
      }
      return out;
    }();
    std::array<std::int64_t, R - (e - s)> out{};
    for (int i = 0, j = 0; i < R; ++i) {
      if (i > s && i <= e) {
        out[j - 1] *= t.shape()[i];
        continue;
      }
      out[j++] = t.shape()[i];
    }
    return BasicTensor<typename TT::value_type, E, typename TT::device_type>(reshape(t, out));
  }
}

}  // namespace solder
