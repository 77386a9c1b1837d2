// Row operations over the last dim of [4096, 1024] floats: softmax and layer_norm, each one
// fused kernel in solder (per row: reductions prepared, then the row written).
//   softmax    solder  vs Eigen Tensor (TensorFlow's softmax functor: max, exp, sum, scale,
//              broadcasting, ThreadPoolDevice of 2 threads) vs a hand-written OpenMP loop per
//              row on glibc's vector maths (max pass, exp + sum pass, scale pass)
//   log_softmax solder vs the same hand loop's form (max pass, sum of exp pass, write pass)
//   layer_norm solder  vs Eigen Tensor (mean, variance, normalize with gamma and beta)
//   batch_norm statistics over dim 0 instead (training-mode BatchNorm1d without affine):
//              solder (the statistics run as column kernels of their own, a run-time break)
//              vs Eigen Tensor vs solder eager; no target, information
//   batch_norm2d the same data as [N, C, H, W] = [16, 64, 64, 64], statistics per channel
//              over {0, 2, 3} (BatchNorm2d): solder vs solder eager; no target, information
// and a copy of the same size (the memory roof).
// Targets (issues): softmax >= 1.5x Eigen; softmax and log_softmax >= 1.5x the hand loop built
// for AVX-512, >= 1.3x built for AVX2 (-march=x86-64-v3); layer_norm >= 1.2x Eigen.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"

#if defined(SOLDER_HAVE_EIGEN)
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>
#endif

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t rows = 4096, cols = 1024, n = rows * cols;
constexpr double bytes_per_iter = 2.0 * static_cast<double>(n) * sizeof(float);  // 16 MiB in + 16 MiB out
constexpr double eps = 1e-5;
constexpr double hand_loop_target = sb::avx512 ? 1.5 : 1.3;

struct Data {
  sd::Tensor<float, 2> x = sd::randn<float>(sd::shape(rows, cols));
  sd::Tensor<float, 1> gamma = sd::rand<float>(sd::shape(cols), 0.5f, 1.5f);
  sd::Tensor<float, 1> beta = sd::rand<float>(sd::shape(cols), -0.5f, 0.5f);
  sd::Tensor<float, 2> y{rows, cols};
  Data() { sb::peer::fill(y.data(), n, 0.f); }
};
Data& data() {
  static Data d;
  return d;
}

#if defined(SOLDER_HAVE_EIGEN)
using EMap2 = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor, Eigen::Index>, Eigen::Aligned64>;
using EMap1 = Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor, Eigen::Index>, Eigen::Aligned64>;
struct EigenEnv {
  Eigen::ThreadPool pool{sb::threads};
  Eigen::ThreadPoolDevice dev{&pool, sb::threads};
  Eigen::Tensor<float, 1, Eigen::RowMajor, Eigen::Index> mu{rows}, rstd{rows}, col_mu{cols}, col_rstd{cols};
};
EigenEnv& eigen() {
  static EigenEnv e;
  return e;
}
Eigen::array<Eigen::Index, 1> const along_row{1}, along_col{0};
Eigen::array<Eigen::Index, 2> const by_one{rows, 1}, one_by_cols{1, cols};
Eigen::array<Eigen::Index, 2> const one_row{1, cols}, by_rows{rows, 1};

// TensorFlow's SoftmaxEigenImpl (tensorflow/core/kernels/softmax_op_functor.h), verbatim in
// structure: the max is forced (.eval()) so it is not recomputed per element.
void eigen_softmax(float const* xp, float* yp) {
  auto& dev = eigen().dev;
  EMap2 x(const_cast<float*>(xp), rows, cols), y(yp, rows, cols);
  auto shifted = x - x.maximum(along_row).eval().reshape(by_one).broadcast(one_by_cols);
  y.device(dev) = shifted.exp();
  y.device(dev) = y * y.sum(along_row).inverse().eval().reshape(by_one).broadcast(one_by_cols);
}

// Layer norm as an Eigen user writes it: row means, row 1/std (biased variance, as PyTorch),
// then one pass that normalizes and applies gamma and beta.
void eigen_layer_norm(float const* xp, float const* gp, float const* bp, float* yp) {
  auto& env = eigen();
  auto& dev = env.dev;
  EMap2 x(const_cast<float*>(xp), rows, cols), y(yp, rows, cols);
  EMap1 g(const_cast<float*>(gp), cols), b(const_cast<float*>(bp), cols);
  auto mu_b = env.mu.reshape(by_one).broadcast(one_by_cols);
  env.mu.device(dev) = x.mean(along_row);
  env.rstd.device(dev) = ((x - mu_b).square().mean(along_row) + static_cast<float>(eps)).rsqrt();
  y.device(dev) = (x - mu_b) * env.rstd.reshape(by_one).broadcast(one_by_cols) *
                      g.reshape(one_row).broadcast(by_rows) +
                  b.reshape(one_row).broadcast(by_rows);
}

// Batch norm's statistics as an Eigen user writes them: column means, column 1/std (biased
// variance), then one normalizing pass.
void eigen_batch_norm(float const* xp, float* yp) {
  auto& env = eigen();
  auto& dev = env.dev;
  EMap2 x(const_cast<float*>(xp), rows, cols), y(yp, rows, cols);
  auto mu_b = env.col_mu.reshape(one_row).broadcast(by_rows);
  env.col_mu.device(dev) = x.mean(along_col);
  env.col_rstd.device(dev) = ((x - mu_b).square().mean(along_col) + static_cast<float>(eps)).rsqrt();
  y.device(dev) = (x - mu_b) * env.col_rstd.reshape(one_row).broadcast(by_rows);
}
#endif

auto batch_norm(sd::Tensor<float, 2> const& x) {
  return (x - sd::mean(x, 0, sd::keepdim)) * sd::rsqrt(sd::var(x, 0, sd::keepdim, 0.0) + float(eps));
}

constexpr std::int64_t nchw[] = {16, 64, 64, 64}, channels = nchw[1], plane = nchw[2] * nchw[3];
auto as_nchw(sd::Tensor<float, 2> const& t) {
  return sd::view(t, std::array<std::int64_t, 4>{nchw[0], nchw[1], nchw[2], nchw[3]});
}
auto batch_norm2d(sd::Tensor<float, 2> const& x) {
  auto x4 = as_nchw(x);
  int d023[] = {0, 2, 3};
  auto centered = x4 - sd::mean(x4, d023, sd::keepdim);
  return centered * sd::rsqrt(sd::mean(centered * centered, d023, sd::keepdim) + float(eps));
}

void check_peers() {
  auto& d = data();
  auto sm = sd::softmax(d.x, -1);
  auto ln = sd::layer_norm(d.x, d.gamma, d.beta, eps);
  std::printf("solder plan: softmax %d kernel(s) (eager %d), layer_norm %d kernel(s) (eager %d)\n",
              sd::kernel_count<decltype(sm)>, sd::eager_kernel_count<decltype(sm)>,
              sd::kernel_count<decltype(ln)>, sd::eager_kernel_count<decltype(ln)>);
  // Double-precision references, row by row.
  std::vector<float> ref_sm(static_cast<std::size_t>(n)), ref_lsm(static_cast<std::size_t>(n)), ref_ln(static_cast<std::size_t>(n)),
      ref_bn(static_cast<std::size_t>(n)), ref_bn2d(static_cast<std::size_t>(n));
  float const* x = d.x.data();
  for (std::int64_t r = 0; r < rows; ++r) {
    float const* xr = x + r * cols;
    double m = -INFINITY, s = 0, mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(xr[j])), mean += xr[j];
    mean /= cols;
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(double(xr[j]) - m), var += (xr[j] - mean) * (xr[j] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (std::int64_t j = 0; j < cols; ++j) {
      ref_sm[static_cast<std::size_t>(r * cols + j)] = static_cast<float>(std::exp(double(xr[j]) - m) / s);
      ref_lsm[static_cast<std::size_t>(r * cols + j)] = static_cast<float>(double(xr[j]) - m - std::log(s));
      ref_ln[static_cast<std::size_t>(r * cols + j)] =
          static_cast<float>((xr[j] - mean) * rstd * d.gamma.data()[j] + d.beta.data()[j]);
    }
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    double mean = 0, var = 0;
    for (std::int64_t r = 0; r < rows; ++r) mean += x[r * cols + j];
    mean /= rows;
    for (std::int64_t r = 0; r < rows; ++r) var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
    double rstd = 1.0 / std::sqrt(var / rows + eps);
    for (std::int64_t r = 0; r < rows; ++r)
      ref_bn[static_cast<std::size_t>(r * cols + j)] = static_cast<float>((x[r * cols + j] - mean) * rstd);
  }
  for (std::int64_t c = 0; c < channels; ++c) {  // [N, C, H, W]: channel c of sample b at (b * C + c) * plane
    double mean = 0, var = 0;
    for (std::int64_t b = 0; b < nchw[0]; ++b)
      for (std::int64_t k = 0; k < plane; ++k) mean += x[(b * channels + c) * plane + k];
    mean /= nchw[0] * plane;
    for (std::int64_t b = 0; b < nchw[0]; ++b)
      for (std::int64_t k = 0; k < plane; ++k) {
        double v = x[(b * channels + c) * plane + k] - mean;
        var += v * v;
      }
    double rstd = 1.0 / std::sqrt(var / static_cast<double>(nchw[0] * plane) + eps);
    for (std::int64_t b = 0; b < nchw[0]; ++b)
      for (std::int64_t k = 0; k < plane; ++k) {
        std::int64_t i = (b * channels + c) * plane + k;
        ref_bn2d[static_cast<std::size_t>(i)] = static_cast<float>((x[i] - mean) * rstd);
      }
  }
  constexpr double sm_atol = 1e-9, sm_rtol = 2e-5, ln_atol = 2e-5, ln_rtol = 2e-5;
  // Every output starts as NaN, so a kernel that skips elements cannot pass on stale values.
  float const nan = std::numeric_limits<float>::quiet_NaN();
  auto clear = [&] { sb::peer::fill(d.y.data(), n, nan); };
  clear();
  d.y = sm;
  sb::check_close("softmax: solder vs double reference", d.y.data(), ref_sm.data(), n, sm_atol, sm_rtol);
  clear();
  sb::peer::softmax_rows(x, d.y.data(), rows, cols);
  sb::check_close("softmax: hand loop vs double reference", d.y.data(), ref_sm.data(), n, sm_atol, sm_rtol);
  clear();
  d.y = sd::log_softmax(d.x, -1);
  sb::check_close("log_softmax: solder vs double reference", d.y.data(), ref_lsm.data(), n, ln_atol, ln_rtol);
  clear();
  sb::peer::log_softmax_rows(x, d.y.data(), rows, cols);
  sb::check_close("log_softmax: hand loop vs double reference", d.y.data(), ref_lsm.data(), n, ln_atol, ln_rtol);
  clear();
  d.y = ln;
  sb::check_close("layer_norm: solder vs double reference", d.y.data(), ref_ln.data(), n, ln_atol, ln_rtol);
  clear();
  d.y = batch_norm(d.x);
  sb::check_close("batch_norm: solder vs double reference", d.y.data(), ref_bn.data(), n, ln_atol, ln_rtol);
  clear();
  d.y = sd::eager(batch_norm(d.x));
  sb::check_close("batch_norm: solder eager vs double reference", d.y.data(), ref_bn.data(), n, ln_atol, ln_rtol);
  clear();
  auto y4 = as_nchw(d.y);
  y4 = batch_norm2d(d.x);
  sb::check_close("batch_norm2d: solder vs double reference", d.y.data(), ref_bn2d.data(), n, ln_atol, ln_rtol);
  auto e4 = sd::eager(batch_norm2d(d.x));
  sb::check_close("batch_norm2d: solder eager vs double reference", e4.data(), ref_bn2d.data(), n, ln_atol, ln_rtol);
#if defined(SOLDER_HAVE_EIGEN)
  clear();
  eigen_softmax(x, d.y.data());
  sb::check_close("softmax: Eigen vs double reference", d.y.data(), ref_sm.data(), n, sm_atol, sm_rtol);
  clear();
  eigen_layer_norm(x, d.gamma.data(), d.beta.data(), d.y.data());
  sb::check_close("layer_norm: Eigen vs double reference", d.y.data(), ref_ln.data(), n, ln_atol, ln_rtol);
  clear();
  eigen_batch_norm(x, d.y.data());
  sb::check_close("batch_norm: Eigen vs double reference", d.y.data(), ref_bn.data(), n, ln_atol, ln_rtol);
#endif
  clear();
  sb::peer::copy_stream(x, d.y.data(), n);
  sb::check_close("copy (streaming stores)", d.y.data(), x, n, 0);
  clear();
  sb::peer::copy(x, d.y.data(), n);
  sb::check_close("copy", d.y.data(), x, n, 0);
  sb::peer::fill(d.y.data(), n, 0.f);
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  check_peers();

  auto us = benchmark::kMicrosecond;
  auto& d = data();
  auto add = [&](char const* name, auto f) {
    sb::add(name, us, bytes_per_iter, [&d, f] {
      f(d);
      return d.y.data();
    });
  };
  add("BM_softmax_solder", [](Data& d) { d.y = sd::softmax(d.x, -1); });
  add("BM_softmax_hand", [](Data& d) { sb::peer::softmax_rows(d.x.data(), d.y.data(), rows, cols); });
  add("BM_log_softmax_solder", [](Data& d) { d.y = sd::log_softmax(d.x, -1); });
  add("BM_log_softmax_hand", [](Data& d) { sb::peer::log_softmax_rows(d.x.data(), d.y.data(), rows, cols); });
  add("BM_layer_norm_solder", [](Data& d) { d.y = sd::layer_norm(d.x, d.gamma, d.beta, eps); });
  add("BM_batch_norm_solder", [](Data& d) { d.y = batch_norm(d.x); });
  add("BM_batch_norm_eager", [](Data& d) { d.y = sd::eager(batch_norm(d.x)); });
  add("BM_batch_norm2d_solder", [](Data& d) {
    auto y = as_nchw(d.y);  // a view: writes d.y
    y = batch_norm2d(d.x);
  });
  add("BM_batch_norm2d_eager", [](Data& d) {
    auto y = sd::eager(batch_norm2d(d.x));  // a new tensor, as eager's other results
    benchmark::DoNotOptimize(y.data());
  });
#if defined(SOLDER_HAVE_EIGEN)
  add("BM_softmax_eigen", [](Data& d) { eigen_softmax(d.x.data(), d.y.data()); });
  add("BM_layer_norm_eigen", [](Data& d) { eigen_layer_norm(d.x.data(), d.gamma.data(), d.beta.data(), d.y.data()); });
  add("BM_batch_norm_eigen", [](Data& d) { eigen_batch_norm(d.x.data(), d.y.data()); });
#endif
  add("BM_copy_omp", [](Data& d) { sb::peer::copy(d.x.data(), d.y.data(), n); });
  add("BM_copy_stream", [](Data& d) { sb::peer::copy_stream(d.x.data(), d.y.data(), n); });

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;

  sb::print_medians(rep);
  std::printf("\n");
#if defined(SOLDER_HAVE_EIGEN)
  sb::report_ratio(rep, "softmax solder/Eigen", "BM_softmax_eigen", "BM_softmax_solder", 1.5);
#else
  std::printf("ratio softmax solder/Eigen: n/a (built without Eigen)\n");
#endif
  sb::report_ratio(rep, "softmax solder/hand loop", "BM_softmax_hand", "BM_softmax_solder", hand_loop_target);
  sb::report_ratio(rep, "log_softmax solder/hand loop", "BM_log_softmax_hand", "BM_log_softmax_solder",
                   hand_loop_target);
#if defined(SOLDER_HAVE_EIGEN)
  sb::report_ratio(rep, "layer_norm solder/Eigen", "BM_layer_norm_eigen", "BM_layer_norm_solder", 1.2);
#else
  std::printf("ratio layer_norm solder/Eigen: n/a (built without Eigen)\n");
#endif
  sb::report_ratio(rep, "batch_norm solder/Eigen", "BM_batch_norm_eigen", "BM_batch_norm_solder", 0);
  sb::report_ratio(rep, "batch_norm solder/eager", "BM_batch_norm_eager", "BM_batch_norm_solder", 0);
  sb::report_ratio(rep, "batch_norm2d solder/eager", "BM_batch_norm2d_eager", "BM_batch_norm2d_solder", 0);
  double c = rep.median_ns("BM_copy_omp"), s = rep.median_ns("BM_copy_stream");
  char const* roof = (s > 0 && (c <= 0 || s < c)) ? "BM_copy_stream" : "BM_copy_omp";
  std::printf("copy roof (16 MiB in + 16 MiB out): %s\n", roof);
  sb::report_fraction(rep, "softmax solder vs copy", roof, "BM_softmax_solder");
  sb::report_fraction(rep, "layer_norm solder vs copy", roof, "BM_layer_norm_solder");
  sb::report_fraction(rep, "batch_norm solder vs copy", roof, "BM_batch_norm_solder");
  sb::report_fraction(rep, "batch_norm2d solder vs copy", roof, "BM_batch_norm2d_solder");
  sb::report_fraction(rep, "softmax Eigen vs copy", roof, "BM_softmax_eigen");
  sb::report_fraction(rep, "softmax hand loop vs copy", roof, "BM_softmax_hand");
  return 0;
}
