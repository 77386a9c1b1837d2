// expect: error: static assertion failed: solder: this contraction is not available on sd::Cuda yet \(matmul, mm, bmm and linear are\)
// Attention on sd::Cuda tensors: only matrix products run there so far. One message.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  using Device = sd::Host;
#else
  using Device = sd::Cuda;
#endif
  sd::Tensor<float, 3, Device> q(2, 4, 8), k(2, 5, 8), v(2, 5, 8);
  sd::Tensor<float, 3, Device> y = sd::scaled_dot_product_attention(q, k, v);
  return static_cast<int>(y.numel()) - 64;
}
