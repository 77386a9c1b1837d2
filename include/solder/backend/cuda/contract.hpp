// Kernels anchored by a contraction on sd::Cuda tensors (plan.hpp: has_anchor).
// Matrix products (matmul, mm, bmm, linear) run in cuBLAS and cuBLASLt:
//   * The product alone is one cuBLAS call (cublasGemmStridedBatchedEx) into the output.
//   * The element-wise rests that cuBLASLt's own epilogues compute (epilogue.hpp: bias, relu,
//     gelu with the tanh approximation, and their combinations) make the kernel one cuBLASLt
//     call that writes the output: one kernel, as on the host.
//   * Any other rest runs after the product, which cuBLAS stores into a temporary from the
//     memory pool: then the rest is one fused element-wise kernel that reads the product as a
//     tensor (the host's run-time break for a broadcast anchor does the same). Two kernels: the
//     host's engine hands each block of the product to the epilogue while it is in the cache,
//     but cuBLAS's kernels take no code of ours, only the epilogues cuBLASLt has. The same two
//     kernels run where the shapes or layouts do not suit cuBLASLt's epilogue (below).
// float operands compute in float (TF32 only with sd::cuda::allow_tf32(true)), double in double,
// half and bfloat16 accumulate in float.
// The other anchors have an engine each (AnchorEngine below): conv2d in cuDNN (conv.hpp), the
// pools (pool.hpp), embedding (embedding.hpp) and attention (attention.hpp) in kernels of
// solder's own. The anchor alone is its engine's one kernel, written into the output; with an
// element-wise rest, the anchor is stored first and the rest is one element-wise kernel after
// it, as for a product that cuBLASLt's epilogues do not cover.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>

#include "../host/contract.hpp"
#include "executor.hpp"

namespace solder::cuda {

// Whether float products may run in TF32 (tensor cores, operands rounded to 10 bits of
// mantissa: about 1e-3 relative error, where float's is 6e-8). Off by default, as PyTorch's
// torch.backends.cuda.matmul.allow_tf32; for the whole process, read at each product.
inline std::atomic<bool>& tf32_switch() {
  static std::atomic<bool> on{false};
  return on;
}
inline void allow_tf32(bool on) { tf32_switch() = on; }
inline bool tf32_allowed() { return tf32_switch(); }

}  // namespace solder::cuda

namespace solder::detail::cuda {

// Throws sd::Error naming the cuBLAS or cuBLASLt call, its status and where the call was made.
inline void check_cublas(cublasStatus_t s, char const* call, char const* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail("cuBLAS call ", call, " failed: ", cublasGetStatusName(s), ": ", cublasGetStatusString(s), " (",
         file, ":", line, ")");
}
#define SOLDER_CUBLAS_CHECK(call) ::solder::detail::cuda::check_cublas((call), #call, __FILE__, __LINE__)

// A handle for the current device, made by create() on first use (never destroyed: the
// process keeps it, as PyTorch keeps its handles).
template <class H, class F>
H device_handle(F create) {
  static std::mutex m;
  static std::map<int, H> handles;
  int const id = current_device();
  std::lock_guard<std::mutex> lock(m);
  auto it = handles.find(id);
  if (it != handles.end()) return it->second;
  return handles.emplace(id, create()).first->second;
}
inline cublasLtHandle_t lt_handle() {
  return device_handle<cublasLtHandle_t>([] {
    cublasLtHandle_t h = nullptr;
    SOLDER_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  });
}
// cuBLAS's handle keeps a stream and a workspace, set for each call: one call at a time holds
// it (blas_lock). Split-K parts are summed in the compute type, never in a 16-bit output type.
inline cublasHandle_t blas_handle() {
  return device_handle<cublasHandle_t>([] {
    cublasHandle_t h = nullptr;
    SOLDER_CUBLAS_CHECK(cublasCreate(&h));
    auto const mode = CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    SOLDER_CUBLAS_CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(mode)));
    return h;
  });
}
inline std::mutex& blas_lock() {
  static std::mutex m;
  return m;
}

template <class H>
using LtOwned = std::unique_ptr<std::remove_pointer_t<H>, cublasStatus_t (*)(H)>;
// f(d, a, &v, sizeof v): sets an attribute of a cuBLASLt descriptor.
template <class Desc, class Attr, class V>
void lt_set(cublasStatus_t (*f)(Desc, Attr, void const*, std::size_t), Desc d, Attr a, V const& v) {
  SOLDER_CUBLAS_CHECK(f(d, a, &v, sizeof v));
}

// Element types: cuBLAS's name, and the type of alpha and beta.
template <class T>
struct blas_type;
template <>
struct blas_type<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
  using Scale = float;
};
template <>
struct blas_type<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F;
  using Scale = double;
};
template <>
struct blas_type<__half> {
  static constexpr cudaDataType_t data = CUDA_R_16F;
  using Scale = float;
};
template <>
struct blas_type<__nv_bfloat16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF;
  using Scale = float;
};
template <class T>
cublasComputeType_t blas_compute() {
  if constexpr (std::is_same_v<T, double>) return CUBLAS_COMPUTE_64F;
  else if constexpr (std::is_same_v<T, float>)
    return solder::cuda::tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  else return CUBLAS_COMPUTE_32F;  // 16-bit operands, float accumulation
}

// A matrix as cuBLAS reads it: column-major, `rows` x `cols` as stored with leading dim `ld`,
// op T where the product reads its transpose. ok: the strides allow it.
struct BlasMatrix {
  cublasOperation_t op = CUBLAS_OP_N;
  std::int64_t rows = 0, cols = 0, ld = 1;
  bool ok = false;
};
// A rows x cols matrix whose (i, j) is at i * rs + j * cs, read column-major: rows contiguous,
// columns ld >= rows apart (the stride of an extent of 1 is never used).
inline BlasMatrix column_major(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  std::int64_t const ld = cols == 1 ? std::max<std::int64_t>(1, rows) : cs;
  return {CUBLAS_OP_N, rows, cols, ld, (rows == 1 || rs == 1) && ld >= std::max<std::int64_t>(1, rows)};
}
// An operand: column-major, or its transpose column-major (a row-major matrix), read with op T.
inline BlasMatrix blas_operand(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  BlasMatrix const n = column_major(rows, cols, rs, cs);
  if (n.ok) return n;
  BlasMatrix t = column_major(cols, rows, cs, rs);
  t.op = CUBLAS_OP_T;
  return t;
}

// An operand tensor as cuBLAS can read it: in place where one of its matrix dims has stride 1
// and the other is a leading dim (any batch strides: a call per batch where they are not one
// stride apart), else a contiguous copy (a kernel). A vector is a row (left) or a column.
template <bool Left, class TT>
TT readable(TT const& t) {
  constexpr int R = TT::rank;
  auto const& s = t.shape();
  auto const& st = t.strides();
  bool ok = t.numel() == 0;  // (never read)
  if constexpr (R == 1)
    ok = ok || (Left ? blas_operand(1, s[0], 0, st[0]) : blas_operand(s[0], 1, st[0], 0)).ok;
  else ok = ok || blas_operand(s[R - 2], s[R - 1], st[R - 2], st[R - 1]).ok;
  return ok ? t : t.clone();
}

// D (m' x n') = op(X) op(Y), k terms each: `batch` products, the matrices of each `*_bs`
// elements apart.
struct BlasProblem {
  BlasMatrix x, y, d;
  std::int64_t k = 0, batch = 1, x_bs = 0, y_bs = 0, d_bs = 0;
};

// The cuBLAS calls that write the product of a and b (operands it can read: readable) into
// out, handed to f(problem, x, y, d) in order until f returns false: one call for all batches
// where their matrices are one stride apart in a, b and out, else one per batch. False where
// out's layout does not allow it (with a bias, which runs along D's rows, out's rows must be
// contiguous) or f refused. k must not be 0. (Host code only: test_cuda_host replays the calls
// on the host.)
template <class TA, class TB, class OutTensor, class F>
bool blas_calls(TA const& a, TB const& b, OutTensor& out, bool bias, F&& f) {
  constexpr int D = OutTensor::rank;
  host::ProductLayout<D> const l(a, b, out.shape());  // (the host's geometry of a product)
  auto const& ost = out.strides();
  std::int64_t const c_rs = l.row >= 0 ? ost[l.row] : 0, c_cs = l.col >= 0 ? ost[l.col] : 0;
  // D = C^T, column-major N x M, where out's rows are contiguous (its usual row-major layout):
  // C^T = B^T A^T. Else D = C = A B, if out's columns are contiguous.
  BlasProblem p;
  p.k = l.k;
  p.d = column_major(l.n, l.m, c_cs, c_rs);
  bool const transposed = p.d.ok;
  if (!transposed) {
    if (bias) return false;
    p.d = column_major(l.m, l.n, c_rs, c_cs);
    if (!p.d.ok) return false;
  }
  p.x = transposed ? blas_operand(l.n, l.k, l.b_cs, l.b_rs) : blas_operand(l.m, l.k, l.a_rs, l.a_cs);
  p.y = transposed ? blas_operand(l.k, l.m, l.a_cs, l.a_rs) : blas_operand(l.k, l.n, l.b_rs, l.b_cs);

  auto out_offset = [&](std::int64_t bi) {
    Index<D> idx{};
    l.batch_index(bi, idx);
    return dot<D>(idx, ost);
  };
  bool linear = l.batch_linear();
  for (std::int64_t bi = 2; bi < l.batch && linear; ++bi) linear = out_offset(bi) == bi * out_offset(1);
  auto const one = linear && l.batch > 1 ? l.offsets(1) : std::array<std::int64_t, 2>{};
  std::int64_t const d_one = linear && l.batch > 1 ? out_offset(1) : 0;
  p.x_bs = transposed ? one[1] : one[0];
  p.y_bs = transposed ? one[0] : one[1];
  p.d_bs = d_one;
  std::int64_t const per_call = linear ? std::min<std::int64_t>(l.batch, INT32_MAX) : 1;  // (cuBLASLt: int32)
  for (std::int64_t b0 = 0; b0 < l.batch; b0 += per_call) {
    p.batch = std::min(per_call, l.batch - b0);
    auto const o = linear ? std::array<std::int64_t, 2>{b0 * one[0], b0 * one[1]} : l.offsets(b0);
    auto const *ap = a.data() + o[0], *bp = b.data() + o[1];
    auto* const dp = out.data() + (linear ? b0 * d_one : out_offset(b0));
    if (!f(p, transposed ? bp : ap, transposed ? ap : bp, dp)) return false;
  }
  return true;
}

// The workspace cuBLAS and cuBLASLt may use (split-K partial sums): 32 MiB, NVIDIA's advice
// for Hopper, from the memory pool, which keeps it cached for the next product.
inline constexpr std::size_t blas_workspace = std::size_t(32) << 20;

// One cuBLAS call on solder's stream.
template <class T>
void gemm_call(BlasProblem const& p, T const* x, T const* y, T* d, void* workspace) {
  using Scale = typename blas_type<T>::Scale;
  constexpr cudaDataType_t type = blas_type<T>::data;
  Scale const alpha = 1, beta = 0;
  std::lock_guard<std::mutex> lock(blas_lock());
  cublasHandle_t const h = blas_handle();
  SOLDER_CUBLAS_CHECK(cublasSetStream(h, solder::cuda::stream()));
  SOLDER_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, blas_workspace));
  SOLDER_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(h, p.x.op, p.y.op, p.d.rows, p.d.cols, p.k, &alpha, x,
                                                    type, p.x.ld, p.x_bs, y, type, p.y.ld, p.y_bs, &beta, d,
                                                    type, p.d.ld, p.d_bs, p.batch, blas_compute<T>(),
                                                    CUBLAS_GEMM_DEFAULT));
}

// The largest power of two (up to 256) that p and every batch `stride_bytes` from it are
// aligned to: what cuBLASLt is told, so that it picks an algorithm that reads them.
inline std::uint32_t alignment(void const* p, std::int64_t stride_bytes) {
  auto const v = reinterpret_cast<std::uintptr_t>(p) | static_cast<std::uintptr_t>(stride_bytes) | 256u;
  return static_cast<std::uint32_t>(v & (~v + 1));
}

// One cuBLASLt call with epilogue ep (and bias, a vector over D's rows, where ep has one) on
// solder's stream; false where cuBLASLt does not take the problem: a dim of 1 (its heuristic
// has refused such shapes: PyTorch keeps them from it too) or no algorithm found.
template <class T>
bool lt_call(BlasProblem const& p, T const* x, T const* y, T* d, cublasLtEpilogue_t ep, T const* bias,
             void* workspace) {
  if (p.d.rows < 2 || p.d.cols < 2 || p.k < 2) return false;
  using Scale = typename blas_type<T>::Scale;
  constexpr cudaDataType_t type = blas_type<T>::data;
  cublasLtMatmulDesc_t made = nullptr;
  SOLDER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&made, blas_compute<T>(), blas_type<Scale>::data));
  LtOwned<cublasLtMatmulDesc_t> const desc(made, &cublasLtMatmulDescDestroy);
  lt_set(cublasLtMatmulDescSetAttribute, desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, p.x.op);
  lt_set(cublasLtMatmulDescSetAttribute, desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, p.y.op);
  lt_set(cublasLtMatmulDescSetAttribute, desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, ep);
  void const* const bias_pointer = bias;  // (its alignment, too, steers the heuristic)
  if (bias)
    lt_set(cublasLtMatmulDescSetAttribute, desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_pointer);

  auto layout = [&](BlasMatrix const& m, std::int64_t stride) {
    cublasLtMatrixLayout_t l = nullptr;
    SOLDER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<std::uint64_t>(m.rows),
                                                   static_cast<std::uint64_t>(m.cols), m.ld));
    LtOwned<cublasLtMatrixLayout_t> owned(l, &cublasLtMatrixLayoutDestroy);
    if (p.batch > 1) {
      auto const count = static_cast<std::int32_t>(p.batch);
      lt_set(cublasLtMatrixLayoutSetAttribute, l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
      lt_set(cublasLtMatrixLayoutSetAttribute, l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
    }
    return owned;
  };
  auto const xl = layout(p.x, p.x_bs), yl = layout(p.y, p.y_bs), dl = layout(p.d, p.d_bs);

  cublasLtMatmulPreference_t pref_made = nullptr;
  SOLDER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref_made));
  LtOwned<cublasLtMatmulPreference_t> const pref(pref_made, &cublasLtMatmulPreferenceDestroy);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t a, auto v) {
    lt_set(cublasLtMatmulPreferenceSetAttribute, pref.get(), a, v);
  };
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{blas_workspace});
  std::int64_t const bytes = sizeof(T);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(x, p.x_bs * bytes));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(y, p.y_bs * bytes));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(d, p.d_bs * bytes));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(d, p.d_bs * bytes));
  // Split-K parts summed in float, never in a 16-bit output type or in the output itself.
  if constexpr (is_half_v<T>)
    prefer(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, std::uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});

  cublasLtHandle_t const handle = lt_handle();
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  if (cublasLtMatmulAlgoGetHeuristic(handle, desc.get(), xl.get(), yl.get(), dl.get(), dl.get(), pref.get(),
                                     1, &found, &count) != CUBLAS_STATUS_SUCCESS ||
      count == 0)
    return false;
  Scale const alpha = 1, beta = 0;
  SOLDER_CUBLAS_CHECK(cublasLtMatmul(handle, desc.get(), &alpha, x, xl.get(), y, yl.get(), &beta, d,
                                     dl.get(), d, dl.get(), &found.algo, workspace, blas_workspace,
                                     solder::cuda::stream()));
  return true;
}

// Writes ep(a @ b [+ bias]) into out: the product alone through cuBLAS, an epilogue through
// cuBLASLt (blas_calls). False, with the output left to be written again, where out's element
// type or layout does not allow it, for an epilogue with k = 0, or where cuBLASLt does not take
// the epilogue's problem: the caller then stores the product first. The product alone into a
// contiguous tensor of its type always runs here.
template <class OutTensor, class A, class B>
bool product_into(OutTensor& out, Contract<A, B> const& anchor, cublasLtEpilogue_t ep,
                  typename OutTensor::value_type const* bias) {
  using T = typename OutTensor::value_type;
  static_assert(std::is_same_v<T, canonical_t<typename Contract<A, B>::value_type>>);
  bool const plain = ep == CUBLASLT_EPILOGUE_DEFAULT;
  auto const a = readable<true>(in_memory(anchor.a));
  auto const b = readable<false>(in_memory(anchor.b));
  if (a.shape()[A::rank - 1] == 0) {  // k = 0: zeros, as PyTorch (cuBLAS need not write them)
    if (!plain || !out.is_contiguous()) return false;
    SOLDER_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, static_cast<std::size_t>(out.numel()) * sizeof(T),
                                      solder::cuda::stream()));
    return true;
  }
  auto const workspace = cuda_allocate<unsigned char>(static_cast<std::int64_t>(blas_workspace));
  return blas_calls(a, b, out, bias != nullptr, [&](BlasProblem const& p, T const* x, T const* y, T* d) {
    if (!plain) return lt_call<T>(p, x, y, d, ep, bias, workspace.get());
    gemm_call<T>(p, x, y, d, workspace.get());
    return true;
  });
}

// Runs the kernel rooted at `root` with its anchor stored first: the anchor's result (materialized
// once per assignment: its own kernel), then the rest as one element-wise kernel that reads it.
template <class OutTensor, class N, class Anchor>
void run_stored(OutTensor& out, N const& root, Anchor const& anchor) {
  constexpr int D = N::rank;
  using T = canonical_t<typename Anchor::value_type>;
  Index<D> const& dom = out.shape();
  Temps temps;
  auto ev = make_eval<D, false, false, N>(root, dom, temps);
  auto const stored = materialize_once(anchor);
  StoredSetter<T, D> setter{leaf_eval<D>(stored, dom)};
  ev.link(setter);
  launch(out, ev, Lines<D>{});
}

// Runs the kernel rooted at `root`, anchored by the product `anchor`, into `out`: one call
// where cuBLAS takes the whole of it (the product alone, or cuBLASLt's epilogue: epilogue.hpp)
// and the shapes and layouts allow; else the product stored first, then the rest (run_stored).
template <class OutTensor, class N, class A, class B>
void run_matmul(OutTensor& out, N const& root, Contract<A, B> const& anchor) {
  constexpr int D = N::rank;
  using T = canonical_t<typename Contract<A, B>::value_type>;
  Index<D> const& dom = out.shape();
  using Lt = lt_epilogue<N>;
  if constexpr (Lt::value && std::is_same_v<typename OutTensor::value_type, T>) {
    if (same_index<D>(anchor.shape(), dom)) {  // (not broadcast in its epilogue)
      T const* bias = nullptr;
      bool usable = true;
      if constexpr (Lt::bias) {  // a vector of out's last extent, contiguous
        auto const& v = lt_bias(root);
        usable = v.shape()[0] == dom[D - 1] && (v.shape()[0] == 1 || v.strides()[0] == 1);
        bias = v.data();
      }
      if (usable && product_into(out, anchor, Lt::op, bias)) return;
    }
  }
  run_stored(out, root, anchor);  // (a lone product: straight into it, above)
}

// How each kind of anchor but a matrix product computes its result on the GPU (conv.hpp,
// pool.hpp, embedding.hpp, attention.hpp): run(anchor, out) writes the anchor's values into
// out, a tensor of the anchor's shape, and returns true; false where out's element type or
// layout does not suit the engine. A contiguous tensor of the anchor's (canonical) element type
// always suits it: run_stored's temporary.
template <class Anchor>
struct AnchorEngine;

// Runs the kernel rooted at `root` (plan.hpp: has_anchor) into `out`. The anchor alone is
// written by its engine; with an element-wise rest, cuBLASLt's epilogues aside, the anchor is
// stored first (device_rules<Cuda>::fuses_epilogue counts the two kernels).
template <class OutTensor, class N>
void run_contraction(OutTensor& out, N const& root) {
  constexpr int D = N::rank;
  if (numel_of<D>(out.shape()) == 0) return;
  with_anchor<D>(root, [&](auto const& anchor) {
    using Anchor = std::remove_cvref_t<decltype(anchor)>;
    if constexpr (is_matmul<Anchor>) {
      run_matmul(out, root, anchor);
    } else {
      if constexpr (std::is_same_v<Anchor, N>)
        if (AnchorEngine<Anchor>::run(anchor, out)) return;
      run_stored(out, root, anchor);
    }
  });
}

}  // namespace solder::detail::cuda
