// expect: error: static assertion failed: solder: assign: after a contraction's output, the results are its sums or means
// A contraction's epilogue folds sums and means of its output: a max among the results is a
// compile error that says so.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 4> x(2, 3, 5, 5), w(4, 3, 3, 3), y(2, 4, 3, 3);
  sd::Tensor<float, 1> s(4);
  auto const c = sd::conv2d(x, w);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  sd::assign(std::tie(y, s), c, sd::sum(c, {0, 2, 3}));
#else
  sd::assign(std::tie(y, s), c, sd::max(c, {0, 2, 3}));
#endif
  return 0;
}
