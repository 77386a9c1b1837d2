// The planner (DESIGN.md §3): kernel counts known at compile time (and the same at run
// time), the eager baseline's counts, explain() / explain_dot() text, and assignments whose
// output aliases an input (every one checked against values computed before the assignment).
#include "reference.hpp"

#include <regex>
#include <set>
#include <string>
#include <tuple>

namespace sd = solder;
using ref::Array;
using ref::contains;

namespace {

int count_of(std::string const& s, std::string const& what) {
  int n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// The number in explain()'s first line, "solder plan: N kernel(s) (eager: M)".
int explained_kernels(std::string const& text) {
  std::smatch m;
  std::regex re("^solder plan: ([0-9]+) kernels? \\(eager: ([0-9]+)\\)");
  if (!std::regex_search(text, m, re)) return -1;
  return std::stoi(m[1]);
}
int explained_eager(std::string const& text) {
  std::smatch m;
  std::regex re("^solder plan: [0-9]+ kernels? \\(eager: ([0-9]+)\\)");
  if (!std::regex_search(text, m, re)) return -1;
  return std::stoi(m[1]);
}

// Distinct clusters that carry a kernel label in explain_dot's output.
int dot_clusters(std::string const& dot) {
  std::set<std::string> ids;
  std::regex re("subgraph (cluster_k[0-9]+) \\{ label=\"kernel [0-9]+");
  for (auto it = std::sregex_iterator(dot.begin(), dot.end(), re); it != std::sregex_iterator(); ++it)
    ids.insert((*it)[1]);
  return static_cast<int>(ids.size());
}

// kernel_count, explain's count and explain_dot's clusters agree, and eager's count too.
template <class E>
void consistent(E const& e, int kernels, int eager_kernels) {
  std::string text = sd::explain(e), dot = sd::explain_dot(e);
  INFO(text << dot);
  CHECK(sd::kernel_count<E> == kernels);
  CHECK(sd::eager_kernel_count<E> == eager_kernels);
  CHECK(explained_kernels(text) == kernels);
  CHECK(explained_eager(text) == eager_kernels);
  CHECK(dot.rfind("digraph", 0) == 0);
  CHECK(dot_clusters(dot) == kernels);
  CHECK(count_of(text, "\nkernel ") == kernels);
  // ... and the kernels that run.
  auto before = sd::detail::kernels_run();
  auto r = sd::eval(e);
  CHECK(sd::detail::kernels_run() - before == static_cast<std::uint64_t>(kernels));
}

}  // namespace

TEST_CASE("kernel counts: compile time and run time", "[plan][kernel_count]") {
  auto x = ref::uniform<float>(-1, 1, 8, 16);
  auto v = ref::uniform<float>(-1, 1, 16);
  auto g = ref::uniform<float>(0.5, 1.5, 16);
  auto b = ref::uniform<float>(-0.5, 0.5, 16);

  // Rule 1: an element-wise chain (9 nodes) is one kernel.
  auto chain = sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
  static_assert(sd::kernel_count<decltype(chain)> == 1);
  static_assert(sd::eager_kernel_count<decltype(chain)> == 9);
  consistent(chain, 1, 9);
  // Broadcasts and views stay in it.
  auto bias_relu = sd::relu(sd::transpose(x, 0, 1) * 2.f + sd::unsqueeze(sd::slice(x, 1, 0, 8), 1));
  static_assert(sd::kernel_count<decltype(bias_relu)> == 1);
  consistent(bias_relu, 1, 3);

  // Rule 2: row ops are one kernel each.
  auto sm = sd::softmax(x, -1);
  auto lsm = sd::log_softmax(x, 1);
  auto ln = sd::layer_norm(x, g, b);
  auto rms = sd::rms_norm(x, g);
  auto centered = x - sd::mean(x, -1, sd::keepdim);
  static_assert(sd::kernel_count<decltype(sm)> == 1);
  static_assert(sd::kernel_count<decltype(lsm)> == 1);
  static_assert(sd::kernel_count<decltype(ln)> == 1);
  static_assert(sd::kernel_count<decltype(rms)> == 1);
  static_assert(sd::kernel_count<decltype(centered)> == 1);
  // softmax = mul(exp(sub(x, max)), div(1, sum(exp(sub(x, max))))): 9 eager kernels.
  static_assert(sd::eager_kernel_count<decltype(sm)> == 9);
  // log_softmax = sub(sub(x, max), log(sum(exp(sub(x, max))))): 8.
  static_assert(sd::eager_kernel_count<decltype(lsm)> == 8);
  consistent(sm, 1, 9);
  consistent(lsm, 1, 8);
  consistent(ln, 1, sd::eager_kernel_count<decltype(ln)>);
  consistent(rms, 1, sd::eager_kernel_count<decltype(rms)>);
  consistent(centered, 1, 2);

  // Reductions: one kernel, producers and consumers fused.
  auto s = sd::sum(x);
  auto s1 = sd::sum(x * x + 1.f, 1);
  auto norm = sd::sqrt(sd::sum(x * x, 1)) * 2.f;
  auto keep = sd::sum(x, 1, sd::keepdim) + x;  // keepdim: broadcast along the reduced axis only
  static_assert(sd::kernel_count<decltype(s)> == 1);
  static_assert(sd::kernel_count<decltype(s1)> == 1);
  static_assert(sd::kernel_count<decltype(norm)> == 1);
  static_assert(sd::kernel_count<decltype(keep)> == 1);
  consistent(s, 1, 1);
  consistent(s1, 1, 3);
  consistent(norm, 1, 4);
  consistent(keep, 1, 2);

  // Run-time breaks: reductions below the kernel's root that fold leading dims run as kernels
  // of their own (their dims are run-time values, so kernel_count cannot know).
  auto keep0 = sd::sum(x, 0, sd::keepdim) + x;
  auto var0 = sd::var(x, 0);
  auto lsm0 = sd::log_softmax(x, 0);
  static_assert(sd::kernel_count<decltype(keep0)> == 1);
  static_assert(sd::kernel_count<decltype(var0)> == 1);
  static_assert(sd::kernel_count<decltype(lsm0)> == 1);
  // var0: the mean (read twice by the sum's input, materialized once), the sum, the division.
  // lsm0: the max (read by the sum's kernel and by the output's, materialized once), the sum,
  // the output.
  auto launched = [](auto const& e) {
    auto before = sd::detail::kernels_run();
    auto r = sd::eval(e);
    return static_cast<int>(sd::detail::kernels_run() - before);
  };
  for (auto [text, kernels, breaks, ran] :
       {std::tuple{sd::explain(keep0), 2, 1, launched(keep0)}, {sd::explain(var0), 3, 2, launched(var0)},
        {sd::explain(lsm0), 3, 2, launched(lsm0)}}) {
    INFO(text);
    CHECK(explained_kernels(text) == kernels);
    CHECK(ran == kernels);  // explain() has the run-time configuration the executor runs
    CHECK(count_of(text, "fold leading dims: on their own they read rows") == breaks);
    CHECK(count_of(text, "(run-time break)") == breaks);
  }
  consistent(sd::sum(x, 0), 1, 1);  // the root itself may fold leading dims

  // Rule 5: a reduction result broadcast along a new axis is a break.
  auto brk = sd::sum(x, 0) + x;
  auto brk0 = x / sd::sum(x);  // rank 0 into rank 2
  auto brk_v = sd::max(x, 1) * v.numel();  // a reduction as the kernel's output is no break
  static_assert(sd::kernel_count<decltype(brk)> == 2);
  static_assert(sd::kernel_count<decltype(brk0)> == 2);
  static_assert(sd::kernel_count<decltype(brk_v)> == 1);
  consistent(brk, 2, 2);
  consistent(brk0, 2, 2);
  consistent(brk_v, 1, 2);

  // Nested breaks.
  auto nested = sd::sum(sd::sum(x, 0) + x, 0) + x;
  static_assert(sd::kernel_count<decltype(nested)> == 3);
  static_assert(sd::eager_kernel_count<decltype(nested)> == 4);
  consistent(nested, 3, 4);
  auto nested2 = sd::exp(sd::sum(sd::sum(x, 1) + v.numel(), 0) + x) * sd::mean(x, 1, sd::keepdim);
  // sum(x,1) [8] + 16 is rank 1 inside a rank-1 reduction: fused into it, but that reduction's
  // rank-0 result is broadcast into the rank-2 kernel: 1 break, whose own kernel has 1 more
  // (sum(x,1) inside a full reduction's input is not keepdim): 3 kernels.
  static_assert(sd::kernel_count<decltype(nested2)> == 3);
  consistent(nested2, 3, sd::eager_kernel_count<decltype(nested2)>);

  // Each count is right at run time as well: the results match references.
  Array X = ref::of(x);
  Array cs = ref::reduce(X, {0}, false, ref::fsum);
  ref::check_close(sd::eval(brk), ref::map([](double c, double u) { return c + u; }, cs, X), ref::Tol{8, 1e-6},
                   "sum(x,0)+x");
  ref::check_close(sd::eval(nested), ref::map([](double c, double u) { return 9 * c + u; }, cs, X),
                   ref::Tol{64, 1e-5}, "nested breaks");
  ref::check_close(sd::eval(keep), ref::map([](double c, double u) { return c + u; }, ref::reduce(X, {1}, true, ref::fsum), X),
                   ref::Tol{16, 1e-6}, "sum(x,1,keepdim)+x");
  ref::check_close(sd::eval(keep0), ref::map([](double c, double u) { return c + u; }, ref::reduce(X, {0}, true, ref::fsum), X),
                   ref::Tol{8, 1e-6}, "sum(x,0,keepdim)+x");
}

TEST_CASE("explain names the kernels, the fused nodes, reuse and breaks", "[plan][explain]") {
  auto x = ref::uniform<float>(-1, 1, 4, 6);
  SECTION("element-wise chain") {
    auto e = sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
    std::string t = sd::explain(e);
    INFO(t);
    CHECK(t.rfind("solder plan: 1 kernel (eager: 9)\n", 0) == 0);
    CHECK(contains(t, "kernel 0: element-wise kernel over [4, 6] float32, 9 nodes fused"));
    for (char const* name : {"tanh(", "sigmoid(", "mul(", "add(", "sub("}) CHECK(contains(t, name));
    CHECK_FALSE(contains(t, "break"));
    CHECK_FALSE(contains(t, "row kernel"));
    CHECK_FALSE(contains(t, "shared:"));
  }
  SECTION("softmax: a row kernel that reuses its max") {
    auto e = sd::softmax(x, -1);
    std::string t = sd::explain(e);
    INFO(t);
    CHECK(t.rfind("solder plan: 1 kernel (eager: 9)\n", 0) == 0);
    CHECK(contains(t, "row kernel (reductions broadcast along dim 1)"));
    for (char const* name : {"exp(", "sub(", "max#0(", "sum#1(", "div(", "mul("}) CHECK(contains(t, name));
    CHECK(count_of(t, "(reused)") == 1);
    CHECK(contains(t, "max#0 (reused)"));
    CHECK(contains(t, "shared: exp (a reduction folds it"));
    CHECK_FALSE(contains(t, "break"));
    CHECK_FALSE(contains(sd::explain(sd::log_softmax(x, -1)), "shared:"));
    auto e0 = sd::softmax(x, 0);
    std::string t0 = sd::explain(e0);
    INFO(t0);
    // Over dim 0 its reductions fold leading dims: they run as column kernels of their own.
    CHECK(contains(t0, "max: the kernel's reductions fold leading dims"));
    CHECK(contains(t0, "(run-time break)"));
    CHECK_FALSE(contains(t0, "row kernel"));
  }
  SECTION("layer_norm and rms_norm: one row kernel") {
    auto g = ref::uniform<float>(0.5, 1.5, 6);
    auto b = ref::uniform<float>(-0.5, 0.5, 6);
    std::string t = sd::explain(sd::layer_norm(x, g, b));
    INFO(t);
    CHECK(contains(t, "solder plan: 1 kernel"));
    CHECK(contains(t, "row kernel"));
    CHECK(contains(t, "mean#"));
    CHECK(contains(t, "rsqrt("));
    CHECK(contains(t, "(reused)"));  // the mean is used by the centred values and the variance
    std::string r = sd::explain(sd::rms_norm(x, g));
    INFO(r);
    CHECK(contains(r, "solder plan: 1 kernel"));
    CHECK(contains(r, "row kernel"));
  }
  SECTION("a reduction kernel") {
    std::string t = sd::explain(sd::sum(x));
    INFO(t);
    CHECK(t.rfind("solder plan: 1 kernel (eager: 1)\n", 0) == 0);
    CHECK(contains(t, "kernel 0: reduction kernel over [] float32"));
    CHECK(contains(t, "sum#0(in0[4, 6], dim=[0, 1])"));
  }
  SECTION("a break names the node and the reason") {
    auto e = sd::sum(x, 0) + x;
    std::string t = sd::explain(e);
    INFO(t);
    CHECK(t.rfind("solder plan: 2 kernels (eager: 2)\n", 0) == 0);
    CHECK(contains(t, "kernel 0: reduction kernel over [6] float32"));
    CHECK(contains(t, "break: materialized because sum result (rank 1) is broadcast into a kernel of rank 2"));
    CHECK(contains(t, "kernel 1: element-wise kernel over [4, 6] float32"));
    CHECK(contains(t, "add(#0, in0[4, 6])"));  // kernel 1 reads kernel 0's result
    CHECK(count_of(t, "break: materialized because") == 1);
    std::string dot = sd::explain_dot(e);
    INFO(dot);
    CHECK(dot.rfind("digraph", 0) == 0);
    CHECK(dot_clusters(dot) == 2);
    CHECK(contains(dot, "kernel 0 result"));
    CHECK(dot.back() == '\n');
    CHECK(contains(dot, "}\n"));
  }
  SECTION("nested breaks: kernels in the order they run") {
    auto e = sd::sum(sd::sum(x, 0) + x, 0) + x;
    std::string t = sd::explain(e);
    INFO(t);
    CHECK(t.rfind("solder plan: 3 kernels", 0) == 0);
    CHECK(count_of(t, "break: materialized because") == 2);
    CHECK(contains(t, "inside another reduction's input is not keepdim"));
    CHECK(dot_clusters(sd::explain_dot(e)) == 3);
  }
}

// DESIGN.md §3 rule 4: "a node used twice is ... materialized once when it is not [cheap] (a
// reduction or contraction result)". Fused reductions follow it (softmax's max, "(reused)"),
// and so does a reduction that is a break: it is materialized once per assignment, however
// many uses read it (backend/eval.hpp: Materialized).
TEST_CASE("a break used twice is materialized once (rule 4)", "[plan][rule4]") {
  auto x = ref::uniform<float>(-1, 1, 4, 6);
  auto s = sd::sum(x, 0);
  auto e = s + x * s;
  std::string t = sd::explain(e);
  INFO(t);
  CHECK(explained_kernels(t) == 2);
  // kernel_count is a fold over types: it cannot tell that two breaks of one type are the same
  // node (they may be sum(x, 0) and sum(y, 0)), so it counts each use: an upper bound here.
  static_assert(sd::kernel_count<decltype(e)> == 3);
  CHECK(count_of(t, "break: materialized because") == 1);
  CHECK(contains(t, "add(#0, mul(in0[4, 6], #0))"));  // both uses read kernel 0's result
  Array cs = ref::reduce(ref::of(x), {0}, false, ref::fsum);
  ref::check_close(sd::eval(e), ref::map([](double c, double u) { return c + u * c; }, cs, ref::of(x)),
                   ref::Tol{16, 1e-6}, "s + x * s");
  // softmax reads its input three times (max, exp, the sum's exp): one break kernel.
  auto sm = sd::softmax(sd::sum(x, 0) + x, -1);
  std::string ts = sd::explain(sm);
  INFO(ts);
  CHECK(explained_kernels(ts) == 2);
}

// Rule 4 for reductions written apart: equal ones (same op, dims, tensors and element-wise ops)
// share one id (plan/common_reductions.hpp). What differs must stay apart: a wrong match would
// silently give wrong values, so those cases check values.
TEST_CASE("equal reductions written apart are computed once", "[plan][rule4][common]") {
  sd::set_num_threads(2);
  auto x = ref::uniform<float>(-2, 2, 300, 2500);
  Array X = ref::of(x);
  Array rowsum = ref::reduce(X, {1}, true, ref::fsum);
  SECTION("batch norm: var's own mean is the user's mean") {
    auto bn = (x - sd::mean(x, 0, sd::keepdim)) * sd::rsqrt(sd::var(x, 0, sd::keepdim, 0) + 1e-5f);
    std::string t = sd::explain(bn);
    INFO(t);
    CHECK(explained_kernels(t) == 3);  // the mean, var's sum, the output (test_rows checks values)
    CHECK(count_of(t, "mean#0(in0[300, 2500], dim=[0], keepdim)") == 1);
  }
  SECTION("in one row kernel, two equal means are folded once") {
    auto c = (x - sd::mean(x, 1, sd::keepdim)) * (x - sd::mean(x, 1, sd::keepdim));
    std::string t = sd::explain(c);
    INFO(t);
    CHECK(explained_kernels(t) == 1);
    CHECK(contains(t, "mean#0 (reused)"));
    Array m = ref::reduce(X, {1}, true, ref::fmean);
    ref::check_close(sd::eval(c), ref::map([](double v, double mu) { return (v - mu) * (v - mu); }, X, m),
                     ref::Tol{16, 1e-5}, "(x - mean)^2 written twice");
  }
  SECTION("reductions that differ stay apart") {
    auto y = x.clone();  // equal values, other storage
    auto e1 = sd::sum(x, 1, sd::keepdim) - sd::sum(y * 1.f, 1, sd::keepdim) + sd::sum(y, 1, sd::keepdim);
    std::string t1 = sd::explain(e1);
    INFO(t1);
    CHECK_FALSE(contains(t1, "(reused)"));
    auto e2 = sd::sum(x * 2.f, 1, sd::keepdim) - sd::sum(x * 3.f, 1, sd::keepdim);  // numbers
    auto half = sd::slice(x, 0, 0, 150), rest = sd::slice(x, 0, 150, 300);  // views of one storage
    auto e3 = sd::sum(half, 1, sd::keepdim) - sd::sum(rest, 1, sd::keepdim);
    auto e4 = sd::max(x, 1, sd::keepdim) + sd::max(x, 0, sd::keepdim);  // dims
    auto z = ref::uniform<float>(-2, 2, 50, 50);  // one pointer and shape, other strides
    auto e5 = sd::sum(z, 1, sd::keepdim) - sd::sum(sd::transpose(z, 0, 1), 1, sd::keepdim);
    CHECK_FALSE(contains(sd::explain(e2), "(reused)"));
    CHECK_FALSE(contains(sd::explain(e3), "(reused)"));
    ref::check_close(sd::eval(e1), rowsum, ref::Tol{16, 1e-4}, "x, y * 1 and y");
    ref::check_close(sd::eval(e2), ref::map([](double s) { return -s; }, rowsum), ref::Tol{16, 1e-4}, "x * 2 and x * 3");
    Array h = ref::reduce(ref::of(sd::eval(half * 1.f)), {1}, true, ref::fsum);
    Array r = ref::reduce(ref::of(sd::eval(rest * 1.f)), {1}, true, ref::fsum);
    ref::check_close(sd::eval(e3), ref::map([](double a, double b) { return a - b; }, h, r), ref::Tol{16, 1e-4}, "two halves");
    Array mr = ref::reduce(X, {1}, true, ref::fmax), mc = ref::reduce(X, {0}, true, ref::fmax);
    ref::check_close(sd::eval(e4), ref::map([](double a, double b) { return a + b; }, mr, mc),
                     ref::Tol{1, 0}, "max over dim 1 and over dim 0");
    Array Z = ref::of(z);
    Array zr = ref::reduce(Z, {1}, true, ref::fsum), zc = ref::reduce(Z, {0}, true, ref::fsum);
    ref::check_close(sd::eval(e5), ref::map([](double a, double b) { return a - b; }, zr, ref::transpose(zc, 0, 1)),
                     ref::Tol{16, 1e-5}, "z and its transpose");
  }
}

TEST_CASE("assignments whose output aliases an input", "[plan][alias]") {
  sd::set_num_threads(2);
  SECTION("y = transpose(y) * 1 on a square y gives the transpose") {
    for (std::int64_t n : {5, 64, 300}) {  // 300^2 > the parallel threshold
      auto y = ref::uniform<float>(-1, 1, n, n);
      Array Y = ref::of(y);
      float* p = y.data();
      y = sd::transpose(y, 0, 1) * 1.f;
      CHECK(y.data() == p);  // written into its own storage
      ref::check_equal(y, ref::transpose(Y, 0, 1), "y = transpose(y) * 1, n=" + std::to_string(n));
    }
  }
  SECTION("y = y * 2 in place") {
    auto y = ref::uniform<float>(-1, 1, 300, 301);
    Array Y = ref::of(y);
    y = y * 2.f;
    ref::check_equal(y, ref::map([](double u) { return u * 2; }, Y), "y = y * 2");
    auto yt = sd::transpose(y, 0, 1);
    yt = yt * 0.5f + 0.f;  // in place through a strided view
    ref::check_equal(y, Y, "yt = yt * 0.5 through a transpose");
  }
  SECTION("y = y - mean(y, -1, keepdim) and softmax in place") {
    for (std::int64_t n : {7, 1000}) {
      auto y = ref::uniform<float>(-1, 3, 40, n);
      Array Y = ref::of(y);
      Array E = ref::map([](double u, double m) { return u - m; }, Y, ref::reduce(Y, {1}, true, ref::fmean));
      Array S = ref::map([](double u) { return std::fabs(u) + 3; }, Y);  // |x| + mean|x| bound
      y = y - sd::mean(y, -1, sd::keepdim);
      ref::check_close(y, E, ref::Tol{0, 0, 140}, "y = y - mean(y, -1, keepdim), n=" + std::to_string(n), &S);
      auto z = ref::uniform<float>(-3, 3, n, 40);
      Array Z = ref::of(z);
      Array Z0 = ref::map([](double u, double m) { return u - m; }, Z, ref::reduce(Z, {0}, true, ref::fmean));
      Array SZ = ref::map([](double u) { return std::fabs(u) + 3; }, Z);
      z = z - sd::mean(z, 0, sd::keepdim);  // strided lines, in place
      ref::check_close(z, Z0, ref::Tol{0, 0, static_cast<double>(n) + 2}, "z = z - mean(z, 0, keepdim)", &SZ);
      auto w = ref::uniform<float>(-3, 3, 40, n);
      Array W = ref::of(w);
      Array SM = ref::map([](double u, double m, double s) { return std::exp(u - m) / s; }, W,
                          ref::reduce(W, {1}, true, ref::fmax),
                          ref::reduce(W, {1}, true, [](std::vector<double> const& v) {
                            double m = ref::fmax(v);
                            long double s = 0;
                            for (double u : v) s += std::exp(u - m);
                            return static_cast<double>(s);
                          }));
      w = sd::softmax(w, -1);
      Array SMS = ref::map([&](double p) { return p * (static_cast<double>(n) + 12); }, SM);
      ref::check_close(w, SM, ref::Tol{0, 1e-38, 1}, "w = softmax(w, -1)", &SMS);
    }
  }
  SECTION("y = sum(y, 0, keepdim) + y and y = y + sum(y, 0) in place") {
    auto y = ref::uniform<float>(-1, 1, 33, 20);
    Array Y = ref::of(y);
    Array cs = ref::reduce(Y, {0}, true, ref::fsum);
    y = sd::sum(y, 0, sd::keepdim) + y;
    ref::check_close(y, ref::map([](double c, double u) { return c + u; }, cs, Y), ref::Tol{40, 2e-4}, "keepdim");
    Array Y2 = ref::of(y);
    Array cs2 = ref::reduce(Y2, {0}, false, ref::fsum);
    y = y + sd::sum(y, 0);
    ref::check_close(y, ref::map([](double u, double c) { return u + c; }, Y2, cs2), ref::Tol{40, 4e-4}, "break");
  }
  SECTION("overlapping shifted slices read the old values") {
    auto y = ref::uniform<float>(-1, 1, 100);
    Array Y = ref::of(y);
    auto tail = sd::slice(y, 0, 1, 100);  // y[1:]
    tail = sd::slice(y, 0, 0, 99) * 1.f;  // y[1:] = y[:-1]
    Array E = Y;
    for (std::int64_t i = 1; i < 100; ++i) E[i] = Y[i - 1];
    ref::check_equal(y, E, "y[1:] = y[:-1]");
  }
  SECTION("y = transpose(y) rebinds y to the view") {
    auto y = ref::uniform<float>(-1, 1, 6, 9);
    Array Y = ref::of(y);
    float* p = y.data();
    sd::Tensor<float, 2> keep = y;  // shares the storage
    y = sd::transpose(y, 0, 1);
    CHECK(y.shape() == sd::Index<2>{9, 6});
    CHECK(y.data() == p);
    CHECK_FALSE(y.is_contiguous());
    ref::check_equal(y, ref::transpose(Y, 0, 1), "y = transpose(y)");
    ref::check_equal(keep, Y, "the original is untouched");
    y = y * 3.f;  // writes through the view into the shared storage
    ref::check_equal(keep, ref::map([](double u) { return double(float(u * 3)); }, Y), "writes through the rebound view");
  }
}

namespace {
// Counts the host allocations made while it is installed (core/tensor.hpp: HostStorage).
struct CountingStorage final : sd::detail::HostStorage {
  std::vector<std::size_t> sizes;
  sd::detail::HostStorage* saved = sd::detail::host_storage();
  CountingStorage() { sd::detail::host_storage() = this; }
  ~CountingStorage() { sd::detail::host_storage() = saved; }
  std::shared_ptr<void> allocate(std::size_t bytes) override {
    sizes.push_back(bytes);
    void* p = ::operator new(bytes, std::align_val_t{64});
    return std::shared_ptr<void>(p, [](void* q) { ::operator delete(q, std::align_val_t{64}); });
  }
};
}  // namespace

TEST_CASE("the plan: a compile-time kernel list run in order, its results in one block", "[plan][list]") {
  auto x = ref::uniform<float>(-1, 1, 8, 16);
  using sd::detail::kernel_list;
  using sd::detail::Path;

  // Two full reductions broadcast into [8, 16]: kernels of their own (rule 5), then the root's.
  auto e = x * sd::sum(x) + sd::amax(x);
  using N = sd::node_t<decltype(e)>;
  using List = kernel_list<N>;
  static_assert(List::size == 3 && sd::kernel_count<decltype(e)> == 3);
  using K0 = sd::detail::type_at<0, List>::type;
  using K1 = sd::detail::type_at<1, List>::type;
  using K2 = sd::detail::type_at<2, List>::type;
  static_assert(K0::node::kind == sd::NodeKind::reduce && std::is_same_v<K0::path, Path<0, 1>>);
  static_assert(K1::node::kind == sd::NodeKind::reduce && std::is_same_v<K1::path, Path<1>>);
  static_assert(std::is_same_v<K2::node, N> && std::is_same_v<K2::path, Path<>>);
  // Two rank-0 float results, each on a cache line of its own.
  CHECK(sd::detail::plan_workspace(e) == 128);
  CHECK(contains(sd::explain(e), "\nworkspace: 128 B in one block"));

  std::vector<std::size_t> sizes;
  sd::Tensor<float, 2> y(sd::shape(8, 16));
  auto before = sd::detail::kernels_run();
  {
    CountingStorage counting;
    y = e;
    sizes = counting.sizes;
  }
  CHECK(sd::detail::kernels_run() - before == 3);
  REQUIRE(sizes.size() == 1);  // the block; y was allocated before
  CHECK(sizes[0] == 128);
  double sum = 0, amax = -1e30;
  for (double v : ref::of(x).v) sum += v, amax = std::max(amax, v);
  ref::check_close(y, ref::map([&](double u) { return u * sum + amax; }, ref::of(x)), ref::Tol{16, 1e-6},
                   "x * sum(x) + amax(x)");

  // A view of a reduction and a shared node: each planned once, in the order they are read.
  auto s = sd::share(sd::softmax(x, -1) * 2.f);
  auto f = sd::flatten(sd::sum(x, 1, sd::keepdim)) + sd::sum(s, 1) + sd::sum(s, 1);
  using F = kernel_list<sd::node_t<decltype(f)>>;
  static_assert(F::size == 3);  // the view's child, s's kernel (once), the root with sum(s, 1) fused
  {
    CountingStorage counting;
    auto r = ref::run_counted(f);
    CHECK(counting.sizes.size() == 2);  // the block and r
    // A row of softmax(x) * 2 sums to 2.
    Array rows = ref::reduce(ref::of(x), {1}, false, ref::fsum);
    ref::check_close(r, ref::map([](double a) { return a + 4; }, rows), ref::Tol{64, 1e-5},
                     "flatten(sum(x, 1)) + 2 sum(share(softmax(x) * 2), 1)");
  }
}

TEST_CASE("the plan: a shared view that keeps its child's order is computed once", "[plan][list]") {
  auto x = ref::uniform<float>(-1, 1, 8, 16);
  auto s = sd::share(sd::flatten(sd::sum(x, 1, sd::keepdim)));
  auto e = s * s + s;
  static_assert(sd::kernel_count<decltype(e)> == 2);  // the sum, then the root
  auto r = ref::run_counted(e);
  Array rows = ref::reduce(ref::of(x), {1}, false, ref::fsum);
  ref::check_close(r, ref::map([](double v) { return v * v + v; }, rows), ref::Tol{16, 1e-6}, "s * s + s");
}
