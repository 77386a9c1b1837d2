// BatchNorm2d in training mode after a convolution: the batch's statistics from one assignment
// of two results (the convolution computed once for both), the output against a double
// reference of PyTorch's formula, the running statistics updated as PyTorch does, and the
// forward run from several threads at once on one module (the batch's scale and shift are each
// call's own; the running statistics are updated under a lock).
#include "reference.hpp"

#include <atomic>
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
  // The convolution stored for the statistics; the mean, the variance's mean and its sum, each
  // a column reduction of its own (channel statistics fold leading dims: a run-time break),
  // and the kernel of the two results that reads them; then the convolution again, with the
  // normalization and the ReLU as its epilogue. (Was 7, the convolution computed three times.)
  CHECK(sd::detail::kernels_run() - before == 6);
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
