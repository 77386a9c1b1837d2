// expect: error: static assertion failed: solder: value_and_grad: f returns one number
// The function differentiated returns a loss, one number (as backward() without an argument in
// PyTorch): a function of shape [3, 4] is refused at compile time, naming the fix.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 2> x = sd::ones<float>(3, 4);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  auto [g] = sd::grad([](auto const& a) { return sd::sum(a * a); })(x);
#else
  auto [g] = sd::grad([](auto const& a) { return a * a; })(x);
#endif
  return static_cast<int>(g.numel()) - 12;
}
