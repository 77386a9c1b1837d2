// Reverse-mode derivation (autograd/derivatives.hpp, autograd/value_and_grad.hpp): the gradient
// of every differentiable element-wise op and of broadcasts, checked against central
// differences of the same function in double precision at every element of every argument
// (autograd_check.hpp); the kernels an element-wise backward takes; float against double; and
// the misuse that is refused. Reductions, views and products: test_autograd_ops.cpp.
#include "autograd_check.hpp"

using namespace autograd_check;

// The unary ops nested in chains (each chain one kernel into its argument), the binary ones
// over two arguments.
TEST_CASE("autograd: every differentiable element-wise op", "[autograd]") {
  auto x = points(3, 5);
  auto pos = points(3, 5, 0.2, 3);
  auto y = points(3, 5);
  auto w = points(3, 5);  // weights: a gradient that differs at each element
  auto weighted = [&](auto const& e) { return sd::sum(e * w); };
  check_grad("exp, expm1, sin, cos, tanh, erf", [&](auto const& a) {
    return weighted(sd::erf(sd::tanh(sd::cos(sd::sin(sd::exp(sd::expm1(a * 0.3)) * 1.5)) + 0.2)));
  }, x);
  check_grad("sigmoid, silu, gelu (both forms), softplus, leaky_relu", [&](auto const& a) {
    auto inner = sd::gelu(sd::silu(sd::sigmoid(a) * 3.0 - 1.0), sd::tanh_approximation);
    return weighted(sd::softplus(sd::leaky_relu(sd::gelu(inner * 2.0 - 0.5), 0.1), 2.0));
  }, x);
  sd::nn::GELU const exact_form, tanh_form({.approximate = "tanh"});  // one op, its form a run-time flag
  check_grad("nn::GELU, both forms", [&](auto const& a) { return weighted(tanh_form(exact_form(a) * 1.5)); }, x);
  check_grad("log, log1p, sqrt, rsqrt, pow", [&](auto const& a) {
    return weighted(sd::log(sd::log1p(sd::sqrt(sd::pow(sd::rsqrt(a) + 1.0, 2.5)))) + sd::pow(1.5, a));
  }, pos);
  check_grad("relu, abs, neg, clamp, where", [&](auto const& a) {
    return weighted(sd::where(a > 0.5, sd::abs(sd::clamp(-sd::relu(a * 1.5), -1.0, 1.0)), a * 0.25));
  }, x);
  check_grad("a + b, a - b, a * b, a / b", [&](auto const& a, auto const& b) {
    return weighted(a + b * 2.0 - a * b + a / (b * b + 1.0));
  }, x, y);
  check_grad("maximum, minimum", [&](auto const& a, auto const& b) {
    return weighted(sd::maximum(a, b) - sd::minimum(a, b) * 3.0);
  }, x, y);
  check_grad("pow(a, b)", [&](auto const& a, auto const& b) { return weighted(sd::pow(a, b)); }, pos, y);
  // Through a cast: the gradient is cast back to the argument's type.
  auto const [g] = sd::grad([&](auto const& a) { return sd::sum(sd::cast<double>(sd::cast<float>(a) * 2.f) * w); })(x);
  ref::check_close(g, ref::of(sd::eval(w * 2.0)), ref::Tol{0, 1e-6}, "through a cast");
}

TEST_CASE("autograd: broadcasts sum the gradient over the dims they repeat", "[autograd]") {
  auto x = points(4, 6);
  auto row = ref::uniform<double>(-1, 1, 6);
  auto col = points(4, 1);
  auto one = ref::uniform<double>(-1, 1, 1, 1);
  check_grad("x * row + col", [](auto const& a, auto const& r, auto const& c) {
    return sd::sum(sd::tanh(a * r + c));
  }, x, row, col);
  check_grad("a 1x1 tensor", [&](auto const& o) { return sd::mean(sd::exp(x * o)); }, one);
}

// weighted by one-hot labels): the program a training step runs.
TEST_CASE("autograd: an element-wise backward is one kernel where the tensor takes it", "[autograd]") {
  auto x = ref::uniform<float>(-1, 1, 300, 200);
  auto f = [](auto const& a) { return sd::sum(sd::tanh(a * 2.f + 1.f) * a); };
  // The loss, and a kernel for each of the two places x is read, each a chain of element-wise
  // products (the fills of the seed and of the gradient's buffer are no planned kernels).
  std::uint64_t const kernels = ref::kernels_of([&] { (void)sd::grad(f)(x); });
  CHECK(kernels == 3);
  // Float against the same maths in double.
  auto const [gf] = sd::grad(f)(x);
  sd::Tensor<double, 2> xd = sd::cast<double>(x);
  auto const [gd] = sd::grad(f)(xd);
  ref::check_close(gf, ref::of(gd), ref::Tol{64, 1e-6}, "float against double");
}

TEST_CASE("autograd: misuse is refused with the details", "[autograd][errors]") {
  auto x = points(3, 4);
  auto view = sd::slice(x, 0, 0, 2);
  CHECK_THROWS_WITH(sd::grad([](auto const& a, auto const& b) { return sd::sum(a) + sd::sum(b); })(x, view),
                    Catch::Contains("value_and_grad: arguments 0 and 1 share memory"));
  // gradcheck finds a gradient that is not the derivative: relu's at its kink (0 by
  // convention, the central difference 1/2).
  sd::Tensor<double, 1> zero = sd::zeros<double>(3);
  CHECK_THROWS_WITH(sd::gradcheck([](auto const& a) { return sd::sum(sd::relu(a)); }, std::tie(zero)),
                    Catch::Contains("gradcheck: argument 0, element 0: the gradient is 0, the central difference 0.5"));
}
