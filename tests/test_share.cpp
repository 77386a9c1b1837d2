// Shared subexpressions (expr/share.hpp): sd::share recomputes cheap element-wise maths and
// materializes anything else once; a residual stack stays linear in type and kernels. Values are
// checked against scalar double-precision loops, kernel counts against the kernels that run.
// (Its own file: under ASan + UBSan at -O0 this test alone takes several GiB to compile.)
#include "reference.hpp"

#include <string>

namespace sd = solder;
using ref::Array;
using ref::run_counted;

TEST_CASE("shared subexpressions: recomputed when cheap, else materialized once", "[nodes][share]") {
  auto x = ref::uniform<float>(-1, 1, 1000);
  Array X = ref::of(x);

  // Cheap element-wise maths: share returns it unchanged, and it fuses.
  auto cheap = sd::share(x * 2.f + 1.f);
  static_assert(std::is_same_v<decltype(cheap), decltype(x * 2.f + 1.f)>);
  static_assert(sd::kernel_count<decltype(cheap * cheap)> == 1);

  // h = share(h + relu(h) * 0.5), 8 times (tools/compile_depth.py goes to 16): the type holds
  // each block once, and each block runs once (the first few are recomputed in place, the rest
  // materialized).
  auto h0 = sd::share(x * 1.f);
  auto h1 = sd::share(h0 + sd::relu(h0) * 0.5f);
  auto h2 = sd::share(h1 + sd::relu(h1) * 0.5f);
  auto h3 = sd::share(h2 + sd::relu(h2) * 0.5f);
  auto h4 = sd::share(h3 + sd::relu(h3) * 0.5f);
  auto h5 = sd::share(h4 + sd::relu(h4) * 0.5f);
  auto h6 = sd::share(h5 + sd::relu(h5) * 0.5f);
  auto h7 = sd::share(h6 + sd::relu(h6) * 0.5f);
  auto h8 = sd::share(h7 + sd::relu(h7) * 0.5f);
  static_assert(sd::kernel_count<decltype(h8)> == 6);  // h1 and h2 recompute: 8 - 2
  auto y = run_counted(h8);
  auto y2 = run_counted(h8 * 2.f);  // the last block fused into its consumer
  auto z = sd::eager(h8);
  for (int i = 0; i < 1000; ++i) {
    double v = X.at({i});
    for (int k = 0; k < 8; ++k) v = v + std::max(v, 0.0) * 0.5;
    CHECK(y(i) == Approx(v).epsilon(1e-5));
    CHECK(y2(i) == Approx(2 * v).epsilon(1e-5));
    CHECK(z(i) == Approx(v).epsilon(1e-5));
  }
  CHECK(sd::eager_kernel_count<decltype(h8)> < 60);  // each block once, not 2^8 times

  // A shared reduction read twice, as a break: materialized once.
  auto a = ref::uniform<float>(-1, 1, 6, 9);
  auto total = sd::share(sd::sum(a));
  auto e = a / total - total;
  static_assert(sd::kernel_count<decltype(e)> == 2);
  auto r = run_counted(e);
  Array A = ref::of(a);
  double s = 0;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 9; ++j) s += A.at({i, j});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 9; ++j) CHECK(r(i, j) == Approx(A.at({i, j}) / s - s).epsilon(1e-4));
}

