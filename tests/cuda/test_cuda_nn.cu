// sd::nn modules and sd::models on sd::Cuda tensors (nn/derived.hpp: parameters on the host,
// device copies made on first use) against the same module's forward on the host, whose
// results tests/test_nn.cpp and tests/test_models.cpp hold to PyTorch's: relative L2 within
// 1e-5 (float sums in another order: cuBLAS, cuDNN and the GPU's reductions). Then the copies
// themselves: made once, dropped by load_state_dict and eval, made again when a parameter is
// rebound.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include <cmath>
#include <cstdint>

#include <solder/nn/models/alexnet.hpp>
#include <solder/nn/models/bert.hpp>
#include <solder/nn/models/mlp.hpp>
#include <solder/nn/models/mobilenet.hpp>
#include <solder/nn/models/resnet.hpp>
#include <solder/nn/models/vit.hpp>

#include "compare.hpp"

namespace {

// ||device - host|| / ||host||.
template <class Dv, class Hv>
double relative_l2(Dv const& device, Hv const& host) {
  auto d = sd::to_vector(device);
  auto h = sd::to_vector(host);
  REQUIRE(d.size() == h.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    double const hv = static_cast<double>(h[i]);
    diff += (static_cast<double>(d[i]) - hv) * (static_cast<double>(d[i]) - hv);
    norm += hv * hv;
  }
  return std::sqrt(diff / (norm > 0 ? norm : 1));
}

// The module's forward on x on the host and on the GPU, compared.
template <int R, class M, class X>
void same_on_both(M const& m, X const& x, double bound = 1e-5) {
  using Out = decltype(sd::nn::materialize(m(x)));
  Out const host = sd::nn::materialize(m(x));
  auto const device = sd::nn::materialize(m(x.template to<sd::Cuda>()));
  static_assert(std::is_same_v<typename decltype(device)::device_type, sd::Cuda>);
  CHECK(relative_l2(device, host) <= bound);
}

}  // namespace

TEST_CASE("cuda nn: layers on the GPU match their host forward", "[gpu][nn]") {
  auto const x = sd::randn<float>({4, 7, 24});
  same_on_both<3>(sd::nn::Linear{24, 40}, x);
  same_on_both<3>(sd::nn::LayerNorm{24}, x);
  same_on_both<3>(sd::nn::RMSNorm{24}, x);
  sd::nn::Sequential<sd::nn::Linear, sd::nn::GELU, sd::nn::Linear> ffn{{24, 48}, {}, {48, 24}};
  same_on_both<3>(ffn, x);

  auto const images = sd::randn<float>({2, 8, 14, 14});
  sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU, sd::nn::MaxPool2d> block{
      {8, 16, 3, {.padding = 1}}, {16}, {}, {2}};
  for (int c = 0; c < 16; ++c) {  // statistics other than the identity's
    block.get<1>().running_mean.data()[c] = 0.1f * c;
    block.get<1>().running_var.data()[c] = 1.f + 0.05f * c;
  }
  sd::nn::eval(block);
  same_on_both<4>(block, images);
  same_on_both<4>(sd::nn::Conv2d{8, 8, 3, {.padding = 1, .groups = 8}}, images);
  same_on_both<4>(sd::nn::AvgPool2d{3, {.stride = 2, .padding = 1}}, images);
  same_on_both<4>(sd::nn::AdaptiveAvgPool2d{3}, images);

  sd::nn::Embedding table{50, 12, {.padding_idx = 0}};
  auto const ids = sd::from_vector(std::vector<std::int64_t>{0, 3, 49, 7, 7, 1}, sd::shape(2, 3));
  same_on_both<3>(table, ids);
}

TEST_CASE("cuda nn: attention modules on the GPU match their host forward", "[gpu][nn]") {
  auto const x = sd::randn<float>({5, 3, 32});  // [L, N, E]: batch_first = false, PyTorch's default
  sd::nn::MultiheadAttention attention{32, 4};
  same_on_both<3>(attention, x);
  for (bool norm_first : {false, true}) {
    sd::nn::TransformerEncoderLayer layer{32, 4, {.dim_feedforward = 64, .activation = "gelu", .norm_first = norm_first}};
    sd::nn::eval(layer);
    same_on_both<3>(layer, x);
  }
}

TEST_CASE("cuda nn: models on the GPU match their host forward", "[gpu][models]") {
  same_on_both<2>(sd::models::mlp({.in_channels = 12, .hidden_channels = {16, 8, 5}}), sd::randn<float>({3, 12}));
  same_on_both<2>(sd::models::alexnet({.widths = {8, 16, 16, 16, 16}, .hidden = 32, .num_classes = 10}),
                  sd::randn<float>({2, 3, 64, 64}));
  same_on_both<2>(sd::models::resnet18({.widths = {8, 16, 32, 64}, .num_classes = 10}), sd::randn<float>({2, 3, 32, 32}));
  same_on_both<2>(sd::models::resnet50({.layers = {1, 2, 1, 1}, .widths = {8, 16, 32, 64}, .num_classes = 10}),
                  sd::randn<float>({1, 3, 64, 64}));
  same_on_both<2>(sd::models::mobilenet_v2({.num_classes = 10, .width_mult = 0.25}), sd::randn<float>({1, 3, 32, 32}));
  same_on_both<2>(sd::models::vit_b_16({.image_size = 32, .patch_size = 8, .num_layers = 2, .num_heads = 2,
                                        .hidden_dim = 16, .mlp_dim = 32, .num_classes = 10}),
                  sd::randn<float>({2, 3, 32, 32}));

  auto const bert = sd::models::bert({.vocab_size = 50, .hidden_size = 16, .num_hidden_layers = 2,
                                      .num_attention_heads = 2, .intermediate_size = 32, .max_position_embeddings = 32});
  auto const ids = sd::from_vector(std::vector<std::int64_t>{1, 5, 9, 49, 2, 2, 7, 0}, sd::shape(2, 4));
  auto const types = sd::from_vector(std::vector<std::int64_t>{0, 0, 1, 1, 0, 0, 0, 0}, sd::shape(2, 4));
  auto const mask = sd::from_vector(std::vector<std::int64_t>{1, 1, 1, 1, 1, 1, 1, 0}, sd::shape(2, 4));
  auto const host = bert(ids, types, mask);
  auto const device = bert(ids.to<sd::Cuda>(), types.to<sd::Cuda>(), mask.to<sd::Cuda>());
  CHECK(relative_l2(device.last_hidden_state, host.last_hidden_state) <= 1e-5);
  CHECK(relative_l2(device.pooler_output, host.pooler_output) <= 1e-5);
}

TEST_CASE("cuda nn: device copies are made once and follow the parameters", "[gpu][nn]") {
  sd::nn::Linear fc{16, 8};
  auto const x = sd::randn<float>({3, 16}).to<sd::Cuda>();
  sd::Tensor<float, 2, sd::Cuda> y = fc(x);
  CHECK(fc.derived.device_copies() == 2);  // weight and bias
  y = fc(x);
  CHECK(fc.derived.device_copies() == 2);

  sd::nn::Linear other{16, 8};  // new values through load_state_dict: copied again
  sd::nn::load_state_dict(fc, sd::nn::state_dict(other));
  CHECK(fc.derived.device_copies() == 0);
  y = fc(x);
  CHECK(relative_l2(y, sd::Tensor<float, 2>(other(x.to<sd::Host>()))) <= 1e-6);

  fc.weight = fc.weight.clone();  // rebound to other storage: copied again
  fc.weight.data()[0] += 1;
  y = fc(x);
  CHECK(relative_l2(y, sd::Tensor<float, 2>(fc(x.to<sd::Host>()))) <= 1e-6);
  CHECK(fc.derived.device_copies() == 2);

  sd::nn::train(fc);  // training: nothing kept
  CHECK(fc.derived.device_copies() == 0);
  y = fc(x);
  CHECK(fc.derived.device_copies() == 0);
}
