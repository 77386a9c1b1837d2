// expect: error: static assertion failed: solder: matmul: the operands' static shapes cannot be multiplied.*mm
// Static extents flow through transpose<D0, D1>: mm of [4, 8] by [10, 7] transposed is a compile
// error whose "required from" lines name mm and both extents, not a run-time one.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, sd::ext<4, 8>> a(4, 8);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, sd::ext<10, 8>> b(10, 8);
#else
  sd::Tensor<float, sd::ext<10, 7>> b(10, 7);
#endif
  sd::Tensor<float, 2> y = sd::mm(a, sd::transpose<0, 1>(b));
  return static_cast<int>(y.numel()) - 40;
}
