// sd::gradcheck(f, x, w, ...): torch.autograd.gradcheck's check of a derivation — the gradients
// of f (a function returning a 0-d expression) that sd::grad computes against central finite
// differences of f itself, at every element of every argument. Arguments are double-precision
// tensors (contiguous), as PyTorch asks; f must be smooth at the point (no ties, no kinks).
// Returns true, or throws sd::Error naming the argument, the element and both values.
#pragma once
#include <cmath>
#include <string>
#include <tuple>

#include "value_and_grad.hpp"

namespace solder {

struct GradcheckOptions {
  double eps = 1e-6;   // the step of the central difference
  double atol = 1e-5;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
};

template <class F, class... A>
bool gradcheck(F const& f, std::tuple<A&...> args, GradcheckOptions const& o = {}) {
  constexpr bool doubles = (std::is_same_v<typename std::remove_cvref_t<A>::value_type, double> && ...);
  static_assert(doubles, "solder: gradcheck: the arguments are double-precision tensors, as PyTorch asks");
  if constexpr (doubles) {
    auto const grads = std::apply([&](auto&... a) { return grad(f)(a...); }, args);
    auto value = [&] { return std::apply([&](auto&... a) { return eval(f(a...)).item(); }, args); };
    auto one = [&](std::size_t which, auto& arg, auto const& g) {
      detail::check(arg.is_contiguous(), "gradcheck: argument ", which, " is not contiguous");
      auto const analytic = eval(g);  // contiguous, in the argument's order of elements
      double* p = arg.data();
      for (std::int64_t k = 0; k < arg.numel(); ++k) {
        double const keep = p[k];
        p[k] = keep + o.eps;
        double const up = value();
        p[k] = keep - o.eps;
        double const down = value();
        p[k] = keep;
        double const numeric = (up - down) / (2 * o.eps), a = analytic.data()[k];
        detail::check(std::abs(a - numeric) <= o.atol + o.rtol * std::abs(numeric), "gradcheck: argument ", which,
                      ", element ", k, ": the gradient is ", a, ", the central difference ", numeric);
      }
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (one(I, std::get<I>(args), std::get<I>(grads)), ...);
    }(std::index_sequence_for<A...>{});
  }
  return true;
}

}  // namespace solder
