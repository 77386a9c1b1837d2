// expect: error: static assertion failed: solder: gradcheck: the arguments are double-precision tensors
// gradcheck differentiates numerically, which float's precision cannot do: float arguments are
// refused at compile time, as PyTorch warns.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::Tensor<double, 1> x = sd::ones<double>(3);
#else
  sd::Tensor<float, 1> x = sd::ones<float>(3);
#endif
  return sd::gradcheck([](auto const& a) { return sd::sum(a * a); }, std::tie(x)) ? 0 : 1;
}
