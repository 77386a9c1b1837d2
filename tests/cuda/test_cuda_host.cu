// The host side of an nvcc build, which must work on any machine, with or without a GPU:
// a request for GPU memory either works or throws sd::Error "no CUDA device: ...", and a failed
// CUDA call throws sd::Error naming the call, CUDA's error and the place.
#include <catch2/catch.hpp>
#include <solder/solder.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>

namespace sd = solder;
using Catch::Matchers::Contains;

TEST_CASE("nvcc build: host expressions still run on the host", "[cuda][host]") {
  auto x = sd::arange<float>(8);
  sd::Tensor<float, 1> y = sd::tanh(x * 0.5f) + sd::softmax(x, 0);
  for (int i = 0; i < 8; ++i)
    CHECK(y(i) == sd::math::tanh(i * 0.5f) + sd::eval(sd::softmax(x, 0))(i));
}

// The README's static_assert, with the GPU tensor declared `auto x = xh.to<sd::Cuda>()`:
// nvcc's front end once spelled that type with a name it had not declared. (Compiled here, run
// with the GPU tests: it needs a device.)
[[maybe_unused]] static int readme_chain_on_the_gpu() {
  sd::Tensor<float, 1> xh = sd::rand<float>(sd::shape(1 << 10), -1.f, 1.f);
  auto x = xh.to<sd::Cuda>();
  auto c = x.clone();
  auto e = sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
  static_assert(sd::kernel_count<decltype(e)> == 1);
  using E = decltype(e);
  static_assert(sd::kernel_count<E> == 1);
  auto f = sd::softmax(c * 2.f, 0);
  static_assert(sd::kernel_count<decltype(f)> == 1);
  return sd::kernel_count<E>;
}

TEST_CASE("a GPU tensor without a GPU throws \"no CUDA device\"", "[cuda][host]") {
  if (sd::cuda::device_count() == 0) {
    CHECK_THROWS_WITH((sd::Tensor<float, 1, sd::Cuda>(4)), Contains("no CUDA device: "));
    CHECK_THROWS_AS((sd::zeros<float, sd::Cuda>(sd::shape(3))), sd::Error);
    CHECK_THROWS_WITH(sd::arange<float>(5).to<sd::Cuda>(), Contains("no CUDA device"));
    // The process goes on: host work is unaffected by the failed request.
    CHECK(sd::eval(sd::sum(sd::ones<float>(sd::shape(10)))).item() == 10.f);
  } else {
    sd::Tensor<float, 1, sd::Cuda> t = sd::arange<float>(4).to<sd::Cuda>();
    CHECK(sd::to_vector(t) == std::vector<float>{0, 1, 2, 3});
  }
}

TEST_CASE("a failed CUDA call throws sd::Error with the call, the error and the place",
          "[cuda][host]") {
  // Fails everywhere: an invalid device with a GPU, no driver without one.
  CHECK_THROWS_WITH(SOLDER_CUDA_CHECK(cudaSetDevice(-1)),
                    Contains("CUDA call cudaSetDevice(-1) failed: cudaError") &&
                        Contains("test_cuda_host.cu:"));
  cudaGetLastError();
}

// Which stream a thread starts on, and when a block released from a queue must wait for the
// device first (cuda_allocate's release): only another queue is not ordered after the kernels
// that used it.
TEST_CASE("streams: one default queue for all threads; which releases are on another queue",
          "[cuda][host]") {
  namespace dc = sd::detail::cuda;
  CHECK(sd::cuda::stream() == cudaStreamLegacy);
  cudaStream_t other_threads = nullptr;
  std::thread([&] { other_threads = sd::cuda::stream(); }).join();
  CHECK(other_threads == cudaStreamLegacy);

  // Threads are told apart by a token that is never given again (a std::thread::id can be,
  // once its thread has ended: a per-thread stream's release would then not wait).
  auto const me = dc::thread_token();
  std::uint64_t someone = 0, later = 0;
  std::thread([&] { someone = dc::thread_token(); }).join();
  std::thread([&] { later = dc::thread_token(); }).join();
  CHECK(me == dc::thread_token());
  CHECK(someone != me);
  CHECK(later != someone);
  CHECK_FALSE(dc::same_queue(cudaStreamPerThread, cudaStreamPerThread, later));
  auto const user = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000});  // a handle's value
  CHECK(dc::same_queue(cudaStreamLegacy, cudaStreamLegacy, me));
  CHECK(dc::same_queue(cudaStreamLegacy, cudaStreamLegacy, someone));  // one queue for all
  CHECK(dc::same_queue(user, user, someone));
  CHECK_FALSE(dc::same_queue(cudaStreamLegacy, user, me));
  CHECK_FALSE(dc::same_queue(user, cudaStreamLegacy, me));
  CHECK(dc::same_queue(cudaStreamPerThread, cudaStreamPerThread, me));
  CHECK_FALSE(dc::same_queue(cudaStreamPerThread, cudaStreamPerThread, someone));  // its own
  // 0 names the legacy default stream (this file is not built with --default-stream per-thread).
  CHECK(dc::same_queue(nullptr, nullptr, someone));
  CHECK(dc::same_queue(nullptr, cudaStreamLegacy, someone));
  CHECK(dc::same_queue(cudaStreamLegacy, nullptr, me));
  CHECK_FALSE(dc::same_queue(nullptr, user, me));
  CHECK_FALSE(dc::same_queue(nullptr, cudaStreamPerThread, me));
  CHECK_FALSE(dc::same_queue(cudaStreamLegacy, cudaStreamPerThread, me));

  sd::cuda::set_stream(user);  // set for this thread only
  std::thread([&] { other_threads = sd::cuda::stream(); }).join();
  CHECK(sd::cuda::stream() == user);
  CHECK(other_threads == cudaStreamLegacy);
  sd::cuda::set_stream(cudaStreamLegacy);
}

// How a reduction at a kernel's root is shared out over the GPU's blocks when it runs apart
// (fold_apart): the parts cover every line's values once, none empty, each as aligned as the
// line, enough of them to fill the GPU where the values allow; no split where lines_kernel
// serves the reduction better.
TEST_CASE("reductions apart: how lines are split into parts", "[cuda][host]") {
  namespace dc = sd::detail::cuda;
  std::int64_t const resident = 132 * 8;  // an H100's blocks of 256 threads
  for (bool columns_possible : {false, true})
    for (std::int64_t lines : {1, 3, 15, 16, 37, 63, 64, 500, 528, 529, 1024, 100000})
      for (std::int64_t count : {0, 1, 7, 8, 31, 33, 129, 4096, 8191, 8192, 30000, 100003, 10000000}) {
        INFO("lines " << lines << ", count " << count << ", columns " << columns_possible);
        dc::Parts const p = dc::parts_for(lines, count, resident, columns_possible);
        if (p.chunks == 0) {  // lines_kernel: many lines, or short ones
          CHECK(!p.columns);
          CHECK((2 * lines > resident || count < 2 * 256 * 16));
          continue;
        }
        CHECK(p.columns == (columns_possible && lines >= 16 && count >= 8));
        CHECK(p.units == (p.columns ? (lines + 31) / 32 : lines));
        if (!p.columns) CHECK(p.chunk % 16 == 0);  // chunks of a run: as aligned as the line
        if (!p.columns) CHECK(p.chunks >= 2);       // only columns_kernel folds a line whole
        CHECK(p.chunks * p.chunk >= count);         // every value in a part
        CHECK((p.chunks - 1) * p.chunk < count);    // and no part empty
        CHECK(p.chunks <= std::max<std::int64_t>(1, (resident + p.units - 1) / p.units));
        std::int64_t const part_min = p.columns ? 8 * 4 : 256 * 16;  // steps a warp, values a thread
        if (!p.columns) CHECK(p.chunk >= part_min);
        // Enough parts to fill the GPU, or as many as the values allow (within rounding).
        std::int64_t const fill = std::min(resident, p.units * std::max<std::int64_t>(1, count / part_min));
        CHECK(10 * p.units * p.chunks >= 9 * fill);
      }
}

// A GPU thread folds its share of a line in the host's order (ThreadFold in cuda/evaluators.hpp,
// the Cascade of backend/cascade.hpp that the host folds terms one by one in: 16 terms a chunk,
// the chunks passed up its levels), whether it takes a term at each index (columns, strided
// lines) or a vector of 4 (rows): the same bits as the host's fold of the same terms, so a float
// sum of 10^6 or 10^7 terms keeps the host's bound (tests/test_edges.cpp). One accumulator would
// give 100958 and 1087937.
TEST_CASE("a GPU thread's fold: the host's order, so the host's error bound", "[cuda][host]") {
  using Sum = sd::ops::Sum;
  for (std::int64_t n : {std::int64_t{1000000}, std::int64_t{10000000}}) {
    INFO("n = " << n);
    sd::detail::Cascade<Sum, float> host;
    for (std::int64_t i = 0; i < n; ++i) {
      host.chunk() = Sum::step(host.chunk(), 0.1f, i);
      host.next();
    }
    sd::detail::cuda::ThreadFold<Sum, float> one, vec;
    one.in_chunks(std::int64_t{0}, n, std::int64_t{1}, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) one.chunk() = Sum::step(one.chunk(), 0.1f, i);
    });
    vec.in_chunks<4>(std::int64_t{0}, n, std::int64_t{4}, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; i += 4)
        for (int k = 0; k < 4; ++k) vec.chunk() = Sum::step(vec.chunk(), 0.1f, i + k);
    });
    CHECK(one.result() == host.result());
    CHECK(vec.result() == host.result());
    double const exact = static_cast<double>(0.1f) * static_cast<double>(n);
    double const bound = (16 * (std::log(static_cast<double>(n)) / std::log(16.0) + 1) + 7 + 2) *
                         std::numeric_limits<float>::epsilon() * exact;
    CHECK(std::fabs(one.result() - exact) <= bound);
  }
}

// Which row kernels get lines_kernel's variant for a static length (executor.hpp: static_line):
// the last extent static, in the expression or in the tensor it is stored in, and a warp's
// line of it at most 16 vector steps a thread.
TEST_CASE("rows of a static length: the lengths that get the unrolled variant", "[cuda][host]") {
  // (Types deduced: nvcc's host pass cannot spell these types back in a template argument list.)
  auto static_line = []<class N, class Out>(N const&, Out const&) {
    return sd::detail::cuda::static_line<N, Out>();
  };
  sd::Tensor<float, sd::ext<sd::dyn, 1024>> fixed(2, 1024);
  sd::Tensor<float, 2> any(2, 1024);
  auto fixed_softmax = sd::softmax(fixed, 1);
  auto any_softmax = sd::softmax(any, 1);
  CHECK(static_line(fixed_softmax, any) == 1024);  // the expression's
  CHECK(static_line(any_softmax, fixed) == 1024);  // the output's
  CHECK(static_line(any_softmax, any) == 0);
  sd::Tensor<double, sd::ext<sd::dyn, 1024>> two(2, 1024);  // two values a vector: 16 steps
  auto two_softmax = sd::softmax(two, 1);
  CHECK(static_line(two_softmax, two) == 1024);
  sd::Tensor<float, sd::ext<sd::dyn, 1000>> odd(2, 1000);  // not whole steps of a warp
  auto odd_softmax = sd::softmax(odd, 1);
  CHECK(static_line(odd_softmax, odd) == 0);
  sd::Tensor<float, sd::ext<sd::dyn, 4096>> long_rows(2, 4096);  // 32 steps a thread
  auto long_softmax = sd::softmax(long_rows, 1);
  CHECK(static_line(long_softmax, long_rows) == 0);
  sd::Tensor<float, sd::ext<sd::dyn, 128>> short_rows(2, 128);
  auto short_softmax = sd::softmax(short_rows, 1);
  CHECK(static_line(short_softmax, short_rows) == 128);
}

TEST_CASE("half and bfloat16: storage types, maths in float, PyTorch's promotion", "[cuda][host][half]") {
  static_assert(std::is_same_v<sd::promote_t<sd::half, sd::half>, sd::half>);
  static_assert(std::is_same_v<sd::promote_t<sd::half, float>, float>);
  static_assert(std::is_same_v<sd::promote_t<sd::bfloat16, std::int64_t>, sd::bfloat16>);
  static_assert(std::is_same_v<sd::promote_t<sd::half, sd::bfloat16>, float>);
  CHECK(sd::dtype_name<sd::half>() == "float16");
  CHECK(sd::dtype_name<sd::bfloat16>() == "bfloat16");

  auto x = sd::rand<float>(sd::shape(7, 33), -4.f, 4.f);
  sd::Tensor<sd::half, 2> h = sd::cast<sd::half>(x);
  sd::Tensor<sd::bfloat16, 2> b = sd::cast<sd::bfloat16>(x);
  auto e = sd::tanh(h) * 2.f + h;  // a float literal keeps half (a wrapped number)
  static_assert(std::is_same_v<decltype(e)::value_type, sd::half>);
  static_assert(std::is_same_v<decltype(h + x)::value_type, float>);
  sd::Tensor<sd::half, 2> y = e;
  sd::Tensor<sd::bfloat16, 2> z = sd::sigmoid(b);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 33; ++j) {
      float hv = __half2float(h(i, j)), bv = __bfloat162float(b(i, j));
      CHECK(__half2float(h(i, j)) == __half2float(__float2half(x(i, j))));
      // computed in float, rounded once when stored
      CHECK(__half2float(y(i, j)) == __half2float(__float2half(sd::math::tanh(hv) * 2.f + hv)));
      CHECK(__bfloat162float(z(i, j)) == __bfloat162float(__float2bfloat16(sd::math::sigmoid(bv))));
    }
  // Reductions accumulate in float and return the input's type, as torch.sum of a half tensor.
  auto s = sd::eval(sd::sum(h, 1));
  static_assert(std::is_same_v<decltype(s)::value_type, sd::half>);
  for (int i = 0; i < 7; ++i) {
    double ref = 0;
    for (int j = 0; j < 33; ++j) ref += __half2float(h(i, j));
    CHECK(std::abs(__half2float(s(i)) - ref) <= 1e-3 * (1 + std::abs(ref)));
  }
  auto m = sd::eval(sd::max(b, 0));
  for (int j = 0; j < 33; ++j) {
    float best = -INFINITY;
    for (int i = 0; i < 7; ++i) best = std::max(best, __bfloat162float(b(i, j)));
    CHECK(__bfloat162float(m(j)) == best);
  }
  auto p = sd::eval(sd::softmax(h, 1));
  auto pf = sd::eval(sd::softmax(sd::cast<float>(h), 1));
  for (int j = 0; j < 33; ++j) CHECK(__half2float(p(0, j)) == __half2float(__float2half(pf(0, j))));
}

// Contractions on sd::Cuda tensors (backend/cuda/contract.hpp): what is known without a GPU.

namespace {

namespace dc = sd::detail::cuda;

// A sd::Cuda tensor's shape and strides over no memory: what the planner and explain() read
// (inputs told apart by their address, `tag`), on a machine without a GPU.
template <int R>
sd::Tensor<float, R, sd::Cuda> cuda_shape(sd::Index<R> s, std::uintptr_t tag) {
  return sd::Tensor<float, R, sd::Cuda>::template make_view<R>(nullptr, reinterpret_cast<float*>(tag << 8), s,
                                                               sd::contiguous_strides<R>(s));
}

bool contains(std::string const& s, std::string const& what) { return s.find(what) != std::string::npos; }

// The expressions' types (never run): how many kernels each is on the GPU and on the host, and
// which cuBLASLt epilogue takes its rest (DEFAULT: the product alone, one cuBLAS call).
template <class N>
constexpr cublasLtEpilogue_t lt_op() {
  static_assert(dc::lt_epilogue<N>::value);
  return dc::lt_epilogue<N>::op;
}
template <class E>
constexpr bool lt_whole = dc::lt_epilogue<sd::node_t<E>>::value;

[[maybe_unused]] void contraction_kernel_counts(sd::Tensor<float, 2, sd::Cuda> const& a,
                                                sd::Tensor<float, 1, sd::Cuda> const& v,
                                                sd::Tensor<float, 2> const& h,
                                                sd::Tensor<float, 1> const& hv,
                                                sd::Tensor<sd::half, 2, sd::Cuda> const& x16,
                                                sd::Tensor<sd::half, 1, sd::Cuda> const& v16,
                                                sd::Tensor<double, 1, sd::Cuda> const& v64) {
  using sd::kernel_count;
  auto mm = sd::matmul(a, a);
  static_assert(kernel_count<decltype(mm)> == 1 && lt_op<decltype(mm)>() == CUBLASLT_EPILOGUE_DEFAULT);
  auto lin = sd::linear(a, a, v);  // matmul + bias: the bias epilogue
  static_assert(kernel_count<decltype(lin)> == 1 && lt_op<decltype(lin)>() == CUBLASLT_EPILOGUE_BIAS);
  auto bias_first = v + sd::matmul(a, a);
  static_assert(kernel_count<decltype(bias_first)> == 1 &&
                lt_op<decltype(bias_first)>() == CUBLASLT_EPILOGUE_BIAS);
  auto rl = sd::relu(sd::linear(a, a, v));
  static_assert(kernel_count<decltype(rl)> == 1 && lt_op<decltype(rl)>() == CUBLASLT_EPILOGUE_RELU_BIAS);
  auto gl = sd::gelu(sd::linear(a, a, v), sd::tanh_approximation);
  static_assert(kernel_count<decltype(gl)> == 1 && lt_op<decltype(gl)>() == CUBLASLT_EPILOGUE_GELU_BIAS);
  auto rm = sd::relu(sd::matmul(a, a));
  static_assert(kernel_count<decltype(rm)> == 1 && lt_op<decltype(rm)>() == CUBLASLT_EPILOGUE_RELU);
  auto gm = sd::gelu(sd::mm(a, a), sd::tanh_approximation);
  static_assert(kernel_count<decltype(gm)> == 1 && lt_op<decltype(gm)>() == CUBLASLT_EPILOGUE_GELU);
  auto h16 = sd::relu(sd::linear(x16, x16, v16));
  static_assert(kernel_count<decltype(h16)> == 1 && lt_op<decltype(h16)>() == CUBLASLT_EPILOGUE_RELU_BIAS);

  // Not cuBLASLt's: the product, then one element-wise kernel.
  auto erf_gelu = sd::gelu(sd::linear(a, a, v));  // the erf form: cuBLASLt's GELU is the tanh one
  static_assert(!lt_whole<decltype(erf_gelu)> && kernel_count<decltype(erf_gelu)> == 2);
  auto general = sd::relu(sd::matmul(a, a) * 2.f + a);
  static_assert(!lt_whole<decltype(general)> && kernel_count<decltype(general)> == 2);
  auto scaled = sd::matmul(a, a) * 2.f;
  static_assert(!lt_whole<decltype(scaled)> && kernel_count<decltype(scaled)> == 2);
  auto matrix_add = sd::matmul(a, a) + a;  // not a vector: no bias
  static_assert(!lt_whole<decltype(matrix_add)> && kernel_count<decltype(matrix_add)> == 2);
  auto wide_bias = sd::matmul(a, a) + v64;  // another element type: promoted, no bias
  static_assert(!lt_whole<decltype(wide_bias)> && kernel_count<decltype(wide_bias)> == 2);
  auto vector_product = sd::matmul(a, v) + v;  // [M, K] x [K]: the bias would run along M
  static_assert(!lt_whole<decltype(vector_product)> && kernel_count<decltype(vector_product)> == 2);
  auto twice = sd::relu(sd::relu(sd::matmul(a, a)));
  static_assert(!lt_whole<decltype(twice)> && kernel_count<decltype(twice)> == 2);
  auto operand = sd::matmul(a * 2.f, a);  // an expression operand is materialized first
  static_assert(kernel_count<decltype(operand)> == 2);
  auto g16 = sd::matmul(x16, x16) * 2.f;
  static_assert(kernel_count<decltype(g16)> == 2);

  // The host's engine takes any epilogue: one kernel, as before.
  auto host_general = sd::relu(sd::matmul(h, h) * 2.f + h);
  static_assert(kernel_count<decltype(host_general)> == 1);
  auto host_erf_gelu = sd::gelu(sd::linear(h, h, hv));
  static_assert(kernel_count<decltype(host_erf_gelu)> == 1);
  auto host_operand = sd::matmul(h * 2.f, h);  // computed while the engine packs it
  static_assert(kernel_count<decltype(host_operand)> == 1);
}

// A cuBLAS or cuBLASLt call as blas_calls makes it, replayed on the host as they compute it:
// D (column-major) = op(X) op(Y), plus the bias along D's rows, for each of the batch; each
// call's dims and leading dims checked first.
struct BlasReplay {
  float const* bias = nullptr;
  int calls = 0;
  bool operator()(dc::BlasProblem const& p, float const* x, float const* y, float* d) {
    ++calls;
    auto op_rows = [](dc::BlasMatrix const& m) { return m.op == CUBLAS_OP_N ? m.rows : m.cols; };
    auto op_cols = [](dc::BlasMatrix const& m) { return m.op == CUBLAS_OP_N ? m.cols : m.rows; };
    std::int64_t const m = p.d.rows, n = p.d.cols, k = p.k;
    CHECK(p.d.op == CUBLAS_OP_N);
    CHECK(op_rows(p.x) == m);
    CHECK(op_cols(p.x) == k);
    CHECK(op_rows(p.y) == k);
    CHECK(op_cols(p.y) == n);
    CHECK(p.batch >= 1);
    for (dc::BlasMatrix const* mat : {&p.x, &p.y, &p.d})
      CHECK(mat->ld >= std::max<std::int64_t>(1, mat->rows));
    auto at = [](dc::BlasMatrix const& mat, float const* base, std::int64_t i, std::int64_t j) {
      return mat.op == CUBLAS_OP_N ? base[i + j * mat.ld] : base[j + i * mat.ld];
    };
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double s = bias ? bias[i] : 0;
          for (std::int64_t l = 0; l < k; ++l)
            s += double(at(p.x, x + b * p.x_bs, i, l)) * double(at(p.y, y + b * p.y_bs, l, j));
          d[b * p.d_bs + i + j * p.d.ld] = static_cast<float>(s);
        }
    return true;
  }
};

// Runs blas_calls on host tensors through BlasReplay into out; the calls made, or -1 where
// out's layout was refused. The operands go through readable() as on the GPU.
template <class TA, class TB, class Out>
int replay(TA const& a, TB const& b, Out& out, float const* bias = nullptr) {
  auto const ra = dc::readable<true>(a);
  auto const rb = dc::readable<false>(b);
  BlasReplay r{bias};
  return dc::blas_calls(ra, rb, out, bias != nullptr, r) ? r.calls : -1;
}

template <class Got, class Want>
void same_values(Got const& got, Want const& want) {
  auto g = sd::to_vector(got), w = sd::to_vector(want);
  REQUIRE(g.size() == w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(double(g[i]) - double(w[i])) <= 1e-5 * (1 + std::abs(double(w[i]))));
  }
}

}  // namespace

TEST_CASE("contractions on the GPU: cuBLAS's calls, replayed on the host", "[cuda][host][contract]") {
  auto a = sd::rand<float>(sd::shape(13, 7), -1.f, 1.f);
  auto b = sd::rand<float>(sd::shape(7, 5), -1.f, 1.f);
  auto want = sd::eval(sd::matmul(a, b));
  SECTION("a row-major output: D = C^T = B^T A^T, one call") {
    sd::Tensor<float, 2> out(13, 5);
    CHECK(replay(a, b, out) == 1);
    same_values(out, want);
  }
  SECTION("a column-major output (a transposed view): D = C") {
    sd::Tensor<float, 2> store(5, 13);
    auto out = sd::transpose(store, 0, 1);
    CHECK(replay(a, b, out) == 1);
    same_values(out, want);
    auto bias = sd::rand<float>(sd::shape(5), -1.f, 1.f);  // along C's rows: refused
    CHECK(replay(a, b, out, bias.data()) == -1);
  }
  SECTION("rows of a wider tensor: the leading dim is its row") {
    sd::Tensor<float, 2> store(13, 9);
    auto out = sd::narrow(store, 1, 2, 5);
    CHECK(replay(a, b, out) == 1);
    same_values(out, want);
  }
  SECTION("an output with no contiguous dim is refused") {
    sd::Tensor<float, 2> store(13, 10);
    auto out = sd::slice(store, 1, 0, 10, 2);
    CHECK(replay(a, b, out) == -1);
  }
  SECTION("transposed, sliced, expanded operands") {
    auto at = sd::eval(sd::transpose(a, 0, 1));  // [7, 13]
    auto bw = sd::rand<float>(sd::shape(7, 11), -1.f, 1.f);
    auto ta = sd::transpose(at, 0, 1);           // a, read with op T
    auto nb = sd::narrow(bw, 1, 3, 5);           // leading dim 11
    auto sb = sd::slice(bw, 1, 0, 10, 2);        // no unit stride: copied
    auto eb = sd::expand(sd::narrow(bw, 1, 0, 1), {7, 5});  // stride 0: copied
    CHECK(dc::readable<false>(sb).is_contiguous());
    CHECK(dc::readable<false>(eb).is_contiguous());
    CHECK(dc::readable<true>(ta).data() == ta.data());  // read in place
    CHECK(dc::readable<false>(nb).data() == nb.data());
    auto check_right = [&](auto const& right) {
      sd::Tensor<float, 2> out(13, 5);
      CHECK(replay(ta, right, out) == 1);
      same_values(out, sd::eval(sd::matmul(a, right)));
    };
    check_right(nb);
    check_right(sb);
    check_right(eb);
  }
  SECTION("vectors: rows and columns") {
    auto u = sd::rand<float>(sd::shape(7), -1.f, 1.f);
    auto w = sd::rand<float>(sd::shape(13), -1.f, 1.f);
    sd::Tensor<float, 0> dot(sd::Index<0>{});
    CHECK(replay(u, u, dot) == 1);
    same_values(dot, sd::eval(sd::matmul(u, u)));
    sd::Tensor<float, 1> mv(13), vm(5), wa(7);
    CHECK(replay(a, u, mv) == 1);
    same_values(mv, sd::eval(sd::matmul(a, u)));
    CHECK(replay(u, b, vm) == 1);
    same_values(vm, sd::eval(sd::matmul(u, b)));
    CHECK(replay(w, a, wa) == 1);
    same_values(wa, sd::eval(sd::matmul(w, a)));
  }
  SECTION("batches: one call where they are one stride apart, else one each") {
    auto x = sd::rand<float>(sd::shape(3, 13, 7), -1.f, 1.f);
    sd::Tensor<float, 3> one(3, 13, 5);
    CHECK(replay(x, b, one) == 1);  // b broadcast: batch stride 0
    same_values(one, sd::eval(sd::matmul(x, b)));
    auto y4 = sd::rand<float>(sd::shape(4, 1, 13, 7), -1.f, 1.f);
    auto z3 = sd::rand<float>(sd::shape(3, 7, 5), -1.f, 1.f);
    sd::Tensor<float, 4> each(4, 3, 13, 5);
    CHECK(replay(y4, z3, each) == 12);  // [4, 1] with [3]: no one stride
    same_values(each, sd::eval(sd::matmul(y4, z3)));
    auto mb = sd::rand<float>(sd::shape(13, 3, 7), -1.f, 1.f);  // batches inside rows
    auto xb = sd::permute(mb, {1, 0, 2});
    sd::Tensor<float, 3> store(13, 3, 5);
    auto ob = sd::permute(store, {1, 0, 2});  // an output whose batches lie in its rows too
    CHECK(replay(xb, z3, ob) == 1);
    same_values(ob, sd::eval(sd::matmul(xb, z3)));
  }
  SECTION("a bias along the output's last dim") {
    auto bias = sd::rand<float>(sd::shape(5), -1.f, 1.f);
    sd::Tensor<float, 2> out(13, 5);
    CHECK(replay(a, b, out, bias.data()) == 1);
    same_values(out, sd::eval(sd::matmul(a, b) + bias));
  }
}

TEST_CASE("contractions on the GPU: explain() counts the product and the rest apart",
          "[cuda][host][contract]") {
  auto x = cuda_shape<2>({33, 20}, 1);
  auto w = cuda_shape<2>({17, 20}, 2);
  auto b = cuda_shape<1>({17}, 3);
  auto r = cuda_shape<2>({33, 17}, 4);
  std::string const one = sd::explain(sd::relu(sd::linear(x, w, b)));
  INFO(one);
  CHECK(contains(one, "solder plan: 1 kernel (eager: 3)"));
  CHECK(contains(one, "kernel 0: contraction kernel (the element-wise rest is its epilogue)"));
  std::string const two = sd::explain(sd::relu(sd::linear(x, w) * 2.f + r));
  INFO(two);
  CHECK(contains(two, "solder plan: 2 kernels"));
  CHECK(contains(two, "kernel 0: contraction kernel"));
  CHECK(contains(two, "break: materialized because the element-wise rest runs after the product: "
                      "cuBLAS does not take this epilogue"));
  CHECK(contains(two, "kernel 1: element-wise kernel over [33, 17] float32"));
  CHECK(contains(two, "relu(add(mul(#0, 2), in"));
  std::string const erf = sd::explain(sd::gelu(sd::linear(x, w, b)));
  CHECK(contains(erf, "solder plan: 2 kernels"));
  // A product broadcast in its rest: stored first, as on the host.
  auto row = cuda_shape<2>({1, 20}, 5);
  std::string const wide = sd::explain(sd::matmul(row, sd::transpose(w, 0, 1)) + r);
  INFO(wide);
  CHECK(contains(wide, "solder plan: 2 kernels"));
  CHECK(contains(wide, "(run-time break)"));
}

TEST_CASE("TF32 for float products: off unless allowed", "[cuda][host][contract]") {
  CHECK_FALSE(sd::cuda::tf32_allowed());
  CHECK(dc::blas_compute<float>() == CUBLAS_COMPUTE_32F);
  sd::cuda::allow_tf32(true);
  CHECK(dc::blas_compute<float>() == CUBLAS_COMPUTE_32F_FAST_TF32);
  CHECK(dc::blas_compute<double>() == CUBLAS_COMPUTE_64F);
  CHECK(dc::blas_compute<sd::half>() == CUBLAS_COMPUTE_32F);
  CHECK(dc::blas_compute<sd::bfloat16>() == CUBLAS_COMPUTE_32F);
  sd::cuda::allow_tf32(false);
  CHECK(dc::blas_compute<float>() == CUBLAS_COMPUTE_32F);
}
