// nn::MultiheadAttention's and nn::TransformerEncoderLayer's masks (nn/transformer.hpp), as
// PyTorch's forward takes them: attn_mask ([L, S] or [N * heads, L, S]), key_padding_mask
// ([N, S]), bool (true: masked out) or float (added), is_causal (a hint that attn_mask is the
// causal mask), and need_weights (the weights averaged over the heads). MultiheadAttention is
// checked against double-precision loops over its own weights; TransformerEncoderLayer against
// what the masks mean: a padded key changes nothing of the other positions' outputs, and under
// the causal mask a position's output is the layer's output for the prefix that ends there.
#include "reference.hpp"

#include <limits>
#include <string>

namespace sd = solder;
using ref::Array;
using ref::contains;
using ref::Shape;

namespace {

constexpr std::int64_t N = 2, L = 3, S = 4, E = 8, H = 2, Dh = E / H;
constexpr double neg_inf = -std::numeric_limits<double>::infinity();

// Random biases, so that every parameter counts (PyTorch starts them at 0).
void randomize_biases(sd::nn::MultiheadAttention& m) {
  m.in_proj_bias.value = ref::uniform<float>(-0.5, 0.5, 3 * E);
  m.out_proj.bias.value = ref::uniform<float>(-0.5, 0.5, E);
  sd::nn::eval(m);
}

// x [rows, cols_in] @ w[first:first + out]^T + b[first:...] in double.
Array project(Array const& x, Array const& w, Array const& b, std::int64_t first, std::int64_t out) {
  std::int64_t const rows = x.shape[0], in = x.shape[1];
  Array y(Shape{rows, out});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      double acc = b[first + o];
      for (std::int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[(first + o) * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

struct Expect {
  Array output, weights;  // [N, L, E] and [N, L, S], batch first
};

// The module's attention in double for batch-first query [N, L, E], key and value [N, S, E];
// mask [N, H, L, S] added to the scores (-inf: masked out).
Expect reference(sd::nn::MultiheadAttention const& m, Array const& query, Array const& key, Array const& value,
                 Array const& mask) {
  Array const w = ref::of(m.in_proj_weight), b = ref::of(m.in_proj_bias.value);
  Array const wo = ref::of(m.out_proj.weight), bo = ref::of(m.out_proj.bias.value);
  std::int64_t const l = query.shape[1], s = key.shape[1];
  Expect r{Array(Shape{N, l, E}), Array(Shape{N, l, s})};
  for (std::int64_t n = 0; n < N; ++n) {
    auto rows = [&](Array const& x, std::int64_t len) {
      Array y(Shape{len, E});
      for (std::int64_t i = 0; i < len * E; ++i) y[i] = x[n * len * E + i];
      return y;
    };
    Array const q = project(rows(query, l), w, b, 0, E), k = project(rows(key, s), w, b, E, E),
                v = project(rows(value, s), w, b, 2 * E, E);
    Array heads(Shape{l, E});
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < l; ++i) {
        std::vector<double> p(static_cast<std::size_t>(s));
        double mx = neg_inf, z = 0;
        for (std::int64_t j = 0; j < s; ++j) {
          double d = 0;
          for (std::int64_t c = 0; c < Dh; ++c) d += q[i * E + h * Dh + c] * k[j * E + h * Dh + c];
          p[j] = d / std::sqrt(static_cast<double>(Dh)) + mask[((n * H + h) * l + i) * s + j];
          mx = std::max(mx, p[j]);
        }
        for (double& x : p) z += x = std::exp(x - mx);
        for (std::int64_t j = 0; j < s; ++j) {
          p[j] /= z;
          r.weights[(n * l + i) * s + j] += p[j] / H;
        }
        for (std::int64_t c = 0; c < Dh; ++c) {
          double o = 0;
          for (std::int64_t j = 0; j < s; ++j) o += p[j] * v[j * E + h * Dh + c];
          heads[i * E + h * Dh + c] = o;
        }
      }
    Array const out = project(heads, wo, bo, 0, E);
    for (std::int64_t i = 0; i < l * E; ++i) r.output[n * l * E + i] = out[i];
  }
  return r;
}

// [N, H, L, S] masks in double from what the module is given.
Array no_mask(std::int64_t l, std::int64_t s) { return Array(Shape{N, H, l, s}); }
template <class F>
Array mask_where(std::int64_t l, std::int64_t s, F const& value) {  // value(n, h, i, j)
  Array m = no_mask(l, s);
  for (std::int64_t n = 0, o = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < l; ++i)
        for (std::int64_t j = 0; j < s; ++j, ++o) m[o] = value(n, h, i, j);
  return m;
}

constexpr ref::Tol tol{0, 2e-5, 0};

// Two float results held as arrays, within tol's absolute bound of each other.
void check_same(Array const& got, Array const& want, std::string const& what) {
  INFO(what);
  REQUIRE(got.shape == want.shape);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) bad += !(std::fabs(got[i] - want[i]) <= tol.abs);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("MultiheadAttention's masks and weights, against double loops", "[nn][attention][masks]") {
  sd::nn::MultiheadAttention mha(E, H, {.batch_first = true});
  randomize_biases(mha);
  auto q = ref::uniform<float>(-1, 1, N, L, E);
  auto k = ref::uniform<float>(-1, 1, N, S, E);
  auto v = ref::uniform<float>(-1, 1, N, S, E);
  Array const Q = ref::of(q), K = ref::of(k), V = ref::of(v);

  SECTION("no mask") {
    ref::check_close(sd::eval(mha.forward(q, k, v)), reference(mha, Q, K, V, no_mask(L, S)).output, tol, "no mask");
  }
  SECTION("a float attn_mask [L, S] is added to the scores") {
    auto m = ref::uniform<float>(-2, 2, L, S);
    Array const M = ref::of(m);
    auto e = reference(mha, Q, K, V, mask_where(L, S, [&](auto, auto, auto i, auto j) { return M[i * S + j]; }));
    ref::check_close(sd::eval(mha.forward(q, k, v, {.attn_mask = m})), e.output, tol, "float attn_mask");
  }
  SECTION("a bool attn_mask [L, S] masks out where true; key_padding_mask [N, S] too, both together") {
    auto m = ref::values<bool>({false, true, false, true, true, false, false, false, false, false, true, false}, L, S);
    auto pad = ref::values<bool>({false, false, false, false, false, false, true, true}, N, S);
    auto e = reference(mha, Q, K, V, mask_where(L, S, [&](auto, auto, auto i, auto j) { return m(i, j) ? neg_inf : 0; }));
    ref::check_close(sd::eval(mha.forward(q, k, v, {.attn_mask = m})), e.output, tol, "bool attn_mask");
    auto p = reference(mha, Q, K, V, mask_where(L, S, [&](auto n, auto, auto, auto j) { return pad(n, j) ? neg_inf : 0; }));
    ref::check_close(sd::eval(mha.forward(q, k, v, {.key_padding_mask = pad})), p.output, tol, "key_padding_mask");
    auto both = reference(mha, Q, K, V, mask_where(L, S, [&](auto n, auto, auto i, auto j) {
                            return m(i, j) || pad(n, j) ? neg_inf : 0;
                          }));
    auto [out, weights] = mha.forward(q, k, v, sd::nn::need_weights, {.key_padding_mask = pad, .attn_mask = m});
    ref::check_close(sd::eval(out), both.output, tol, "both masks");
    ref::check_close(weights, both.weights, tol, "both masks: weights averaged over the heads");
    CHECK(weights(1, 0, 3) == 0);  // a padded key has no weight
  }
  SECTION("a float key_padding_mask and a per-head bool attn_mask [N * H, L, S]") {
    auto pad = ref::uniform<float>(-1, 1, N, S);
    auto m = ref::uniform<bool>(0, 1, N * H, L, S);
    for (std::int64_t b = 0; b < N * H; ++b)
      for (std::int64_t i = 0; i < L; ++i) m(b, i, 0) = false;  // no row masked whole
    auto e = reference(mha, Q, K, V, mask_where(L, S, [&](auto n, auto h, auto i, auto j) {
                         return m(n * H + h, i, j) ? neg_inf : pad(n, j);
                       }));
    auto [out, weights] = mha.forward(q, k, v, sd::nn::need_weights, {.key_padding_mask = pad, .attn_mask = m});
    ref::check_close(sd::eval(out), e.output, tol, "per-head mask");
    ref::check_close(weights, e.weights, tol, "per-head mask: weights");
  }
  SECTION("need_weights without masks; the output is the same as without weights") {
    auto e = reference(mha, Q, K, V, no_mask(L, S));
    auto [out, weights] = mha.forward(q, k, v, sd::nn::need_weights);
    ref::check_close(weights, e.weights, tol, "weights");
    ref::check_close(sd::eval(out), ref::of(sd::eval(mha.forward(q, k, v))), tol, "output with and without weights");
  }
  SECTION("shapes PyTorch refuses") {
    auto wrong = ref::uniform<float>(-1, 1, S, L);
    CHECK(contains(ref::error_message([&] { sd::eval(mha.forward(q, k, v, {.attn_mask = wrong})); }),
                   "attn_mask of shape [4, 3] should be [L, S] = [3, 4] or [N * num_heads, L, S] = [4, 3, 4]"));
    auto pad = ref::uniform<bool>(0, 1, N, L);
    CHECK(contains(ref::error_message([&] { sd::eval(mha.forward(q, k, v, {.key_padding_mask = pad})); }),
                   "key_padding_mask of shape [2, 3] should be [N, S] = [2, 4]"));
  }
}

TEST_CASE("MultiheadAttention's is_causal: a hint that attn_mask is the causal mask, as PyTorch's",
          "[nn][attention][masks]") {
  sd::nn::MultiheadAttention mha(E, H);  // batch second, PyTorch's default: [L, N, E]
  randomize_biases(mha);
  auto x = ref::uniform<float>(-1, 1, L, N, E);
  Array const X = ref::permute(ref::of(x), {1, 0, 2});  // batch first, for the reference
  auto causal = sd::nn::generate_square_subsequent_mask(L);
  CHECK(causal(0, 1) == -std::numeric_limits<float>::infinity());
  CHECK(causal(1, 0) == 0);
  auto e = reference(mha, X, X, X, mask_where(L, L, [](auto, auto, auto i, auto j) { return j > i ? neg_inf : 0; }));
  Array const expect = ref::permute(e.output, {1, 0, 2});
  ref::check_close(sd::eval(mha.forward(x, {.attn_mask = causal})), expect, tol, "the causal mask");
  ref::check_close(sd::eval(mha.forward(x, {.attn_mask = causal, .is_causal = true})), expect, tol,
                   "is_causal: the causal kernel");
  auto pad = ref::values<bool>({false, false, true, false, false, false}, N, L);
  auto padded = reference(mha, X, X, X, mask_where(L, L, [&](auto n, auto, auto i, auto j) {
                            return j > i || pad(n, j) ? neg_inf : 0;
                          }));
  ref::check_close(sd::eval(mha.forward(x, {.key_padding_mask = pad, .attn_mask = causal, .is_causal = true})),
                   ref::permute(padded.output, {1, 0, 2}), tol, "is_causal with a padding mask: the masks");
  auto [out, weights] = mha.forward(x, sd::nn::need_weights, {.attn_mask = causal, .is_causal = true});
  ref::check_close(weights, e.weights, tol, "is_causal with weights: the weights of the mask");
  CHECK(contains(ref::error_message([&] { sd::eval(mha.forward(x, {.is_causal = true})); }),
                 "is_causal needs attn_mask"));
}

TEST_CASE("TransformerEncoderLayer's masks mean what they say", "[nn][attention][masks]") {
  constexpr std::int64_t T = 5;
  sd::nn::TransformerEncoderLayer layer(E, H, {.dim_feedforward = 16, .batch_first = true});
  randomize_biases(layer.self_attn);
  sd::nn::eval(layer);
  auto x = ref::uniform<float>(-1, 1, N, T, E);
  // The outputs of one sequence's first `len` positions, [len, E].
  auto rows = [](Array const& y, std::int64_t n, std::int64_t len) {
    Array r(Shape{len, E});
    for (std::int64_t i = 0; i < len * E; ++i) r[i] = y[n * T * E + i];
    return r;
  };
  auto alone = [&](std::int64_t n, std::int64_t len, auto const&... args) {  // the layer on x[n, :len]
    sd::Tensor<float, 3> prefix = sd::narrow(sd::narrow(x, 0, n, 1), 1, 0, len);
    Array y = ref::of(sd::eval(layer.forward(prefix, args...)));
    y.shape = {len, E};
    return y;
  };

  SECTION("src_key_padding_mask: the padded keys change nothing of the other positions") {
    auto pad = ref::values<bool>({false, false, false, true, true, false, false, false, false, false}, N, T);
    Array const y = ref::of(sd::eval(layer.forward(x, {.src_key_padding_mask = pad})));
    check_same(rows(y, 0, 3), alone(0, 3), "sequence 0, its 3 unpadded positions");
    check_same(rows(y, 1, T), alone(1, T), "sequence 1, unpadded");
  }
  SECTION("src_mask, causal: each position's output is the layer's output for its prefix") {
    auto causal = sd::nn::generate_square_subsequent_mask(T);
    Array const y = ref::of(sd::eval(layer.forward(x, {.src_mask = causal})));
    ref::check_close(sd::eval(layer.forward(x, {.src_mask = causal, .is_causal = true})), y, tol, "is_causal hint");
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t len = 1; len <= T; ++len) {
        Array const last = rows(y, n, len);
        Array const expect = alone(n, len);
        for (std::int64_t c = 0; c < E; ++c) {
          INFO("sequence " << n << ", position " << len - 1 << ", feature " << c);
          CHECK(std::fabs(last[(len - 1) * E + c] - expect[(len - 1) * E + c]) <= 2e-5);
        }
      }
  }
}
