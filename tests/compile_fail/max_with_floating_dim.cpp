// expect: error: static assertion failed: solder: max\(x, dim\): a dim must be an integer.*sd::maximum\(x, v\)
// max(x, 0.f) does not convert 0.f to dim 0 and reduce: a dim is an integer, and the element-wise
// maximum with a number is sd::maximum.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 2> x(3, 4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 2> r = sd::maximum(x, 0.f);
#else
  sd::Tensor<float, 2> r = sd::max(x, 0.f);
#endif
  return static_cast<int>(r.numel()) - 12;
}
