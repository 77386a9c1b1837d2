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
// BlockedFold in host/evaluators.hpp: 128 terms a chunk, 64 chunks a block, the blocks in order),
// whether it takes a term at each index (columns, strided lines) or a vector of 4 (rows): the
// same bits as the host's fold of the same terms, so a float sum of 10^6 or 10^7 terms keeps the
// host's bound (tests/test_edges.cpp). One accumulator would give 100958 and 1087937.
TEST_CASE("a GPU thread's fold: the host's order, so the host's error bound", "[cuda][host]") {
  using Sum = sd::ops::Sum;
  for (std::int64_t n : {std::int64_t{1000000}, std::int64_t{10000000}}) {
    INFO("n = " << n);
    sd::detail::host::BlockedFold<Sum, float> host;
    for (std::int64_t i = 0; i < n; ++i) {
      host.chunk = Sum::step(host.chunk, 0.1f, i);
      host.next();
    }
    sd::detail::cuda::ThreadFold<Sum, float> one, vec;
    one.in_chunks(std::int64_t{0}, n, std::int64_t{1}, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) one.chunk = Sum::step(one.chunk, 0.1f, i);
    });
    vec.in_chunks<4>(std::int64_t{0}, n, std::int64_t{4}, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; i += 4)
        for (int k = 0; k < 4; ++k) vec.chunk = Sum::step(vec.chunk, 0.1f, i + k);
    });
    CHECK(one.result() == host.result());
    CHECK(vec.result() == host.result());
    double const exact = static_cast<double>(0.1f) * static_cast<double>(n);
    double const bound = (128 + 64 + static_cast<double>(n) / 8192 + 2) *
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
