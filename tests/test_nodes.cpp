// The node kinds the planner redesign added (expr/view.hpp, expr/share.hpp): views of
// expressions that hold a reduction, shared subexpressions, the cap on a fused kernel's size,
// and writes through views whose elements share memory. Every value is checked against scalar
// double-precision loops, and every kernel count against the kernels that run.
#include "reference.hpp"

#include <string>

namespace sd = solder;
using ref::Array;
using ref::contains;
using ref::run_counted;

namespace {

// x * 0.999 + 0.001, N times: 2N nested element-wise nodes.
template <int N, class X>
auto deep_chain(X const& x) {
  if constexpr (N == 0) return sd::share(x);
  else return deep_chain<N - 1>(x * 0.999f + 0.001f);
}

}  // namespace

TEST_CASE("views of expressions that hold a reduction", "[nodes][view]") {
  auto a = ref::uniform<float>(-2, 2, 5, 7);
  Array A = ref::of(a);

  // transpose(softmax(a, 0)): the softmax is materialized, its transpose read without a copy.
  auto t = sd::transpose(sd::softmax(a, 1), 0, 1) * 2.f;
  static_assert(sd::kernel_count<decltype(t)> == 2);
  CHECK(contains(sd::explain(t), "transpose of an expression that holds a kernel anchor"));
  auto r = run_counted(t);
  REQUIRE(r.shape() == sd::Index<2>{7, 5});
  for (int i = 0; i < 5; ++i) {
    double m = -1e300, s = 0;
    for (int j = 0; j < 7; ++j) m = std::max(m, A.at({i, j}));
    for (int j = 0; j < 7; ++j) s += std::exp(A.at({i, j}) - m);
    for (int j = 0; j < 7; ++j) CHECK(r(j, i) == Approx(2 * std::exp(A.at({i, j}) - m) / s).epsilon(1e-5));
  }

  // flatten(mean(x, {2, 3}, keepdim)): DESIGN.md's adaptive average pool, then Linear's input.
  auto x = ref::uniform<float>(-1, 1, 2, 3, 4, 5);
  Array X = ref::of(x);
  auto pooled = sd::flatten<1>(sd::mean(x, {2, 3}, sd::keepdim));
  auto p = run_counted(pooled);
  REQUIRE(p.shape() == sd::Index<2>{2, 3});
  Array M = ref::reduce(X, {2, 3}, false, ref::fsum);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) CHECK(p(n, c) == Approx(M.at({n, c}) / 20).epsilon(1e-5));

  // A view of a view is one materialization; squeeze and narrow of a reduction.
  auto vv = sd::narrow(sd::squeeze(sd::sum(x, 3, sd::keepdim), 3), 2, 1, 2);
  static_assert(sd::kernel_count<decltype(vv)> == 2);
  auto v = run_counted(vv);
  REQUIRE(v.shape() == sd::Index<3>{2, 3, 2});
  Array S = ref::reduce(X, {3}, false, ref::fsum);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 2; ++h) CHECK(v(n, c, h) == Approx(S.at({n, c, h + 1})).epsilon(1e-5));

  // A reshape of element-wise maths is a view node (a broadcast input has no layout to
  // reshape): stored, the maths is written straight into the result seen with its own shape
  // (one kernel); read by more maths, it is materialized first. A transpose of it stays fused.
  auto b = ref::uniform<float>(-1, 1, 7);
  auto rs = sd::reshape(a + b, std::array<std::int64_t, 2>{7, 5});
  static_assert(sd::kernel_count<decltype(rs)> == 1);
  static_assert(sd::kernel_count<decltype(rs * 2.f)> == 2);
  auto q = run_counted(rs);
  auto q2 = run_counted(rs * 2.f);
  Array B = ref::of(b);
  for (int k = 0; k < 35; ++k) {
    CHECK(q(k / 5, k % 5) == Approx(A.at({k / 7, k % 7}) + B.at({k % 7})).epsilon(1e-6));
    CHECK(q2(k / 5, k % 5) == Approx(2 * (A.at({k / 7, k % 7}) + B.at({k % 7}))).epsilon(1e-6));
  }
  // Into a tensor that is not contiguous, the view's result is copied: one kernel more.
  sd::Tensor<float, 2> wide(7, 10);
  auto half = sd::slice(wide, 1, 0, 10, 2);
  auto before = sd::detail::kernels_run();
  half = rs;
  CHECK(sd::detail::kernels_run() - before == 2);
  for (int k = 0; k < 35; ++k) CHECK(half(k / 5, k % 5) == q(k / 5, k % 5));
  static_assert(sd::kernel_count<decltype(sd::transpose(a + b, 0, 1))> == 1);

  // The eager baseline agrees, and so does a view used inside a reduction.
  auto e = sd::eager(t);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) CHECK(e(i, j) == Approx(r(i, j)).epsilon(1e-5));
  auto inside = sd::sum(sd::transpose(sd::softmax(a, 1), 0, 1), 1);
  auto in = run_counted(inside);
  for (int j = 0; j < 7; ++j) {
    double s = 0;
    for (int i = 0; i < 5; ++i) s += r(j, i) / 2;
    CHECK(in(j) == Approx(s).epsilon(1e-5));
  }
}

TEST_CASE("a fused kernel holds at most max_fusion_size nodes", "[nodes][cap]") {
  auto x = ref::uniform<float>(-1, 1, 257);
  Array X = ref::of(x);
  // 40 steps of * and +: 80 nodes, cut into kernels of at most 64.
  auto e = deep_chain<40>(x);
  static_assert(sd::kernel_count<decltype(e)> == 2);
  CHECK(contains(sd::explain(e), "max_fusion_size"));
  auto y = run_counted(e);
  for (int i = 0; i < 257; ++i) {
    double v = X.at({i});
    for (int k = 0; k < 40; ++k) v = v * 0.999f + 0.001f;
    CHECK(y(i) == Approx(v).margin(80 * 6e-8));  // 80 float roundings of values below 1
  }
}

TEST_CASE("writes through a view whose elements share memory are refused", "[nodes][overlap]") {
  auto col = sd::zeros<float>(sd::shape(3, 1));
  auto ex = sd::expand(col, std::array<std::int64_t, 2>{3, 4});
  CHECK_THROWS_WITH(ex = ex + 1.f, Catch::Contains("assign") && Catch::Contains("strides [1, 0]") &&
                                       Catch::Contains("same memory location"));
  CHECK(col(0, 0) == 0.f);  // nothing was written
  // A stride-0 axis of one element is no overlap.
  auto one = sd::expand(col, std::array<std::int64_t, 3>{1, 3, 1});
  one = one + 1.f;
  CHECK(col(2, 0) == 1.f);
}

TEST_CASE("item() of a one-element expression evaluates it", "[nodes][item]") {
  auto x = ref::uniform<float>(-1, 1, 3, 4);
  Array X = ref::of(x);
  double s = 0, m = -1e300;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) s += X.at({i, j}), m = std::max(m, X.at({i, j}));
  CHECK(sd::sum(x).item() == Approx(s).epsilon(1e-6));
  CHECK((sd::sum(x) * 2.f).item() == Approx(2 * s).epsilon(1e-6));
  CHECK(sd::share(sd::max(x)).item() == static_cast<float>(m));
  CHECK(sd::flatten(sd::sum(x, {0, 1}, sd::keepdim)).item() == Approx(s).epsilon(1e-6));
  CHECK_THROWS_WITH(sd::sum(x, 1).item(), Catch::Contains("item") && Catch::Contains("3 elements"));
}

TEST_CASE("static dims: the planner knows a kernel needs no run-time break variant", "[nodes][static]") {
  auto x = ref::uniform<float>(-2, 2, 6, 10);
  auto g = ref::uniform<float>(0.5, 1.5, 10);
  auto b = ref::uniform<float>(-0.5, 0.5, 10);
  Array X = ref::of(x);
  using sd::detail::may_split;
  // Run-time dims could fold leading dims: the variant is compiled; static last dims cannot.
  static_assert(may_split<sd::node_t<decltype(sd::softmax(x, -1))>>());
  static_assert(!may_split<sd::node_t<decltype(sd::softmax<-1>(x))>>());
  static_assert(!may_split<sd::node_t<decltype(sd::log_softmax<1>(x))>>());
  static_assert(!may_split<sd::node_t<decltype(sd::layer_norm(x, g, b))>>());
  static_assert(!may_split<sd::node_t<decltype(sd::rms_norm(x, g))>>());
  static_assert(!may_split<sd::node_t<decltype(sd::sum(x, 0))>>());  // a lone reduction
  static_assert(!may_split<sd::node_t<decltype(x * 2.f)>>());
  // A static leading dim is no trailing reduction.
  static_assert(may_split<sd::node_t<decltype(sd::softmax<0>(x))>>());

  // The same values as the run-time dims.
  auto same = [](auto const& a, auto const& e) {
    REQUIRE(a.shape() == e.shape());
    for (std::int64_t i = 0; i < a.numel(); ++i) CHECK(a.data()[i] == e.data()[i]);
  };
  same(run_counted(sd::softmax<-1>(x)), sd::eval(sd::softmax(x, -1)));
  same(run_counted(sd::log_softmax<1>(x)), sd::eval(sd::log_softmax(x, 1)));
  same(sd::eval(sd::softmax<0>(x)), sd::eval(sd::softmax(x, 0)));  // (a run-time break)
  same(run_counted(sd::sum<-1>(x)), sd::eval(sd::sum(x, -1)));
  same(run_counted(sd::max<0>(x, sd::keepdim)), sd::eval(sd::max(x, 0, sd::keepdim)));
  same(run_counted(x - sd::mean<-1>(x, sd::keepdim)), sd::eval(x - sd::mean(x, -1, sd::keepdim)));
  auto s = run_counted(sd::sum<1>(x * x));
  for (int i = 0; i < 6; ++i) {
    double r = 0;
    for (int j = 0; j < 10; ++j) r += X.at({i, j}) * X.at({i, j});
    CHECK(s(i) == Approx(r).epsilon(1e-5));
  }
}

TEST_CASE("a reduction whose input holds another compiles its run-time break variant", "[nodes][static]") {
  auto x = ref::uniform<float>(-2, 2, 6, 10);
  using sd::detail::may_split;
  // var(x, 0)'s sum folds a mean of leading dims: it may break; over static last dims it may not.
  static_assert(may_split<sd::node_t<decltype(sd::sum(x - sd::mean(x, 0, sd::keepdim), 0))>>());
  static_assert(may_split<sd::node_t<decltype(sd::sum<-1>(x - sd::mean(x, 0, sd::keepdim)))>>());
  static_assert(!may_split<sd::node_t<decltype(sd::sum<-1>(x - sd::mean<-1>(x, sd::keepdim)))>>());
  auto v = run_counted(sd::sum<-1>(x - sd::mean<-1>(x, sd::keepdim)));
  for (int i = 0; i < 6; ++i) CHECK(v(i) == Approx(0).margin(1e-5));
}
