// The fixed cost of one fused expression: y = relu(x * 2 + 1) over 1,024 floats, end to end
// (building the expression, planning, shape checks, the loop; below the parallel threshold, so
// one thread). Target (issue): <= 1 us per call. A hand loop over the same 1,024 floats is the
// reference for the work itself; the long chain of bench_elementwise is shown for information.
#include <cstdio>

#include <solder/solder.hpp>

#include "common.hpp"

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t n = 1024;

struct Data {
  sd::Tensor<float, 1> x = sd::rand<float>(sd::shape(n), -1.f, 1.f);
  sd::Tensor<float, 1> y = sd::zeros<float>(n);
  sd::Tensor<float, sd::ext<n>> xs = sd::rand<float>(sd::shape(sd::fix<n>), -1.f, 1.f);
  sd::Tensor<float, sd::ext<n>> ys = sd::zeros<float>(sd::shape(sd::fix<n>));
};
Data& data() {
  static Data d;
  return d;
}

// Not inlined into the benchmark loop, so the compiler cannot hoist work out of it.
[[gnu::noinline]] void hand_relu_affine(float const* __restrict x, float* __restrict y, std::int64_t m) {
  for (std::int64_t i = 0; i < m; ++i) {
    float v = x[i] * 2.f + 1.f;
    y[i] = v < 0.f ? 0.f : v;
  }
}

void check() {
  auto& d = data();
  sd::Tensor<float, 1> ref = sd::zeros<float>(n);
  hand_relu_affine(d.x.data(), ref.data(), n);
  d.y = sd::relu(d.x * 2.f + 1.f);
  sb::check_close("relu(x*2+1): solder vs hand loop", d.y.data(), ref.data(), n, 0);
  hand_relu_affine(d.xs.data(), ref.data(), n);
  d.ys = sd::relu(d.xs * 2.f + 1.f);
  sb::check_close("relu(x*2+1), static extent: solder vs hand", d.ys.data(), ref.data(), n, 0);
}

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  check();

  auto ns = benchmark::kNanosecond;
  auto& d = data();
  double const bytes = 2.0 * n * sizeof(float);
  sb::add("BM_solder_relu_affine", ns, bytes, [&] { return (d.y = sd::relu(d.x * 2.f + 1.f)).data(); });
  sb::add("BM_solder_relu_affine_static", ns, bytes, [&] { return (d.ys = sd::relu(d.xs * 2.f + 1.f)).data(); });
  sb::add("BM_hand_relu_affine", ns, bytes, [&] {
    hand_relu_affine(d.x.data(), d.y.data(), n);
    return d.y.data();
  });
  sb::add("BM_solder_chain", ns, bytes, [&] {
    auto const& x = d.x;
    return (d.y = sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f).data();
  });

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;

  sb::print_medians(rep);
  std::printf("\n");
  double t = rep.median_ns("BM_solder_relu_affine");
  if (t > 0)
    std::printf("overhead: %.0f ns per call (target <= 1000 ns) %s\n", t, t <= 1000 ? "MET" : "NOT MET");
  else
    std::printf("overhead: n/a (BM_solder_relu_affine not run)\n");
  double h = rep.median_ns("BM_hand_relu_affine");
  if (t > 0 && h > 0)
    std::printf("overhead above the hand loop: %.0f ns per call (hand loop %.0f ns)\n", t - h, h);
  sb::report_fraction(rep, "static extent: hand loop vs solder", "BM_hand_relu_affine",
                      "BM_solder_relu_affine_static");
  return 0;
}
