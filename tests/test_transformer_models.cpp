// sd::models::vit_b_16 against torchvision's VisionTransformer and sd::models::bert against
// Hugging Face's BertModel: the full-size state_dict layouts (tests/fixtures/nn/keys.txt), small
// models' outputs (relative L2 <= 1e-5) and the kernels of one encoder layer.
#include <solder/solder.hpp>
#include <solder/nn/models/bert.hpp>
#include <solder/nn/models/vit.hpp>

#include <catch2/catch.hpp>
#include <string>

#include "nn_fixtures.hpp"
#include "reference.hpp"

namespace sd = solder;

namespace {

sd::models::ViTConfig const vit_small{.image_size = 32, .patch_size = 8, .num_layers = 2, .num_heads = 2,
                                      .hidden_dim = 16, .mlp_dim = 32, .num_classes = 10};
sd::models::BertConfig const bert_small{.vocab_size = 50, .hidden_size = 16, .num_hidden_layers = 2,
                                        .num_attention_heads = 2, .intermediate_size = 32,
                                        .max_position_embeddings = 32};

}  // namespace

TEST_CASE("models: ViT-B/16 and BERT-base have PyTorch's state_dicts", "[models]") {
  auto const want = fx::reference_layouts();
  CHECK(fx::first_difference(fx::layout(sd::models::vit_b_16()), want.at("vit_b_16")) == "");
  CHECK(fx::first_difference(fx::layout(sd::models::bert()), want.at("bert")) == "");
}

TEST_CASE("models: ViT and BERT match torchvision and Hugging Face", "[models][torch]") {
  auto vit = sd::models::vit_b_16(vit_small);
  fx::load(vit, "vit_small");
  auto io = fx::io("vit_small");
  auto const image = io.at("input").to<float, 4>("input");
  sd::Tensor<float, 2> logits = vit(image);
  CHECK(fx::relative_l2(logits, io.at("output")) <= 1e-5);
  // Each block: ln_1, QKV projection, attention, out_proj + residual, ln_2, mlp.0 + GELU,
  // mlp.3 + residual.
  std::uint64_t const planned = fx::planned_kernels(sd::explain(vit, image));
  CHECK(planned == 2 + 2 * 7 + 2);  // patches and positions, the blocks, ln and head

  auto bert = sd::models::bert(bert_small);
  fx::load(bert, "bert_small");
  io = fx::io("bert_small");
  auto in = [&](char const* k) { return io.at(k).to<std::int64_t, 2>(k); };
  auto const out = bert(in("input0"), in("input1"), in("input2"));
  CHECK(fx::relative_l2(out.last_hidden_state, io.at("output")) <= 1e-5);
  CHECK(fx::relative_l2(out.pooler_output, io.at("pooled")) <= 1e-5);
}

TEST_CASE("models: a BERT encoder layer is at most 8 kernels", "[models][plan]") {
  auto bert = sd::models::bert(bert_small);
  auto h = sd::randn<float>({2, 7, 16});
  sd::Tensor<float, 4> mask = sd::zeros<float>(2, 1, 1, 7);
  auto const before = sd::detail::kernels_run();
  sd::Tensor<float, 3> y = bert.encoder.layer[0].forward(h, mask);
  // QKV projection, attention, output dense + residual, LayerNorm, intermediate + GELU,
  // output dense + residual, LayerNorm.
  CHECK(sd::detail::kernels_run() - before == 7);
  CHECK(ref::contains(ref::error_message([&] { bert(sd::zeros<std::int64_t>(1, 40), sd::zeros<std::int64_t>(1, 40),
                                                    sd::ones<std::int64_t>(1, 40)); }),
                      "sequence length 40 exceeds max_position_embeddings 32"));
}
