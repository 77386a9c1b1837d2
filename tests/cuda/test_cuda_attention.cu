// scaled_dot_product_attention and embedding on sd::Cuda tensors (backend/cuda/attention.hpp,
// embedding.hpp) against the host's results on the same inputs (tests/test_attention.cpp and
// tests/test_embedding.cpp hold those to double-precision loops), and every kernel count
// against the kernels that run.
// Attention: L != S, head dims 16 to 256, broadcast batch dims, causal (L < S and L > S), bool and
// float masks of several shapes, the scale, rows that no key takes part in (0), transposed and
// head-split operands, outputs of any layout, epilogues, double, half and bfloat16. The two
// engines fold the keys in other orders, so a value may differ by the rounding of its scores
// and sums: within 32 (E + S) eps of 1 + |value| (values are averages of values in [-1, 1]).
// Embedding: a gather, the host's values bit for bit; an index out of range is the host's error.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "compare.hpp"

using namespace gpu_test;
using Catch::Matchers::Contains;

namespace {

template <class T>
constexpr double eps = std::numeric_limits<T>::epsilon();

// f(q, k, v, mask...) of the device copies against f of the host tensors, one kernel, within the
// bound above (E: the head dim, S: the keys).
template <class F, class... H>
void attention_on_both(F const& f, std::int64_t E, std::int64_t S, H const&... host) {
  using T = typename std::tuple_element_t<0, std::tuple<H...>>::value_type;
  auto const e = f(host.template to<sd::Cuda>()...);
  static_assert(sd::kernel_count<decltype(e)> == 1);
  auto const want = sd::eval(f(host...));
  close(counted(e, 1), want, 32.0 * static_cast<double>(E + S) * eps<T>);
}

auto sdpa = [](auto const& q, auto const& k, auto const& v) { return sd::scaled_dot_product_attention(q, k, v); };

}  // namespace

TEST_CASE("attention: L != S, head dims 16 to 256, broadcast batch dims", "[gpu][attention]") {
  struct Case {
    std::int64_t l, s, e, ev;
  };
  for (Case c : {Case{7, 19, 32, 32}, Case{130, 67, 64, 64}, Case{33, 130, 128, 128}, Case{1, 1, 32, 5},
                 Case{65, 200, 64, 24}, Case{16, 16, 80, 80}, Case{40, 33, 16, 256}, Case{9, 70, 256, 64}}) {
    INFO("L=" << c.l << " S=" << c.s << " E=" << c.e << " Ev=" << c.ev);
    // Batch dims [2, 3] for q, [1, 3] for k and v: broadcast, as PyTorch.
    attention_on_both(sdpa, c.e, c.s, host_rand<float>(2, 3, c.l, c.e), host_rand<float>(1, 3, c.s, c.e),
                      host_rand<float>(1, 3, c.s, c.ev));
  }
  // double; shared memory past 48 KiB a block (E = Ev = 128 in double).
  attention_on_both(sdpa, 128, 77, host_rand<double>(2, 50, 128), host_rand<double>(2, 77, 128),
                    host_rand<double>(2, 77, 128));
  // q of rank 2 against batched k and v; scores of up to about +-90 that grow along the keys, so
  // that the running max changes tile after tile.
  auto q = sd::rand<float>(sd::shape(40, 64), -3.f, 3.f);
  auto k = sd::eval(sd::rand<float>(sd::shape(2, 300, 64), -3.f, 3.f) *
                    sd::reshape(sd::arange<float>(300) * (2.f / 300) + 0.2f, {300, 1}));
  attention_on_both([](auto const& q_, auto const& k_, auto const& v_) {
    return sd::scaled_dot_product_attention(q_, k_, v_, {.scale = 0.3});
  }, 64 * 20, 300, q, k, host_rand<float>(2, 300, 16));
}

TEST_CASE("attention: causal, masks, scale, rows that no key takes part in", "[gpu][attention]") {
  for (auto [l, s] : {std::pair<std::int64_t, std::int64_t>{5, 70}, {150, 40}, {130, 130}, {1, 9}}) {
    INFO("causal L=" << l << " S=" << s);
    attention_on_both([](auto const& q_, auto const& k_, auto const& v_) {
      return sd::scaled_dot_product_attention(q_, k_, v_, {.is_causal = true});
    }, 64, s, host_rand<float>(3, l, 64), host_rand<float>(3, s, 64), host_rand<float>(3, s, 20));
  }
  std::int64_t const B = 2, H = 3, L = 37, S = 70, E = 32;
  auto q = host_rand<float>(B, H, L, E), k = host_rand<float>(B, H, S, E), v = host_rand<float>(B, H, S, E);
  auto masked = [](auto const& q_, auto const& k_, auto const& v_, auto const& m_) {
    return sd::scaled_dot_product_attention(q_, k_, v_, m_);
  };
  auto keep = sd::eval(host_rand<float>(L, S) > 0.f);
  attention_on_both(masked, E, S, q, k, v, keep);                                         // bool [L, S]
  attention_on_both(masked, E, S, q, k, v, sd::eval(host_rand<float>(B, 1, L, S) > 0.f));  // [B, 1, L, S]
  attention_on_both(masked, E, S, q, k, v, sd::eval(host_rand<float>(L, 1) > 0.f));        // whole rows
  attention_on_both(masked, E, S, q, k, v, sd::eval(host_rand<float>(L, S) * 4.f));        // float, added
  attention_on_both([](auto const& q_, auto const& k_, auto const& v_, auto const& m_) {
    return sd::scaled_dot_product_attention(q_, k_, v_, m_, {.scale = 0.5});
  }, E, S, q, k, v, sd::eval(host_rand<float>(B, 1, L, S) * 4.f));
  // A key padding mask [S]: the last keys out.
  auto pad = sd::eval(sd::where(sd::arange<float>(S) < 50.f, 0.f, -std::numeric_limits<float>::infinity()));
  attention_on_both(masked, E, S, q, k, v, pad);

  // Rows that no key takes part in give 0, on both.
  auto keep_some = sd::eval(sd::where(sd::reshape(sd::arange<float>(L), sd::shape(L, 1)) == 3.f, false, keep));
  auto none = sd::eval(sd::where(sd::reshape(sd::arange<float>(L), sd::shape(L, 1)) == 5.f,
                                 -std::numeric_limits<float>::infinity(), host_rand<float>(L, S)));
  auto a = counted(masked(q.to<sd::Cuda>(), k.to<sd::Cuda>(), v.to<sd::Cuda>(), keep_some.to<sd::Cuda>()), 1);
  auto b = counted(masked(q.to<sd::Cuda>(), k.to<sd::Cuda>(), v.to<sd::Cuda>(), none.to<sd::Cuda>()), 1);
  auto ah = a.to<sd::Host>(), bh = b.to<sd::Host>();
  for (std::int64_t n = 0; n < B; ++n)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t c = 0; c < E; ++c) {
        CHECK(ah(n, h, 3, c) == 0);
        CHECK(bh(n, h, 5, c) == 0);
      }
  close(a, sd::eval(masked(q, k, v, keep_some)), 32.0 * (E + S) * eps<float>);
  close(b, sd::eval(masked(q, k, v, none)), 32.0 * (E + S) * eps<float>);
  // No keys at all: zeros, as PyTorch; no queries: nothing to do.
  auto z = counted(sdpa(q.to<sd::Cuda>(), host_rand<float>(B, H, 0, E).to<sd::Cuda>(),
                        host_rand<float>(B, H, 0, 8).to<sd::Cuda>()), 1);
  for (float x : sd::to_vector(z)) CHECK(x == 0);
  CHECK(sd::eval(sdpa(host_rand<float>(B, H, 0, E).to<sd::Cuda>(), k.to<sd::Cuda>(), v.to<sd::Cuda>())).numel() == 0);
}

TEST_CASE("attention: transposed, sliced and head-split operands; outputs of any layout", "[gpu][attention]") {
  std::int64_t const B = 2, T = 45, H = 4, E = 16;
  auto xq = host_rand<float>(B, T, H * E), xkv = host_rand<float>(B, T, 2 * H * E);
  auto heads = [&](auto const& x, std::int64_t h0) {  // [B, T, n * E] -> [B, H, T, E] from head h0
    auto split = sd::view(x, std::array<std::int64_t, 4>{B, T, x.shape()[2] / E, E});
    return sd::transpose(sd::slice(split, 2, h0, h0 + H), 1, 2);
  };
  auto dq = xq.to<sd::Cuda>(), dkv = xkv.to<sd::Cuda>();
  close(counted(sdpa(heads(dq, 0), heads(dkv, 0), heads(dkv, H)), 1),
        sd::eval(sdpa(heads(xq, 0), heads(xkv, 0), heads(xkv, H))), 32.0 * (E + T) * eps<float>);
  // Keys stored transposed ([.., E, S]), queries every other row, causal.
  auto kt = host_rand<float>(B, H, E, T), qq = host_rand<float>(B, H, 2 * T, E);
  auto causal = [](auto const& q_, auto const& k_, auto const& v_) {
    return sd::scaled_dot_product_attention(q_, k_, v_, {.is_causal = true});
  };
  close(counted(causal(sd::slice(qq.to<sd::Cuda>(), 2, 0, 2 * T, 2), sd::transpose(kt.to<sd::Cuda>(), -2, -1),
                       heads(dkv, H)), 1),
        sd::eval(causal(sd::slice(qq, 2, 0, 2 * T, 2), sd::transpose(kt, -2, -1), heads(xkv, H))),
        32.0 * (E + T) * eps<float>);
  // Expanded values (stride 0 along the value dim).
  auto col = host_rand<float>(B, H, T, 1);
  auto kk = host_rand<float>(B, H, T, E);
  close(counted(sdpa(heads(dq, 0), kk.to<sd::Cuda>(), sd::expand(col.to<sd::Cuda>(), {B, H, T, 6})), 1),
        sd::eval(sdpa(heads(xq, 0), kk, sd::expand(col, {B, H, T, 6}))), 32.0 * (E + T) * eps<float>);
  // The kernel writes any layout and element type itself: one kernel into a transposed view, or
  // into a double tensor.
  auto q = host_rand<float>(2, 3, 20, 32), k = host_rand<float>(2, 3, 50, 32), v = host_rand<float>(2, 3, 50, 24);
  auto want = sd::eval(sdpa(q, k, v));
  sd::Tensor<float, 4, sd::Cuda> store(2, 3, 24, 20);
  auto out = sd::transpose(store, -2, -1);
  auto before = sd::detail::kernels_run();
  out = sdpa(q.to<sd::Cuda>(), k.to<sd::Cuda>(), v.to<sd::Cuda>());
  CHECK(sd::detail::kernels_run() - before == 1);
  close(out, want, 32.0 * (32 + 50) * eps<float>);
  sd::Tensor<double, 4, sd::Cuda> wide(2, 3, 20, 24);
  before = sd::detail::kernels_run();
  wide = sdpa(q.to<sd::Cuda>(), k.to<sd::Cuda>(), v.to<sd::Cuda>());
  CHECK(sd::detail::kernels_run() - before == 1);
  close(wide, want, 32.0 * (32 + 50) * eps<float>);
}

TEST_CASE("attention: element-wise epilogues run after it", "[gpu][attention][fusion]") {
  auto q = host_rand<float>(2, 3, 20, 32), k = host_rand<float>(2, 3, 50, 32), v = host_rand<float>(2, 3, 50, 24);
  auto x = host_rand<float>(2, 3, 20, 24);
  auto dq = q.to<sd::Cuda>(), dk = k.to<sd::Cuda>(), dv = v.to<sd::Cuda>(), dx = x.to<sd::Cuda>();
  double const rel = 32.0 * (32 + 50) * eps<float>;
  auto const e = sdpa(dq, dk, dv) * 2.f + dx;
  static_assert(sd::kernel_count<decltype(e)> == 2);  // attention stored, then the rest
  CHECK_THAT(sd::explain(e), Contains("runs after scaled_dot_product_attention, which is stored first"));
  close(counted(e, 2), sd::eval(sdpa(q, k, v) * 2.f + x), 2 * rel);
  // Broadcast in its rest: the same two kernels.
  auto q1 = host_rand<float>(1, 3, 20, 32);
  close(counted(sdpa(q1.to<sd::Cuda>(), dk, dv) + dx, 2), sd::eval(sdpa(q1, k, v) + x), rel);
  // An operand or a mask that is an expression is materialized first.
  auto const s = sd::scaled_dot_product_attention(dq * 2.f, dk, dv);
  static_assert(sd::kernel_count<decltype(s)> == 2);
  close(counted(s, 2), sd::eval(sd::scaled_dot_product_attention(q * 2.f, k, v)), rel);
  auto bias = host_rand<float>(20, 50);
  auto const m = sd::scaled_dot_product_attention(dq, dk, dv, bias.to<sd::Cuda>() > 0.f);
  static_assert(sd::kernel_count<decltype(m)> == 2);
  close(counted(m, 2), sd::eval(sd::scaled_dot_product_attention(q, k, v, bias > 0.f)), rel);
  // Under a reduction: stored first.
  auto const total = sd::sum(sdpa(dq, dk, dv), -1);
  static_assert(sd::kernel_count<decltype(total)> == 2);
  close(counted(total, 2), sd::eval(sd::sum(sdpa(q, k, v), -1)), 24 * rel);
}

TEST_CASE("attention: the pattern written out by hand runs as the attention kernel", "[gpu][attention][fusion]") {
  auto q = host_rand<float>(2, 3, 20, 32), k = host_rand<float>(2, 3, 50, 32), v = host_rand<float>(2, 3, 50, 24);
  auto bias = host_rand<float>(20, 50);
  auto written = [](auto const& q, auto const& k, auto const& v, auto const& mask) {
    return sd::matmul(sd::softmax(sd::matmul(q, sd::transpose(k, -2, -1)) * 0.125f + mask, -1), v);
  };
  auto const e = written(q.to<sd::Cuda>(), k.to<sd::Cuda>(), v.to<sd::Cuda>(), bias.to<sd::Cuda>());
  static_assert(sd::kernel_count<decltype(e)> == 1);
  CHECK_THAT(sd::explain(e), Contains("rewrite: matmul(softmax("));
  close(counted(e, 1), sd::eval(written(q, k, v, bias)), 32.0 * (32 + 50) * eps<float>);
}

TEMPLATE_TEST_CASE("attention of half and bfloat16 computes in float", "[gpu][attention][half]", sd::half,
                   sd::bfloat16) {
  using H = TestType;
  double const u = std::is_same_v<H, sd::half> ? 1.0 / 2048 : 1.0 / 256;  // one rounding to H
  auto rounded = [](auto const& t) { return sd::eval(sd::cast<H>(t)); };
  auto widened = [](auto const& t) { return sd::eval(sd::cast<float>(t)); };
  auto q = rounded(host_rand<float>(2, 4, 70, 64)), k = rounded(host_rand<float>(2, 4, 90, 64));
  auto v = rounded(host_rand<float>(2, 4, 90, 64));
  auto bias = rounded(host_rand<float>(70, 90));
  auto const e = sdpa(q.template to<sd::Cuda>(), k.template to<sd::Cuda>(), v.template to<sd::Cuda>());
  static_assert(std::is_same_v<typename decltype(e)::value_type, H>);
  close(widened(counted(e, 1)), sd::eval(sdpa(widened(q), widened(k), widened(v))), 2 * u);
  auto const c = sd::scaled_dot_product_attention(q.template to<sd::Cuda>(), k.template to<sd::Cuda>(),
                                                  v.template to<sd::Cuda>(), {.is_causal = true});
  close(widened(counted(c, 1)),
        sd::eval(sd::scaled_dot_product_attention(widened(q), widened(k), widened(v), {.is_causal = true})), 2 * u);
  auto const m = sd::scaled_dot_product_attention(q.template to<sd::Cuda>(), k.template to<sd::Cuda>(),
                                                  v.template to<sd::Cuda>(), bias.template to<sd::Cuda>());
  close(widened(counted(m, 1)),
        sd::eval(sd::scaled_dot_product_attention(widened(q), widened(k), widened(v), widened(bias))), 2 * u);
}

TEST_CASE("attention on sd::Cuda: the host's shape errors, and the largest value dim", "[gpu][attention][errors]") {
  auto q = host_rand<float>(2, 5, 8).to<sd::Cuda>();
  CHECK_THROWS_WITH(sdpa(q, host_rand<float>(2, 6, 9).to<sd::Cuda>(), host_rand<float>(2, 6, 4).to<sd::Cuda>()),
                    Contains("the query's and the key's last dims (E) differ"));
  CHECK_THROWS_WITH(sdpa(q, host_rand<float>(3, 6, 8).to<sd::Cuda>(), host_rand<float>(3, 6, 4).to<sd::Cuda>()),
                    Contains("do not broadcast"));
  CHECK_THROWS_WITH(sd::eval(sdpa(q, host_rand<float>(2, 6, 8).to<sd::Cuda>(), host_rand<float>(2, 6, 300).to<sd::Cuda>())),
                    Contains("the value's last dim (Ev) is 300, at most 256"));
}

TEST_CASE("embedding: the host's rows, bit for bit", "[gpu][embedding]") {
  auto w = host_rand<float>(7, 5);
  auto ids = sd::from_vector(std::vector<std::int64_t>{3, 0, 6, 6, 1, 2}, sd::shape(2, 3));
  auto dw = w.to<sd::Cuda>();
  auto e = sd::embedding(ids.to<sd::Cuda>(), dw);
  static_assert(sd::kernel_count<decltype(e)> == 1);
  same_bits(counted(e, 1), sd::eval(sd::embedding(ids, w)));
  // int32 indices; a weight whose rows are not contiguous (a transposed view); a 0-d index.
  auto ids32 = sd::from_vector(std::vector<std::int32_t>{4, 4, 0}, sd::shape(3));
  auto wt = host_rand<double>(5, 6);
  same_bits(counted(sd::embedding(ids32.to<sd::Cuda>(), sd::transpose(wt.to<sd::Cuda>(), 0, 1)), 1),
            sd::eval(sd::embedding(ids32, sd::transpose(wt, 0, 1))));
  sd::Tensor<std::int64_t, 0> one;
  one.data()[0] = 5;
  same_bits(counted(sd::embedding(one.to<sd::Cuda>(), dw), 1), sd::eval(sd::embedding(one, w)));
  // Many rows; 16-bit weights; into a transposed view.
  auto many = sd::eval(sd::cast<std::int64_t>(sd::rand<float>(sd::shape(64, 300), 0.f, 6.99f)));
  same_bits(counted(sd::embedding(many.to<sd::Cuda>(), dw), 1), sd::eval(sd::embedding(many, w)));
  auto wh = sd::eval(sd::cast<sd::half>(w));
  same_bits(counted(sd::embedding(ids.to<sd::Cuda>(), wh.to<sd::Cuda>()), 1), sd::eval(sd::embedding(ids, wh)));
  sd::Tensor<float, 3, sd::Cuda> store(2, 5, 3);
  auto out = sd::transpose(store, 1, 2);
  auto const before = sd::detail::kernels_run();
  out = sd::embedding(ids.to<sd::Cuda>(), dw);
  CHECK(sd::detail::kernels_run() - before == 1);
  same_bits(out, sd::eval(sd::embedding(ids, w)));
}

TEST_CASE("embedding: element-wise epilogues run after the gather", "[gpu][embedding][fusion]") {
  auto w = host_rand<float>(11, 8), pos = host_rand<float>(4, 8);
  auto ids = sd::from_vector(std::vector<std::int64_t>{10, 2, 2, 7}, sd::shape(4));
  auto const x = sd::embedding(ids.to<sd::Cuda>(), w.to<sd::Cuda>()) * 2.5f + pos.to<sd::Cuda>();
  static_assert(sd::kernel_count<decltype(x)> == 2);  // the rows gathered, then the rest
  CHECK_THAT(sd::explain(x), Contains("runs after embedding, which is stored first"));
  same_bits(counted(x, 2), sd::eval(sd::embedding(ids, w) * 2.5f + pos));
  auto const ln = sd::layer_norm(sd::embedding(ids.to<sd::Cuda>(), w.to<sd::Cuda>()),
                                 sd::ones<float, sd::Cuda>(sd::shape(8)), sd::zeros<float, sd::Cuda>(sd::shape(8)));
  static_assert(sd::kernel_count<decltype(ln)> == 2);
  close(counted(ln, 2),
        sd::eval(sd::layer_norm(sd::embedding(ids, w), sd::ones<float>(sd::shape(8)), sd::zeros<float>(sd::shape(8)))),
        1e-5);
}

TEST_CASE("embedding: an index out of range is the host's error, and nothing is read through it",
          "[gpu][embedding][errors]") {
  auto w = host_rand<float>(5, 3);
  auto dw = w.to<sd::Cuda>();
  auto high = sd::from_vector(std::vector<std::int64_t>{0, 5, 1, 9}, sd::shape(2, 2)).to<sd::Cuda>();
  auto embed = [&](auto const& ids) { sd::Tensor<float, 3, sd::Cuda> y = sd::embedding(ids, dw); };
  CHECK_THROWS_WITH(embed(high), Contains("embedding: index 5 is out of range for a weight of shape [5, 3]") &&
                                     Contains("(indices must be in [0, 5))"));
  auto negative = sd::from_vector(std::vector<std::int32_t>{2, -1}, sd::shape(1, 2)).to<sd::Cuda>();
  CHECK_THROWS_WITH(embed(negative), Contains("index -1"));
  // The GPU stays usable: the next gather runs.
  auto ok = sd::from_vector(std::vector<std::int64_t>{4, 0}, sd::shape(1, 2));
  same_bits(sd::eval(sd::embedding(ok.to<sd::Cuda>(), dw)), sd::eval(sd::embedding(ok, w)));
}
