// BatchNorm2d in training mode after a convolution: 2 kernels (the convolution once, its
// channel sums in its epilogue; then the normalization and the ReLU), the output against a
// double reference of PyTorch's formula and against PyTorch's own (fixtures: NCHW and
// channels-last, grouped and strided, two steps of the running statistics), the statistics'
// accuracy where the mean dwarfs the spread, and the forward run from several threads at once on
// one module (the batch's output, scale and shift are each call's own; the running statistics
// are updated under a lock).
#include <solder/nn/models/resnet.hpp>

#include "nn_fixtures.hpp"
#include "reference.hpp"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace sd = solder;

namespace {

// relu(batch_norm(conv2d(x, w, b))) of PyTorch in double, with bn's weight 1 and bias 0 (its
// initial affine parameters): each channel normalized by the batch's mean and biased variance.
std::vector<double> conv_bn_relu(sd::Tensor<float, 4> const& x, sd::nn::Conv2d const& conv, double eps) {
  auto const y = sd::Tensor<float, 4>(sd::conv2d(x, conv.weight, conv.bias.value, {.padding = 1}));
  ref::Array Y = ref::of(y);  // (the convolution itself is checked by test_conv)
  std::int64_t const N = y.size(0), C = y.size(1), HW = y.size(2) * y.size(3);
  std::vector<double> out(static_cast<std::size_t>(N * C * HW));
  for (std::int64_t c = 0; c < C; ++c) {
    double s = 0, ss = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) s += Y.v[static_cast<std::size_t>((n * C + c) * HW + i)];
    double const mean = s / double(N * HW);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) {
        double const d = Y.v[static_cast<std::size_t>((n * C + c) * HW + i)] - mean;
        ss += d * d;
      }
    double const var = ss / double(N * HW);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) {
        std::size_t const k = static_cast<std::size_t>((n * C + c) * HW + i);
        out[k] = std::max(0.0, (Y.v[k] - mean) / std::sqrt(var + eps));
      }
  }
  return out;
}

}  // namespace

TEST_CASE("BatchNorm2d training: conv + bn + relu against PyTorch's formula", "[nn][batchnorm]") {
  sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU> block{{3, 8, 3, {.padding = 1}}, {8}, {}};
  sd::nn::train(block);
  auto x = ref::uniform<float>(-1, 1, 4, 3, 9, 9);
  auto const expected = conv_bn_relu(x, std::get<0>(block.modules), 1e-5);
  auto const before = sd::detail::kernels_run();
  sd::Tensor<float, 4> y = block(x);
  // The convolution, its output stored and its channel sums folded in its epilogue; then the
  // normalization and the ReLU over that output. (Was 7, the convolution computed three times,
  // then 6, computed twice.)
  CHECK(sd::detail::kernels_run() - before == 2);
  auto const got = sd::to_vector(y);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expected[i]).margin(2e-5));
  auto const& bn = std::get<1>(block.modules);
  CHECK(bn.num_batches_tracked.data()[0] == 1);
}

TEST_CASE("BatchNorm2d training: one module's forward from several threads", "[nn][batchnorm][threads]") {
  sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU> block{{3, 8, 3, {.padding = 1}}, {8}, {}};
  sd::nn::train(block);
  constexpr int threads = 4, calls = 6;
  std::vector<sd::Tensor<float, 4>> inputs;
  std::vector<std::vector<double>> expected;
  for (int t = 0; t < threads; ++t) {
    // Each thread its own batch, of its own scale: a forward that read another call's scale
    // and shift would be far off.
    inputs.push_back(sd::Tensor<float, 4>(ref::uniform<float>(-1, 1, 2, 3, 7, 7) * float(1 + 3 * t)));
    expected.push_back(conv_bn_relu(inputs.back(), std::get<0>(block.modules), 1e-5));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      sd::set_num_threads(1);
      for (int c = 0; c < calls; ++c) {
        sd::Tensor<float, 4> y = block(inputs[static_cast<std::size_t>(t)]);
        auto const got = sd::to_vector(y);
        auto const& want = expected[static_cast<std::size_t>(t)];
        for (std::size_t i = 0; i < got.size(); ++i)
          if (std::abs(got[i] - want[i]) > 2e-5 * (1 + std::abs(want[i]))) {
            ++wrong;
            break;
          }
      }
    });
  for (auto& th : pool) th.join();
  CHECK(wrong == 0);
  CHECK(std::get<1>(block.modules).num_batches_tracked.data()[0] == threads * calls);
}

namespace {

using Block = sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU>;

// tools/make_model_fixtures.py's training cases: two forwards (the input, then input / 2 + 1/4),
// then the running statistics, each against PyTorch's; the input NCHW or channels-last.
void check_training_fixture(Block block, std::string const& name, bool channels_last) {
  INFO("case " << name << (channels_last ? ", channels-last" : ", NCHW"));
  fx::load(block, name);
  sd::nn::train(block);
  auto const d = fx::io(name);
  sd::Tensor<float, 4> x = d.at("input").to<float, 4>("input");
  if (channels_last) x = sd::contiguous(x, sd::channels_last);
  auto const before = sd::detail::kernels_run();
  sd::Tensor<float, 4> const y = block(x);
  CHECK(sd::detail::kernels_run() - before == 2);
  CHECK(fx::relative_l2(y, d.at("output")) <= 1e-6);
  sd::Tensor<float, 4> const x2 = x * 0.5f + 0.25f;
  sd::Tensor<float, 4> const y2 = block(x2);
  CHECK(fx::relative_l2(y2, d.at("output2")) <= 1e-6);
  auto const& bn = std::get<1>(block.modules);
  CHECK(fx::relative_l2(bn.running_mean, d.at("running_mean")) <= 1e-6);
  CHECK(fx::relative_l2(bn.running_var, d.at("running_var")) <= 1e-6);
  CHECK(bn.num_batches_tracked.data()[0] == d.at("num_batches_tracked").to<std::int64_t, 0>().data()[0]);
}

}  // namespace

TEST_CASE("BatchNorm2d training: conv + bn + relu against PyTorch's fixtures", "[nn][batchnorm][torch]") {
  for (bool channels_last : {false, true}) {
    check_training_fixture(Block{{3, 8, 3, {.padding = 1}}, {8, {.eps = 1e-5, .momentum = 0.1}}, {}},
                           "conv_bn_relu_train", channels_last);
    check_training_fixture(
        Block{{4, 6, 3, {.stride = 2, .padding = 1, .groups = 2, .bias = false}}, {6, {.eps = 1e-3, .momentum = 0.3}}, {}},
        "conv_bn_relu_train_groups", channels_last);
  }
}

TEST_CASE("BatchNorm2d training: the batch's statistics in double, near PyTorch's variance", "[nn][batchnorm]") {
  // A mean far from zero beside a small spread (mean / std = 1000): E[x^2] - E[x]^2 of float
  // sums would lose every digit; of double sums it keeps float's.
  Block block{{2, 4, 1, {.bias = false}}, {4}, {}};
  sd::nn::train(block);
  auto& conv = std::get<0>(block.modules);
  conv.weight = sd::Tensor<float, 4>(sd::ones<float>(4, 2, 1, 1) * 0.5f);
  conv.prepare();
  sd::Tensor<float, 4> x = ref::uniform<float>(999, 1001, 3, 2, 11, 11);
  sd::Tensor<float, 4> const conv_out = sd::conv2d(x, conv.weight);
  ref::Array const C = ref::of(conv_out);
  sd::Tensor<float, 4> const y = block(x);
  ref::Array const Y = ref::of(y);
  std::int64_t const N = 3, HW = 121;
  for (std::int64_t c = 0; c < 4; ++c) {
    double s = 0, ss = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) s += C[(n * 4 + c) * HW + i];
    double const mean = s / double(N * HW);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) ss += (C[(n * 4 + c) * HW + i] - mean) * (C[(n * 4 + c) * HW + i] - mean);
    double const var = ss / double(N * HW);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) {
        std::int64_t const k = (n * 4 + c) * HW + i;
        // (x * scale + shift rounds near |shift| = 2400, float's step 2.4e-4 there: a few steps.)
        REQUIRE(Y[k] == Approx(std::max(0.0, (C[k] - mean) / std::sqrt(var + 1e-5))).margin(1e-2));
      }
    auto const& bn = std::get<1>(block.modules);
    CHECK(bn.running_mean.data()[c] == Approx(0.1 * mean).epsilon(1e-6));
    CHECK(bn.running_var.data()[c] == Approx(0.9 + 0.1 * var * double(N * HW) / double(N * HW - 1)).epsilon(1e-4));
  }
}

namespace {

// batch_norm(c) of PyTorch in training mode with weight 1 and bias 0, in double.
ref::Array batch_norm_ref(sd::Tensor<float, 4> const& c, double eps = 1e-5) {
  ref::Array a = ref::of(c);
  std::int64_t const N = c.size(0), C = c.size(1), HW = c.size(2) * c.size(3);
  for (std::int64_t ch = 0; ch < C; ++ch) {
    double s = 0, ss = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) s += a[(n * C + ch) * HW + i];
    double const mean = s / double(N * HW);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) ss += (a[(n * C + ch) * HW + i] - mean) * (a[(n * C + ch) * HW + i] - mean);
    double const inv = 1 / std::sqrt(ss / double(N * HW) + eps);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) a[(n * C + ch) * HW + i] = (a[(n * C + ch) * HW + i] - mean) * inv;
  }
  return a;
}

}  // namespace

TEST_CASE("BatchNorm2d training: ResNet's BasicBlock is 4 kernels, 6 with a downsample", "[nn][batchnorm][models]") {
  for (bool channels_last : {false, true})
    for (std::int64_t stride : {1, 2}) {
      INFO((channels_last ? "channels-last" : "NCHW") << ", stride " << stride);
      sd::models::BasicBlock block(16, 16 * stride, stride);
      sd::nn::train(block);
      sd::Tensor<float, 4> x = ref::uniform<float>(-1, 1, 2, 16, 10, 10);
      if (channels_last) x = sd::contiguous(x, sd::channels_last);
      // The reference: each convolution on its own (test_conv checks them), each batch norm in
      // double, the ReLUs and the residual add in double.
      auto relu = [](ref::Array a) {
        for (auto& v : a.v) v = std::max(0.0, v);
        return a;
      };
      auto to_tensor = [](ref::Array const& a) {
        sd::Tensor<float, 4> t(a.shape[0], a.shape[1], a.shape[2], a.shape[3]);
        for (std::int64_t i = 0; i < a.numel(); ++i) t.data()[i] = static_cast<float>(a[i]);
        return t;
      };
      sd::Tensor<float, 4> const c1 = sd::conv2d(x, block.conv1.weight, block.conv1.options);
      sd::Tensor<float, 4> const h = to_tensor(relu(batch_norm_ref(c1)));
      sd::Tensor<float, 4> const c2 = sd::conv2d(h, block.conv2.weight, block.conv2.options);
      ref::Array want = batch_norm_ref(c2);
      ref::Array const identity = [&] {
        if (!block.downsample) return ref::of(x);
        auto const& ds = std::get<0>(block.downsample->modules);
        return batch_norm_ref(sd::Tensor<float, 4>(sd::conv2d(x, ds.weight, ds.options)));
      }();
      for (std::int64_t i = 0; i < want.numel(); ++i) want[i] = std::max(0.0, want[i] + identity[i]);

      auto const before = sd::detail::kernels_run();
      sd::Tensor<float, 4> const y = block(x);
      // Per convolution and batch norm: the convolution with its sums, then the normalization
      // (conv1's with the ReLU, conv2's with the residual add and the ReLU; a downsample's
      // stored for the add).
      CHECK(sd::detail::kernels_run() - before == (stride == 1 ? 4u : 6u));
      ref::Array const got = ref::of(y);
      REQUIRE(got.numel() == want.numel());
      for (std::int64_t i = 0; i < got.numel(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-4));
      CHECK(block.bn1.num_batches_tracked.data()[0] == 1);
      CHECK(block.bn2.num_batches_tracked.data()[0] == 1);
    }
}
