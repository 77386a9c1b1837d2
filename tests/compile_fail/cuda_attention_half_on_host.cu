// expect: error: static assertion failed: solder: scaled_dot_product_attention: float and double operands only \(sd::half and sd::bfloat16 on sd::Cuda tensors\)
// Attention over 16-bit floats on the host: the host's engine computes in float and double;
// 16-bit operands run on sd::Cuda tensors (computed in float). One message.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  using Device = sd::Cuda;
#else
  using Device = sd::Host;
#endif
  sd::Tensor<sd::half, 3, Device> q(2, 4, 8), k(2, 5, 8), v(2, 5, 8);
  auto e = sd::scaled_dot_product_attention(q, k, v);
  return static_cast<int>(e.shape()[0]) - 2;
}
