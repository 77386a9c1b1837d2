// nn.MultiheadAttention and nn.TransformerEncoderLayer, with PyTorch's keys. Attention runs
// as scaled_dot_product_attention (one flash-style kernel that never stores the [L, S]
// scores) on head views of one fused Q/K/V projection, and writes its heads straight into the
// [N, L, E] layout the output projection reads: a self-attention block is three kernels
// (QKV projection, attention, output projection with whatever follows it as epilogue).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "../core/any_tensor.hpp"
#include "../expr/attention.hpp"
#include "block.hpp"
#include "layers.hpp"

namespace solder::nn {

namespace detail {

// Heads of a [N, L, C] tensor whose last dim is contiguous: the H blocks of D columns that
// start at column `first`, as an [N, H, L, D] view (no copy).
template <class TT>
BasicTensor<float, dynamic_extents<4>(), typename TT::device_type> heads(TT const& t, std::int64_t first, std::int64_t h,
                                                                        std::int64_t d) {
  solder::detail::check(t.stride(2) == 1, "attention heads: the last dim must be contiguous");
  return solder::detail::view_of<4>(t, {t.size(0), h, t.size(1), d}, {t.stride(0), d, t.stride(1), 1}, first);
}

// softmax(q k^T / sqrt(D) + mask) v for every head, q/k/v taken from [N, L|S, E] tensors at
// column offsets; the result [N, L, E] with the heads side by side, as the output projection
// reads it. `mask` (optional) is an additive float mask broadcast to [N, H, L, S].
template <class TT, class... Mask>
TT attend(TT const& q, std::int64_t q_first, TT const& k, std::int64_t k_first, TT const& v, std::int64_t v_first,
          std::int64_t embed_dim, std::int64_t num_heads, AttentionOptions const& o, Mask const&... mask) {
  std::int64_t const n = q.size(0), l = q.size(1), d = embed_dim / num_heads;
  TT out(n, l, embed_dim);
  auto out_heads = heads(out, 0, num_heads, d);
  auto const attention = scaled_dot_product_attention(heads(q, q_first, num_heads, d), heads(k, k_first, num_heads, d),
                                                      heads(v, v_first, num_heads, d), mask..., o);
  log_block(attention);  // a block of its own, written in place rather than materialized
  out_heads = attention;
  return out;
}

constexpr std::array<std::int64_t, 3> batch_order(bool batch_first) {
  return batch_first ? std::array<std::int64_t, 3>{0, 1, 2} : std::array<std::int64_t, 3>{1, 0, 2};
}

// A mask's values as floats added to the scores: a bool mask's true (masked out) as -inf.
template <int R>
Param<R> additive_mask(AnyTensor const& m, char const* what) {
  if (m.dtype() != DType::boolean) return m.to<float, R>(what);
  auto const masked = m.to<bool, R>(what);
  Param<R> f(masked.shape());
  for (std::int64_t i = 0; i < f.numel(); ++i)
    f.data()[i] = masked.data()[i] ? -std::numeric_limits<float>::infinity() : 0.f;
  return f;
}

}  // namespace detail

// A mask of nn.MultiheadAttention or nn.TransformerEncoderLayer: a host tensor of any element
// type and rank, kept as its values (checked when the forward reads it).
struct AttentionMask {
  AnyTensor values;
  template <class T, auto E>
  AttentionMask(BasicTensor<T, E, Host> const& t) : values(t) {}
};

// nn.MultiheadAttention.forward's keyword arguments, as PyTorch's. attn_mask [L, S] or
// [N * num_heads, L, S] and key_padding_mask [N, S]: bool (true: the key is masked out, as
// PyTorch's modules read it, the opposite of scaled_dot_product_attention's bool mask) or
// floating (added to the scores). is_causal: a hint that attn_mask is the causal mask, which
// PyTorch requires with it; without a padding mask or weights the causal kernel then runs
// instead of reading the mask.
struct MultiheadAttentionArgs {
  std::optional<AttentionMask> key_padding_mask = std::nullopt;
  std::optional<AttentionMask> attn_mask = std::nullopt;
  bool is_causal = false;
};

// PyTorch's need_weights=True: forward(q, k, v, sd::nn::need_weights, {...}) returns the output
// and the attention weights averaged over the heads, [N, L, S] (average_attn_weights=True).
struct NeedWeights {};
inline constexpr NeedWeights need_weights{};

// nn.Transformer.generate_square_subsequent_mask(size): the causal mask, -inf above the
// diagonal and 0 elsewhere.
inline Param<2> generate_square_subsequent_mask(std::int64_t size) {
  Param<2> m = zeros<float>(size, size);
  for (std::int64_t i = 0; i < size; ++i)
    for (std::int64_t j = i + 1; j < size; ++j) m(i, j) = -std::numeric_limits<float>::infinity();
  return m;
}

struct MultiheadAttentionOptions {
  double dropout = 0;  // attention dropout: training only
  bool bias = true;
  bool batch_first = false;  // PyTorch's default: [L, N, E]
};

// nn.MultiheadAttention(embed_dim, num_heads): in_proj_weight [3E, E], in_proj_bias [3E],
// out_proj (a Linear). forward(x) is self-attention (one fused projection); forward(q, k, v)
// projects each with its third of in_proj_weight. Each takes PyTorch's masks and is_causal
// last (MultiheadAttentionArgs), and returns the attention output (PyTorch's
// need_weights=False), or with sd::nn::need_weights before them the output and the weights.
struct MultiheadAttention : Callable<MultiheadAttention> {
  std::int64_t embed_dim, num_heads;
  MultiheadAttentionOptions options;
  bool training = false;
  Param<2> in_proj_weight;
  detail::Bias in_proj_bias;
  Linear out_proj;
  detail::Derived derived;  // in_proj_weight packed (self-attention), device copies (nn/derived.hpp)

  MultiheadAttention(std::int64_t e, std::int64_t h, MultiheadAttentionOptions o = {})
      : embed_dim(e), num_heads(h), options(o), in_proj_weight(xavier(e)),
        in_proj_bias{zeros<float>(3 * e), o.bias}, out_proj(e, e, {.bias = o.bias}) {
    solder::detail::check(h > 0 && e % h == 0, "nn::MultiheadAttention: embed_dim ", e,
                          " must be divisible by num_heads ", h);
    if (o.bias) std::fill_n(out_proj.bias.value.data(), e, 0.f);
  }

  template <Lazy X>
  auto forward(X const& x, MultiheadAttentionArgs const& a = {}) const {
    auto const order = detail::batch_order(options.batch_first);
    return permute(out_proj(self_attention(permute(materialize(x), order), a)), order);
  }
  template <Lazy X>
  auto forward(X const& x, NeedWeights, MultiheadAttentionArgs const& a = {}) const {
    auto const order = detail::batch_order(options.batch_first);
    auto [heads, weights] = self_attention<true>(permute(materialize(x), order), a);
    return std::pair(permute(out_proj(heads), order), weights);
  }
  template <Lazy Q, Lazy K, Lazy V>
  auto forward(Q const& query, K const& key, V const& value, MultiheadAttentionArgs const& a = {}) const {
    return permute(out_proj(cross_attention<false>(query, key, value, a)), detail::batch_order(options.batch_first));
  }
  template <Lazy Q, Lazy K, Lazy V>
  auto forward(Q const& query, K const& key, V const& value, NeedWeights, MultiheadAttentionArgs const& a = {}) const {
    auto [heads, weights] = cross_attention<true>(query, key, value, a);
    return std::pair(permute(out_proj(heads), detail::batch_order(options.batch_first)), weights);
  }

  // Self-attention of a batch-first [N, L, E] input (a tensor), before the output
  // projection: the fused projection, then the heads (and with Weights the weights too, as
  // attend_heads). (Tensors of the template's type, here and in TransformerEncoderLayer, so that
  // every expression depends on it: a file that includes solder.hpp without running a layer
  // then compiles none of its kernels.)
  template <bool Weights = false, class X>
  auto self_attention(X const& x, MultiheadAttentionArgs const& a = {}) const {
    check_eval();
    solder::detail::check(x.size(2) == embed_dim, "nn::MultiheadAttention(", embed_dim, ", ", num_heads,
                          "): input of shape ", shape_string<3>(x.shape()), " does not end in ", embed_dim);
    using D = device_of<X>;
    X qkv = materialize(detail::module_linear<D>(x, derived, in_proj_weight, in_proj_bias.value, training));
    return attend_heads<Weights>(qkv, 0, qkv, embed_dim, qkv, 2 * embed_dim, a);
  }

  void prepare() { derived.clear(); }
  template <class V>
  void visit(V& v) {
    v.parameter("in_proj_weight", in_proj_weight);
    if (in_proj_bias.present) v.parameter("in_proj_bias", in_proj_bias.value);
    v.child("out_proj", out_proj);
  }

 private:
  template <bool Weights, class Q, class K, class V>
  auto cross_attention(Q const& query, K const& key, V const& value, MultiheadAttentionArgs const& a) const {
    auto const order = detail::batch_order(options.batch_first);
    using D = device_of<Q>;
    auto project = [&](auto const& t, std::int64_t third) {
      return materialize(linear(permute(materialize(t), order),
                                narrow(derived.on<D>(in_proj_weight, training), 0, third * embed_dim, embed_dim),
                                narrow(derived.on<D>(in_proj_bias.value, training), 0, third * embed_dim, embed_dim)));
    };
    check_eval();
    return attend_heads<Weights>(project(query, 0), 0, project(key, 1), 0, project(value, 2), 0, a);
  }

  // The heads' attention of the projected q, k and v (batch-first [N, L|S, .] tensors, the
  // heads at column offsets) under the forward's masks: the heads side by side, [N, L, E]; with
  // Weights also the weights averaged over the heads, [N, L, S], as PyTorch's.
  template <bool Weights, class TT>
  auto attend_heads(TT const& q, std::int64_t q_first, TT const& k, std::int64_t k_first, TT const& v,
                    std::int64_t v_first, MultiheadAttentionArgs const& a) const {
    solder::detail::check(!a.is_causal || a.attn_mask, "nn::MultiheadAttention: is_causal needs attn_mask (as PyTorch: it "
                          "is a hint that attn_mask is the causal mask; sd::nn::generate_square_subsequent_mask(L) "
                          "makes one)");
    using D = typename TT::device_type;
    std::int64_t const n = q.size(0), l = q.size(1), s = k.size(1), d = embed_dim / num_heads;
    // As PyTorch: the hint alone, without a padding mask or weights, runs the causal kernel.
    bool const causal = a.is_causal && !a.key_padding_mask && !Weights;
    std::optional<BasicTensor<float, dynamic_extents<4>(), D>> mask;
    if (!causal && (a.attn_mask || a.key_padding_mask)) mask = scores_mask(a, n, l, s).template to<D>();
    TT out = mask ? detail::attend(q, q_first, k, k_first, v, v_first, embed_dim, num_heads, {}, *mask)
                  : detail::attend(q, q_first, k, k_first, v, v_first, embed_dim, num_heads, {.is_causal = causal});
    if constexpr (Weights) {
      auto scores = solder::matmul(detail::heads(q, q_first, num_heads, d),
                                   solder::transpose(detail::heads(k, k_first, num_heads, d), -2, -1)) *
                    static_cast<float>(1 / std::sqrt(static_cast<double>(d)));
      BasicTensor<float, dynamic_extents<4>(), D> per_head =
          mask ? solder::eval(solder::softmax(scores + *mask, -1)) : solder::eval(solder::softmax(scores, -1));
      BasicTensor<float, dynamic_extents<3>(), D> weights = solder::mean(per_head, 1);
      return std::pair(out, weights);
    } else {
      return out;
    }
  }
  // The masks of a forward as one float mask added to the scores, [N or 1, num_heads or 1, L,
  // S], their shapes checked as PyTorch checks them.
  Param<4> scores_mask(MultiheadAttentionArgs const& a, std::int64_t n, std::int64_t l, std::int64_t s) const {
    std::int64_t const h = num_heads;
    std::optional<Param<4>> attn, padding;
    if (a.attn_mask) {
      AnyTensor const& m = a.attn_mask->values;
      std::vector<std::int64_t> const flat{l, s}, per_head{n * h, l, s};
      solder::detail::check(m.shape() == flat || m.shape() == per_head, "nn::MultiheadAttention: attn_mask of shape ",
                            solder::detail::dims_string(m.shape()), " should be [L, S] = ",
                            solder::detail::dims_string(flat), " or [N * num_heads, L, S] = ",
                            solder::detail::dims_string(per_head));
      attn = m.rank() == 2 ? solder::view(detail::additive_mask<2>(m, "attn_mask"), {1, 1, l, s})
                           : solder::view(detail::additive_mask<3>(m, "attn_mask"), {n, h, l, s});
    }
    if (a.key_padding_mask) {
      AnyTensor const& m = a.key_padding_mask->values;
      solder::detail::check(m.shape() == std::vector<std::int64_t>{n, s}, "nn::MultiheadAttention: key_padding_mask of shape ",
                            solder::detail::dims_string(m.shape()), " should be [N, S] = [", n, ", ", s, "]");
      padding = solder::view(detail::additive_mask<2>(m, "key_padding_mask"), {n, 1, 1, s});
    }
    if (attn && padding) return solder::eval(*attn + *padding);
    return attn ? *attn : *padding;
  }
  void check_eval() const {
    solder::detail::check(!training || options.dropout == 0, "nn::MultiheadAttention(dropout=", options.dropout,
                          "): training mode is not supported yet; call sd::nn::eval(model) for inference");
  }
  static Param<2> xavier(std::int64_t e) {  // xavier_uniform_ of [3E, E]
    float const bound = static_cast<float>(std::sqrt(6.0 / static_cast<double>(e + 3 * e)));
    return rand<float>({3 * e, e}, -bound, bound);
  }
};

// nn.TransformerEncoderLayer.forward's keyword arguments, as PyTorch's (read as
// MultiheadAttentionArgs' attn_mask, key_padding_mask and is_causal).
struct TransformerEncoderLayerArgs {
  std::optional<AttentionMask> src_mask = std::nullopt;
  std::optional<AttentionMask> src_key_padding_mask = std::nullopt;
  bool is_causal = false;
};

struct TransformerEncoderLayerOptions {
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  char const* activation = "relu";  // or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

// nn.TransformerEncoderLayer(d_model, nhead): self-attention and a feed-forward network, each
// with a residual add and a LayerNorm after it (norm_first: before it). The output
// projections carry the residual adds as epilogues; each LayerNorm is a row kernel.
struct TransformerEncoderLayer : Callable<TransformerEncoderLayer> {
  TransformerEncoderLayerOptions options;
  bool use_gelu = false;
  MultiheadAttention self_attn;
  Linear linear1;
  Dropout dropout;
  Linear linear2;
  LayerNorm norm1, norm2;
  Dropout dropout1, dropout2;

  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, TransformerEncoderLayerOptions o = {})
      : options(o), use_gelu(activation_is_gelu(o.activation)),
        self_attn(d_model, nhead, {.dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first}),
        linear1(d_model, o.dim_feedforward, {.bias = o.bias}), dropout(o.dropout),
        linear2(o.dim_feedforward, d_model, {.bias = o.bias}),
        norm1(d_model, {.eps = o.layer_norm_eps, .bias = o.bias}), norm2(d_model, {.eps = o.layer_norm_eps, .bias = o.bias}),
        dropout1(o.dropout), dropout2(o.dropout) {}

  template <Lazy X>
  auto forward(X const& src, TransformerEncoderLayerArgs const& a = {}) const {
    auto const order = detail::batch_order(options.batch_first);
    using Tensor3 = BasicTensor<float, dynamic_extents<3>(), device_of<X>>;
    Tensor3 x = permute(materialize(src), order);
    for (Dropout const* d : {&dropout, &dropout1, &dropout2}) d->forward(x);  // training check
    MultiheadAttentionArgs const masks{
        .key_padding_mask = a.src_key_padding_mask, .attn_mask = a.src_mask, .is_causal = a.is_causal};
    Tensor3 const y = options.norm_first ? norm_before(x, masks) : norm_after(x, masks);
    return permute(y, order);
  }

  template <class V>
  void visit(V& v) {
    v.child("self_attn", self_attn);
    v.child("linear1", linear1);
    v.child("dropout", dropout);
    v.child("linear2", linear2);
    v.child("norm1", norm1);
    v.child("norm2", norm2);
    v.child("dropout1", dropout1);
    v.child("dropout2", dropout2);
  }

 private:
  // linear2(activation(linear1(x))): the activation in linear1's epilogue. (X: a tensor, as
  // in MultiheadAttention::self_attention.)
  template <class X>
  auto feed_forward(X const& x) const {
    X h = use_gelu ? materialize(gelu(linear1(x))) : materialize(relu(linear1(x)));
    return linear2(h);
  }
  template <class X>
  X norm_after(X const& x, MultiheadAttentionArgs const& masks) const {
    X h = materialize(norm1(x + self_attn.out_proj(self_attn.self_attention(x, masks))));
    return materialize(norm2(h + feed_forward(h)));
  }
  template <class X>
  X norm_before(X const& x, MultiheadAttentionArgs const& masks) const {
    X h = materialize(x + self_attn.out_proj(self_attn.self_attention(X(materialize(norm1(x))), masks)));
    return materialize(h + feed_forward(X(materialize(norm2(h)))));
  }
  static bool activation_is_gelu(std::string_view a) {
    solder::detail::check(a == "relu" || a == "gelu", "nn::TransformerEncoderLayer: activation must be \"relu\" or \"gelu\", got \"",
                          a, "\"");
    return a == "gelu";
  }
};

}  // namespace solder::nn
