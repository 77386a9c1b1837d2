// Element types and PyTorch's type promotion (torch.result_type), as compile-time functions.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace solder {

#if defined(__CUDACC__)
// 16-bit floats (with nvcc): storage types; every op computes in float and rounds once, when it
// stores its result.
using half = __half;
using bfloat16 = __nv_bfloat16;
#endif

namespace detail {
template <class T>
inline constexpr bool is_half_v = false;
#if defined(__CUDACC__)
template <>
inline constexpr bool is_half_v<__half> = true;
template <>
inline constexpr bool is_half_v<__nv_bfloat16> = true;
#endif

// An element type named without the alias it was reached through. A node's value_type is an alias
// member of a class whose template arguments include Extents values; the host code nvcc generates
// spells a class-type element (half) through that path, which g++ cannot parse back. The tensors
// that kernels write are made with canonical_t<...>.
template <class T>
struct canonical;
template <> struct canonical<float> { using type = float; };
template <> struct canonical<double> { using type = double; };
template <> struct canonical<std::int32_t> { using type = std::int32_t; };
template <> struct canonical<std::int64_t> { using type = std::int64_t; };
template <> struct canonical<bool> { using type = bool; };
#if defined(__CUDACC__)
template <> struct canonical<__half> { using type = __half; };
template <> struct canonical<__nv_bfloat16> { using type = __nv_bfloat16; };
#endif
template <class T>
using canonical_t = typename canonical<T>::type;
}  // namespace detail

// float, double and the 16-bit floats.
template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || detail::is_half_v<T>;

template <class T>
concept Element = std::same_as<T, float> || std::same_as<T, double> ||
                  std::same_as<T, std::int32_t> || std::same_as<T, std::int64_t> ||
                  std::same_as<T, bool> || detail::is_half_v<T>;

// A C++ number an op accepts beside tensors: an Element, or an integer of any other width
// (size_t, unsigned, long long, short ...), which enters as an int64 wrapped number, as a
// Python int does in PyTorch (wrapped_t).
template <class T>
concept Number = Element<T> || std::integral<T>;
template <Number T>
using wrapped_t = std::conditional_t<Element<T>, T, std::int64_t>;

template <class T>
constexpr std::string_view dtype_name() {
#if defined(__CUDACC__)
  if constexpr (std::same_as<T, half>) return "float16";
  else if constexpr (std::same_as<T, bfloat16>) return "bfloat16";
  else
#endif
  if constexpr (std::same_as<T, float>) return "float32";
  else if constexpr (std::same_as<T, double>) return "float64";
  else if constexpr (std::same_as<T, std::int32_t>) return "int32";
  else if constexpr (std::same_as<T, std::int64_t>) return "int64";
  else return "bool";
}

// The dtype of a kernel's output as explain and traces print it: a tensor element's, or what
// a value names itself (the pack of a kernel with several results, expr/results.hpp).
template <class T>
std::string dtype_label() {
  if constexpr (requires { T::dtype_label(); }) return T::dtype_label();
  else return std::string(dtype_name<T>());
}

namespace detail {

// PyTorch's categories: bool < integral < floating. Within a category the wider type wins.
template <class T>
constexpr int category = std::same_as<T, bool> ? 0 : std::is_integral_v<T> ? 1 : 2;

template <class A, class B>
struct promote {
  using type = std::conditional_t<
      (category<A> != category<B>), std::conditional_t<(category<A> > category<B>), A, B>,
      std::conditional_t<(is_half_v<A> && is_half_v<B> && !std::is_same_v<A, B>), float,  // as torch
                         std::conditional_t<(sizeof(A) >= sizeof(B)), A, B>>>;
};

// A C++ literal is a "wrapped number": it only matters when its category is higher than
// the tensor's (int tensor * 0.5f -> float32; float tensor * 0.5 stays float32;
// bool tensor + 1 -> int64), as in PyTorch.
template <class TensorT, class ScalarT>
struct promote_with_scalar {
  static constexpr int tc = category<TensorT>;
  static constexpr int sc = category<ScalarT>;
  using type = std::conditional_t<(sc <= tc), TensorT,
                                  std::conditional_t<sc == 2, float, std::int64_t>>;
};

}  // namespace detail

template <class... Ts>
struct promote;
template <class T>
struct promote<T> {
  using type = T;
};
template <class A, class B, class... Rest>
struct promote<A, B, Rest...> : promote<typename detail::promote<A, B>::type, Rest...> {};

template <class... Ts>
using promote_t = typename promote<Ts...>::type;

// The type floating-point ops compute in: ints and bool become float32 (PyTorch's default).
template <class T>
using floating_t = std::conditional_t<is_floating_v<T>, T, float>;

// The type an element-wise op computes in: its own, but float for the 16-bit floats.
template <class T>
using compute_t = std::conditional_t<detail::is_half_v<T>, float, T>;

}  // namespace solder
