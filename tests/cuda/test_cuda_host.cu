// The host side of an nvcc build, which must work on any machine, with or without a GPU:
// a request for GPU memory either works or throws sd::Error "no CUDA device: ...", and a failed
// CUDA call throws sd::Error naming the call, CUDA's error and the place.
#include <catch2/catch.hpp>
#include <solder/solder.hpp>

#include <cmath>
#include <string>

namespace sd = solder;
using Catch::Matchers::Contains;

TEST_CASE("nvcc build: host expressions still run on the host", "[cuda][host]") {
  auto x = sd::arange<float>(8);
  sd::Tensor<float, 1> y = sd::tanh(x * 0.5f) + sd::softmax(x, 0);
  for (int i = 0; i < 8; ++i)
    CHECK(y(i) == sd::math::tanh(i * 0.5f) + sd::eval(sd::softmax(x, 0))(i));
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
