// sd::nn modules against PyTorch's: the fixtures of tools/make_model_fixtures.py hold each
// module's state_dict (PyTorch's keys), an input and torch.nn's output in eval mode; every
// module loads the state strictly and must match to fp32 precision (relative L2 <= 1e-5).
// Then the module protocol itself: keys, strict loading, errors, modes, kernel counts.
#include <solder/solder.hpp>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "nn_fixtures.hpp"
#include "reference.hpp"

namespace sd = solder;

namespace {

// Loads the case's PyTorch state_dict into m when its module has state; eval mode.
template <class M>
void load_case(M& m, std::string const& name) {
  if (std::filesystem::exists(fx::path(name + ".state.safetensors"))) fx::load(m, name);
  sd::nn::eval(m);
}

// Runs the module on the case's input and compares with PyTorch's output.
template <int R, class M, int RIn = R>
void check_case(M& m, std::string const& name) {
  INFO("case " << name);
  load_case(m, name);
  auto const d = fx::io(name);
  auto const x = d.at("input").to<float, RIn>("input");
  sd::Tensor<float, R> y = m(x);
  CHECK(fx::relative_l2(y, d.at("output")) <= 1e-5);
}

}  // namespace

TEST_CASE("nn modules match torch.nn in eval mode", "[nn][torch]") {
  sd::nn::Linear linear{5, 3};
  check_case<3>(linear, "linear");
  sd::nn::Linear nobias{5, 3, {.bias = false}};
  check_case<2>(nobias, "linear_nobias");
  sd::nn::Conv2d conv{3, 4, 3, {.stride = 2, .padding = 1}};
  check_case<4>(conv, "conv2d");
  sd::nn::Conv2d grouped{4, 6, 3, {.padding = 1, .groups = 2, .bias = false}};
  check_case<4>(grouped, "conv2d_groups");
  sd::nn::Conv2d depthwise{4, 4, 3, {.padding = 1, .groups = 4}};
  check_case<4>(depthwise, "conv2d_depthwise");
  sd::nn::BatchNorm2d bn{4};
  check_case<4>(bn, "batchnorm2d");
  sd::nn::LayerNorm ln{6};
  check_case<3>(ln, "layernorm");
  sd::nn::RMSNorm rms{6, {.eps = 1e-6}};
  check_case<3>(rms, "rmsnorm");
  sd::nn::MaxPool2d maxpool{3, {.stride = 2, .padding = 1}};
  check_case<4>(maxpool, "maxpool2d");
  sd::nn::AvgPool2d avgpool{2};
  check_case<4>(avgpool, "avgpool2d");
  sd::nn::AdaptiveAvgPool2d adaptive{{2, 3}};
  check_case<4>(adaptive, "adaptiveavgpool2d");
  sd::nn::ReLU relu;
  check_case<2>(relu, "relu");
  sd::nn::GELU gelu;
  check_case<2>(gelu, "gelu");
  sd::nn::GELU gelu_tanh{{.approximate = "tanh"}};
  check_case<2>(gelu_tanh, "gelu_tanh");
  sd::nn::SiLU silu;
  check_case<2>(silu, "silu");
  sd::nn::Tanh tanh_;
  check_case<2>(tanh_, "tanh");
  sd::nn::Sigmoid sigmoid;
  check_case<2>(sigmoid, "sigmoid");
  sd::nn::Flatten flatten;
  check_case<2, sd::nn::Flatten, 4>(flatten, "flatten");
  sd::nn::MultiheadAttention self_attention{8, 2, {.batch_first = true}};
  check_case<3>(self_attention, "mha_self");
  sd::nn::TransformerEncoderLayer post{8, 2, {.dim_feedforward = 16, .dropout = 0, .batch_first = true}};
  check_case<3>(post, "encoder_layer");
  sd::nn::TransformerEncoderLayer pre{
      8, 2, {.dim_feedforward = 16, .dropout = 0, .activation = "gelu", .batch_first = true, .norm_first = true}};
  check_case<3>(pre, "encoder_layer_normfirst_gelu");
}

TEST_CASE("nn::Sequential matches torch.nn.Sequential", "[nn][torch]") {
  sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU, sd::nn::MaxPool2d, sd::nn::Flatten, sd::nn::Linear>
      seq{{3, 8, 3}, {8}, {}, {2}, {}, {72, 4}};
  check_case<2, decltype(seq), 4>(seq, "sequential");
}

TEST_CASE("nn::Embedding and cross-attention match torch.nn", "[nn][torch]") {
  sd::nn::Embedding emb{10, 4};
  load_case(emb, "embedding");
  auto d = fx::io("embedding");
  sd::Tensor<float, 3> y = emb(d.at("input").to<std::int64_t, 2>("input"));
  CHECK(fx::relative_l2(y, d.at("output")) <= 1e-5);

  sd::nn::MultiheadAttention mha{8, 2, {.batch_first = true}};
  load_case(mha, "mha");
  d = fx::io("mha");
  auto in = [&](char const* k) { return d.at(k).to<float, 3>(k); };
  sd::Tensor<float, 3> a = mha(in("input0"), in("input1"), in("input2"));
  CHECK(fx::relative_l2(a, d.at("output")) <= 1e-5);
}

TEST_CASE("nn: batch_first = false takes [L, N, E] as PyTorch's default", "[nn]") {
  sd::nn::MultiheadAttention first{8, 2, {.batch_first = true}};
  load_case(first, "mha_self");
  sd::nn::MultiheadAttention seq_first{8, 2};
  sd::nn::load_state_dict(seq_first, sd::nn::state_dict(first));
  auto const x = fx::io("mha_self").at("input").to<float, 3>("input");  // [N, L, E]
  sd::Tensor<float, 3> want = first(x);
  sd::Tensor<float, 3> got = seq_first(sd::transpose(x, 0, 1));
  REQUIRE(got.shape() == sd::Index<3>{5, 2, 8});
  auto const w = sd::to_vector(want), g = sd::to_vector(sd::Tensor<float, 3>(sd::transpose(got, 0, 1)));
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(g[i] == Approx(w[i]).margin(1e-6));
}

namespace {

struct Block {
  sd::nn::Conv2d conv{3, 8, 3, {.padding = 1, .bias = false}};
  sd::nn::BatchNorm2d bn{8};
  sd::Tensor<float, 1> scale = sd::ones<float>(8);
};
struct Net {
  sd::nn::Sequential<sd::nn::Linear, sd::nn::ReLU> head{{4, 2}, {}};
  Block block;
  std::optional<sd::nn::Linear> extra;
  int not_state = 3;
};

}  // namespace
SOLDER_MODULE(Block, conv, bn, scale);
SOLDER_MODULE(Net, head, block, extra, not_state);

TEST_CASE("nn: state_dict keys and order are PyTorch's", "[nn]") {
  Net net;
  auto keys = sd::nn::state_dict(net).keys();
  std::vector<std::string> const want = {"head.0.weight", "head.0.bias", "block.scale", "block.conv.weight",
                                         "block.bn.weight", "block.bn.bias", "block.bn.running_mean",
                                         "block.bn.running_var", "block.bn.num_batches_tracked"};
  CHECK(keys == want);  // own tensors before children's, as PyTorch
  net.extra.emplace(2, 2);
  CHECK(sd::nn::state_dict(net).size() == want.size() + 2);
  CHECK(sd::nn::named_parameters(net).size() == 8);
  CHECK(sd::nn::named_buffers(net).size() == 3);
  CHECK(sd::nn::parameters(net)[0].shape() == std::vector<std::int64_t>{2, 4});
}

TEST_CASE("nn: load_state_dict checks everything before it writes anything", "[nn][errors]") {
  Net a, b;
  auto dict = sd::nn::state_dict(a);
  sd::nn::load_state_dict(b, dict);
  CHECK(sd::to_vector(b.block.conv.weight) == sd::to_vector(a.block.conv.weight));

  Net c;
  auto const before = sd::to_vector(c.block.conv.weight);
  sd::nn::StateDict partial;
  for (auto const& [k, t] : dict)
    if (k != "head.0.bias") partial.insert(k, t);
  partial.insert("head.9.weight", dict.at("head.0.weight"));
  auto msg = ref::error_message([&] { sd::nn::load_state_dict(c, partial); });
  CHECK(ref::contains(msg, "missing key(s): \"head.0.bias\""));
  CHECK(ref::contains(msg, "unexpected key(s): \"head.9.weight\""));
  CHECK(sd::to_vector(c.block.conv.weight) == before);  // nothing written
  auto r = sd::nn::load_state_dict(c, partial, {.strict = false});
  CHECK(r.missing_keys == std::vector<std::string>{"head.0.bias"});
  CHECK(r.unexpected_keys == std::vector<std::string>{"head.9.weight"});
  CHECK(sd::to_vector(c.block.conv.weight) == sd::to_vector(a.block.conv.weight));

  sd::nn::StateDict wrong;
  for (auto const& [k, t] : dict) wrong.insert(k, k == "block.conv.weight" ? sd::AnyTensor(sd::zeros<float>(8, 3, 5, 5)) : t);
  CHECK(ref::contains(ref::error_message([&] { sd::nn::load_state_dict(c, wrong); }),
                 "size mismatch for block.conv.weight: the file has shape [8, 3, 5, 5], the module has [8, 3, 3, 3]"));
  sd::nn::StateDict ints;
  for (auto const& [k, t] : dict) ints.insert(k, k == "block.scale" ? sd::AnyTensor(sd::zeros<std::int64_t>(8)) : t);
  CHECK(ref::contains(ref::error_message([&] { sd::nn::load_state_dict(c, ints); }),
                 "'block.scale': an int64 tensor cannot be loaded into a float32 tensor"));
}

TEST_CASE("nn: BatchNorm2d folds its statistics once; training uses the batch's", "[nn]") {
  sd::nn::BatchNorm2d bn{3};
  for (int c = 0; c < 3; ++c) {
    bn.running_mean.data()[c] = 0.5f * c;
    bn.running_var.data()[c] = 1.f + c;
    bn.weight.data()[c] = 2.f - c;
    bn.bias.data()[c] = 0.25f;
  }
  auto x = sd::randn<float>({4, 3, 5, 5});
  sd::Tensor<float, 4> stale = bn(x);  // the fold still has the old statistics
  CHECK(stale(0, 1, 0, 0) == Approx(x(0, 1, 0, 0)));
  sd::nn::eval(bn);  // refolds
  sd::Tensor<float, 4> y = bn(x);
  for (int c = 0; c < 3; ++c)
    CHECK(y(1, c, 2, 3) == Approx((x(1, c, 2, 3) - 0.5 * c) / std::sqrt(1.0 + c + 1e-5) * (2 - c) + 0.25).epsilon(1e-6));

  sd::nn::train(bn);
  sd::Tensor<float, 4> t = bn(x);
  std::vector<double> v;
  for (int n = 0; n < 4; ++n)
    for (int h = 0; h < 5; ++h)
      for (int w = 0; w < 5; ++w) v.push_back(x(n, 1, h, w));
  double const mean = ref::fmean(v), var = ref::fvar(0)(v);
  CHECK(t(2, 1, 4, 0) == Approx((x(2, 1, 4, 0) - mean) / std::sqrt(var + 1e-5) * 1 + 0.25).epsilon(1e-5));
  CHECK(bn.running_mean.data()[1] == Approx(0.9 * 0.5 + 0.1 * mean).epsilon(1e-6));
  CHECK(bn.running_var.data()[1] == Approx(0.9 * 2 + 0.1 * ref::fvar(1)(v)).epsilon(1e-6));
  CHECK(bn.num_batches_tracked.data()[0] == 1);
}

TEST_CASE("nn: Linear and Conv2d pack their weights once in eval mode, again when they change", "[nn]") {
  auto x = sd::randn<float>({40, 300});  // 40 rows: the GEMM engine's blocked path, which reads a packed weight
  sd::nn::Linear fc{300, 70};
  auto unpacked = [&] { return sd::to_vector(sd::Tensor<float, 2>(sd::linear(x, fc.weight, fc.bias.value))); };
  CHECK_FALSE(fc.derived.holds_pack());
  sd::Tensor<float, 2> y = fc(x);
  CHECK(fc.derived.holds_pack());
  CHECK(sd::to_vector(y) == unpacked());  // the same bits as packing on the call
  y = fc(x);
  CHECK(sd::to_vector(y) == unpacked());

  sd::nn::Linear other{300, 70};  // new values through load_state_dict: the packed copy is dropped
  sd::nn::load_state_dict(fc, sd::nn::state_dict(other));
  CHECK_FALSE(fc.derived.holds_pack());
  y = fc(x);
  CHECK(sd::to_vector(y) == unpacked());
  fc.weight = fc.weight.clone();  // rebound to other storage: packed again
  fc.weight.data()[0] += 1;
  y = fc(x);
  CHECK(sd::to_vector(y) == unpacked());

  sd::nn::train(fc);  // the weights change between calls in training: nothing is kept
  CHECK_FALSE(fc.derived.holds_pack());
  y = fc(x);
  CHECK_FALSE(fc.derived.holds_pack());
  CHECK(sd::to_vector(y) == unpacked());
  sd::nn::eval(fc);

  sd::nn::Linear copy = fc;  // a copy packs its own
  y = copy(x);
  CHECK_FALSE(fc.derived.holds_pack());
  CHECK(copy.derived.holds_pack());

  auto images = sd::randn<float>({2, 16, 10, 10});
  sd::nn::Conv2d three{16, 32, 3, {.padding = 1}}, pointwise{16, 24, 1}, grouped{16, 48, 3, {.groups = 2}};
  for (sd::nn::Conv2d* conv : {&three, &pointwise, &grouped}) {
    INFO("groups " << conv->options.groups << ", kernel " << conv->kernel_size.h);
    auto const expected = sd::to_vector(sd::Tensor<float, 4>(sd::conv2d(images, conv->weight, conv->bias.value, conv->options)));
    sd::Tensor<float, 4> once = (*conv)(images), again = (*conv)(images);
    CHECK(conv->derived.holds_pack());
    CHECK(sd::to_vector(once) == expected);
    CHECK(sd::to_vector(again) == expected);
  }
}

TEST_CASE("nn: errors name the layer and both shapes", "[nn][errors]") {
  sd::nn::Linear decoder{64, 10};
  auto big = sd::zeros<float>(2, 64 * 7 * 7);
  CHECK(ref::contains(ref::error_message([&] { sd::Tensor<float, 2> y = decoder(big); }),
                 "nn::Linear(in_features=64, out_features=10): input of shape [2, 3136] does not end in 64"));
  sd::nn::Conv2d conv{3, 8, 3};
  CHECK(ref::contains(ref::error_message([&] { sd::Tensor<float, 4> y = conv(sd::zeros<float>(1, 4, 8, 8)); }),
                 "nn::Conv2d(3, 8): input of shape [1, 4, 8, 8] has 4 channels, expected 3"));
  sd::nn::Dropout drop{0.1};
  sd::nn::train(drop);
  CHECK(ref::contains(ref::error_message([&] { sd::Tensor<float, 2> y = drop(big); }), "training mode is not supported yet"));
  CHECK(ref::contains(ref::error_message([] { sd::nn::GELU g{{.approximate = "fast"}}; }), "approximate must be"));
}

TEST_CASE("nn: element-wise modules fuse into the block before them", "[nn][plan]") {
  sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU> block{{3, 8, 3}, {8}, {}};
  auto x = sd::rand<float>({2, 3, 10, 10});
  auto e = block(x);
  static_assert(sd::kernel_count<decltype(e)> == 1);
  auto const before = sd::detail::kernels_run();
  sd::Tensor<float, 4> y = e;
  CHECK(sd::detail::kernels_run() - before == 1);

  sd::nn::TransformerEncoderLayer layer{16, 4, {.dim_feedforward = 32, .dropout = 0, .batch_first = true}};
  auto h = sd::rand<float>({2, 6, 16});
  auto const plan = sd::explain(layer, h);
  CHECK(ref::contains(plan, "solder forward: "));
  auto const start = sd::detail::kernels_run();
  sd::Tensor<float, 3> out = layer(h);
  // QKV projection, attention, output projection + residual, LayerNorm, linear1 + relu,
  // linear2 + residual, LayerNorm.
  auto const fused = sd::detail::kernels_run() - start;
  CHECK(fused <= 7);
  CHECK(ref::contains(plan, "solder forward: " + std::to_string(fused) + " kernels"));

  // The eager baseline: the same maths, a kernel per node.
  auto const eager_start = sd::detail::kernels_run();
  sd::Tensor<float, 3> slow = sd::eager(layer, h);
  CHECK(sd::detail::kernels_run() - eager_start > fused + 5);
  auto const a = sd::to_vector(out), b = sd::to_vector(slow);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-5));
}
