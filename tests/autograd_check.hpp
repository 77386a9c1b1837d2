// The gradient checks of the autograd tests (test_autograd.cpp, test_autograd_ops.cpp).
#pragma once
#include "reference.hpp"

#include <cmath>
#include <tuple>

namespace sd = solder;

namespace autograd_check {

// sd::grad(f) at args against (f(a + h) - f(a - h)) / 2h for every element of every argument
// (contiguous double tensors). The functions are smooth at the points used (no ties, no kinks).
template <class F, class... A>
void check_grad(char const* what, F const& f, A&... args) {
  INFO(what);
  auto const grads = sd::grad(f)(args...);
  constexpr double h = 1e-5;
  auto value = [&] { return sd::eval(f(args...)).item(); };
  auto one = [&](auto& arg, auto const& g) {
    REQUIRE(g.shape() == arg.shape());
    ref::Array analytic = ref::of(g);
    double* p = arg.data();
    for (std::int64_t k = 0; k < arg.numel(); ++k) {
      double const keep = p[k];
      p[k] = keep + h;
      double const up = value();
      p[k] = keep - h;
      double const down = value();
      p[k] = keep;
      double const numeric = (up - down) / (2 * h);
      INFO("element " << k << ": analytic " << analytic[k] << ", numeric " << numeric);
      REQUIRE(std::abs(analytic[k] - numeric) <= 1e-6 * (1 + std::abs(numeric)));
    }
  };
  auto const all = std::tie(args...);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (one(std::get<I>(all), std::get<I>(grads)), ...);
  }(std::index_sequence_for<A...>{});
}

sd::Tensor<double, 2> points(std::int64_t r, std::int64_t c, double lo = -2, double hi = 2) {
  return ref::uniform<double>(lo, hi, r, c);
}

}  // namespace autograd_check
