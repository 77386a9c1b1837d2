// expect: error: static assertion failed: solder: element-wise op: operands live on different devices \(sd::Host and sd::Cuda\)
// A host tensor and a GPU tensor in one expression: one message that says how to move one.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 2, sd::Cuda> d(3, 4);
  sd::Tensor<float, 2> h(3, 4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 2, sd::Cuda> y = d * 2.f + h.to<sd::Cuda>();
#else
  sd::Tensor<float, 2, sd::Cuda> y = d * 2.f + h;
#endif
  return static_cast<int>(y.numel()) - 12;
}
