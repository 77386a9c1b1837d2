// Several results from one kernel (sd::assign(std::tie(...), ...), sd::eval(a, b)) against the
// same maths written as one assignment per result:
//   adamw      an AdamW-shaped update of p, m and v from g over 4M floats: one kernel that reads
//              g, p, m, v and writes p, m, v once each (7 x 16 MiB), against three assignments
//              (m, then v, then p from the new m and v: g read twice, m and v written and read
//              back); the roof is a copy moving the same bytes (7/2 of a 16 MiB copy's time)
//   mean_var   the mean and the variance of each row of [4096, 1024]: one kernel against two
//   conv_bn    Conv2d -> BatchNorm2d -> ReLU in training mode at ResNet-50's 3x3 64 -> 64 layer
//              (batch 8, 56 x 56, channels-last as the models run, no bias): the module's 2
//              kernels (the convolution once, its channel sums folded in its epilogue; then the
//              normalization over its stored output) against the paths before them, written
//              out here as they were: conv_bn_apart, 6 kernels (the convolution stored, its mean
//              and variance from one assignment of two results, then the convolution again with
//              the normalization as its epilogue), and conv_bn_thrice, the 7 kernels of issue
//              37's reading (the convolution computed for the mean, for the variance and for the
//              output). Target: 2.5x over the 7 kernels; over the 6, which compute the
//              convolution twice, about 2x is the bound. conv_bn_eval, the same block in eval
//              mode (one kernel: the statistics known), is the floor.
// The adamw and mean_var rows are information only (their target is the kernel count, held by
// test_results).
#include <cstdio>
#include <tuple>

#include <solder/solder.hpp>

#include "common.hpp"

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t n = std::int64_t(1) << 22;  // 16 MiB of floats per tensor
constexpr std::int64_t rows = 4096, cols = 1024;
constexpr float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 1e-2f, c1 = 0.1f, c2 = 0.001f;

struct Data {
  sd::Tensor<float, 1> g = sd::randn<float>(sd::shape(n));
  sd::Tensor<float, 1> p = sd::randn<float>(sd::shape(n));
  sd::Tensor<float, 1> m = sd::rand<float>(sd::shape(n), -0.1f, 0.1f);
  sd::Tensor<float, 1> v = sd::rand<float>(sd::shape(n), 0.f, 0.01f);
  sd::Tensor<float, 1> copy_in = sd::randn<float>(sd::shape(n));
  sd::Tensor<float, 1> copy_out{n};
  sd::Tensor<float, 2> x = sd::randn<float>(sd::shape(rows, cols));
  sd::Tensor<float, 1> mean{rows}, var{rows};
  Data() {
    sb::peer::fill(copy_out.data(), n, 0.f);
    sb::peer::fill(mean.data(), rows, 0.f);
    sb::peer::fill(var.data(), rows, 0.f);
  }
};
Data& data() {
  static Data d;
  return d;
}

// The step in one kernel. (The same p, m and v every iteration: the values drift, the work is
// the same.)
float* adamw_fused() {
  auto& d = data();
  auto m_next = b1 * d.m + (1 - b1) * d.g;
  auto v_next = b2 * d.v + (1 - b2) * d.g * d.g;
  auto p_next = d.p - lr * ((m_next / c1) / (sd::sqrt(v_next / c2) + eps) + wd * d.p);
  sd::assign(std::tie(d.p, d.m, d.v), p_next, m_next, v_next);
  return d.p.data();
}

// The step as three assignments, in the order that keeps the maths the same.
float* adamw_apart() {
  auto& d = data();
  d.m = b1 * d.m + (1 - b1) * d.g;
  d.v = b2 * d.v + (1 - b2) * d.g * d.g;
  d.p = d.p - lr * ((d.m / c1) / (sd::sqrt(d.v / c2) + eps) + wd * d.p);
  return d.p.data();
}

float* mean_var_fused() {
  auto& d = data();
  sd::assign(std::tie(d.mean, d.var), sd::mean(d.x, 1), sd::var(d.x, 1));
  return d.var.data();
}

float* mean_var_apart() {
  auto& d = data();
  d.mean = sd::mean(d.x, 1);
  d.var = sd::var(d.x, 1);
  return d.var.data();
}

struct ConvBn {
  sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU> block{
      {64, 64, 3, {.padding = 1, .bias = false}}, {64}, {}};
  sd::Tensor<float, 4> x = sd::contiguous(sd::Tensor<float, 4>(sd::randn<float>(sd::shape(8, 64, 56, 56))),
                                          sd::channels_last);
  sd::Tensor<float, 4> y;
  decltype(block) frozen = block;  // in eval mode
  ConvBn() { sd::nn::train(block); }
};
ConvBn& conv_bn() {
  static ConvBn d;
  return d;
}

float* conv_bn_fused() {
  auto& d = conv_bn();
  d.y = sd::nn::materialize(d.block(d.x));
  return d.y.data();
}

float* conv_bn_eval() {
  auto& d = conv_bn();
  d.y = sd::nn::materialize(d.frozen(d.x));
  return d.y.data();
}

// The training forward before the sums in the epilogue (BatchNorm2d's batch_scale_shift then):
// the convolution stored, the statistics from it, the convolution again with the rest.
float* conv_bn_apart() {
  auto& d = conv_bn();
  auto const& bn = std::get<1>(d.block.modules);
  auto const conv = std::get<0>(d.block.modules)(d.x);
  sd::Tensor<float, 4> const input = conv;
  auto const [mean, var] = sd::eval(sd::mean(input, {0, 2, 3}), sd::var(input, {0, 2, 3}, 0));
  sd::Tensor<float, 3> scale(64, 1, 1), shift(64, 1, 1);
  for (std::int64_t c = 0; c < 64; ++c) {  // (the running statistics' update: as cheap)
    double const k = bn.weight.data()[c] / std::sqrt(double(var.data()[c]) + bn.options.eps);
    scale.data()[c] = float(k), shift.data()[c] = float(bn.bias.data()[c] - mean.data()[c] * k);
  }
  d.y = sd::nn::materialize(sd::relu(conv * scale + shift));
  return d.y.data();
}

// The training forward as issue 37 read it: the mean and the variance each a kernel over the
// convolution, which each computes again, then the output's.
float* conv_bn_thrice() {
  auto& d = conv_bn();
  auto const& bn = std::get<1>(d.block.modules);
  auto const conv = std::get<0>(d.block.modules)(d.x);
  sd::Tensor<float, 1> const mean = sd::mean(conv, {0, 2, 3});
  sd::Tensor<float, 1> const var = sd::var(conv, {0, 2, 3}, 0);
  sd::Tensor<float, 3> scale(64, 1, 1), shift(64, 1, 1);
  for (std::int64_t c = 0; c < 64; ++c) {
    double const k = bn.weight.data()[c] / std::sqrt(double(var.data()[c]) + bn.options.eps);
    scale.data()[c] = float(k), shift.data()[c] = float(bn.bias.data()[c] - mean.data()[c] * k);
  }
  d.y = sd::nn::materialize(sd::relu(conv * scale + shift));
  return d.y.data();
}

// Both forms give the same bits from the same state (each value computed by the same maths).
void check() {
  auto& d = data();
  auto const p0 = d.p.clone(), m0 = d.m.clone(), v0 = d.v.clone();
  adamw_fused();
  auto const fused = d.p.clone();
  d.p = p0, d.m = m0, d.v = v0;  // (rebinding: the next step runs on the saved tensors)
  adamw_apart();
  sb::check_close("adamw: fused vs apart", fused.data(), d.p.data(), n, 0, 1e-6);
  mean_var_fused();
  auto const var = d.var.clone();
  mean_var_apart();
  sb::check_close("mean, var: fused vs apart", var.data(), d.var.data(), rows, 0, 1e-6);
  // (Statistics from double sums against float cascades: close, not the same bits.)
  conv_bn_fused();
  sd::Tensor<float, 4> const fused_y = sd::contiguous(conv_bn().y);
  conv_bn_apart();
  sd::Tensor<float, 4> const apart_y = sd::contiguous(conv_bn().y);
  sb::check_close("conv + bn + relu: fused vs apart", fused_y.data(), apart_y.data(), fused_y.numel(), 1e-4, 1e-4);
  conv_bn_thrice();
  sd::Tensor<float, 4> const thrice_y = sd::contiguous(conv_bn().y);
  sb::check_close("conv + bn + relu: fused vs thrice", fused_y.data(), thrice_y.data(), fused_y.numel(), 1e-4, 1e-4);
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  check();
  double const tensor_bytes = double(n) * sizeof(float);
  sb::add("copy", benchmark::kMillisecond, 2 * tensor_bytes, [] {
    auto& d = data();
    sb::peer::copy(d.copy_in.data(), d.copy_out.data(), n);
    return d.copy_out.data();
  });
  sb::add("adamw_fused", benchmark::kMillisecond, 7 * tensor_bytes, adamw_fused);
  sb::add("adamw_apart", benchmark::kMillisecond, 7 * tensor_bytes, adamw_apart);
  double const x_bytes = double(rows * cols) * sizeof(float);
  sb::add("mean_var_fused", benchmark::kMillisecond, x_bytes, mean_var_fused);
  sb::add("mean_var_apart", benchmark::kMillisecond, x_bytes, mean_var_apart);
  double const conv_bytes = 2.0 * 8 * 64 * 56 * 56 * sizeof(float);  // its input and output
  sb::add("conv_bn_fused", benchmark::kMillisecond, conv_bytes, conv_bn_fused);
  sb::add("conv_bn_apart", benchmark::kMillisecond, conv_bytes, conv_bn_apart);
  sb::add("conv_bn_thrice", benchmark::kMillisecond, conv_bytes, conv_bn_thrice);
  sb::add("conv_bn_eval", benchmark::kMillisecond, conv_bytes, conv_bn_eval);
  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);
  sb::report_ratio(rep, "adamw one kernel / three", "adamw_apart", "adamw_fused", 0);
  sb::report_fraction(rep, "adamw one kernel vs a copy of its bytes", "copy", "adamw_fused", 0, 3.5);
  sb::report_ratio(rep, "mean and var one kernel / two", "mean_var_apart", "mean_var_fused", 0);
  sb::report_ratio(rep, "conv + bn + relu training, 2 kernels / issue 37's 7", "conv_bn_thrice", "conv_bn_fused", 2.5);
  sb::report_ratio(rep, "conv + bn + relu training, 2 kernels / 6", "conv_bn_apart", "conv_bn_fused", 0);
  sb::report_fraction(rep, "conv + bn + relu training vs eval mode's one kernel", "conv_bn_eval", "conv_bn_fused");
  return 0;
}
