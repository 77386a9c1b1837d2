// expect: error: static assertion failed: solder: assignment: the expression's tensors live on another device than the tensor it is stored into
// A reduction of GPU tensors stored into a host tensor: one message, not the executor's errors
// that would follow it.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 2, sd::Cuda> d(3, 4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<float, 1> s = sd::eval(sd::sum(d, 0)).to<sd::Host>();
#else
  sd::Tensor<float, 1> s = sd::sum(d, 0);
#endif
  return static_cast<int>(s.numel()) - 4;
}
