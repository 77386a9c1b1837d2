// expect: error: static assertion failed: solder: conv2d: the input's channels \(dim -3\) must be the weight's in_channels
// Static extents: an input of 3 channels and a weight of [8, 2, 3, 3] (2 input channels per
// group: 3 is no multiple of 2, whatever groups is): one compile error, whose "required from"
// lines name both extents, not a run-time one (DESIGN.md §5).
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, sd::ext<1, 3, 8, 8>> x;
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, sd::ext<8, 3, 3, 3>> w;
#else
  sd::Tensor<float, sd::ext<8, 2, 3, 3>> w;
#endif
  auto e = sd::relu(sd::conv2d(x, w, {.padding = 1}));
  sd::Tensor<float, 4> y = e;
  return static_cast<int>(y.numel()) - 512;
}
