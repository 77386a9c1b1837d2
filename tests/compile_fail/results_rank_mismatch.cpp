// expect: error: static assertion failed: solder: results: the expressions' ranks differ
// Several results are one iteration space: expressions of two ranks are a compile error.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 2> x(3, 4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 2> y(3, 4);
#else
  sd::Tensor<float, 1> y(4);
#endif
  sd::results(x * 2.f, y + 1.f);
  return 0;
}
