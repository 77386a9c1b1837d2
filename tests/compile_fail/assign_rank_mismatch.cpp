// expect: error: static assertion failed: solder: .*ranks? differ
// Assigning a rank-2 expression to a rank-1 tensor is a compile error.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 2> x(3, 4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 2> y(3, 4);
#else
  sd::Tensor<float, 1> y(4);
#endif
  y = x * 2.f;
  return 0;
}
