// expect: error: static assertion failed: solder: linear: the input's last static dim differs from in_features
// An input [4, 8] and a weight [10, 7] ([out_features, in_features]): one compile error naming
// linear, whose "required from" lines name both extents, not a run-time one (DESIGN.md §5).
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, sd::ext<4, 8>> x(4, 8);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, sd::ext<10, 8>> w(10, 8);
#else
  sd::Tensor<float, sd::ext<10, 7>> w(10, 7);
#endif
  sd::Tensor<float, 2> y = sd::linear(x, w);
  return static_cast<int>(y.numel()) - 40;
}
