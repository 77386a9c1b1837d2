// expect: error: static assertion failed: solder: where\(cond, a, b\): the condition must be a bool expression
// where() takes a bool condition; a float tensor is not silently compared with zero.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 1> c(4), a(4), b(4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 1> r = sd::where(c > 0.f, a, b);
#else
  sd::Tensor<float, 1> r = sd::where(c, a, b);
#endif
  return static_cast<int>(r.numel()) - 4;
}
