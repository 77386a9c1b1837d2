// expect: error: static assertion failed: solder: matmul: float and double operands only \(sd::half and sd::bfloat16 on sd::Cuda tensors\)
// A product of 16-bit floats on the host: the host's GEMM engine computes in float and double;
// 16-bit operands multiply on sd::Cuda tensors (cuBLAS, float accumulation). One message.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<sd::half, 2, sd::Cuda> a(3, 4), b(4, 5);
#else
  sd::Tensor<sd::half, 2> a(3, 4), b(4, 5);
#endif
  auto e = sd::matmul(a, b);
  return static_cast<int>(e.shape()[0]) - 3;
}
