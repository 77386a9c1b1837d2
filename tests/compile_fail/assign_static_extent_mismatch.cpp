// expect: error: static assertion failed: solder: assignment: static extents of the expression and the tensor differ
// A value of static extent 3 cannot be stored into a tensor of static extent 4.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, sd::ext<4>> dst;
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, sd::ext<4>> src;
#else
  sd::Tensor<float, sd::ext<3>> src;
#endif
  dst = src * 2.f;
  return 0;
}
