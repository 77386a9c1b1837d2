// Printing, close to PyTorch's: tensor([[1., 2.], [3., 4.]], shape=[2, 2], dtype=float32).
#pragma once
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>

#include "factories.hpp"

namespace solder {

template <class T, auto E, class D>
std::ostream& operator<<(std::ostream& os, BasicTensor<T, E, D> const& t) {
  constexpr int R = rank_of<E>;
  auto v = to_vector(t);
  auto const& s = t.shape();
  constexpr std::int64_t edge = 3, limit = 1000;  // summarise large tensors as PyTorch does
  bool summarise = t.numel() > limit;
  auto const precision = os.precision();  // restored below: printing leaves the stream as it was
  os << "tensor(";
  std::int64_t pos = 0;
  auto put = [&](T x) {
    if constexpr (std::is_same_v<T, bool>) os << (x ? "True" : "False");
    else if constexpr (is_floating_v<T>) {
      auto c = static_cast<compute_t<T>>(x);
      std::ostringstream one;
      one << std::setprecision(6) << c;
      std::string text = one.str();  // whole numbers print as "1." as in PyTorch
      if (text.find_first_of(".enai") == std::string::npos) text += '.';
      if (c != c) text = "nan";  // whatever its sign bit, as in PyTorch
      os << text;
    }
    else os << static_cast<long long>(x);
  };
  auto rec = [&](auto&& self, int axis) -> void {
    if (axis == R) {
      put(v[static_cast<std::size_t>(pos++)]);
      return;
    }
    os << '[';
    std::int64_t n = s[axis], stride = 1;
    for (int a = axis + 1; a < R; ++a) stride *= s[a];
    for (std::int64_t i = 0; i < n; ++i) {
      if (summarise && n > 2 * edge && i == edge) {
        os << ", ...";
        pos += (n - 2 * edge) * stride;
        i = n - edge - 1;
        continue;
      }
      if (i) os << ", ";
      self(self, axis + 1);
    }
    os << ']';
  };
  rec(rec, 0);
  os << ", shape=" << shape_string<R>(s) << ", dtype=" << dtype_name<T>() << ')';
  os.precision(precision);
  return os;
}

}  // namespace solder
