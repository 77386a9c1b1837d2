// The gradient checks of the autograd tests (test_autograd.cpp, test_autograd_ops.cpp).
#pragma once
#include "reference.hpp"

#include <cmath>
#include <tuple>

namespace sd = solder;

namespace autograd_check {

// sd::gradcheck (the public check: central differences at every element of every argument,
// contiguous double tensors) with a tight bound. The functions are smooth at the points used.
template <class F, class... A>
void check_grad(char const* what, F const& f, A&... args) {
  INFO(what);
  REQUIRE(sd::gradcheck(f, std::tie(args...), {.eps = 1e-5, .atol = 1e-6, .rtol = 1e-6}));
}

sd::Tensor<double, 2> points(std::int64_t r, std::int64_t c, double lo = -2, double hi = 2) {
  return ref::uniform<double>(lo, hi, r, c);
}

}  // namespace autograd_check
