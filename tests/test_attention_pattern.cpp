// The hand-written attention pattern (expr/attention.hpp: attention_pattern) and its near misses.
// A pattern matcher must never turn a non-match into an error: each expression below is one
// edit away from matmul(softmax(q @ k^T * s + mask, -1), v). Those that match run as attention,
// and explain names the rewrite; the others run as written. Every value is checked against
// double-precision loops (the scores, a softmax over the last dim, the product with v).
#include "reference.hpp"

#include <string>

namespace sd = solder;
using ref::Array;
using ref::contains;

namespace {

// softmax over the last dim, in double, the max subtracted.
Array softmax_last(Array s) {
  std::int64_t const n = s.shape.back();
  for (std::int64_t r = 0; r < s.numel(); r += n) {
    double mx = -ref::inf, z = 0;
    for (std::int64_t j = 0; j < n; ++j) mx = std::max(mx, s[r + j]);
    for (std::int64_t j = 0; j < n; ++j) z += s[r + j] = std::exp(s[r + j] - mx);
    for (std::int64_t j = 0; j < n; ++j) s[r + j] /= z;
  }
  return s;
}

Array plus(Array const& a, Array const& b) {
  return ref::map([](double x, double y) { return x + y; }, a, b);
}
Array times(Array const& a, double s) {
  return ref::map([s](double x) { return x * s; }, a);
}

}  // namespace

TEST_CASE("near misses of the attention pattern run as written, with softmax's values", "[attention][pattern]") {
  auto q = ref::uniform<float>(-1, 1, 2, 3, 5, 8);
  auto k = ref::uniform<float>(-1, 1, 2, 3, 7, 8);
  auto v = ref::uniform<float>(-1, 1, 2, 3, 7, 6);
  auto v2 = ref::uniform<float>(-1, 1, 7, 6);
  auto x = ref::uniform<float>(-2, 2, 2, 3, 5, 7);
  auto y = ref::uniform<float>(-2, 2, 2, 3, 5, 7);
  auto mask = ref::uniform<float>(-1, 1, 5, 7);
  auto mask2 = ref::uniform<float>(-1, 1, 5, 7);
  auto column = ref::uniform<float>(-1, 1, 5, 1);
  auto kt = sd::transpose(k, -2, -1);
  Array const V = ref::of(v), X = ref::of(x), Y = ref::of(y), M = ref::of(mask), M2 = ref::of(mask2);
  Array const S = ref::matmul(ref::of(q), ref::transpose(ref::of(k), 2, 3)).value;  // q @ k^T

  // Checks matmul(softmax(scores, -1), w) against the reference, and whether the planner
  // rewrote it. The scores are sums of 8 products of numbers in [-1, 1] (or sums of a few
  // numbers in [-2, 2]): each off by at most ~16 eps, each weight relatively by twice that,
  // and an output a convex combination of 7 values in [-1, 1].
  auto check = [](std::string const& what, auto const& e, Array const& scores, Array const& w, bool rewritten) {
    std::string const text = sd::explain(e);
    INFO(what << "\n" << text);
    CHECK(contains(text, "rewrite:") == rewritten);
    ref::check_close(ref::run_counted(e), ref::matmul(softmax_last(scores), w).value, ref::Tol{4, 64 * ref::eps<float>(), 0},
                     what);
  };

  // The pattern itself, each of its forms: rewritten.
  check("softmax(q @ k^T * s)", sd::matmul(sd::softmax(sd::matmul(q, kt) * 0.125f, -1), v), times(S, 0.125), V, true);
  check("softmax(q @ k^T * s + mask)", sd::matmul(sd::softmax(sd::matmul(q, kt) * 0.125f + mask, -1), v),
        plus(times(S, 0.125), M), V, true);
  check("softmax(mask + q @ k^T / s)", sd::matmul(sd::softmax(mask + sd::matmul(q, kt) / 8.f, -1), v),
        plus(times(S, 0.125), M), V, true);
  check("softmax<-1>(s * q @ k^T + column)", sd::matmul(sd::softmax<-1>(0.5f * sd::matmul(q, kt) + column), v),
        plus(times(S, 0.5), ref::of(column)), V, true);

  // Sums that are not scores plus a mask (issue 39: each was a compile error).
  check("softmax(x + y)", sd::matmul(sd::softmax(x + y, -1), v), plus(X, Y), V, false);
  check("softmax(x + 1)", sd::matmul(sd::softmax(x + 1.f, -1), v), ref::map([](double a) { return a + 1; }, X), V,
        false);
  check("softmax(relu(x) + y)", sd::matmul(sd::softmax(sd::relu(x) + y, -1), v),
        plus(ref::map([](double a) { return a > 0 ? a : 0; }, X), Y), V, false);
  check("softmax<-1>(x + y)", sd::matmul(sd::softmax<-1>(x + y), v), plus(X, Y), V, false);
  check("softmax(x + y) @ v of rank 2", sd::matmul(sd::softmax(x + y, -1), v2), plus(X, Y), ref::of(v2), false);
  check("softmax(q @ k^T * s * 2 + mask)", sd::matmul(sd::softmax(sd::matmul(q, kt) * 0.125f * 2.f + mask, -1), v),
        plus(times(S, 0.25), M), V, false);
  check("softmax(q @ k^T + mask + mask2)", sd::matmul(sd::softmax(sd::matmul(q, kt) + mask + mask2, -1), v),
        plus(plus(S, M), M2), V, false);
  check("softmax(mask + (q @ k^T + mask2))", sd::matmul(sd::softmax(mask + (sd::matmul(q, kt) + mask2), -1), v),
        plus(M, plus(S, M2)), V, false);
  check("softmax(q @ k^T + 1)", sd::matmul(sd::softmax(sd::matmul(q, kt) + 1.f, -1), v),
        ref::map([](double a) { return a + 1; }, S), V, false);

  // Other edits of the scores, the softmax or what multiplies it.
  check("softmax(q @ k^T * x)", sd::matmul(sd::softmax(sd::matmul(q, kt) * x, -1), v),
        ref::map([](double a, double b) { return a * b; }, S, X), V, false);
  check("softmax(q @ k^T - mask)", sd::matmul(sd::softmax(sd::matmul(q, kt) - mask, -1), v),
        ref::map([](double a, double b) { return a - b; }, S, M), V, false);
  check("softmax(relu(q @ k^T))", sd::matmul(sd::softmax(sd::relu(sd::matmul(q, kt)), -1), v),
        ref::map([](double a) { return a > 0 ? a : 0; }, S), V, false);
  check("softmax(x)", sd::matmul(sd::softmax(x, -1), v), X, V, false);
  check("softmax(x) * 2", sd::matmul(sd::softmax(x, -1) * 2.f, v), X, times(V, 2), false);
}

TEST_CASE("the attention pattern over another dim than the last runs as written", "[attention][pattern]") {
  // A softmax over dim 2 of [.., L, S] scores matches the types but not the run-time dim: the
  // kernels run as written (more than planned), with the values softmax over dim 2 gives.
  auto q = ref::uniform<float>(-1, 1, 2, 7, 8);
  auto k = ref::uniform<float>(-1, 1, 2, 7, 8);
  auto v = ref::uniform<float>(-1, 1, 2, 7, 6);
  auto e = sd::matmul(sd::softmax(sd::matmul(q, sd::transpose(k, -2, -1)) * 0.5f, 1), v);
  CHECK_FALSE(contains(sd::explain(e), "rewrite:"));
  Array const S = ref::matmul(ref::of(q), ref::transpose(ref::of(k), 1, 2)).value;
  Array const P = ref::transpose(softmax_last(ref::transpose(times(S, 0.5), 1, 2)), 1, 2);
  ref::check_close(sd::eval(e), ref::matmul(P, ref::of(v)).value, ref::Tol{4, 64 * ref::eps<float>(), 0},
                   "softmax(q @ k^T * s, dim 1)");
}
