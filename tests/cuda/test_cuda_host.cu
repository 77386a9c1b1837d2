// The host side of an nvcc build, which must work on any machine, with or without a GPU:
// a request for GPU memory either works or throws sd::Error "no CUDA device: ...", and a failed
// CUDA call throws sd::Error naming the call, CUDA's error and the place.
#include <catch2/catch.hpp>
#include <solder/solder.hpp>

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
