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
// A cuBLASLt product's descriptors and its heuristic's algorithms are made on the first call of
// the problem (shapes, strides, types, epilogue, alignments) and kept for the next (LtPlan):
// a repeated product sets no descriptor up and asks no heuristic. Under sd::compile's
// max_autotune, the product alone runs in cuBLASLt too (cuBLAS's gemm has no algorithms to
// choose from), and the algorithms the heuristic offers (up to lt_algorithms) are timed on the
// problem's first call, the fastest kept (runtime/autotune.hpp: per GPU, in the cache file).
// float operands compute in float (TF32 only with sd::cuda::allow_tf32(true)), double in double,
// half and bfloat16 accumulate in float.
// The other anchors have an engine each (AnchorEngine below): conv2d in cuDNN (conv.hpp), the
// pools (pool.hpp), embedding (embedding.hpp) and attention (attention.hpp) in kernels of
// solder's own. The anchor alone is its engine's one kernel, written into the output; with an
// element-wise rest, the anchor is stored first and the rest is one element-wise kernel after
// it, as for a product that cuBLASLt's epilogues do not cover (but for the rests of conv2d that
// cuDNN's fused call computes: epilogue.hpp).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <compare>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "../device_tuner.hpp"
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

// A value for the current device (a library's handle, the GPU's key), made by create() on first
// use and kept for the process (a handle is never destroyed, as PyTorch keeps its handles).
template <class H, class F>
H per_device(F create) {
  static std::mutex m;
  static std::map<int, H> handles;
  int const id = current_device();
  std::lock_guard<std::mutex> lock(m);
  auto it = handles.find(id);
  if (it != handles.end()) return it->second;
  return handles.emplace(id, create()).first->second;
}
inline cublasLtHandle_t lt_handle() {
  return per_device<cublasLtHandle_t>([] {
    cublasLtHandle_t h = nullptr;
    SOLDER_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  });
}
// cuBLAS's handle keeps a stream and a workspace, set for each call: one call at a time holds
// it (blas_lock). Split-K parts are summed in the compute type, never in a 16-bit output type.
inline cublasHandle_t blas_handle() {
  return per_device<cublasHandle_t>([] {
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

// The GPU that max_autotune's choices belong to (runtime/autotune.hpp keeps each GPU's apart):
// its name, compute capability and driver version.
inline std::string gpu_key() {
  return per_device<std::string>([] {
    cudaDeviceProp p{};
    SOLDER_CUDA_CHECK(cudaGetDeviceProperties(&p, current_device()));
    int driver = 0;
    SOLDER_CUDA_CHECK(cudaDriverGetVersion(&driver));
    return std::string(p.name) + " | sm_" + std::to_string(p.major * 10 + p.minor) + " | driver " +
           std::to_string(driver);
  });
}

// Seconds that the work run() queues on solder's stream takes on the GPU, between two events;
// infinity where run() says it could not run (max_autotune's timings).
template <class F>
double seconds_on_stream(F&& run) {
  using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, cudaError_t (*)(cudaEvent_t)>;
  auto event = [] {
    cudaEvent_t e = nullptr;
    SOLDER_CUDA_CHECK(cudaEventCreate(&e));
    return Event(e, &cudaEventDestroy);
  };
  Event const start = event(), stop = event();
  cudaStream_t const s = solder::cuda::stream();
  SOLDER_CUDA_CHECK(cudaEventRecord(start.get(), s));
  if (!run()) return std::numeric_limits<double>::infinity();
  SOLDER_CUDA_CHECK(cudaEventRecord(stop.get(), s));
  SOLDER_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  SOLDER_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms * 1e-3;
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
  friend auto operator<=>(BlasMatrix const&, BlasMatrix const&) = default;
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

// What a cuBLASLt product's descriptors and its heuristic's answer depend on: the device, the
// types, the three matrices and the batch, the epilogue, and the alignments the heuristic is
// told (of X, Y, D and the bias; 0: no bias).
struct LtKey {
  int device;
  cudaDataType_t type;
  cublasComputeType_t compute;
  cublasLtEpilogue_t epilogue;
  BlasMatrix x, y, d;
  std::int64_t k, batch, x_bs, y_bs, d_bs;
  std::uint32_t x_align, y_align, d_align, bias_align;
  friend auto operator<=>(LtKey const&, LtKey const&) = default;
};

// The algorithms asked of cuBLASLt's heuristic for a problem: its first runs outside
// max_autotune, all are timed under it.
inline constexpr int lt_algorithms = 8;

// A cuBLASLt problem's descriptors, the algorithms its heuristic offers (best first; none where
// it offers none) and its key in max_autotune's cache, made on the problem's first call and kept
// (lt_plans). Only the bias pointer differs between the calls of a plan: each call sets it on
// the shared descriptor, holding bias_lock until cuBLASLt has queued the product.
struct LtPlan {
  LtOwned<cublasLtMatmulDesc_t> desc{nullptr, &cublasLtMatmulDescDestroy};
  LtOwned<cublasLtMatrixLayout_t> x{nullptr, &cublasLtMatrixLayoutDestroy};
  LtOwned<cublasLtMatrixLayout_t> y{nullptr, &cublasLtMatrixLayoutDestroy};
  LtOwned<cublasLtMatrixLayout_t> d{nullptr, &cublasLtMatrixLayoutDestroy};
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms;
  std::string tuning_key;
  std::mutex bias_lock;
};

// The plans made so far, by problem. Bounded: past lt_plans_max the map starts again, so that a
// program meeting ever new shapes does not keep descriptors without end (a plan in use lives
// on with its callers). Never destroyed, as the handles: at exit the library may be gone.
struct LtPlans {
  std::mutex mutex;
  std::map<LtKey, std::shared_ptr<LtPlan>> plans;
};
inline LtPlans& lt_plans() {
  static auto* p = new LtPlans;
  return *p;
}
inline constexpr std::size_t lt_plans_max = 1024;

inline char const* lt_epilogue_name(cublasLtEpilogue_t ep) {
  switch (ep) {
    case CUBLASLT_EPILOGUE_BIAS: return "bias";
    case CUBLASLT_EPILOGUE_RELU: return "relu";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "bias+relu";
    case CUBLASLT_EPILOGUE_GELU: return "gelu";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "bias+gelu";
    default: return "none";
  }
}

// The problem as max_autotune's cache names it, with cuBLASLt's version: another version's
// heuristic may list other algorithms.
template <class T>
std::string lt_tuning_key(LtKey const& k) {
  std::ostringstream os;
  auto matrix = [&](char const* name, BlasMatrix const& m, std::int64_t bs, std::uint32_t align) {
    os << ' ' << name << '=' << (m.op == CUBLAS_OP_T ? "T:" : "N:") << m.rows << 'x' << m.cols << ",ld=" << m.ld
       << ",batch-stride=" << bs << ",align=" << align;
  };
  os << "cublasLt " << cublasLtGetVersion() << ' ' << dtype_name<T>()
     << (k.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? " tf32" : "") << " k=" << k.k << " batch=" << k.batch
     << " epilogue=" << lt_epilogue_name(k.epilogue);
  matrix("x", k.x, k.x_bs, k.x_align);
  matrix("y", k.y, k.y_bs, k.y_align);
  matrix("d", k.d, k.d_bs, k.d_align);
  if (k.bias_align) os << " bias-align=" << k.bias_align;
  return os.str();
}

// An algorithm of the heuristic's list, as the autotune log names it.
inline std::string lt_describe(int index, cublasLtMatmulHeuristicResult_t const& r) {
  auto config = [&](cublasLtMatmulAlgoConfigAttributes_t a) {
    std::uint32_t v = 0;  // (each of these is 32 bits wide)
    std::size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&r.algo, a, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS
               ? std::to_string(v)
               : std::string("?");
  };
  return "#" + std::to_string(index) + "[algo=" + config(CUBLASLT_ALGO_CONFIG_ID) +
         ",tile=" + config(CUBLASLT_ALGO_CONFIG_TILE_ID) + ",stages=" + config(CUBLASLT_ALGO_CONFIG_STAGES_ID) +
         ",split-k=" + config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM) + ",workspace=" + std::to_string(r.workspaceSize) +
         "]";
}

// The plan of problem `key` (p, with bias where its epilogue has one): the one kept, or made now.
template <class T>
std::shared_ptr<LtPlan> lt_plan(LtKey const& key, BlasProblem const& p, T const* bias) {
  using Scale = typename blas_type<T>::Scale;
  constexpr cudaDataType_t type = blas_type<T>::data;
  auto& cache = lt_plans();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto const found = cache.plans.find(key);
  if (found != cache.plans.end()) return found->second;

  auto plan = std::make_shared<LtPlan>();
  cublasLtMatmulDesc_t desc = nullptr;
  SOLDER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, key.compute, blas_type<Scale>::data));
  plan->desc.reset(desc);
  lt_set(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_TRANSA, p.x.op);
  lt_set(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_TRANSB, p.y.op);
  lt_set(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_EPILOGUE, key.epilogue);
  void const* const bias_pointer = bias;  // (its alignment, too, steers the heuristic)
  if (bias) lt_set(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_pointer);

  auto layout = [&](LtOwned<cublasLtMatrixLayout_t>& owned, BlasMatrix const& m, std::int64_t stride) {
    cublasLtMatrixLayout_t l = nullptr;
    SOLDER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<std::uint64_t>(m.rows),
                                                   static_cast<std::uint64_t>(m.cols), m.ld));
    owned.reset(l);
    if (p.batch > 1) {
      auto const count = static_cast<std::int32_t>(p.batch);
      lt_set(cublasLtMatrixLayoutSetAttribute, l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
      lt_set(cublasLtMatrixLayoutSetAttribute, l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
    }
  };
  layout(plan->x, p.x, p.x_bs);
  layout(plan->y, p.y, p.y_bs);
  layout(plan->d, p.d, p.d_bs);

  cublasLtMatmulPreference_t pref_made = nullptr;
  SOLDER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref_made));
  LtOwned<cublasLtMatmulPreference_t> const pref(pref_made, &cublasLtMatmulPreferenceDestroy);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t a, auto v) {
    lt_set(cublasLtMatmulPreferenceSetAttribute, pref.get(), a, v);
  };
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{blas_workspace});
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.x_align);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.y_align);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.d_align);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.d_align);
  // Split-K parts summed in float, never in a 16-bit output type or in the output itself.
  if constexpr (is_half_v<T>)
    prefer(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, std::uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});

  cublasLtMatmulHeuristicResult_t results[lt_algorithms]{};
  int count = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt_handle(), desc, plan->x.get(), plan->y.get(), plan->d.get(), plan->d.get(),
                                     pref.get(), lt_algorithms, results, &count) == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < count; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS) plan->algorithms.push_back(results[i]);
  plan->tuning_key = lt_tuning_key<T>(key);

  if (cache.plans.size() >= lt_plans_max) cache.plans.clear();
  cache.plans.emplace(key, plan);
  return plan;
}

// One cuBLASLt call with epilogue ep (and bias, a vector over D's rows, where ep has one) on
// solder's stream, in the heuristic's first algorithm (under max_autotune: the fastest); false
// where cuBLASLt does not take the problem: a dim of 1 (its heuristic has refused such shapes:
// PyTorch keeps them from it too) or no algorithm found.
template <class T>
bool lt_call(BlasProblem const& p, T const* x, T const* y, T* d, cublasLtEpilogue_t ep, T const* bias,
             void* workspace) {
  if (p.d.rows < 2 || p.d.cols < 2 || p.k < 2) return false;
  std::int64_t const bytes = sizeof(T);
  LtKey const key{current_device(), blas_type<T>::data, blas_compute<T>(), ep, p.x, p.y, p.d, p.k, p.batch,
                  p.x_bs, p.y_bs, p.d_bs, alignment(x, p.x_bs * bytes), alignment(y, p.y_bs * bytes),
                  alignment(d, p.d_bs * bytes), bias ? alignment(bias, 0) : 0};
  auto const plan = lt_plan(key, p, bias);
  if (plan->algorithms.empty()) return false;

  using Scale = typename blas_type<T>::Scale;
  Scale const alpha = 1, beta = 0;
  cublasLtHandle_t const handle = lt_handle();
  auto matmul = [&](int algorithm) {
    std::unique_lock<std::mutex> lock(plan->bias_lock, std::defer_lock);
    if (bias) {
      lock.lock();
      void const* const bias_pointer = bias;
      lt_set(cublasLtMatmulDescSetAttribute, plan->desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_pointer);
    }
    return cublasLtMatmul(handle, plan->desc.get(), &alpha, x, plan->x.get(), y, plan->y.get(), &beta, d,
                          plan->d.get(), d, plan->d.get(), &plan->algorithms[algorithm].algo, workspace,
                          blas_workspace, solder::cuda::stream());
  };
  int algorithm = 0;
  if (auto* tuner = device_tuner()) {
    std::vector<int> choices(plan->algorithms.size());
    std::iota(choices.begin(), choices.end(), 0);
    algorithm = tuner->choose_on_device(
        gpu_key(), plan->tuning_key, choices,
        [&](int i) { return seconds_on_stream([&] { return matmul(i) == CUBLAS_STATUS_SUCCESS; }); },
        [&](int i) { return lt_describe(i, plan->algorithms[i]); });
  }
  SOLDER_CUBLAS_CHECK(matmul(algorithm));
  return true;
}

// Writes ep(a @ b [+ bias]) into out: the product alone through cuBLAS, an epilogue through
// cuBLASLt (blas_calls); under max_autotune, the product alone too through cuBLASLt, where it
// takes the problem, for its algorithms to be timed. False, with the output left to be written
// again, where out's element type or layout does not allow it, for an epilogue with k = 0, or
// where cuBLASLt does not take the epilogue's problem: the caller then stores the product
// first. The product alone into a contiguous tensor of its type always runs here.
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
  bool const tuning = device_tuner() != nullptr;
  return blas_calls(a, b, out, bias != nullptr, [&](BlasProblem const& p, T const* x, T const* y, T* d) {
    if ((!plain || tuning) && lt_call<T>(p, x, y, d, ep, bias, workspace.get())) return true;
    if (!plain) return false;
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
// written by its engine; with an element-wise rest, cuBLASLt's epilogues and cuDNN's fused call
// aside (epilogue.hpp), the anchor is stored first (device_rules<Cuda>::fuses_epilogue counts
// the two kernels).
template <class OutTensor, class N>
void run_contraction(OutTensor& out, N const& root) {
  constexpr int D = N::rank;
  if (numel_of<D>(out.shape()) == 0) return;
  with_anchor<D>(root, [&](auto const& anchor) {
    using Anchor = std::remove_cvref_t<decltype(anchor)>;
    if constexpr (is_matmul<Anchor>) {
      run_matmul(out, root, anchor);
    } else {
      if constexpr (std::is_same_v<Anchor, N>) {
        if (AnchorEngine<Anchor>::run(anchor, out)) return;
      } else if constexpr (dnn_epilogue<N>::value) {  // (conv.hpp)
        if (AnchorEngine<Anchor>::run_fused(root, anchor, out)) return;
      }
      run_stored(out, root, anchor);
    }
  });
}

}  // namespace solder::detail::cuda
