#include <solder/solder.hpp>
#include <cstdio>
namespace sd = solder;
int main() {
  sd::Tensor<float, 1> x = sd::arange<float>(0, 8);
  auto e = sd::relu(x - 3.f) * 2.f;
  static_assert(sd::kernel_count<decltype(e)> == 1);
  sd::Tensor<float, 1> y = e;
  auto v = sd::to_vector(y);
  if (v.size() != 8 || v[7] != 8.f || v[0] != 0.f) { std::puts("wrong result"); return 1; }
  std::puts("consume ok");
  return 0;
}
