// conv2d on sd::Cuda tensors (expr/conv.hpp), in cuDNN: one cudnnConvolutionForward call, its
// algorithm the first that cuDNN's heuristic (cudnnGetConvolutionForwardAlgorithm_v7) offers
// and that runs on these descriptors, its workspace from the memory pool. The descriptors and
// the heuristic's answer are made on the first call of a problem (shapes, window, groups, type)
// and kept (ConvPlan). Under sd::compile's max_autotune the algorithms the heuristic offers are
// timed on the problem's first call and the fastest kept (runtime/autotune.hpp: per GPU, in the
// cache file), leaving out any that asks for more workspace than 256 MiB and than the first. The
// input and the weight are read as packed NCHW and KCRS: a view with other strides is copied
// first (a kernel).
// The result goes straight into a contiguous output of its element type; run_contraction
// (contract.hpp) stores it first for any other output.
// A rest that cuDNN's fused call computes, y = act(alpha1 * conv2d(x, w) + z + bias) (dnn_epilogue,
// epilogue.hpp: a bias per channel, a residual z, a ReLU or the identity, a number times the
// convolution), is that one call (cudnnConvolutionBiasActivationForward) where the output is
// contiguous of the convolution's type and of its shape, and the bias and the residual are
// contiguous; its plan keeps the bias's and the activation's descriptors too, and max_autotune
// times its algorithms as the plain convolution's. Any other rest, or where those do not hold,
// runs after the convolution, stored first (run_contraction).
// Groups (depthwise included) are cuDNN's group count; cuDNN pads each side alike, so
// padding="same" with an odd total (the extra row at the end, as PyTorch) is computed one row
// and column larger and its window copied out (a second launch, in the same planned kernel).
// float computes in float (CUDNN_FMA_MATH; TF32 only with sd::cuda::allow_tf32(true), as for
// products), double in double, half and bfloat16 in float with tensor cores.
// Without cuDNN's header, conv2d on sd::Cuda tensors is a compile error that says so; nothing
// else needs cuDNN, and a program that convolves no sd::Cuda tensor need not link it.
#pragma once
#include <array>
#include <climits>
#include <compare>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../expr/conv.hpp"
#include "contract.hpp"
#include "epilogue.hpp"

#if __has_include(<cudnn.h>)
#include <cudnn.h>

namespace solder::detail::cuda {

// Throws sd::Error naming the cuDNN call, its status and where the call was made.
inline void check_cudnn(cudnnStatus_t s, char const* call, char const* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS)
    fail("cuDNN call ", call, " failed: ", cudnnGetErrorString(s), " (", file, ":", line, ")");
}
#define SOLDER_CUDNN_CHECK(call) ::solder::detail::cuda::check_cudnn((call), #call, __FILE__, __LINE__)

// cuDNN's handle for the current device (per_device, contract.hpp). It keeps a stream, set for
// each call: one call at a time holds it (dnn_lock), and with it the plans (conv_plans).
inline cudnnHandle_t dnn_handle() {
  return per_device<cudnnHandle_t>([] {
    cudnnHandle_t h = nullptr;
    SOLDER_CUDNN_CHECK(cudnnCreate(&h));
    return h;
  });
}
inline std::mutex& dnn_lock() {
  static std::mutex m;
  return m;
}

// A cuDNN descriptor, destroyed with its owner.
template <class H>
using DnnOwned = std::unique_ptr<std::remove_pointer_t<H>, cudnnStatus_t (*)(H)>;
template <class H>
DnnOwned<H> dnn_descriptor(cudnnStatus_t (*create)(H*), cudnnStatus_t (*destroy)(H)) {
  H h = nullptr;
  SOLDER_CUDNN_CHECK(create(&h));
  return DnnOwned<H>(h, destroy);
}

// Element types: cuDNN's name, the type it computes in, and the type of alpha and beta.
template <class T>
struct dnn_type;
template <>
struct dnn_type<float> {
  static constexpr cudnnDataType_t data = CUDNN_DATA_FLOAT, compute = CUDNN_DATA_FLOAT;
  using Scale = float;
};
template <>
struct dnn_type<double> {
  static constexpr cudnnDataType_t data = CUDNN_DATA_DOUBLE, compute = CUDNN_DATA_DOUBLE;
  using Scale = double;
};
template <>
struct dnn_type<__half> {
  static constexpr cudnnDataType_t data = CUDNN_DATA_HALF, compute = CUDNN_DATA_FLOAT;
  using Scale = float;
};
template <>
struct dnn_type<__nv_bfloat16> {
  static constexpr cudnnDataType_t data = CUDNN_DATA_BFLOAT16, compute = CUDNN_DATA_FLOAT;
  using Scale = float;
};
// Tensor cores only where they keep the element type's accuracy: 16-bit operands always, float
// only where TF32 is allowed.
template <class T>
cudnnMathType_t dnn_math() {
  if constexpr (is_half_v<T>) return CUDNN_DEFAULT_MATH;
  else if constexpr (std::is_same_v<T, float>)
    return solder::cuda::tf32_allowed() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  else return CUDNN_FMA_MATH;
}

// A size as cuDNN's legacy API takes it, an int.
inline int dnn_int(std::int64_t v) {
  check(v <= INT_MAX, "conv2d on sd::Cuda: a size of ", v, " exceeds cuDNN's int sizes");
  return static_cast<int>(v);
}

// [N, C, H, W] of an image tensor ([C, H, W]: N = 1).
template <class TT>
std::array<int, 4> nchw(TT const& t) {
  constexpr int R = TT::rank;
  auto const& s = t.shape();
  return {R == 4 ? dnn_int(s[0]) : 1, dnn_int(s[R - 3]), dnn_int(s[R - 2]), dnn_int(s[R - 1])};
}

// What a convolution's descriptors and cuDNN's heuristic depend on: the device, the types, the
// shapes of x, w and y, the window and the groups; and the call: the convolution alone, or
// cuDNN's fused call (fused) with a ReLU or the identity, with a residual or not.
struct ConvKey {
  int device;
  cudnnDataType_t type;
  cudnnMathType_t math;
  std::array<int, 4> x, w, y;
  std::array<int, 6> window;  // padding, stride, dilation: (h, w) each
  int groups;
  bool fused, relu, residual;
  friend auto operator<=>(ConvKey const&, ConvKey const&) = default;
};

// The operands of cuDNN's fused call, y = act(alpha1 * conv2d(x, w) + z + bias), act a ReLU or
// the identity: the bias, a value per output channel, and z (null: none) of y's shape, both
// packed, of y's element type.
template <class T>
struct ConvEpilogue {
  bool relu = false;
  typename dnn_type<T>::Scale alpha1 = 1;
  T const* bias = nullptr;
  T const* z = nullptr;
};

// A convolution's descriptors, the algorithms cuDNN's heuristic offers for them that run (best
// first) and its key in max_autotune's cache, made on the problem's first call and kept
// (conv_plans). Each call sets its algorithm's math type on the descriptor, under dnn_lock.
// The fused call's plan also keeps the bias's ([1, C, 1, 1]) and the activation's descriptors
// (z's is y's).
struct ConvPlan {
  DnnOwned<cudnnTensorDescriptor_t> x, y;
  DnnOwned<cudnnFilterDescriptor_t> w;
  DnnOwned<cudnnConvolutionDescriptor_t> conv;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> algorithms;
  std::string tuning_key;
  DnnOwned<cudnnTensorDescriptor_t> bias{nullptr, cudnnDestroyTensorDescriptor};
  DnnOwned<cudnnActivationDescriptor_t> activation{nullptr, cudnnDestroyActivationDescriptor};
};

// The plans made so far, by problem, read and written under dnn_lock. Bounded and never
// destroyed, as lt_plans.
inline std::map<ConvKey, ConvPlan>& conv_plans() {
  static auto* plans = new std::map<ConvKey, ConvPlan>;
  return *plans;
}
inline constexpr std::size_t conv_plans_max = 1024;

// max_autotune leaves out the algorithms that ask for more workspace than this and than the
// heuristic's first choice: the memory pool keeps what a workspace took.
inline constexpr std::size_t dnn_tuning_workspace = std::size_t(256) << 20;

// The problem as max_autotune's cache names it, with cuDNN's version: another version's
// heuristic may list other algorithms.
template <class T>
std::string conv_tuning_key(ConvKey const& k) {
  auto dims = [](auto const& a, std::size_t from, std::size_t n) {
    std::string s;
    for (std::size_t i = from; i < from + n; ++i) s += (i == from ? "" : ",") + std::to_string(a[i]);
    return s;
  };
  return "cudnn " + std::to_string(cudnnGetVersion()) + " conv2d " + std::string(dtype_name<T>()) +
         (k.math == CUDNN_DEFAULT_MATH ? " tensor-ops" : "") + " x=[" + dims(k.x, 0, 4) + "] w=[" +
         dims(k.w, 0, 4) + "] y=[" + dims(k.y, 0, 4) + "] padding=" + dims(k.window, 0, 2) +
         " stride=" + dims(k.window, 2, 2) + " dilation=" + dims(k.window, 4, 2) +
         " groups=" + std::to_string(k.groups) +
         (k.fused ? std::string(" epilogue=bias") + (k.residual ? "+residual" : "") + (k.relu ? "+relu" : "") : "");
}

// An algorithm of the heuristic's list, as the autotune log names it.
inline std::string dnn_describe(int index, cudnnConvolutionFwdAlgoPerf_t const& a) {
  static constexpr char const* names[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm",     "direct",
                                          "fft",           "fft_tiling",            "winograd", "winograd_nonfused"};
  auto const algo = static_cast<std::size_t>(a.algo);
  return "#" + std::to_string(index) + "[" + (algo < std::size(names) ? names[algo] : std::to_string(algo)) +
         (a.mathType == CUDNN_FMA_MATH || a.mathType == CUDNN_DEFAULT_MATH ? "" : ",tensor-ops") +
         ",workspace=" + std::to_string(a.memory) + "]";
}

// The plan of problem `key`: the one kept, or made now. Called with dnn_lock held.
template <class T>
ConvPlan const& conv_plan(cudnnHandle_t h, ConvKey const& key) {
  auto& plans = conv_plans();
  auto const found = plans.find(key);
  if (found != plans.end()) return found->second;

  auto tensor = [&](std::array<int, 4> const& s) {
    auto d = dnn_descriptor(cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor);
    SOLDER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, key.type, s[0], s[1], s[2], s[3]));
    return d;
  };
  ConvPlan plan{tensor(key.x), tensor(key.y), dnn_descriptor(cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor),
                dnn_descriptor(cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor), {},
                conv_tuning_key<T>(key)};
  auto const& w = key.w;
  SOLDER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w.get(), key.type, CUDNN_TENSOR_NCHW, w[0], w[1], w[2], w[3]));
  auto const& win = key.window;
  // (CROSS_CORRELATION: PyTorch's conv2d does not flip the kernel.)
  SOLDER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.conv.get(), win[0], win[1], win[2], win[3], win[4], win[5],
                                                     CUDNN_CROSS_CORRELATION, dnn_type<T>::compute));
  SOLDER_CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan.conv.get(), key.groups));
  SOLDER_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv.get(), key.math));
  if (key.fused) {
    plan.bias = tensor({1, key.y[1], 1, 1});
    plan.activation = dnn_descriptor(cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor);
    // (the fused call takes no other NaN rule)
    SOLDER_CUDNN_CHECK(cudnnSetActivationDescriptor(plan.activation.get(),
                                                    key.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                    CUDNN_NOT_PROPAGATE_NAN, 0));
  }

  constexpr int wanted = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  cudnnConvolutionFwdAlgoPerf_t found_algorithms[wanted];
  int count = 0;
  SOLDER_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, plan.x.get(), plan.w.get(), plan.conv.get(),
                                                            plan.y.get(), wanted, &count, found_algorithms));
  // The fused call with the identity runs in IMPLICIT_PRECOMP_GEMM only (cuDNN's rule).
  auto runs = [&](cudnnConvolutionFwdAlgoPerf_t const& a) {
    return a.status == CUDNN_STATUS_SUCCESS &&
           (!key.fused || key.relu || a.algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  };
  for (int i = 0; i < count; ++i)
    if (runs(found_algorithms[i])) plan.algorithms.push_back(found_algorithms[i]);

  if (plans.size() >= conv_plans_max) plans.clear();
  return plans.emplace(key, std::move(plan)).first->second;
}

// The convolution of x (packed NCHW) by w (packed KCRS) into y (packed, cuDNN's output shape
// for these descriptors), with symmetric padding ph, pw: cudnnConvolutionForward, or with `fused`
// cuDNN's fused call. False where the fused call does not take the problem (none of its
// algorithms runs on these descriptors, or CUDNN_STATUS_NOT_SUPPORTED), y left to be written.
template <class T, class TX, class TW, class TY>
bool dnn_convolution(TX const& x, TW const& w, TY& y, Window2d const& win, std::int64_t ph, std::int64_t pw,
                     std::int64_t groups, ConvEpilogue<T> const* fused = nullptr) {
  auto const& ws = w.shape();
  ConvKey const key{current_device(), dnn_type<T>::data, dnn_math<T>(), nchw(x),
                    {dnn_int(ws[0]), dnn_int(ws[1]), dnn_int(ws[2]), dnn_int(ws[3])}, nchw(y),
                    {dnn_int(ph), dnn_int(pw), dnn_int(win.sh), dnn_int(win.sw), dnn_int(win.dh), dnn_int(win.dw)},
                    dnn_int(groups), fused != nullptr, fused && fused->relu, fused && fused->z};
  std::lock_guard<std::mutex> lock(dnn_lock());
  cudnnHandle_t const h = dnn_handle();
  SOLDER_CUDNN_CHECK(cudnnSetStream(h, solder::cuda::stream()));
  ConvPlan const& plan = conv_plan<T>(h, key);
  if (fused && plan.algorithms.empty()) return false;
  check(!plan.algorithms.empty(), "conv2d on sd::Cuda: cuDNN has no algorithm for input ",
        shape_string<TX::rank>(x.shape()), ", weight ", shape_string<4>(ws), " (", dtype_name<T>(), ")");

  using Scale = typename dnn_type<T>::Scale;
  Scale const alpha = 1, beta = 0;
  // Without a residual, alpha2 is 0 and z is y itself (the call takes a z of y's shape).
  Scale const alpha2 = fused && fused->z ? 1 : 0;
  auto forward = [&](int algorithm, void* workspace) {
    auto const& a = plan.algorithms[algorithm];
    SOLDER_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv.get(), a.mathType));
    if (!fused)
      return cudnnConvolutionForward(h, &alpha, plan.x.get(), x.data(), plan.w.get(), w.data(), plan.conv.get(),
                                     a.algo, workspace, a.memory, &beta, plan.y.get(), y.data());
    return cudnnConvolutionBiasActivationForward(
        h, &fused->alpha1, plan.x.get(), x.data(), plan.w.get(), w.data(), plan.conv.get(), a.algo, workspace, a.memory,
        &alpha2, plan.y.get(), fused->z ? fused->z : y.data(), plan.bias.get(), fused->bias, plan.activation.get(),
        plan.y.get(), y.data());
  };
  auto workspace = [&](int algorithm) {
    return cuda_allocate<unsigned char>(static_cast<std::int64_t>(plan.algorithms[algorithm].memory));
  };
  int algorithm = 0;
  if (auto* tuner = device_tuner()) {
    std::size_t const most = std::max(plan.algorithms.front().memory, dnn_tuning_workspace);
    std::vector<int> choices;
    for (std::size_t i = 0; i < plan.algorithms.size(); ++i)
      if (plan.algorithms[i].memory <= most) choices.push_back(static_cast<int>(i));
    algorithm = tuner->choose_on_device(
        gpu_key(), plan.tuning_key, choices,
        [&](int i) {
          auto const space = workspace(i);
          return seconds_on_stream([&] { return forward(i, space.get()) == CUDNN_STATUS_SUCCESS; });
        },
        [&](int i) { return dnn_describe(i, plan.algorithms[i]); });
  }
  auto const space = workspace(algorithm);
  cudnnStatus_t const status = forward(algorithm, space.get());
  if (fused && status == CUDNN_STATUS_NOT_SUPPORTED) return false;
  check_cudnn(status, fused ? "cudnnConvolutionBiasActivationForward" : "cudnnConvolutionForward", __FILE__, __LINE__);
  return true;
}

// Sets ep's bias and z from the tensors that the kernel rooted at `root` adds to the convolution
// (dnn_epilogue, epilogue.hpp), told apart by their shapes as broadcasting aligns them: a bias
// holds a value per channel of y ([C, 1, 1], [1, C, 1, 1]), a residual has y's shape; both
// contiguous, and the residual apart from y (max_autotune runs the call more than once). False
// where they are not at most one of each.
template <class N, class T, auto E>
bool dnn_operands(N const& root, BasicTensor<T, E, Cuda> const& y, ConvEpilogue<T>& ep) {
  constexpr int D = rank_of<E>;
  Index<D> const& ys = y.shape();
  Index<D> channels;
  channels.fill(1);
  channels[D - 3] = ys[D - 3];
  struct Addend {
    T const* data;
    bool bias, residual;
  };
  std::array<Addend, 2> a{};
  int n = 0;
  dnn_epilogue<N>::for_each_addend(root, [&](auto const& t) {
    constexpr int R = std::remove_cvref_t<decltype(t)>::rank;
    Index<D> s;
    s.fill(1);
    for (int i = 0; i < R; ++i) s[D - R + i] = t.shape()[i];
    bool const packed = t.is_contiguous();
    a[n++] = {t.data(), packed && same_index<D>(s, channels), packed && same_index<D>(s, ys) && t.data() != y.data()};
  });
  if (n == 1) {
    if (a[0].bias) ep.bias = a[0].data;
    else if (a[0].residual) ep.z = a[0].data;
    else return false;
  } else if (n == 2) {
    if (!(a[0].bias && a[1].residual)) std::swap(a[0], a[1]);  // (either order)
    if (!(a[0].bias && a[1].residual)) return false;
    ep.bias = a[0].data;
    ep.z = a[1].data;
  }
  return true;
}

template <class X, class W>
struct AnchorEngine<Conv2d<X, W>> {
  using Anchor = Conv2d<X, W>;
  using T = canonical_t<typename Anchor::value_type>;
  static constexpr int D = Anchor::rank;

  // The padding cuDNN is given for an output of shape os, {h, w}. cuDNN pads both sides alike:
  // by the larger of the padding before and the padding the output needs after; where that is
  // more than the padding before ("same" with an odd total), the output is the window of a
  // larger result that starts the difference later.
  static std::array<std::int64_t, 2> padding(Anchor const& anchor, Index<D> const& os) {
    Index<D> const& xs = anchor.x.shape();
    Window2d const& win = anchor.win;
    auto both_sides = [](std::int64_t out_len, std::int64_t in_len, std::int64_t k, std::int64_t s, std::int64_t d,
                         std::int64_t before) {
      return std::max(before, (out_len - 1) * s + d * (k - 1) + 1 - in_len - before);
    };
    return {both_sides(os[D - 2], xs[D - 2], win.kh, win.sh, win.dh, win.ph),
            both_sides(os[D - 1], xs[D - 1], win.kw, win.sw, win.dw, win.pw)};
  }
  static auto packed(auto const& t) { return t.is_contiguous() ? t : t.clone(); }

  // Writes conv2d(x, w) into out (the anchor's shape); false where cuDNN cannot write out itself
  // (another element type, or not contiguous: run_contraction then stores the result first).
  template <class OutT, auto E>
  static bool run(Anchor const& anchor, BasicTensor<OutT, E, Cuda>& out) {
    if constexpr (!std::is_same_v<OutT, T>) {
      return false;
    } else {
      Index<D> const& os = out.shape();
      Index<D> const& xs = anchor.x.shape();
      bool const contiguous = out.is_contiguous();
      if (xs[D - 3] == 0) {  // no input channels: zeros, as PyTorch
        if (contiguous)
          SOLDER_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, static_cast<std::size_t>(out.numel()) * sizeof(T),
                                            solder::cuda::stream()));
        return contiguous;
      }
      Window2d const& win = anchor.win;
      auto const [ph, pw] = padding(anchor, os);
      bool const window = ph != win.ph || pw != win.pw;  // copied out (into any layout)
      if (!window && !contiguous) return false;
      auto const x = packed(in_memory(anchor.x));
      auto const w = packed(in_memory(anchor.w));
      if (!window) return dnn_convolution<T>(x, w, out, win, ph, pw, anchor.groups);
      Index<D> larger = os;
      larger[D - 2] = (xs[D - 2] + 2 * ph - win.dh * (win.kh - 1) - 1) / win.sh + 1;
      larger[D - 1] = (xs[D - 1] + 2 * pw - win.dw * (win.kw - 1) - 1) / win.sw + 1;
      BasicTensor<T, dynamic_extents<D>(), Cuda> full(larger);
      dnn_convolution<T>(x, w, full, win, ph, pw, anchor.groups);
      auto copy = leaf_eval<D>(
          solder::narrow(solder::narrow(full, D - 2, ph - win.ph, os[D - 2]), D - 1, pw - win.pw, os[D - 1]), os);
      launch(out, copy, Lines<D>{});
      return true;
    }
  }

  // Writes the kernel rooted at `root`, the convolution with a rest that cuDNN's fused call
  // computes (dnn_epilogue, epilogue.hpp), into out in that one call; false, out left to be
  // written, where out is not contiguous of the convolution's type and shape (a broadcast rest),
  // cuDNN would pad more than the convolution does ("same" with an odd total), there are no
  // input channels, the added tensors are not a bias and a residual (dnn_operands), or cuDNN
  // does not take the call: run_contraction then stores the convolution first.
  template <class N, class OutT, auto E>
  static bool run_fused(N const& root, Anchor const& anchor, BasicTensor<OutT, E, Cuda>& out) {
    if constexpr (!std::is_same_v<OutT, T>) {
      return false;
    } else {
      Index<D> const& os = out.shape();
      Window2d const& win = anchor.win;
      auto const [ph, pw] = padding(anchor, os);
      if (!out.is_contiguous() || !same_index<D>(anchor.shape(), os) || ph != win.ph || pw != win.pw ||
          anchor.x.shape()[D - 3] == 0)
        return false;
      using Ep = dnn_epilogue<N>;
      ConvEpilogue<T> ep{Ep::relu, static_cast<typename dnn_type<T>::Scale>(Ep::scale(root))};
      if (!dnn_operands(root, out, ep)) return false;
      std::shared_ptr<T> zeros;  // no bias in the expression: the call takes one all the same
      if (!ep.bias) {
        zeros = cuda_allocate<T>(os[D - 3]);
        SOLDER_CUDA_CHECK(cudaMemsetAsync(zeros.get(), 0, static_cast<std::size_t>(os[D - 3]) * sizeof(T),
                                          solder::cuda::stream()));
        ep.bias = zeros.get();
      }
      return dnn_convolution<T>(packed(in_memory(anchor.x)), packed(in_memory(anchor.w)), out, win, ph, pw,
                                anchor.groups, &ep);
    }
  }
};

}  // namespace solder::detail::cuda

#else  // no cuDNN

namespace solder::detail::cuda {

template <class X, class W>
struct AnchorEngine<Conv2d<X, W>> {
  static_assert(always_false<X>,
                "solder: conv2d on sd::Cuda tensors runs in cuDNN, and cudnn.h was not found: install "
                "cuDNN beside the CUDA Toolkit, or compute it on sd::Host tensors");
  template <class OutTensor>
  static bool run(Conv2d<X, W> const&, OutTensor&) {
    return false;
  }
  template <class N, class OutTensor>
  static bool run_fused(N const&, Conv2d<X, W> const&, OutTensor&) {
    return false;
  }
};

}  // namespace solder::detail::cuda

#endif
