// expect: error: static assertion failed: solder: sd::Cuda tensors need the CUDA backend: compile this file with nvcc
// A GPU tensor in a file compiled by g++ is a compile error that says what to do.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 1, sd::Host> x(4);
#else
  sd::Tensor<float, 1, sd::Cuda> x(4);
#endif
  return static_cast<int>(x.numel()) - 4;
}
