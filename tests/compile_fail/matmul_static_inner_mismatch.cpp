// expect: error: static assertion failed: solder: matmul: the operands' static shapes cannot be multiplied
// Static extents [3, 4] and [5, 2] cannot be multiplied (inner dims 4 and 5): one compile error,
// whose "required from" lines name both extents, not a run-time one (DESIGN.md §5).
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, sd::ext<3, 4>> a;
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, sd::ext<4, 2>> b;
#else
  sd::Tensor<float, sd::ext<5, 2>> b;
#endif
  auto e = sd::relu(sd::matmul(a, b));
  sd::Tensor<float, sd::ext<3, 2>> c = e;
  return static_cast<int>(c.numel()) - 6;
}
