// scaled_dot_product_attention (expr/attention.hpp, backend/host/attention.hpp): torch's
// semantics (batch dims broadcast, causal top-left, bool and float masks, the default scale,
// fully masked rows), against double-precision loops that store the scores and take the softmax
// with the max subtracted; and rule 3: the element-wise expression over it is its epilogue.
#include "reference.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace sd = solder;
using ref::Array;
using ref::contains;
using ref::run_counted;
using ref::Shape;

namespace {

// Element (r, c) of the matrix of output batch index bi (right-aligned, extent 1 broadcast) of
// an array of rank >= 1 whose last two dims (one, for a rank-1 mask) are rows and columns.
double at(Array const& x, Shape const& bi, std::int64_t r, std::int64_t c) {
  std::size_t const xr = x.shape.size(), nb = bi.size();
  Shape idx(xr, 0);
  for (std::size_t i = 0; i + 2 < xr; ++i) idx[i] = x.shape[i] == 1 ? 0 : bi[nb - (xr - 2) + i];
  if (xr >= 2) idx[xr - 2] = x.shape[xr - 2] == 1 ? 0 : r;
  idx[xr - 1] = x.shape[xr - 1] == 1 ? 0 : c;
  return x.at(idx);
}

// The [rows, cols] matrix of `at`, row-major: gathered once per batch index, so that the loops
// below read plain arrays (indexing through `at` per term made the reference the slowest part of
// the test).
std::vector<double> matrix(Array const& x, Shape const& bi, std::int64_t rows, std::int64_t cols) {
  std::vector<double> m(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) m[static_cast<std::size_t>(r * cols + c)] = at(x, bi, r, c);
  return m;
}

enum class MaskKind { none, boolean, additive };

struct Expect {
  Array value, scale;  // scale: the bound of the error of each output over eps (see below)
};

// Attention in double: the scores [L, S] stored, masked, softmax with the max subtracted, then
// the weighted sum of the values. A row that no key takes part in is 0 (PyTorch 2.5 and later).
// Error bound of a float engine, to first order: each score is a dot product of E terms (and a
// mask added), off by up to (E + 2) eps A, A the largest |score| term sum of the row; each p_j =
// exp(s_j - max) is then off by twice that relatively, the sums of S terms add S eps, and each of
// the S / 64 rescales of the online softmax a few eps: so |error| <= (4 (E + 2) A + 2 S + 16) eps
// sum_j p_j |v_jc| / sum_j p_j.
Expect attention(Array const& q, Array const& k, Array const& v, double scale, bool causal = false,
                 Array const* mask = nullptr, MaskKind kind = MaskKind::none) {
  std::size_t const D = std::max({q.shape.size(), k.shape.size(), v.shape.size()});
  Shape batch(D - 2, 1);
  for (Array const* x : {&q, &k, &v})
    for (std::size_t i = 0; i + 2 < x->shape.size(); ++i) {
      std::int64_t& o = batch[D - x->shape.size() + i];
      if (o == 1) o = x->shape[i];
    }
  std::int64_t const L = q.shape.end()[-2], E = q.shape.back(), S = k.shape.end()[-2], Ev = v.shape.back();
  Shape out = batch;
  out.push_back(L);
  out.push_back(Ev);
  Expect r{Array(out), Array(out)};
  Shape bi(D - 2, 0);
  std::int64_t o = 0;
  std::vector<double> s(static_cast<std::size_t>(S)), bound(static_cast<std::size_t>(S));
  do {
    std::vector<double> const Q = matrix(q, bi, L, E), K = matrix(k, bi, S, E), V = matrix(v, bi, S, Ev),
                               M = mask ? matrix(*mask, bi, L, S) : std::vector<double>{};
    auto el = [](std::vector<double> const& m, std::int64_t cols, std::int64_t r, std::int64_t c) {
      return m[static_cast<std::size_t>(r * cols + c)];
    };
    for (std::int64_t i = 0; i < L; ++i) {
      double mx = -ref::inf, terms = 0;
      for (std::int64_t j = 0; j < S; ++j) {
        double d = 0, a = 0;
        for (std::int64_t e = 0; e < E; ++e) {
          d += el(Q, E, i, e) * el(K, E, j, e);
          a += std::fabs(el(Q, E, i, e) * el(K, E, j, e));
        }
        double x = d * scale, ax = a * std::fabs(scale);
        if (kind == MaskKind::additive) x += el(M, S, i, j), ax += std::fabs(el(M, S, i, j));
        if ((kind == MaskKind::boolean && el(M, S, i, j) == 0) || (causal && j > i)) x = -ref::inf;
        s[static_cast<std::size_t>(j)] = x;
        if (x != -ref::inf) terms = std::max(terms, ax);
        mx = std::max(mx, x);
      }
      double z = 0;
      for (double& x : s) z += x = mx == -ref::inf ? 0 : std::exp(x - mx);
      double const factor = 4.0 * static_cast<double>(E + 2) * terms + 2.0 * static_cast<double>(S) + 16;
      for (std::int64_t c = 0; c < Ev; ++c, ++o) {
        double w = 0, a = 0;
        for (std::int64_t j = 0; j < S; ++j) {
          w += s[static_cast<std::size_t>(j)] * el(V, Ev, j, c);
          a += s[static_cast<std::size_t>(j)] * std::fabs(el(V, Ev, j, c));
        }
        r.value[o] = z == 0 ? 0 : w / z;
        r.scale[o] = z == 0 ? 0 : factor * a / z;
      }
    }
  } while (!batch.empty() && ref::next_index(bi, batch));
  return r;
}

template <class TT>
void check_attention(TT const& got, Expect const& e, std::string const& what) {
  ref::check_close(got, e.value, ref::Tol{4, 0, 1}, what, &e.scale);
}

double default_scale(std::int64_t e) { return 1 / std::sqrt(static_cast<double>(e)); }

}  // namespace

TEMPLATE_TEST_CASE("scaled_dot_product_attention against double loops", "[attention]", float, double) {
  struct Case {
    std::int64_t l, s, e, ev;
  };
  for (Case c : {Case{7, 19, 32, 32}, Case{130, 67, 64, 64}, Case{7, 19, 80, 80}, Case{33, 130, 128, 128},
                 Case{1, 1, 32, 5}, Case{65, 200, 64, 24}}) {
    // Batch dims [2, 3] for q, [1, 3] for k and v: broadcast, as PyTorch.
    auto q = ref::uniform<TestType>(-1, 1, 2, 3, c.l, c.e);
    auto k = ref::uniform<TestType>(-1, 1, 1, 3, c.s, c.e);
    auto v = ref::uniform<TestType>(-1, 1, 1, 3, c.s, c.ev);
    std::string what = "L=" + std::to_string(c.l) + " S=" + std::to_string(c.s) + " E=" + std::to_string(c.e) +
                       " Ev=" + std::to_string(c.ev);
    auto expect = attention(ref::of(q), ref::of(k), ref::of(v), default_scale(c.e));
    check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v)), expect, what);
  }
}

TEST_CASE("attention with large scores rescales its running sums", "[attention]") {
  // Scores up to about +-90 that grow along the keys: the running max changes block after block.
  auto q = ref::uniform<float>(-3, 3, 2, 40, 64);
  auto k = ref::uniform<float>(-3, 3, 2, 300, 64);
  auto ramp = ref::uniform<float>(0, 1, 300, 1);
  for (std::int64_t j = 0; j < 300; ++j) ramp(j, 0) = static_cast<float>(0.2 + 2.0 * static_cast<double>(j) / 300);
  sd::Tensor<float, 3> kr = k * ramp;
  auto v = ref::uniform<float>(-1, 1, 2, 300, 16);
  auto expect = attention(ref::of(q), ref::of(kr), ref::of(v), 0.3);
  auto a = sd::scaled_dot_product_attention(q, kr, v, {.scale = 0.3});
  CHECK(contains(sd::explain(a), "in2[2, 300, 16], scale=0.3)"));
  check_attention(run_counted(a), expect, "large scores");
}

TEMPLATE_TEST_CASE("causal attention masks the keys after each query, top-left aligned", "[attention]", float,
                   double) {
  struct Case {
    std::int64_t l, s;
  };
  for (Case c : {Case{5, 70}, Case{150, 40}, Case{130, 130}, Case{1, 9}}) {
    auto q = ref::uniform<TestType>(-1, 1, 3, c.l, 32);
    auto k = ref::uniform<TestType>(-1, 1, 3, c.s, 32);
    auto v = ref::uniform<TestType>(-1, 1, 3, c.s, 20);
    auto expect = attention(ref::of(q), ref::of(k), ref::of(v), default_scale(32), true);
    auto a = sd::scaled_dot_product_attention(q, k, v, {.is_causal = true});
    CHECK(contains(sd::explain(a), "in2[3, " + std::to_string(c.s) + ", 20], is_causal)"));
    check_attention(run_counted(a), expect, "causal L=" + std::to_string(c.l) + " S=" + std::to_string(c.s));
  }
}

TEST_CASE("attention masks: bool (true takes part) and float (added), broadcast", "[attention]") {
  std::int64_t const B = 2, H = 3, L = 37, S = 70, E = 32;
  auto q = ref::uniform<float>(-1, 1, B, H, L, E);
  auto k = ref::uniform<float>(-1, 1, B, H, S, E);
  auto v = ref::uniform<float>(-1, 1, B, H, S, E);
  Array Q = ref::of(q), K = ref::of(k), V = ref::of(v);
  double const sc = default_scale(E);

  auto keep = ref::uniform<bool>(0, 1, L, S);  // [L, S], broadcast over batch and heads
  Array Keep = ref::of(keep);
  check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v, keep)),
                  attention(Q, K, V, sc, false, &Keep, MaskKind::boolean), "bool [L, S]");
  auto keep4 = ref::uniform<bool>(0, 1, B, 1, L, S);  // per batch, broadcast over heads
  Array K4 = ref::of(keep4);
  check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v, keep4)),
                  attention(Q, K, V, sc, false, &K4, MaskKind::boolean), "bool [B, 1, L, S]");

  auto bias = ref::uniform<float>(-4, 4, L, S);
  Array Bias = ref::of(bias);
  check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v, bias)),
                  attention(Q, K, V, sc, false, &Bias, MaskKind::additive), "float [L, S]");
  auto bias4 = ref::uniform<float>(-4, 4, B, 1, L, S);
  Array Bias4 = ref::of(bias4);
  check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v, bias4, {.scale = 0.5})),
                  attention(Q, K, V, 0.5, false, &Bias4, MaskKind::additive), "float [B, 1, L, S], scale 0.5");
  auto pad = ref::uniform<float>(-1, 1, S);  // a key padding mask [S]: the last keys masked out
  for (std::int64_t j = 0; j < S; ++j) pad(j) = j < 50 ? 0.f : -std::numeric_limits<float>::infinity();
  Array Pad = ref::of(pad);
  check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v, pad)),
                  attention(Q, K, V, sc, false, &Pad, MaskKind::additive), "float [S] padding");
  auto col = ref::uniform<bool>(0, 1, L, 1);  // [L, 1]: whole rows in or out
  Array Col = ref::of(col);
  check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v, col)),
                  attention(Q, K, V, sc, false, &Col, MaskKind::boolean), "bool [L, 1]");
}

TEST_CASE("a row that no key takes part in is 0, as PyTorch", "[attention]") {
  auto q = ref::uniform<double>(-1, 1, 2, 5, 16);
  auto k = ref::uniform<double>(-1, 1, 2, 90, 16);
  auto v = ref::uniform<double>(-1, 1, 2, 90, 8);
  auto keep = ref::uniform<bool>(0, 1, 5, 90);
  for (std::int64_t j = 0; j < 90; ++j) keep(1, j) = false;
  auto bias = ref::uniform<double>(-1, 1, 5, 90);
  for (std::int64_t j = 0; j < 90; ++j) bias(3, j) = -std::numeric_limits<double>::infinity();
  auto a = run_counted(sd::scaled_dot_product_attention(q, k, v, keep));
  auto b = run_counted(sd::scaled_dot_product_attention(q, k, v, bias));
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 8; ++c) {
      CHECK(a(n, 1, c) == 0);
      CHECK(b(n, 3, c) == 0);
    }
  Array K = ref::of(keep), Bias = ref::of(bias);
  check_attention(a, attention(ref::of(q), ref::of(k), ref::of(v), 0.25, false, &K, MaskKind::boolean), "bool");
  check_attention(b, attention(ref::of(q), ref::of(k), ref::of(v), 0.25, false, &Bias, MaskKind::additive), "float");
  // No keys at all: zeros, as PyTorch.
  auto none = run_counted(sd::scaled_dot_product_attention(q, ref::uniform<double>(-1, 1, 2, 0, 16),
                                                           ref::uniform<double>(-1, 1, 2, 0, 8)));
  ref::check_equal(none, Array({2, 5, 8}, 0.0), "S = 0");
  auto empty = run_counted(sd::scaled_dot_product_attention(ref::uniform<double>(-1, 1, 2, 0, 16), k, v));
  CHECK(empty.shape() == sd::Index<3>{2, 0, 8});
}

TEST_CASE("attention reads transposed, sliced and head-split operands in place", "[attention]") {
  std::int64_t const B = 2, T = 45, H = 4, E = 16;
  // Heads split by views, as in a transformer: [B, T, H * E] -> [B, T, H, E] -> [B, H, T, E].
  auto xq = ref::uniform<float>(-1, 1, B, T, H * E);
  auto xkv = ref::uniform<float>(-1, 1, B, T, 2 * H * E);  // k and v side by side
  auto heads = [&](auto const& x, std::int64_t h0) {
    auto split = sd::view(x, std::array<std::int64_t, 4>{B, T, x.shape()[2] / E, E});
    return sd::transpose(sd::slice(split, 2, h0, h0 + H), 1, 2);
  };
  auto q = heads(xq, 0);
  auto k = heads(xkv, 0);
  auto v = heads(xkv, H);
  auto expect = attention(ref::of(q), ref::of(k), ref::of(v), default_scale(E));
  check_attention(run_counted(sd::scaled_dot_product_attention(q, k, v)), expect, "heads split by views");
  // Keys stored transposed ([.., E, S]), queries every other row.
  auto kt = ref::uniform<float>(-1, 1, B, H, E, T);
  auto qq = ref::uniform<float>(-1, 1, B, H, 2 * T, E);
  auto qs = sd::slice(qq, 2, 0, 2 * T, 2);
  auto kk = sd::transpose(kt, -2, -1);
  check_attention(run_counted(sd::scaled_dot_product_attention(qs, kk, v, {.is_causal = true})),
                  attention(ref::of(qs), ref::of(kk), ref::of(v), default_scale(E), true),
                  "transposed keys, sliced queries");
  // Expanded values (stride 0 along the value dim), and q of rank 2 against batched k, v.
  auto col = ref::uniform<float>(-1, 1, B, H, T, 1);
  auto ve = sd::expand(col, {B, H, T, 6});
  auto q2 = ref::uniform<float>(-1, 1, 9, E);
  check_attention(run_counted(sd::scaled_dot_product_attention(q2, kk, ve)),
                  attention(ref::of(q2), ref::of(kk), ref::of(ve), default_scale(E)), "expanded values, rank-2 q");
}

TEST_CASE("element-wise maths over attention is its epilogue: one kernel", "[attention][fusion]") {
  auto q = ref::uniform<float>(-1, 1, 2, 3, 20, 32);
  auto k = ref::uniform<float>(-1, 1, 2, 3, 50, 32);
  auto v = ref::uniform<float>(-1, 1, 2, 3, 50, 24);
  auto x = ref::uniform<float>(-1, 1, 2, 3, 20, 24);
  auto expect = attention(ref::of(q), ref::of(k), ref::of(v), default_scale(32));

  auto a = sd::scaled_dot_product_attention(q, k, v);
  static_assert(sd::kernel_count<decltype(a)> == 1);
  std::string text = sd::explain(a);
  INFO(text);
  CHECK(contains(text, "contraction kernel"));
  CHECK(contains(text, "scaled_dot_product_attention(in0[2, 3, 20, 32], in1[2, 3, 50, 32], in2[2, 3, 50, 24])"));

  auto e = a * 2.f + x;
  static_assert(sd::kernel_count<decltype(e)> == 1);
  static_assert(sd::eager_kernel_count<decltype(e)> == 3);
  Array fx = ref::map([](double y, double r) { return 2 * y + r; }, expect.value, ref::of(x));
  Array fs = ref::map([](double s) { return 2 * s + 2; }, expect.scale);
  ref::check_close(run_counted(e), fx, ref::Tol{4, 0, 1}, "sdpa * 2 + x", &fs);
  ref::check_close(sd::eager(e), fx, ref::Tol{4, 0, 1}, "eager sdpa * 2 + x", &fs);

  // Into a transposed view of the output: the epilogue walks elements instead of rows.
  sd::Tensor<float, 4> out(2, 3, 24, 20);
  auto out_t = sd::transpose(out, -2, -1);
  auto before = sd::detail::kernels_run();
  out_t = sd::relu(a);
  CHECK(sd::detail::kernels_run() - before == 1);
  ref::check_close(out_t, ref::map([](double y) { return y > 0 ? y : 0; }, expect.value), ref::Tol{4, 0, 1},
                   "relu(sdpa) into a transposed view", &expect.scale);

  // An operand that is an expression, or a mask that is one, is materialized first.
  auto scaled = sd::scaled_dot_product_attention(q * 2.f, k, v);
  static_assert(sd::kernel_count<decltype(scaled)> == 2);
  auto e2 = attention(ref::map([](double t) { return 2 * t; }, ref::of(q)), ref::of(k), ref::of(v), default_scale(32));
  check_attention(run_counted(scaled), e2, "sdpa(q * 2, k, v)");
  auto bias = ref::uniform<float>(-1, 1, 20, 50);
  auto masked = sd::scaled_dot_product_attention(q, k, v, bias > 0.f);
  static_assert(sd::kernel_count<decltype(masked)> == 2);
  Array keep = ref::map([](double t) { return t > 0 ? 1.0 : 0.0; }, ref::of(bias));
  check_attention(run_counted(masked), attention(ref::of(q), ref::of(k), ref::of(v), default_scale(32), false, &keep,
                                                 MaskKind::boolean),
                  "mask bias > 0");

  // Under a reduction, attention is stored first.
  auto total = sd::sum(sd::scaled_dot_product_attention(q, k, v), -1);
  static_assert(sd::kernel_count<decltype(total)> == 2);
  run_counted(total);

  // Broadcast in its own epilogue ([1, ...] plus a [2, ...] tensor): a run-time break.
  auto q1 = ref::uniform<float>(-1, 1, 1, 3, 20, 32);
  auto k1 = ref::uniform<float>(-1, 1, 1, 3, 50, 32);
  auto v1 = ref::uniform<float>(-1, 1, 1, 3, 50, 24);
  auto wide = sd::scaled_dot_product_attention(q1, k1, v1) + x;
  std::string wt = sd::explain(wide);
  CHECK(contains(wt, "run-time break"));
  before = sd::detail::kernels_run();
  sd::Tensor<float, 4> w = wide;
  CHECK(sd::detail::kernels_run() - before == 2);
  auto e1 = attention(ref::of(q1), ref::of(k1), ref::of(v1), default_scale(32));
  Array ws = ref::map([](double s, double) { return s + 1; }, e1.scale, ref::of(x));
  ref::check_close(w, ref::map([](double y, double r) { return y + r; }, e1.value, ref::of(x)), ref::Tol{4, 0, 1},
                   "[1, ...] attention broadcast", &ws);
}

TEST_CASE("the attention pattern written out by hand runs as one attention kernel", "[attention][fusion]") {
  auto q = ref::uniform<float>(-1, 1, 2, 3, 20, 32);
  auto k = ref::uniform<float>(-1, 1, 2, 3, 50, 32);
  auto v = ref::uniform<float>(-1, 1, 2, 3, 50, 24);
  auto bias = ref::uniform<float>(-1, 1, 20, 50);
  Array Bias = ref::of(bias);
  auto kt = sd::transpose(k, -2, -1);
  auto const expect = attention(ref::of(q), ref::of(k), ref::of(v), 0.125);
  auto const masked = attention(ref::of(q), ref::of(k), ref::of(v), 0.125, false, &Bias, MaskKind::additive);

  // The forms of the scores: scaled by a product or a quotient, either side, masked either side.
  auto plain = sd::matmul(sd::softmax(sd::matmul(q, kt) * 0.125f, -1), v);
  static_assert(sd::kernel_count<decltype(plain)> == 1);
  std::string text = sd::explain(plain);
  INFO(text);
  CHECK(contains(text, "rewrite: matmul(softmax(q @ k^T * scale [+ mask], -1), v) written out"));
  CHECK(contains(text, "scaled_dot_product_attention("));
  check_attention(run_counted(plain), expect, "softmax(q @ k^T * s) @ v");
  check_attention(run_counted(sd::matmul(sd::softmax(0.125f * sd::matmul(q, kt), -1), v)), expect, "s * scores");
  check_attention(run_counted(sd::matmul(sd::softmax(sd::matmul(q, kt) / 8.f, -1), v)), expect, "scores / s");
  check_attention(run_counted(sd::matmul(sd::softmax<-1>(sd::matmul(q, kt) * 0.125f + bias), v)), masked,
                  "softmax<-1>(scores + mask)");
  check_attention(run_counted(sd::matmul(sd::softmax(bias + sd::matmul(q, kt) * 0.125f, 3), v)), masked,
                  "mask + scores, dim 3");
  auto unscaled = attention(ref::of(q), ref::of(k), ref::of(v), 1.0);
  check_attention(run_counted(sd::matmul(sd::softmax(sd::matmul(q, kt), -1), v)), unscaled, "unscaled");

  // The element-wise rest is the attention kernel's epilogue.
  auto x = ref::uniform<float>(-1, 1, 2, 3, 20, 24);
  auto rest = sd::relu(plain) + x;
  static_assert(sd::kernel_count<decltype(rest)> == 1);
  Array const rest_scale = ref::map([](double s, double) { return s + 1; }, expect.scale, ref::of(x));
  ref::check_close(run_counted(rest),
                   ref::map([](double y, double r) { return (y > 0 ? y : 0) + r; }, expect.value, ref::of(x)),
                   ref::Tol{4, 0, 1}, "relu(pattern) + x", &rest_scale);

  // Close to the expression run as written, node by node (each within the bound of the exact).
  ref::check_close(sd::Tensor<float, 4>(plain), ref::of(sd::eager(plain)), ref::Tol{8, 0, 2}, "against eager",
                   &expect.scale);

  // Over another dim than the last, it runs as written (the planned kernel count is the
  // rewrite's: more kernels run, as with a run-time break), and means what it says.
  auto other_dim = sd::matmul(sd::softmax(sd::matmul(q, kt) * 0.125f, 2), v);
  static_assert(sd::kernel_count<decltype(other_dim)> == 1);
  CHECK_FALSE(contains(sd::explain(other_dim), "rewrite:"));
  auto before = sd::detail::kernels_run();
  sd::Tensor<float, 4> o = other_dim;
  CHECK(sd::detail::kernels_run() - before >= 3);  // the scores, the softmax's kernels, the product
  ref::check_close(o, ref::of(sd::eager(other_dim)), ref::Tol{64, 1e-5, 0}, "softmax over dim 2");

  // A mask that adds batch dims is not attention's: the pattern is not recognized.
  auto q3 = ref::uniform<float>(-1, 1, 3, 20, 32);
  auto k3 = ref::uniform<float>(-1, 1, 3, 50, 32);
  auto v3 = ref::uniform<float>(-1, 1, 3, 50, 24);
  auto wide_mask = ref::uniform<float>(-1, 1, 2, 3, 20, 50);
  auto batched = sd::matmul(sd::softmax(sd::matmul(q3, sd::transpose(k3, -2, -1)) + wide_mask, -1), v3);
  static_assert(sd::kernel_count<decltype(batched)> == 4);  // as written: the scores, scores + mask, softmax, product
  run_counted(batched);
}

TEST_CASE("the attention pattern keeps softmax's NaN for a row whose scores are all -inf", "[attention]") {
  auto q = ref::uniform<double>(-1, 1, 2, 5, 16);
  auto k = ref::uniform<double>(-1, 1, 2, 90, 16);
  auto v = ref::uniform<double>(-1, 1, 2, 90, 8);
  auto bias = ref::uniform<double>(-1, 1, 5, 90);
  for (std::int64_t j = 0; j < 90; ++j) bias(3, j) = -std::numeric_limits<double>::infinity();
  auto pattern = sd::matmul(sd::softmax(sd::matmul(q, sd::transpose(k, -2, -1)) * 0.25 + bias, -1), v);
  auto fused = run_counted(pattern);
  auto written = sd::eager(pattern);
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 8; ++c) {
      CHECK(std::isnan(fused(n, 3, c)));
      CHECK(std::isnan(written(n, 3, c)));
      CHECK(fused(n, 1, c) == Approx(written(n, 1, c)).epsilon(1e-12));
    }
}

TEST_CASE("an output that is also an operand of attention is written after it is read", "[attention][alias]") {
  auto y = ref::uniform<float>(-1, 1, 3, 40, 16);
  auto k = ref::uniform<float>(-1, 1, 3, 70, 16);
  auto v = ref::uniform<float>(-1, 1, 3, 70, 16);
  auto expect = attention(ref::of(y), ref::of(k), ref::of(v), default_scale(16));
  y = sd::scaled_dot_product_attention(y, k, v);
  check_attention(y, expect, "y = sdpa(y, k, v)");
}

TEST_CASE("attention results do not depend on the thread count", "[attention][threads]") {
  // (One batch of 150 rows: the tasks are blocks of 16 rows on 2 threads, of 32 on one.)
  auto q = ref::uniform<float>(-1, 1, 1, 150, 64);
  auto k = ref::uniform<float>(-1, 1, 1, 170, 64);
  auto v = ref::uniform<float>(-1, 1, 1, 170, 48);
  int const threads = sd::get_num_threads();
  sd::Tensor<float, 3> r1 = sd::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  sd::set_num_threads(1);
  sd::Tensor<float, 3> r2 = sd::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  sd::set_num_threads(threads);
  CHECK(std::memcmp(r1.data(), r2.data(), sizeof(float) * static_cast<std::size_t>(r1.numel())) == 0);
}

TEST_CASE("attention refuses shapes PyTorch refuses, naming the op and the shapes", "[attention][errors]") {
  auto q = ref::uniform<float>(-1, 1, 2, 4, 8);
  auto k = ref::uniform<float>(-1, 1, 2, 5, 8);
  auto v = ref::uniform<float>(-1, 1, 2, 5, 6);
  std::string m = ref::error_message([&] { (void)sd::scaled_dot_product_attention(q, ref::uniform<float>(-1, 1, 2, 5, 7), v); });
  CHECK(contains(m, "scaled_dot_product_attention"));
  CHECK(contains(m, "[2, 4, 8]"));
  CHECK(contains(m, "[2, 5, 7]"));
  CHECK(contains(m, "last dims (E) differ"));
  CHECK(contains(ref::error_message([&] { (void)sd::scaled_dot_product_attention(q, k, ref::uniform<float>(-1, 1, 2, 6, 6)); }),
                 "sequence dims (S"));
  CHECK(contains(ref::error_message([&] { (void)sd::scaled_dot_product_attention(q, ref::uniform<float>(-1, 1, 3, 5, 8), v); }),
                 "do not broadcast"));
  auto keep = ref::uniform<bool>(0, 1, 4, 5);
  std::string both = ref::error_message([&] { (void)sd::scaled_dot_product_attention(q, k, v, keep, {.is_causal = true}); });
  CHECK(contains(both, "attn_mask should not be set when is_causal"));
  std::string mk = ref::error_message([&] { (void)sd::scaled_dot_product_attention(q, k, v, ref::uniform<bool>(0, 1, 4, 6)); });
  CHECK(contains(mk, "attn_mask [4, 6]"));
  CHECK(contains(mk, "[2, 4, 5]"));
  // A mask may not add batch dims (PyTorch: "doesn't match the broadcast shape").
  CHECK(contains(ref::error_message([&] { (void)sd::scaled_dot_product_attention(q, k, v, ref::uniform<bool>(0, 1, 3, 4, 5)); }),
                 "may not add batch dims"));
}
