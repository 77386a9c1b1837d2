// The kernels anchored by a contraction that one library call computes whole.
// A matrix product: the product alone (cuBLAS), and the product with the element-wise rests
// that cuBLASLt's own epilogues compute (CUBLASLT_EPILOGUE_*): plus a bias, a vector over the
// product's last dim, as linear(x, w, b) builds it (either order of the add); relu or
// gelu(..., sd::tanh_approximation) of either. cuBLASLt's GELU is the tanh form (PyTorch runs
// gelu(..., approximate="tanh") where its addmm cannot take that epilogue), so sd::gelu, the erf
// form, is not one of them.
// conv2d: the convolution alone (cudnnConvolutionForward), and the rests that cuDNN's fused
// call computes, y = act(alpha1 * conv2d(x, w) + z + bias) (cudnnConvolutionBiasActivationForward):
// the convolution, times a number or not, plus up to two tensors (a bias per channel, as
// conv2d(x, w, b) and nn::Conv2d build it, and a residual z of its shape: told apart by their
// shapes at run time, conv.hpp), in any order of the adds, under a relu or not. cuDNN's legacy
// API takes no other activation in that call but the identity.
// Recognized by type, here only: device_rules<Cuda> counts one kernel for these (executor.hpp),
// and backend/cuda/contract.hpp and conv.hpp run them; any other element-wise rest runs as a
// kernel of its own after the contraction.
#pragma once
#include <cublasLt.h>

#include "../../expr/contract.hpp"
#include "../../expr/conv.hpp"

namespace solder::detail::cuda {

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

// dnn_sum<N>::value: N is the convolution, times a C++ number or not (cuDNN's alpha1: scale),
// plus `addends` tensors of its element type and no higher rank, at most two (a bias and a
// residual), the adds in any order and nesting the expression builder makes
// (relu(conv2d(x, w, b) + r) is (conv + b) + r, relu(r + conv2d(x, w, b)) is r + (conv + b)).
template <class N>
struct dnn_sum {
  static constexpr bool value = false;
  static constexpr int addends = 0;
};
// A sum with no tensor added: the convolution, or the convolution times a number.
template <bool Matched>
struct dnn_no_addend {
  static constexpr bool value = Matched;
  static constexpr int addends = 0;
  template <class F>
  static void for_each_addend(auto const&, F&&) {}
};
template <class X, class W>
struct dnn_sum<Conv2d<X, W>> : dnn_no_addend<true> {
  static double scale(auto const&) { return 1; }
};
template <class X, class W, class S>
struct dnn_sum<Map<ops::Mul, Conv2d<X, W>, Scalar<S>>> : dnn_no_addend<std::is_arithmetic_v<S>> {
  static double scale(auto const& n) { return static_cast<double>(n.template child<1>().value); }
};
template <class X, class W, class S>
struct dnn_sum<Map<ops::Mul, Scalar<S>, Conv2d<X, W>>> : dnn_no_addend<std::is_arithmetic_v<S>> {
  static double scale(auto const& n) { return static_cast<double>(n.template child<0>().value); }
};
template <class N, class Sum>
inline constexpr bool dnn_addend = false;
template <class T, auto E, class Sum>
inline constexpr bool dnn_addend<Leaf<T, E, Cuda>, Sum> =
    std::is_same_v<T, typename Sum::value_type> && rank_of<E> <= Sum::rank;
template <class A, class B>
struct dnn_sum<Map<ops::Add, A, B>> {
  static constexpr bool left = dnn_sum<A>::value;  // the sum on the left, the tensor on the right
  using Sum = std::conditional_t<left, A, B>;
  static constexpr bool value =
      dnn_sum<Sum>::value && dnn_sum<Sum>::addends < 2 && dnn_addend<std::conditional_t<left, B, A>, Sum>;
  static constexpr int addends = dnn_sum<Sum>::addends + 1;
  static double scale(auto const& n) { return dnn_sum<Sum>::scale(n.template child<left ? 0 : 1>()); }
  // f(tensor) for each tensor added, the innermost first.
  template <class F>
  static void for_each_addend(auto const& n, F&& f) {
    dnn_sum<Sum>::for_each_addend(n.template child<left ? 0 : 1>(), f);
    f(n.template child<left ? 1 : 0>().tensor);
  }
};

// dnn_epilogue<N>::value: the kernel rooted at N is one cuDNN call, with a ReLU (relu) or the
// identity as the fused call's activation.
template <class N>
struct dnn_epilogue : dnn_sum<N> {
  static constexpr bool relu = false;
};
template <class X>
struct dnn_epilogue<Map<ops::Relu, X>> : dnn_sum<X> {
  static constexpr bool relu = true;
  static double scale(auto const& n) { return dnn_sum<X>::scale(n.template child<0>()); }
  template <class F>
  static void for_each_addend(auto const& n, F&& f) {
    dnn_sum<X>::for_each_addend(n.template child<0>(), f);
  }
};

}  // namespace solder::detail::cuda
