// Hugging Face transformers' BertModel, with its keys (embeddings.word_embeddings.weight,
// encoder.layer.3.attention.self.query.weight, encoder.layer.3.output.LayerNorm.bias,
// pooler.dense.weight, ...). query, key and value are loaded as three Linears and joined into
// one [3E, E] projection by prepare(), once per load. An encoder layer is 7 kernels: the QKV
// projection, attention, the output projection with the residual add, LayerNorm, the
// intermediate projection with its GELU, the output projection with the residual add,
// LayerNorm.
#pragma once
#include <cstdint>
#include <limits>

#include "../block.hpp"
#include "../containers.hpp"
#include "../layers.hpp"
#include "../transformer.hpp"

namespace solder::models {

struct BertConfig {
  std::int64_t vocab_size = 30522, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12;
  std::int64_t intermediate_size = 3072, max_position_embeddings = 512, type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  std::int64_t pad_token_id = 0;
  bool add_pooling_layer = true;
};

// last_hidden_state [N, L, hidden_size] and pooler_output [N, hidden_size] (empty without the
// pooling layer), as BaseModelOutputWithPooling.
template <class D = Host>
struct BertOutput {
  Tensor<float, 3, D> last_hidden_state;
  Tensor<float, 2, D> pooler_output;
};

struct BertEmbeddings {
  nn::Embedding word_embeddings, position_embeddings, token_type_embeddings;
  nn::LayerNorm LayerNorm;  // Hugging Face's name
  nn::Dropout dropout{0};

  explicit BertEmbeddings(BertConfig const& c)
      : word_embeddings(c.vocab_size, c.hidden_size, {.padding_idx = c.pad_token_id}),
        position_embeddings(c.max_position_embeddings, c.hidden_size),
        token_type_embeddings(c.type_vocab_size, c.hidden_size), LayerNorm(c.hidden_size, {.eps = c.layer_norm_eps}) {}

  // LayerNorm(word + token type + position): the gathers fused into one row kernel's input.
  // (Here and below, a template per device: on each, compiled once.)
  template <class D>
  Tensor<float, 3, D> forward(Tensor<std::int64_t, 2, D> const& ids, Tensor<std::int64_t, 2, D> const& types) const {
    std::int64_t const length = ids.size(1);
    solder::detail::check(length <= position_embeddings.num_embeddings, "models::BertModel: sequence length ", length,
                          " exceeds max_position_embeddings ", position_embeddings.num_embeddings);
    auto const& table = position_embeddings.derived.on<D>(position_embeddings.weight, position_embeddings.training);
    auto positions = unsqueeze(narrow(table, 0, 0, length), 0);
    return nn::materialize(LayerNorm(word_embeddings(ids) + token_type_embeddings(types) + positions));
  }
  template <class V>
  void visit(V& v) {
    v.child("word_embeddings", word_embeddings);
    v.child("position_embeddings", position_embeddings);
    v.child("token_type_embeddings", token_type_embeddings);
    v.child("LayerNorm", LayerNorm);
    v.child("dropout", dropout);
  }
};

struct BertSelfAttention {
  std::int64_t num_heads;
  nn::Linear query, key, value;
  nn::Param<2> qkv_weight;  // [query; key; value]: derived by prepare(), not state
  nn::Param<1> qkv_bias;
  bool training = false;
  nn::detail::Derived derived;  // qkv_weight packed, device copies of it and qkv_bias (nn/derived.hpp)

  BertSelfAttention(BertConfig const& c)
      : num_heads(c.num_attention_heads), query(c.hidden_size, c.hidden_size), key(c.hidden_size, c.hidden_size),
        value(c.hidden_size, c.hidden_size), qkv_weight(3 * c.hidden_size, c.hidden_size), qkv_bias(3 * c.hidden_size) {
    solder::detail::check(c.hidden_size % c.num_attention_heads == 0, "models::BertModel: hidden_size ", c.hidden_size,
                          " is not a multiple of num_attention_heads ", c.num_attention_heads);
    prepare();
  }
  void prepare() {
    std::int64_t const e = query.out_features;
    nn::Linear const* parts[] = {&query, &key, &value};
    for (std::int64_t i = 0; i < 3; ++i) {
      // (as_node: assigning an expression writes values; tensor = tensor would share storage)
      narrow(qkv_weight, 0, i * e, e) = as_node(parts[i]->weight);
      narrow(qkv_bias, 0, i * e, e) = as_node(parts[i]->bias.value);
    }
    derived.clear();
  }
  // The heads' outputs [N, L, E] before the output projection; mask [N, 1, 1, L] additive.
  template <class D>
  Tensor<float, 3, D> forward(Tensor<float, 3, D> const& x, Tensor<float, 4, D> const& mask) const {
    std::int64_t const e = query.out_features;
    Tensor<float, 3, D> qkv =
        nn::materialize(nn::detail::module_linear<D>(x, derived, qkv_weight, qkv_bias, training));
    return nn::detail::attend(qkv, 0, qkv, e, qkv, 2 * e, e, num_heads, {}, mask);
  }
  template <class V>
  void visit(V& v) {
    v.child("query", query);
    v.child("key", key);
    v.child("value", value);
  }
};

// BertSelfOutput and BertOutput: LayerNorm(dense(h) + residual).
struct BertResidualOutput {
  nn::Linear dense;
  nn::LayerNorm LayerNorm;
  nn::Dropout dropout{0};
  BertResidualOutput(std::int64_t in, std::int64_t out, double eps) : dense(in, out), LayerNorm(out, {.eps = eps}) {}
  template <class D>
  Tensor<float, 3, D> forward(Tensor<float, 3, D> const& h, Tensor<float, 3, D> const& residual) const {
    return nn::materialize(LayerNorm(dense(h) + residual));
  }
  template <class V>
  void visit(V& v) {
    v.child("dense", dense);
    v.child("LayerNorm", LayerNorm);
    v.child("dropout", dropout);
  }
};

struct BertAttention {
  BertSelfAttention self;
  BertResidualOutput output;
  explicit BertAttention(BertConfig const& c)
      : self(c), output(c.hidden_size, c.hidden_size, c.layer_norm_eps) {}
  template <class V>
  void visit(V& v) {
    v.child("self", self);
    v.child("output", output);
  }
};

struct BertIntermediate {
  nn::Linear dense;
  explicit BertIntermediate(BertConfig const& c) : dense(c.hidden_size, c.intermediate_size) {}
  template <class V>
  void visit(V& v) {
    v.child("dense", dense);
  }
};

struct BertLayer {
  BertAttention attention;
  BertIntermediate intermediate;
  BertResidualOutput output;

  explicit BertLayer(BertConfig const& c)
      : attention(c), intermediate(c), output(c.intermediate_size, c.hidden_size, c.layer_norm_eps) {}
  template <class D>
  Tensor<float, 3, D> forward(Tensor<float, 3, D> const& x, Tensor<float, 4, D> const& mask) const {
    Tensor<float, 3, D> const h = attention.output.forward(attention.self.forward(x, mask), x);
    return output.forward(nn::materialize(gelu(intermediate.dense(h))), h);
  }
  template <class V>
  void visit(V& v) {
    v.child("attention", attention);
    v.child("intermediate", intermediate);
    v.child("output", output);
  }
};

struct BertEncoder {
  nn::ModuleList<BertLayer> layer;
  template <class V>
  void visit(V& v) {
    v.child("layer", layer);
  }
};

struct BertPooler {
  nn::Linear dense;
  template <class V>
  void visit(V& v) {
    v.child("dense", dense);
  }
};

struct BertModel {
  BertConfig config;
  BertEmbeddings embeddings;
  BertEncoder encoder;
  std::optional<BertPooler> pooler;

  explicit BertModel(BertConfig const& c) : config(c), embeddings(c) {
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) encoder.layer.push_back(BertLayer(c));
    if (c.add_pooling_layer) pooler = BertPooler{nn::Linear(c.hidden_size, c.hidden_size)};
  }

  // input_ids, token_type_ids and attention_mask (1 = attend, 0 = padding), each [N, L].
  template <class D>
  BertOutput<D> forward(Tensor<std::int64_t, 2, D> const& input_ids, Tensor<std::int64_t, 2, D> const& token_type_ids,
                        Tensor<std::int64_t, 2, D> const& attention_mask) const {
    solder::detail::check(token_type_ids.shape() == input_ids.shape() && attention_mask.shape() == input_ids.shape(),
                          "models::BertModel: input_ids ", shape_string<2>(input_ids.shape()), ", token_type_ids ",
                          shape_string<2>(token_type_ids.shape()), " and attention_mask ",
                          shape_string<2>(attention_mask.shape()), " must have one shape");
    // Hugging Face's extended mask: 0 where attended, the lowest float where padded.
    Tensor<float, 4, D> const mask = nn::materialize(
        unsqueeze(unsqueeze((1.f - cast<float>(attention_mask)) * std::numeric_limits<float>::lowest(), 1), 1));
    Tensor<float, 3, D> h = embeddings.forward(input_ids, token_type_ids);
    for (BertLayer const& layer : encoder.layer) h = layer.forward(h, mask);
    BertOutput<D> out{h, {}};
    if (pooler) out.pooler_output = nn::materialize(tanh(pooler->dense(squeeze(narrow(h, 1, 0, 1), 1))));
    return out;
  }
  template <class D>
  BertOutput<D> operator()(Tensor<std::int64_t, 2, D> const& ids, Tensor<std::int64_t, 2, D> const& types,
                           Tensor<std::int64_t, 2, D> const& mask) const {
    return forward(ids, types, mask);
  }
  template <class V>
  void visit(V& v) {
    v.child("embeddings", embeddings);
    v.child("encoder", encoder);
    v.child("pooler", pooler);
  }
};

inline BertModel bert(BertConfig const& c = {}) {
  BertModel m(c);
  nn::eval(m);
  return m;
}

}  // namespace solder::models
