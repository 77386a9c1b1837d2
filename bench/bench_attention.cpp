// Attention over [batch 8, 12 heads, 512 tokens, head dim 64] floats (BERT-base's self-attention
// for 8 sequences of 512 tokens):
//   fused    sd::scaled_dot_product_attention: one kernel, flash-attention style (blocks of keys,
//            online softmax), never storing the [512, 512] scores of a head
//   eager    the same maths written out, sd::eager: one kernel per node, every intermediate
//            stored (the scores, scaled, shifted, exponentiated, normalized: [8, 12, 512, 512]
//            each, 96 MiB), as PyTorch's eager mode runs softmax(q @ k^T * s) @ v
//   planned  the same expression written out, evaluated as solder plans it (information): the
//            product, the softmax as one row kernel, the second product
// Peak extra memory: what each allocates beyond its inputs and output (the process's peak
// resident size as it first runs, and for fused its per-thread buffers).
// Target (issue 28): fused >= 2x eager.
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t batch = 8, heads = 12, tokens = 512, dim = 64;
constexpr double flops = 4.0 * batch * heads * tokens * tokens * dim;  // two products
constexpr double bytes_per_iter = 4.0 * batch * heads * tokens * dim * sizeof(float);  // q, k, v in, out
float const scale = 1 / std::sqrt(static_cast<float>(dim));

struct Data {
  sd::Tensor<float, 4> q = sd::randn<float>(sd::shape(batch, heads, tokens, dim));
  sd::Tensor<float, 4> k = sd::randn<float>(sd::shape(batch, heads, tokens, dim));
  sd::Tensor<float, 4> v = sd::randn<float>(sd::shape(batch, heads, tokens, dim));
  sd::Tensor<float, 4> y{batch, heads, tokens, dim};
  Data() { sb::peer::fill(y.data(), y.numel(), 0.f); }  // touched: its pages are not extra memory
};
Data& data() {
  static Data d;
  return d;
}

auto fused(Data const& d) { return sd::scaled_dot_product_attention(d.q, d.k, d.v); }
auto written_out(Data const& d) {
  return sd::matmul(sd::softmax(sd::matmul(d.q, sd::transpose(d.k, -2, -1)) * scale, -1), d.v);
}

// The result's rows of a sample of (batch, head, token) against double loops.
void check(char const* what, sd::Tensor<float, 4> const& y) {
  auto& d = data();
  std::vector<float> got, want;
  std::vector<double> s(tokens);
  for (std::int64_t b : {0, 5}) {
    for (std::int64_t h : {0, 7, 11}) {
      for (std::int64_t i : {0, 1, 255, 511}) {
        double mx = -INFINITY, z = 0;
        for (std::int64_t j = 0; j < tokens; ++j) {
          double t = 0;
          for (std::int64_t e = 0; e < dim; ++e) t += double(d.q(b, h, i, e)) * double(d.k(b, h, j, e));
          s[static_cast<std::size_t>(j)] = t * scale;
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        for (double& t : s) z += t = std::exp(t - mx);
        for (std::int64_t c = 0; c < dim; ++c) {
          double o = 0;
          for (std::int64_t j = 0; j < tokens; ++j) o += s[static_cast<std::size_t>(j)] * double(d.v(b, h, j, c));
          want.push_back(static_cast<float>(o / z));
          got.push_back(y(b, h, i, c));
        }
      }
    }
  }
  sb::check_close(what, got.data(), want.data(), static_cast<std::int64_t>(got.size()), 1e-5, 1e-4);
}

double peak_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  auto& d = data();
  static_assert(sd::kernel_count<decltype(fused(d))> == 1);
  std::printf("solder plan: fused %d kernel, written out %d kernels, eager %d kernels\n",
              sd::kernel_count<decltype(fused(d))>, sd::kernel_count<decltype(written_out(d))>,
              sd::eager_kernel_count<decltype(written_out(d))>);

  // Peak memory, fused first: each run's growth of the process's peak resident size.
  double const base = peak_mib();
  d.y = fused(d);
  double const after_fused = peak_mib();
  check("fused vs double reference", d.y);
  {
    sd::Tensor<float, 4> e = sd::eager(written_out(d));
    check("eager vs double reference", e);
  }
  double const after_eager = peak_mib();
  {
    sd::Tensor<float, 4> p = written_out(d);
    check("planned vs double reference", p);
  }
  sd::detail::host::attention::Buffers<float> buffers(dim, dim);
  double const scores_mib = batch * heads * tokens * tokens * sizeof(float) / (1024.0 * 1024.0);
  std::printf("peak extra memory: fused %.2f MiB measured (per-thread buffers %.0f KiB x %d threads), "
              "eager %.1f MiB measured (its output 12 MiB; one [8, 12, 512, 512] intermediate %.0f MiB)\n",
              after_fused - base, static_cast<double>(buffers.store.size() * sizeof(float)) / 1024.0,
              sb::threads, after_eager - after_fused, scores_mib);

  auto ms = benchmark::kMillisecond;
  sb::add("BM_attention_fused", ms, bytes_per_iter, [&d] {
    d.y = fused(d);
    return d.y.data();
  });
  sb::add("BM_attention_eager", ms, bytes_per_iter, [&d] {
    sd::Tensor<float, 4> y = sd::eager(written_out(d));  // a new tensor, as eager's every result
    return y.data()[0];
  });
  sb::add("BM_attention_planned", ms, bytes_per_iter, [&d] {
    d.y = written_out(d);
    return d.y.data();
  });

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);
  std::printf("\n");
  for (char const* name : {"BM_attention_fused", "BM_attention_eager", "BM_attention_planned"}) {
    double ns = rep.median_ns(name);
    if (ns > 0) std::printf("%-24s %8.1f GFLOP/s\n", name, flops / ns);
  }
  sb::report_ratio(rep, "attention fused/eager", "BM_attention_eager", "BM_attention_fused", 2);
  sb::report_ratio(rep, "attention fused/planned", "BM_attention_planned", "BM_attention_fused", 0);
  return 0;
}
