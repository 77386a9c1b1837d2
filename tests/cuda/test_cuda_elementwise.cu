// Element-wise ops on sd::Cuda tensors against the host's results on the same inputs, bit for
// bit: every op in float, the double polynomials, broadcasts, views, int64 and bool tensors,
// casts, eager and aliasing.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include "compare.hpp"

using namespace gpu_test;

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

TEST_CASE("broadcasts, views, casts and comparisons", "[gpu][elementwise]") {
  auto a = inputs<float>(33, 65, 4.f);
  auto row = sd::rand<float>(sd::shape(65));
  auto col = sd::rand<float>(sd::shape(33, 1));
  same_on_both([](auto const& x, auto const& r, auto const& c) { return x * r - c; }, a, row, col);
  same_on_both([](auto const& x) { return sd::transpose(x, 0, 1) * 2.f; }, a);
  same_on_both([](auto const& x) { return sd::slice(x, 1, 3, 60, 3) + 1.f; }, a);
  // Casting NaN, inf or an out-of-range float to an integer is undefined (C++ and PyTorch):
  // finite inputs only.
  auto finite = sd::rand<float>(sd::shape(33, 65), -4.f, 4.f);
  same_on_both([](auto const& x) { return sd::cast<std::int32_t>(x * 10.f) / 3; }, finite);
  same_on_both([](auto const& x) { return (x > 0.5f) != (x < -0.5f); }, a);
  same_on_both([](auto const& x, auto const& r) { return sd::maximum(x, r) + sd::minimum(x, r); }, a, row);
}

// Views of device tensors, and of expressions over them (pushed down to their inputs): permute,
// narrow, squeeze and unsqueeze, expand and broadcast_to, flatten and reshape (a view where the
// strides allow one, else a copy made on the device). (A few expressions with many views each:
// every expression type is a kernel more to build.)
TEST_CASE("views: permute, narrow, squeeze, expand, flatten, reshape", "[gpu][views]") {
  auto x = sd::reshape(inputs<float>(6, 35, 4.f), sd::shape(6, 5, 7));
  auto col = sd::rand<float>(sd::shape(5, 1), -1.f, 1.f);
  same_on_both([](auto const& v) {
    return sd::permute(v, {2, 0, 1}) * 2.f + sd::permute(v * v - 1.f, {2, 0, 1});
  }, x);
  same_on_both([](auto const& v, auto const& c) {
    return sd::expand(sd::narrow(v, 0, 4, 1), std::array<std::int64_t, 3>{6, 5, 7}) -
           v * sd::broadcast_to(c, sd::shape(6, 5, 7)) +
           sd::unsqueeze(sd::squeeze(sd::narrow(v, 1, 2, 1), 1), 1);
  }, x, col);
  same_on_both([](auto const& v) {
    return sd::flatten<1>(v) + sd::reshape(sd::transpose(v, 0, 2), sd::shape(6, 35)) * 2.f;
  }, x);
}

// int64 and bool tensors: integer arithmetic (int / int is true division, in float, as in
// PyTorch), promotion to float, comparisons, logic, where and casts.
TEST_CASE("int64 and bool tensors", "[gpu][integers]") {
  auto f = sd::rand<float>(sd::shape(33, 65), -2.f, 2.f);
  auto a = sd::eval(sd::cast<std::int64_t>(f * 30000.f));
  auto b = sd::eval(sd::cast<std::int64_t>(sd::rand<float>(sd::shape(33, 65), 1.f, 50.f)));  // no 0
  auto p = sd::eval(f > 0.5f);
  auto q = sd::eval(sd::rand<float>(sd::shape(33, 65)) < 0.5f);
  same_on_both([](auto const& x, auto const& y) {
    return x * y - x / y + y * 3 + sd::maximum(x, y) - sd::clamp(x, -100, 200) + sd::relu(-x) +
           sd::abs(x);
  }, a, b);
  same_on_both([](auto const& x, auto const& y, auto const& v) {
    return sd::where(x > y, x, y * 2) + v;  // int64 + float: float
  }, a, b, f);
  same_on_both([](auto const& m, auto const& n) {
    return sd::logical_xor(sd::logical_and(m, n), sd::logical_or(m, !n));
  }, p, q);
  same_on_both([](auto const& m, auto const& v) {
    return sd::where(m, v, -v) + sd::cast<float>(m) * 2.5f + (m + 1);  // bool + int: int64
  }, p, f);
}

// sd::eager on the device: one kernel and one temporary per node, the same maths as the fused
// kernel, so the same bits.
TEST_CASE("eager on the device agrees with fused", "[gpu][eager]") {
  auto x = inputs<float>(67, 129, 6.f);
  auto chain = [](auto const& v) { return sd::tanh(v * 0.5f + 0.25f) * sd::sigmoid(v) + v * v * 0.1f - 0.3f; };
  same_bits(sd::eager(chain(x.to<sd::Cuda>())), sd::eval(chain(x)));
}

// Broadcast inputs contiguous along the rows (x + bias) take lines_kernel's rows where they are
// many and long: a warp per row (3000 rows), a block per row (600 rows of 4096), rows not
// aligned for vector loads (1027 columns), and a strided view; a column broadcast ([R, 1]) is
// not contiguous along the rows and takes the strided walk.
TEST_CASE("broadcast inputs along rows", "[gpu][elementwise]") {
  std::pair<std::int64_t, std::int64_t> const shapes[] = {{3000, 1024}, {600, 4096}, {3000, 1027}};
  for (auto [rows, cols] : shapes) {
    INFO("rows " << rows << ", cols " << cols);
    auto x = inputs<float>(rows, cols, 4.f);
    auto b = sd::rand<float>(sd::shape(cols), -1.f, 1.f);
    auto c = sd::rand<float>(sd::shape(rows, 1), -1.f, 1.f);
    same_on_both([](auto const& v, auto const& w) { return sd::gelu(v * 0.5f + w); }, x, b);
    same_on_both([](auto const& v, auto const& w, auto const& u) { return v * w - u; }, x, b, c);
    same_on_both([](auto const& v) { return sd::slice(v, 1, 2, v.shape()[1] - 5) * 2.f; }, x);
  }
  auto h = sd::eval(sd::cast<sd::half>(inputs<float>(3000, 1024, 4.f)));
  auto hb = sd::eval(sd::cast<sd::half>(sd::rand<float>(sd::shape(1024))));
  same_on_both([](auto const& v, auto const& w) { return sd::sigmoid(v) + w; }, h, hb);
}

TEST_CASE("inputs of one type: one tensor read twice, two tensors in one buffer",
          "[gpu][elementwise]") {
  auto x = inputs<float>(2, 4100, 4.f);  // each row 16-byte aligned: the vector walks
  // One read of lo serves both uses (Walk::shared).
  same_on_both([](auto const& v) { return sd::slice(v, 0, 0, 1) * sd::slice(v, 0, 0, 1); }, x);
  // lo and hi: the same type and buffer, different memory, so each is read.
  same_on_both([](auto const& v) {
    auto lo = sd::slice(v, 0, 0, 1);
    auto hi = sd::slice(v, 0, 1, 2);
    return lo * hi + lo * lo;
  }, x);
}

TEST_CASE("a run of more than 2^30 values: several kernels, each from where the last ended",
          "[gpu][elementwise]") {
  constexpr std::int64_t n = (std::int64_t(1) << 30) + 12;
  std::size_t free = 0, total = 0;
  SOLDER_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (free < 3 * n * sizeof(float)) {
    WARN("skipped: needs " << 3 * n * sizeof(float) << " bytes of GPU memory, " << free << " free");
    return;
  }
  auto x = sd::rand<float, sd::Cuda>(sd::shape(n), -4.f, 4.f);
  sd::Tensor<float, 1, sd::Cuda> y = x * 0.5f - x * x;  // the shared walk
  sd::Tensor<float, 1, sd::Cuda> z = sd::slice(x, 0, 4, n) + sd::slice(x, 0, 0, n - 4);  // vector
  // Each side of the boundary and the end, against the host.
  for (std::int64_t from : {std::int64_t(0), (std::int64_t(1) << 30) - 8, n - 20}) {
    auto h = sd::slice(x, 0, from, from + 20).to<sd::Host>();
    auto h16 = sd::slice(h, 0, 0, 16);
    same_bits(sd::slice(y, 0, from, from + 16), sd::eval(h16 * 0.5f - h16 * h16));
    same_bits(sd::slice(z, 0, from, from + 16), sd::eval(sd::slice(h, 0, 4, 20) + h16));
  }
}

TEST_CASE("aliasing: y = transpose(y) on the device", "[gpu][elementwise]") {
  auto h = sd::view(sd::arange<float>(0, 16), sd::shape(4, 4));
  sd::Tensor<float, 2, sd::Cuda> y = h.to<sd::Cuda>();
  y = sd::transpose(y, 0, 1);
  same_bits(y, sd::eval(sd::transpose(h, 0, 1)));
}

// Several results from one kernel (sd::assign(std::tie(...)), sd::eval(a, b)) on the device: the
// same functors as the host's, so an element-wise update agrees bit for bit, stored by one
// kernel, in place (each value of a point is computed before any is stored); reductions among
// the results (a row's mean and variance) within the tolerance of another fold order; other
// strides through temporaries; tensors that share memory refused.
TEST_CASE("several results from one kernel on the device", "[gpu][results]") {
  constexpr float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 1e-2f, c1 = 0.19f, c2 = 0.001999f;
  auto update = [&](auto& p, auto& m, auto& v, auto const& g) {
    auto m_next = b1 * m + (1 - b1) * g;
    auto v_next = b2 * v + (1 - b2) * g * g;
    auto p_next = p - lr * ((m_next / c1) / (sd::sqrt(v_next / c2) + eps) + wd * p);
    static_assert(sd::kernel_count<decltype(sd::results(p_next, m_next, v_next))> == 1);
    sd::assign(std::tie(p, m, v), p_next, m_next, v_next);
  };
  for (std::int64_t rows : {3, 1031 * 7}) {
    INFO("rows " << rows);
    sd::Tensor<float, 2> g = host_rand<float>(rows, 7), p = host_rand<float>(rows, 7);
    sd::Tensor<float, 2> m = sd::eval(host_rand<float>(rows, 7) * 0.1f), v = sd::eval(sd::abs(host_rand<float>(rows, 7)) * 0.01f);
    sd::Tensor<float, 2, sd::Cuda> dg = g.to<sd::Cuda>(), dp = p.to<sd::Cuda>(), dm = m.to<sd::Cuda>(),
                                   dv = v.to<sd::Cuda>();
    auto const before = sd::detail::kernels_run();
    update(dp, dm, dv, dg);
    CHECK(sd::detail::kernels_run() - before == 1);
    update(p, m, v, g);
    same_bits(dp, p);
    same_bits(dm, m);
    same_bits(dv, v);
  }

  auto x = host_rand<float>(37, 1029);
  auto dx = x.to<sd::Cuda>();
  auto const before = sd::detail::kernels_run();
  auto [mean, var] = sd::eval(sd::mean(dx, 1), sd::var(dx, 1));
  CHECK(sd::detail::kernels_run() - before == 1);
  static_assert(std::is_same_v<decltype(mean)::device_type, sd::Cuda>);
  auto [hmean, hvar] = sd::eval(sd::mean(x, 1), sd::var(x, 1));
  close(mean, hmean, 1e-5);
  close(var, hvar, 1e-5);

  // A transposed destination: computed into contiguous temporaries, then copied.
  sd::Tensor<float, 2, sd::Cuda> a = sd::zeros<float, sd::Cuda>(sd::shape(5, 6));
  sd::Tensor<float, 2, sd::Cuda> b = sd::zeros<float, sd::Cuda>(sd::shape(6, 5));
  auto small = host_rand<float>(6, 5);
  auto bt = sd::transpose(b, 0, 1);
  sd::assign(std::tie(a, bt), sd::transpose(small.to<sd::Cuda>(), 0, 1) * 2.f,
             sd::transpose(small.to<sd::Cuda>(), 0, 1) + 1.f);
  same_bits(a, sd::eval(sd::transpose(small, 0, 1) * 2.f));
  same_bits(b, sd::eval(small + 1.f));
  CHECK_THROWS_WITH(sd::assign(std::tie(a, a), a * 1.f, a * 2.f), Catch::Contains("share memory"));
}
