// expect: solder: compile .cu files that include solder with nvcc --expt-relaxed-constexpr
// A .cu file built without --expt-relaxed-constexpr gets one error that names the flags solder
// needs, at the first line of solder it reads (here the flag's macro is removed to stand in
// for a build that forgot it).
#ifndef SOLDER_COMPILE_FAIL_CONTROL
#undef __CUDACC_RELAXED_CONSTEXPR__
#endif
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 1> x(4);
  return static_cast<int>(x.numel()) - 4;
}
