// expect: error: static assertion failed: solder: matmul: the operands' static shapes cannot be multiplied.*mm
// Static extents flow through views of expressions: mm of [4, 8] by t of a [10, 7] expression
// is a compile error, not a run-time one.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, sd::ext<4, 8>> a(4, 8);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, sd::ext<10, 8>> b(10, 8);
#else
  sd::Tensor<float, sd::ext<10, 7>> b(10, 7);
#endif
  sd::Tensor<float, 2> y = sd::mm(a, sd::t(b * 2.f));
  return static_cast<int>(y.numel()) - 40;
}
