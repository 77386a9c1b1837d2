// sd::models against torchvision: the full-size models' state_dict layout (keys, order, dtypes,
// shapes) against tests/fixtures/nn/keys.txt, and small models' outputs against PyTorch's
// (tests/fixtures/nn/<case>.{state,io}.safetensors, tools/make_model_fixtures.py: relative L2
// <= 1e-5); then the kernels a forward runs, and the errors of a wrong input.
#include <solder/solder.hpp>
#include <solder/nn/models/alexnet.hpp>
#include <solder/nn/models/mlp.hpp>
#include <solder/nn/models/mobilenet.hpp>
#include <solder/nn/models/resnet.hpp>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "nn_fixtures.hpp"
#include "reference.hpp"

namespace sd = solder;

namespace {

// Loads <name>'s PyTorch state_dict, runs its input and returns ||y - ref|| / ||ref||.
template <int R, class M>
double relative_error(M& m, std::string const& name) {
  fx::load(m, name);
  auto const io = fx::io(name);
  sd::Tensor<float, 2> const y = m(io.at("input").to<float, R>("input"));
  return fx::relative_l2(y, io.at("output"));
}

// The kernels of a forward as sd::explain plans them ("solder forward: N kernels ..."), checked
// against those a forward runs.
template <class M, class X>
std::uint64_t kernels(M const& m, X const& x) {
  std::uint64_t const planned = fx::planned_kernels(sd::explain(m, x));
  std::uint64_t const before = sd::detail::kernels_run();
  sd::Tensor<float, 2> const y = m(x);
  CHECK(sd::detail::kernels_run() - before == planned);
  return planned;
}

sd::models::AlexNetConfig const alexnet_small{.widths = {8, 16, 16, 16, 16}, .hidden = 32, .num_classes = 10};
sd::models::ResNetConfig const resnet_small{.widths = {8, 16, 32, 64}, .num_classes = 10};
sd::models::MobileNetV2Config const mobilenet_v2_small{
    .num_classes = 10, .width_mult = 0.25, .inverted_residual_setting = {{1, 8, 1, 1}, {6, 12, 2, 2}, {6, 16, 2, 2}, {6, 24, 1, 1}}};

}  // namespace

TEST_CASE("models: state_dicts are torchvision's (keys, order, dtypes, shapes)", "[models]") {
  auto const want = fx::reference_layouts();
  auto check = [&](std::string const& name, auto const& model) {
    INFO("model " << name);
    REQUIRE(want.count(name));
    CHECK(fx::first_difference(fx::layout(model), want.at(name)) == "");
  };
  check("mlp", sd::models::mlp({.in_channels = 784, .hidden_channels = {256, 10}}));
  check("alexnet", sd::models::alexnet());
  check("resnet18", sd::models::resnet18());
  check("resnet34", sd::models::resnet34());
  check("resnet50", sd::models::resnet50());
  check("mobilenet_v2", sd::models::mobilenet_v2());
}

TEST_CASE("models: outputs match torchvision's in eval mode", "[models][torch]") {
  auto mlp = sd::models::mlp({.in_channels = 12, .hidden_channels = {16, 8, 5}});
  CHECK(relative_error<2>(mlp, "mlp") <= 1e-5);
  auto alexnet = sd::models::alexnet(alexnet_small);
  CHECK(relative_error<4>(alexnet, "alexnet_small") <= 1e-5);
  auto resnet18 = sd::models::resnet18(resnet_small);
  CHECK(relative_error<4>(resnet18, "resnet18_small") <= 1e-5);
  sd::models::ResNetConfig c50 = resnet_small;
  c50.layers = {1, 2, 1, 1};
  auto resnet50 = sd::models::resnet50(c50);
  CHECK(relative_error<4>(resnet50, "resnet50_small") <= 1e-5);
  auto mobilenet = sd::models::mobilenet_v2(mobilenet_v2_small);
  CHECK(relative_error<4>(mobilenet, "mobilenet_v2_small") <= 1e-5);
}

TEST_CASE("models: one kernel per layer, everything element-wise in its epilogue", "[models][plan]") {
  // Hidden layers with their ReLU, then the last Linear.
  CHECK(kernels(sd::models::mlp({.in_channels = 12, .hidden_channels = {16, 8, 5}}), sd::rand<float>({3, 12})) == 3);
  // 5 convolutions with ReLU, 3 max pools, the average pool, 3 Linear.
  CHECK(kernels(sd::models::alexnet(alexnet_small), sd::rand<float>({1, 3, 64, 64})) == 12);
  // Convolutions with BN, ReLU and residual add (stem, 2 per block, 3 downsamples), max pool,
  // average pool, fc.
  CHECK(kernels(sd::models::resnet18(resnet_small), sd::rand<float>({1, 3, 32, 32})) == 1 + 16 + 3 + 3);
  // As ResNet-50's full depth: 53 convolutions (3 per block, 4 downsamples, the stem) + 3.
  sd::models::ResNetConfig c50 = resnet_small;
  c50.layers = {3, 4, 6, 3};
  CHECK(kernels(sd::models::resnet50(c50), sd::rand<float>({1, 3, 64, 64})) == 1 + 48 + 4 + 3);
  // The default MobileNetV2: stem, 2 + 16 * 3 block convolutions, last 1x1 convolution, average
  // pool, classifier.
  CHECK(kernels(sd::models::mobilenet_v2(), sd::rand<float>({1, 3, 32, 32})) == 1 + 50 + 1 + 2);
}

TEST_CASE("models: a wrong input names the layer and the shapes", "[models][errors]") {
  auto mlp = sd::models::mlp({.in_channels = 12, .hidden_channels = {16, 8, 5}});
  CHECK(ref::contains(ref::error_message([&] { sd::Tensor<float, 2> y = mlp(sd::zeros<float>(3, 11)); }),
                      "nn::Linear(in_features=12, out_features=16): input of shape [3, 11] does not end in 12 "
                      "features (weight of shape [16, 12])"));
  auto resnet = sd::models::resnet18(resnet_small);
  CHECK(ref::contains(ref::error_message([&] { sd::Tensor<float, 2> y = resnet(sd::zeros<float>(1, 1, 32, 32)); }),
                      "nn::Conv2d(3, 8): input of shape [1, 1, 32, 32] has 1 channels, expected 3 (weight of "
                      "shape [8, 3, 7, 7])"));
}
