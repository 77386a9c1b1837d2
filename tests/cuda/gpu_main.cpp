// Catch2's main for the tests that need a GPU: with no usable device (no GPU, no driver) it
// prints "skipped: no CUDA device: <why>" and exits 77, which ctest reports as skipped — never
// as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdio>

int main(int argc, char** argv) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device: %s\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
