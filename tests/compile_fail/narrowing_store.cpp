// expect: error: static assertion failed: solder: assignment: .*without a narrowing cast
// Storing a float expression into an int32 tensor needs an explicit sd::cast.
#include <cstdint>

#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 1> f(4);
  sd::Tensor<std::int32_t, 1> i(4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  i = sd::cast<std::int32_t>(f * 2.f);
#else
  i = f * 2.f;
#endif
  return 0;
}
