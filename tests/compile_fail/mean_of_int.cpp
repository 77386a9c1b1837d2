// expect: error: static assertion failed: solder: mean: the input must be floating point
// mean of an integer tensor is refused, as in PyTorch; cast first.
#include <cstdint>

#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<std::int32_t, 2> x(3, 4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 1> m = sd::mean(sd::cast<float>(x), 1);
#else
  sd::Tensor<float, 1> m = sd::mean(x, 1);
#endif
  return static_cast<int>(m.numel()) - 3;
}
