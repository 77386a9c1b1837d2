// expect: error: static assertion failed: solder: compile with sd::fullgraph: .*more than one kernel
// sd::compile(f, sd::fullgraph): a callable whose expression the planner breaks does not compile;
// the same break made a user break with sd::materialize does.
#include <solder/solder.hpp>

namespace sd = solder;

int main() {
  sd::Tensor<float, 1> x = sd::ones<float>(8);
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  auto f = sd::compile([](sd::Tensor<float, 1> const& v) { return v - sd::materialize(sd::sum(v)); }, sd::fullgraph);
#else
  auto f = sd::compile([](sd::Tensor<float, 1> const& v) { return v - sd::sum(v); }, sd::fullgraph);
#endif
  sd::Tensor<float, 1> y = f(x);
  return y.numel() == 8 ? 0 : 1;
}
