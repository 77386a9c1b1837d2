// The kernels anchored by a matrix product that one library call computes whole: the product
// alone (cuBLAS), and the product with the element-wise rests that cuBLASLt's own epilogues
// compute (CUBLASLT_EPILOGUE_*): plus a bias, a vector over the product's last dim, as
// linear(x, w, b) builds it (either order of the add); relu or gelu(..., sd::tanh_approximation)
// of either. cuBLASLt's GELU is the tanh form (PyTorch runs gelu(..., approximate="tanh") where
// its addmm cannot take that epilogue), so sd::gelu, the erf form, is not one of them.
// Recognized by type, here only: device_rules<Cuda> counts one kernel for these (executor.hpp),
// and backend/cuda/contract.hpp runs them; any other element-wise rest runs as a kernel of its
// own after the product.
#pragma once
#include <cublasLt.h>

#include "../../expr/contract.hpp"

namespace solder::detail::cuda {

template <class N>
inline constexpr bool is_matmul = false;
template <class A, class B>
inline constexpr bool is_matmul<Contract<A, B>> = true;

// The product, or the product plus a bias (a tensor of its element type over its last dim).
template <class N>
struct lt_product {
  static constexpr bool value = is_matmul<N>, bias = false;
};
template <class A, class B, class T, auto E>
struct lt_biased {
  static constexpr bool value = rank_of<E> == 1 && B::rank >= 2 &&
                                std::is_same_v<T, typename Contract<A, B>::value_type>,
                        bias = value;
};
template <class A, class B, class T, auto E>
struct lt_product<Map<ops::Add, Contract<A, B>, Leaf<T, E, Cuda>>> : lt_biased<A, B, T, E> {};
template <class A, class B, class T, auto E>
struct lt_product<Map<ops::Add, Leaf<T, E, Cuda>, Contract<A, B>>> : lt_biased<A, B, T, E> {};

// lt_epilogue<N>::value: the kernel rooted at N is one call, with cuBLASLt's epilogue op
// (DEFAULT: the product alone, cuBLAS's; bias: op adds one).
template <class X, cublasLtEpilogue_t Plain, cublasLtEpilogue_t Biased>
struct lt_over {
  static constexpr bool value = lt_product<X>::value, bias = lt_product<X>::bias;
  static constexpr cublasLtEpilogue_t op = bias ? Biased : Plain;
};
template <class N>
struct lt_epilogue : lt_over<N, CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS> {};
template <class X>
struct lt_epilogue<Map<ops::Relu, X>>
    : lt_over<X, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU_BIAS> {};
template <class X>
struct lt_epilogue<Map<ops::GeluTanh, X>>
    : lt_over<X, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS> {};

// The bias of a kernel that lt_epilogue matched with one: the leaf of its add.
template <class N>
auto const& lt_bias(N const& root) {
  if constexpr (lt_product<N>::bias) return root.template child<is_matmul<child_t<N, 0>> ? 1 : 0>().tensor;
  else return lt_bias(root.template child<0>());
}

}  // namespace solder::detail::cuda
