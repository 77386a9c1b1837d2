// Memory formats of 4-d tensors, as torch.memory_format: contiguous_format (NCHW strides) and
// channels_last (NHWC strides; the shape stays [N, C, H, W], only the strides change).
//   sd::contiguous(x, sd::channels_last)     x.contiguous(memory_format=torch.channels_last)
//   sd::is_contiguous(t, sd::channels_last)  t.is_contiguous(memory_format=torch.channels_last)
// Convolutions and pools read either format and write the one their output tensor has; a
// block's result (nn::materialize) takes channels-last strides when one of its 4-d inputs has
// them, as PyTorch's convolutions keep their input's format (DESIGN.md rule 7: the CNN models
// run channels-last).
#pragma once
#include "../core/views.hpp"
#include "node.hpp"

namespace solder {

enum class MemoryFormat { contiguous_format, channels_last };
inline constexpr MemoryFormat contiguous_format = MemoryFormat::contiguous_format;
inline constexpr MemoryFormat channels_last = MemoryFormat::channels_last;

// Whether t's strides are those of a fresh tensor of its shape in format f (size-1 axes' strides
// do not count, as in PyTorch: a [N, C, 1, 1] tensor is in both formats).
template <TensorType TT>
bool is_contiguous(TT const& t, MemoryFormat f = contiguous_format) {
  if (f == contiguous_format) return t.is_contiguous();
  if constexpr (TT::rank != 4) {
    return false;  // (channels_last is a format of 4-d tensors, as in PyTorch)
  } else {
    auto const &s = t.shape(), &st = t.strides();
    std::int64_t expect = 1;
    for (int d : {1, 3, 2, 0}) {  // C, W, H, N: innermost first
      if (s[d] != 1 && st[d] != expect) return false;
      expect *= s[d];
    }
    return true;
  }
}

namespace detail {

// Whether some 4-d tensor that x reads is channels-last and not also contiguous: then x's
// result is stored channels-last (PyTorch's convolutions and element-wise ops keep it so).
template <class N>
bool reads_channels_last(N const& n) {
  if constexpr (N::kind == NodeKind::leaf) {
    if constexpr (N::rank == 4) return is_contiguous(n.tensor, channels_last) && !n.tensor.is_contiguous();
    else return false;
  } else {
    return any_child(n, [](auto const& c) { return reads_channels_last(c); });
  }
}

// An uninitialized [N, C, H, W] tensor with channels-last strides.
template <class Result>
Result empty_channels_last(Index<4> const& s) {
  return permute(Result(s[0], s[2], s[3], s[1]), {0, 3, 1, 2});
}

}  // namespace detail

// x's values in a new tensor of format f, or x itself when it is a tensor in that format
// already (torch's contiguous(memory_format=)).
template <Lazy X>
auto contiguous(X const& x, MemoryFormat f = contiguous_format) {
  using N = node_t<X>;
  using T = detail::canonical_t<typename N::value_type>;
  using D = typename N::device_type;
  using Result = BasicTensor<T, dynamic_extents<N::rank>(), D>;
  if constexpr (TensorType<X>)
    if (is_contiguous(x, f)) return Result(x);
  if constexpr (N::rank == 4 && std::is_same_v<D, Host>) {
    if (f == channels_last) {
      Result r = detail::empty_channels_last<Result>(x.shape());
      r = as_node(x);
      return r;
    }
  } else {
    detail::check(f == contiguous_format, "contiguous: channels_last is a format of 4-d host tensors, not of ",
                  shape_string<N::rank>(x.shape()), std::is_same_v<D, Host> ? "" : " on sd::Cuda");
  }
  return Result(as_node(x));
}

}  // namespace solder
