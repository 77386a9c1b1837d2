// The op suite on sd::Cuda tensors, against the host's results on the same inputs. Element-wise
// maths is one functor on both sides, built without fma contraction (-fmad=false), so device
// results must equal the host's bit for bit; reductions fold in another order and are compared
// within a tolerance. Needs a GPU: without one its main (gpu_main.cpp) prints
// "skipped: no CUDA device: ..." and exits 77, which ctest reports as skipped.
#include <catch2/catch.hpp>
#include <solder/solder.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace sd = solder;

namespace {

// Inputs with the special values every op must handle, then random ones of both signs.
template <class T>
sd::Tensor<T, 2> inputs(std::int64_t rows, std::int64_t cols, T scale) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::vector<T> specials{T(0), -T(0), T(1), T(-1), inf, -inf, std::numeric_limits<T>::quiet_NaN(),
                          std::numeric_limits<T>::denorm_min(), T(1e-30), T(-88.5), T(89.5), T(700)};
  auto r = sd::rand<T>(sd::shape(rows, cols), -scale, scale);
  auto v = sd::to_vector(r);
  for (std::size_t i = 0; i < specials.size() && i < v.size(); ++i) v[i] = specials[i];
  return sd::from_vector(v, sd::shape(rows, cols));
}

template <class A, class B>
void same_bits(A const& device, B const& host) {
  auto d = sd::to_vector(device);
  auto h = sd::to_vector(host);
  REQUIRE(d.size() == h.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    INFO("element " << i << ": device " << static_cast<double>(d[i]) << ", host "
                     << static_cast<double>(h[i]));
    if constexpr (sd::is_floating_v<typename decltype(d)::value_type>) {
      if (std::isnan(static_cast<double>(h[i]))) CHECK(std::isnan(static_cast<double>(d[i])));
      else CHECK(std::memcmp(&d[i], &h[i], sizeof(d[i])) == 0);
    } else {
      CHECK(d[i] == h[i]);
    }
  }
}

template <class A, class B>
void close(A const& device, B const& host, double rel) {
  auto d = sd::to_vector(device);
  auto h = sd::to_vector(host);
  REQUIRE(d.size() == h.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    double dv = static_cast<double>(d[i]), hv = static_cast<double>(h[i]);
    INFO("element " << i << ": device " << dv << ", host " << hv);
    if (std::isnan(hv)) CHECK(std::isnan(dv));
    else CHECK(std::abs(dv - hv) <= rel * (1 + std::abs(hv)));
  }
}

// Applies f to the host tensors and to their device copies and compares bit for bit.
template <class F, class... H>
void same_on_both(F const& f, H const&... host) {
  same_bits(sd::eval(f(host.template to<sd::Cuda>()...)), sd::eval(f(host...)));
}

}  // namespace

// Every op in float; double shares the functors, so a few expressions cover its polynomials.
TEST_CASE("element-wise maths: device equals host bit for bit", "[gpu][elementwise]") {
  using T = float;
  auto x = inputs<T>(67, 129, T(30));
  auto pos = sd::eval(sd::abs(x));
#define SOLDER_SAME(expr) \
  SECTION(#expr) { same_on_both([](auto const& a) { return expr; }, x); }
  SOLDER_SAME(sd::exp(a))
  SOLDER_SAME(sd::expm1(a))
  SOLDER_SAME(sd::tanh(a))
  SOLDER_SAME(sd::sigmoid(a))
  SOLDER_SAME(sd::erf(a))
  SOLDER_SAME(sd::sin(a))
  SOLDER_SAME(sd::cos(a))
  SOLDER_SAME(sd::gelu(a))
  SOLDER_SAME(sd::gelu(a, sd::tanh_approximation))
  SOLDER_SAME(sd::silu(a))
  SOLDER_SAME(sd::softplus(a))
  SOLDER_SAME(sd::relu(a) - sd::abs(a) * 2 + (-a) + sd::leaky_relu(a, 0.1) +
              sd::clamp(a, T(-1), T(2)) * sd::where(a > T(0), a, a * T(0.5)))
  SOLDER_SAME(sd::tanh(a * T(0.5) + T(0.25)) * sd::sigmoid(a) + a * a * T(0.1) - T(0.3))
#undef SOLDER_SAME
  SECTION("log, log1p, sqrt, rsqrt, pow") {
    same_on_both([](auto const& a) { return sd::log(a) + sd::log1p(a); }, pos);
    same_on_both([](auto const& a) { return sd::sqrt(a) * sd::rsqrt(a + T(1)); }, pos);
    same_on_both([](auto const& a, auto const& b) { return sd::pow(a, b * T(0.1)); }, pos, x);
  }
}

TEST_CASE("element-wise maths in double: device equals host bit for bit", "[gpu][elementwise]") {
  auto x = inputs<double>(67, 129, 30.0);
  same_on_both([](auto const& a) { return sd::exp(a) + sd::tanh(a) * sd::sigmoid(a) - sd::erf(a); }, x);
  same_on_both([](auto const& a) { return sd::sin(a) * sd::cos(a) + sd::expm1(a) / sd::softplus(a); }, x);
  same_on_both([](auto const& a) { return sd::log1p(sd::abs(a)) * sd::pow(sd::abs(a), a * 0.1); }, x);
}

TEMPLATE_TEST_CASE("16-bit floats: storage on the GPU, maths in float, same bits as the host",
                   "[gpu][half]", sd::half, sd::bfloat16) {
  using H = TestType;
  sd::Tensor<H, 2> x = sd::cast<H>(inputs<float>(65, 1031, 8.f));
  same_on_both([](auto const& a) { return sd::tanh(a * 0.5f + 0.25f) * sd::sigmoid(a) - a * a; }, x);
  // The row sum folds in another order, so a result may round to the neighbouring half.
  close(sd::eval(sd::softmax(x.template to<sd::Cuda>(), 1)), sd::eval(sd::softmax(x, 1)), 2e-3);
  same_on_both([](auto const& a) { return sd::max(a, 0); }, x);
  same_on_both([](auto const& a) { return sd::argmax(a, 1); }, x);
  auto fin = sd::eval(sd::cast<H>(sd::rand<float>(sd::shape(257, 1031))));
  close(sd::eval(sd::sum(fin.template to<sd::Cuda>(), 1)), sd::eval(sd::sum(fin, 1)), 4e-3);
  auto g = sd::eval(sd::cast<H>(sd::rand<float>(sd::shape(1031))));
  close(sd::eval(sd::layer_norm(fin.template to<sd::Cuda>(), g.template to<sd::Cuda>(), g.template to<sd::Cuda>())),
        sd::eval(sd::layer_norm(fin, g, g)), 1e-2);
}

TEST_CASE("broadcasts, views, casts and comparisons", "[gpu][elementwise]") {
  auto a = inputs<float>(33, 65, 4.f);
  auto row = sd::rand<float>(sd::shape(65));
  auto col = sd::rand<float>(sd::shape(33, 1));
  same_on_both([](auto const& x, auto const& r, auto const& c) { return x * r - c; }, a, row, col);
  same_on_both([](auto const& x) { return sd::transpose(x, 0, 1) * 2.f; }, a);
  same_on_both([](auto const& x) { return sd::slice(x, 1, 3, 60, 3) + 1.f; }, a);
  same_on_both([](auto const& x) { return sd::cast<std::int32_t>(x * 10.f) / 3; }, a);
  same_on_both([](auto const& x) { return (x > 0.5f) != (x < -0.5f); }, a);
  same_on_both([](auto const& x, auto const& r) { return sd::maximum(x, r) + sd::minimum(x, r); }, a, row);
}

TEST_CASE("aliasing: y = transpose(y) on the device", "[gpu][elementwise]") {
  auto h = sd::view(sd::arange<float>(0, 16), sd::shape(4, 4));
  sd::Tensor<float, 2, sd::Cuda> y = h.to<sd::Cuda>();
  y = sd::transpose(y, 0, 1);
  same_bits(y, sd::eval(sd::transpose(h, 0, 1)));
}

// In float; the double instantiations share all but the accumulator type (checked below).
TEST_CASE("reductions: device against host", "[gpu][reduce]") {
  using T = float;
  auto x = sd::rand<T>(sd::shape(129, 257), T(-1), T(1));
  auto d = x.template to<sd::Cuda>();
  double tol = 2e-5;
  for (int dim : {0, 1}) {
    INFO("dim " << dim);
    close(sd::eval(sd::sum(d, dim)), sd::eval(sd::sum(x, dim)), tol * 300);
    close(sd::eval(sd::mean(d, dim, sd::keepdim)), sd::eval(sd::mean(x, dim, sd::keepdim)), tol);
    close(sd::eval(sd::var(d, dim)), sd::eval(sd::var(x, dim)), tol * 10);
    same_bits(sd::eval(sd::max(d, dim)), sd::eval(sd::max(x, dim)));
    same_bits(sd::eval(sd::min(d, dim)), sd::eval(sd::min(x, dim)));
    same_bits(sd::eval(sd::argmax(d, dim)), sd::eval(sd::argmax(x, dim)));
    same_bits(sd::eval(sd::argmin(d, dim)), sd::eval(sd::argmin(x, dim)));
    close(sd::eval(sd::prod(d * T(0.01) + T(1), dim)), sd::eval(sd::prod(x * T(0.01) + T(1), dim)), tol * 10);
  }
  close(sd::eval(sd::sum(d)), sd::eval(sd::sum(x)), tol * 1000);
  same_bits(sd::eval(sd::argmax(d)), sd::eval(sd::argmax(x)));
  // Large full reductions take CUB's device-wide path, over a fused input.
  auto big = sd::rand<T>(sd::shape(1 << 20), T(0), T(1));
  auto bd = big.template to<sd::Cuda>();
  close(sd::eval(sd::sum(bd * T(2))), sd::eval(sd::sum(big * T(2))), tol * 100);
  same_bits(sd::eval(sd::max(sd::exp(bd))), sd::eval(sd::max(sd::exp(big))));
  same_bits(sd::eval(sd::argmin(bd)), sd::eval(sd::argmin(big)));
  // Integer sums widen to int64 and are exact.
  auto ints = sd::eval(sd::cast<std::int32_t>(x * T(100)));
  same_bits(sd::eval(sd::sum(ints.template to<sd::Cuda>(), 1)), sd::eval(sd::sum(ints, 1)));
}

TEST_CASE("reductions and rows in double", "[gpu][reduce][rows]") {
  auto x = sd::randn<double>(sd::shape(129, 1031));
  auto d = x.to<sd::Cuda>();
  close(sd::eval(sd::sum(d, 1)), sd::eval(sd::sum(x, 1)), 1e-12);
  same_bits(sd::eval(sd::argmax(d, 0)), sd::eval(sd::argmax(x, 0)));
  close(sd::eval(sd::softmax(d, 1)), sd::eval(sd::softmax(x, 1)), 1e-12);
}

TEST_CASE("reductions broadcast along different dims: the run-time split", "[gpu][reduce]") {
  auto x = sd::rand<float>(sd::shape(37, 53));
  auto d = x.to<sd::Cuda>();
  close(sd::eval(sd::sum(d, 0, sd::keepdim) + sd::sum(d, 1, sd::keepdim)),
        sd::eval(sd::sum(x, 0, sd::keepdim) + sd::sum(x, 1, sd::keepdim)), 1e-5);
}

TEST_CASE("row kernels: device against host", "[gpu][rows]") {
  using T = float;
  double tol = 1e-5;
  for (std::int64_t cols : {1, 7, 1024, 4099}) {
    INFO("cols " << cols);
    auto x = sd::randn<T>(sd::shape(65, cols));
    auto g = sd::rand<T>(sd::shape(cols));
    auto b = sd::rand<T>(sd::shape(cols));
    auto d = x.template to<sd::Cuda>();
    auto gd = g.template to<sd::Cuda>();
    auto bd = b.template to<sd::Cuda>();
    close(sd::eval(sd::softmax(d, 1)), sd::eval(sd::softmax(x, 1)), tol);
    close(sd::eval(sd::log_softmax(d, 1)), sd::eval(sd::log_softmax(x, 1)), tol);
    close(sd::eval(sd::layer_norm(d, gd, bd)), sd::eval(sd::layer_norm(x, g, b)), tol * 10);
    close(sd::eval(sd::rms_norm(d, gd)), sd::eval(sd::rms_norm(x, g)), tol * 10);
    close(sd::eval(sd::softmax(d, 0)), sd::eval(sd::softmax(x, 0)), tol);  // along columns
  }
}

TEST_CASE("factories and copies", "[gpu][tensor]") {
  sd::manual_seed(7);
  auto h = sd::rand<float>(sd::shape(1000, 3), -2.f, 3.f);
  auto hn = sd::randn<double>(sd::shape(501));
  sd::manual_seed(7);
  auto d = sd::rand<float, sd::Cuda>(sd::shape(1000, 3), -2.f, 3.f);
  auto dn = sd::randn<double, sd::Cuda>(sd::shape(501));
  same_bits(d, h);  // the same seed gives the same numbers on both devices
  same_bits(dn, hn);
  same_bits(sd::full<float, sd::Cuda>(sd::shape(5, 2), 2.5f), sd::full<float>(sd::shape(5, 2), 2.5f));
  auto back = d.to<sd::Host>();
  CHECK(back.storage() != d.storage());
  same_bits(d.clone(), h);
  same_bits(sd::transpose(d, 0, 1).to<sd::Host>(), sd::eval(sd::transpose(h, 0, 1)));
  CHECK(sd::slice(sd::slice(d, 0, 10, 11), 1, 2, 3).item() == h(10, 2));
  sd::Tensor<float, 2, sd::Cuda> empty(0, 3);
  sd::Tensor<float, 2, sd::Cuda> also_empty = sd::exp(empty);
  CHECK(also_empty.numel() == 0);
  CHECK(sd::eval(sd::sum(empty)).item() == 0.f);
}

TEST_CASE("run-time misuse on the device throws sd::Error", "[gpu][errors]") {
  auto a = sd::zeros<float, sd::Cuda>(sd::shape(3, 4));
  auto b = sd::zeros<float, sd::Cuda>(sd::shape(5, 4));
  CHECK_THROWS_AS(sd::eval(a + b), sd::Error);
  sd::Tensor<float, 2, sd::Cuda> c(4, 3);
  CHECK_THROWS_AS(c = a * 2.f, sd::Error);
}
