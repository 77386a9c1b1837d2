// Reductions. The headline: a full sum of 64M floats (256 MiB, read once) against the read
// roof — a hand-written OpenMP AVX-512 (or AVX2) loop with eight independent vector
// accumulators, the fastest read this machine does. Target (issue): >= 0.85 of the roof.
// For information: Eigen's full sum, and a row sum [4096,1024] -> [4096], a column sum
// [4096,1024] -> [1024] and a sum over the middle dim [32,512,1024] -> [32,1024] (pooling over
// tokens) in solder and Eigen.
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

constexpr std::int64_t n = std::int64_t{1} << 26;  // 64M floats, 256 MiB
constexpr std::int64_t rows = 4096, cols = 1024;
constexpr std::int64_t batch = 32, tokens = 512;  // the middle-dim sum: [batch, tokens, cols]

struct Data {
  sd::Tensor<float, 1> x = sd::rand<float>(sd::shape(n), 0.f, 1.f);
  sd::Tensor<float, 2> m = sd::rand<float>(sd::shape(rows, cols), -1.f, 1.f);
  sd::Tensor<float, 0> s;
  sd::Tensor<float, 1> row{rows}, col{cols};
  sd::Tensor<float, 3> t = sd::rand<float>(sd::shape(batch, tokens, cols), -1.f, 1.f);
  sd::Tensor<float, 2> pooled{batch, cols};
};
Data& data() {
  static Data d;
  return d;
}

#if defined(SOLDER_HAVE_EIGEN)
template <int R>
using EMap = Eigen::TensorMap<Eigen::Tensor<float, R, Eigen::RowMajor, Eigen::Index>, Eigen::Aligned64>;
struct EigenEnv {
  Eigen::ThreadPool pool{sb::threads};
  Eigen::ThreadPoolDevice dev{&pool, sb::threads};
};
EigenEnv& eigen() {
  static EigenEnv e;
  return e;
}
float eigen_sum(float const* xp) {
  EMap<1> x(const_cast<float*>(xp), n);
  Eigen::Tensor<float, 0, Eigen::RowMajor, Eigen::Index> s;
  s.device(eigen().dev) = x.sum();
  return s();
}
void eigen_sum_dim(float const* mp, float* out, Eigen::Index dim) {
  EMap<2> m(const_cast<float*>(mp), rows, cols);
  EMap<1> o(out, dim == 1 ? rows : cols);
  o.device(eigen().dev) = m.sum(Eigen::array<Eigen::Index, 1>{dim});
}
void eigen_sum_middle(float const* tp, float* out) {
  EMap<3> t(const_cast<float*>(tp), batch, tokens, cols);
  EMap<2> o(out, batch, cols);
  o.device(eigen().dev) = t.sum(Eigen::array<Eigen::Index, 1>{1});
}
#endif

void check_peers() {
  auto& d = data();
  double ref = 0;
  {
    float const* x = d.x.data();
    for (std::int64_t i = 0; i < n; ++i) ref += x[i];
  }
  float ref_f = static_cast<float>(ref);
  // Sums of 64M values in [0, 1) near 3.4e7: float keeps ~7 digits, blocked sums do better.
  constexpr double rtol = 1e-5;
  d.s = sd::sum(d.x);
  float got = d.s.item();
  sb::check_close("full sum: solder vs double", &got, &ref_f, 1, 0, rtol);
  float roof = sb::peer::read_sum(d.x.data(), n);
  sb::check_close("full sum: read roof loop vs double", &roof, &ref_f, 1, 0, rtol);

  std::vector<float> rref(static_cast<std::size_t>(rows)), cref(static_cast<std::size_t>(cols)),
      pref(static_cast<std::size_t>(batch * cols));
  {
    std::vector<double> c(static_cast<std::size_t>(cols), 0.0);
    float const* m = d.m.data();
    for (std::int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (std::int64_t j = 0; j < cols; ++j) s += m[r * cols + j], c[static_cast<std::size_t>(j)] += m[r * cols + j];
      rref[static_cast<std::size_t>(r)] = static_cast<float>(s);
    }
    for (std::int64_t j = 0; j < cols; ++j) cref[static_cast<std::size_t>(j)] = static_cast<float>(c[static_cast<std::size_t>(j)]);
    float const* t = d.t.data();
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t j = 0; j < cols; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < tokens; ++k) s += t[(b * tokens + k) * cols + j];
        pref[static_cast<std::size_t>(b * cols + j)] = static_cast<float>(s);
      }
  }
  constexpr double atol = 1e-3;  // sums of +-1 values: |sum| ~ 20..60, float error ~1e-5
  // Outputs start as NaN, so a kernel that skips elements cannot pass on stale values.
  float const nan = std::numeric_limits<float>::quiet_NaN();
  auto clear = [&] {
    sb::peer::fill(d.row.data(), rows, nan);
    sb::peer::fill(d.col.data(), cols, nan);
    sb::peer::fill(d.pooled.data(), batch * cols, nan);
  };
  clear();
  d.row = sd::sum(d.m, 1);
  sb::check_close("row sum: solder vs double", d.row.data(), rref.data(), rows, atol);
  clear();
  d.col = sd::sum(d.m, 0);
  sb::check_close("column sum: solder vs double", d.col.data(), cref.data(), cols, atol);
  clear();
  d.pooled = sd::sum(d.t, 1);
  sb::check_close("middle-dim sum: solder vs double", d.pooled.data(), pref.data(), batch * cols, atol);
#if defined(SOLDER_HAVE_EIGEN)
  float e = eigen_sum(d.x.data());
  sb::check_close("full sum: Eigen vs double", &e, &ref_f, 1, 0, rtol);
  clear();
  eigen_sum_dim(d.m.data(), d.row.data(), 1);
  sb::check_close("row sum: Eigen vs double", d.row.data(), rref.data(), rows, atol);
  clear();
  eigen_sum_dim(d.m.data(), d.col.data(), 0);
  sb::check_close("column sum: Eigen vs double", d.col.data(), cref.data(), cols, atol);
  clear();
  eigen_sum_middle(d.t.data(), d.pooled.data());
  sb::check_close("middle-dim sum: Eigen vs double", d.pooled.data(), pref.data(), batch * cols, atol);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  check_peers();

  auto us = benchmark::kMicrosecond;
  auto& d = data();
  double const full = static_cast<double>(n) * sizeof(float);
  double const by_row = static_cast<double>(rows * cols + rows) * sizeof(float);
  double const by_col = static_cast<double>(rows * cols + cols) * sizeof(float);
  double const middle = static_cast<double>(batch * tokens * cols + batch * cols) * sizeof(float);
  sb::add("BM_sum_solder", us, full, [&] { return (d.s = sd::sum(d.x)).data(); });
  sb::add("BM_read_roof", us, full, [&] { return sb::peer::read_sum(d.x.data(), n); });
  sb::add("BM_row_sum_solder", us, by_row, [&] { return (d.row = sd::sum(d.m, 1)).data(); });
  sb::add("BM_col_sum_solder", us, by_col, [&] { return (d.col = sd::sum(d.m, 0)).data(); });
  sb::add("BM_middle_sum_solder", us, middle, [&] { return (d.pooled = sd::sum(d.t, 1)).data(); });
#if defined(SOLDER_HAVE_EIGEN)
  sb::add("BM_sum_eigen", us, full, [&] { return eigen_sum(d.x.data()); });
  sb::add("BM_row_sum_eigen", us, by_row, [&] {
    eigen_sum_dim(d.m.data(), d.row.data(), 1);
    return d.row.data();
  });
  sb::add("BM_col_sum_eigen", us, by_col, [&] {
    eigen_sum_dim(d.m.data(), d.col.data(), 0);
    return d.col.data();
  });
  sb::add("BM_middle_sum_eigen", us, middle, [&] {
    eigen_sum_middle(d.t.data(), d.pooled.data());
    return d.pooled.data();
  });
#endif

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;

  sb::print_medians(rep);
  std::printf("\n");
  sb::report_fraction(rep, "full sum solder vs read roof (time_roof / time_sum)", "BM_read_roof",
                      "BM_sum_solder", 0.85);
#if defined(SOLDER_HAVE_EIGEN)
  sb::report_fraction(rep, "full sum Eigen vs read roof", "BM_read_roof", "BM_sum_eigen");
  sb::report_ratio(rep, "full sum solder/Eigen", "BM_sum_eigen", "BM_sum_solder", 0);
  sb::report_ratio(rep, "row sum solder/Eigen", "BM_row_sum_eigen", "BM_row_sum_solder", 0);
  sb::report_ratio(rep, "column sum solder/Eigen", "BM_col_sum_eigen", "BM_col_sum_solder", 0);
  sb::report_ratio(rep, "middle-dim sum solder/Eigen", "BM_middle_sum_eigen", "BM_middle_sum_solder", 0);
#endif
  return 0;
}
