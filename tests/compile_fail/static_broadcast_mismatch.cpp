// expect: error: static assertion failed: solder: element-wise op: operand shapes cannot be broadcast together
// Static extents [3, 4] and [5] cannot broadcast: a compile error, not a run-time one
// (DESIGN.md §5). The op (ops::Add) and both extents appear in the "required from" lines
// around the first error.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, sd::ext<3, 4>> a;
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, sd::ext<4>> b;
#else
  sd::Tensor<float, sd::ext<5>> b;
#endif
  auto e = a + b;
  sd::Tensor<float, sd::ext<3, 4>> c = e;
  return static_cast<int>(c.numel()) - 12;
}
