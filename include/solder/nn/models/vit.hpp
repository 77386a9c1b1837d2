// torchvision.models.VisionTransformer (vit_b_16), with torchvision's keys (class_token,
// conv_proj.weight, encoder.layers.encoder_layer_3.self_attention.in_proj_weight,
// encoder.layers.encoder_layer_3.mlp.0.weight, heads.head.weight, ...). An encoder block is 7
// kernels: ln_1, the QKV projection, attention, the output projection with the residual add,
// ln_2, mlp.0 with its GELU, mlp.3 with the residual add.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../block.hpp"
#include "../containers.hpp"
#include "../layers.hpp"
#include "../transformer.hpp"

namespace solder::models {

struct ViTConfig {
  std::int64_t image_size = 224, patch_size = 16;
  std::int64_t num_layers = 12, num_heads = 12, hidden_dim = 768, mlp_dim = 3072;
  std::int64_t num_classes = 1000;
  double layer_norm_eps = 1e-6;
};

// torchvision's EncoderBlock: x + attention(ln_1(x)), then y + mlp(ln_2(y)).
struct EncoderBlock : nn::Callable<EncoderBlock> {
  nn::LayerNorm ln_1;
  nn::MultiheadAttention self_attention;
  nn::Dropout dropout{0};
  nn::LayerNorm ln_2;
  nn::Sequential<nn::Linear, nn::GELU, nn::Dropout, nn::Linear, nn::Dropout> mlp;

  explicit EncoderBlock(ViTConfig const& c)
      : ln_1(c.hidden_dim, {.eps = c.layer_norm_eps}),
        self_attention(c.hidden_dim, c.num_heads, {.batch_first = true}),
        ln_2(c.hidden_dim, {.eps = c.layer_norm_eps}),
        mlp{{c.hidden_dim, c.mlp_dim}, {}, {0}, {c.mlp_dim, c.hidden_dim}, {0}} {}

  template <class D>  // (a template per device: on each, compiled once)
  Tensor<float, 3, D> forward(Tensor<float, 3, D> const& x) const {
    Tensor<float, 3, D> const attended = self_attention.self_attention(nn::materialize(ln_1(x)));
    Tensor<float, 3, D> const y = nn::materialize(x + dropout(self_attention.out_proj(attended)));
    return nn::materialize(y + mlp(nn::materialize(ln_2(y))));
  }
  template <class V>
  void visit(V& v) {
    v.child("ln_1", ln_1);
    v.child("self_attention", self_attention);
    v.child("dropout", dropout);
    v.child("ln_2", ln_2);
    v.child("mlp", mlp);
  }
};

// torchvision's Encoder: positions added, the blocks, a final LayerNorm.
struct ViTEncoder {
  Tensor<float, 3> pos_embedding;
  nn::Dropout dropout{0};
  std::vector<EncoderBlock> layers;
  nn::LayerNorm ln;

  ViTEncoder(ViTConfig const& c, std::int64_t seq_length)
      : pos_embedding(randn<float>({1, seq_length, c.hidden_dim}) * 0.02f), ln(c.hidden_dim, {.eps = c.layer_norm_eps}) {
    for (std::int64_t i = 0; i < c.num_layers; ++i) layers.emplace_back(c);
  }
  template <class V>
  void visit(V& v) {
    v.parameter("pos_embedding", pos_embedding);
    v.child("dropout", dropout);
    nn::detail::Prefixed<EncoderBlock> named{"encoder_layer_", layers};  // an nn.Sequential of named blocks
    v.child("layers", named);
    v.child("ln", ln);
  }
};

struct VisionTransformer : nn::Callable<VisionTransformer> {
  ViTConfig config;
  Tensor<float, 3> class_token;
  nn::Conv2d conv_proj;
  ViTEncoder encoder;
  nn::Linear head;  // torchvision's heads.head
  bool training = false;
  nn::detail::Derived derived;  // device copies of class_token and the positions (nn/derived.hpp)

  explicit VisionTransformer(ViTConfig const& c)
      : config(c), class_token(zeros<float>(1, 1, c.hidden_dim)),
        conv_proj(3, c.hidden_dim, c.patch_size, {.stride = c.patch_size}),
        encoder(c, patches(c) + 1), head(c.hidden_dim, c.num_classes) {}

  // x [N, 3, image_size, image_size] -> logits [N, num_classes].
  template <Lazy X>
  auto forward(X const& x) const {
    auto const& s = x.shape();
    solder::detail::check(node_t<X>::rank == 4 && s[2] == config.image_size && s[3] == config.image_size,
                          "models::VisionTransformer: input of shape ", shape_string<node_t<X>::rank>(s),
                          ", expected [N, 3, ", config.image_size, ", ", config.image_size, "]");
    using D = nn::device_of<X>;
    Tensor<float, 3, D> h = tokens(Tensor<float, 4, D>(nn::materialize(x)));
    for (EncoderBlock const& block : encoder.layers) h = block(h);
    // Only the class token's row goes on: the final LayerNorm of that row, then the head.
    Tensor<float, 2, D> cls = nn::materialize(encoder.ln(squeeze(narrow(h, 1, 0, 1), 1)));
    return head(cls);
  }
  void prepare() { derived.clear(); }
  template <class V>
  void visit(V& v) {
    v.parameter("class_token", class_token);
    v.child("conv_proj", conv_proj);
    v.child("encoder", encoder);
    nn::detail::Named<nn::Linear> heads{"head", head};  // an nn.Sequential holding one named Linear
    v.child("heads", heads);
  }

 private:
  static std::int64_t patches(ViTConfig const& c) {
    solder::detail::check(c.image_size % c.patch_size == 0, "models::VisionTransformer: image_size ", c.image_size,
                          " is not a multiple of patch_size ", c.patch_size);
    return (c.image_size / c.patch_size) * (c.image_size / c.patch_size);
  }
  // [class token, patch embeddings] + positions: [N, 1 + patches, hidden_dim], the patches
  // written in place behind the class token (torch.cat's result without a copy).
  template <class D>
  Tensor<float, 3, D> tokens(Tensor<float, 4, D> const& x) const {
    std::int64_t const n = x.size(0), d = config.hidden_dim, p = patches(config);
    Tensor<float, 3, D> t(n, p + 1, d);
    auto const pos = derived.on<D>(encoder.pos_embedding, training);
    auto first = narrow(t, 1, 0, 1), rest = narrow(t, 1, 1, p);
    first = expand(derived.on<D>(class_token, training) + narrow(pos, 1, 0, 1), {n, 1, d});
    auto embedded = permute(flatten<2>(conv_proj(x)), {0, 2, 1}) + narrow(pos, 1, 1, p);
    nn::detail::log_block(embedded);
    rest = embedded;
    return t;
  }
};

inline VisionTransformer vit_b_16(ViTConfig const& c = {}) {
  VisionTransformer m(c);
  nn::eval(m);
  return m;
}

}  // namespace solder::models
