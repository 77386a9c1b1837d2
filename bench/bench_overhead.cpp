// The fixed cost of one fused expression: y = relu(x * 2 + 1) over 1,024 floats, end to end
// (building the expression, planning, shape checks, the loop; below the parallel threshold, so
// one thread). Target (issue): <= 1 us per call. A hand loop over the same 1,024 floats is the
// reference for the work itself; the long chain of bench_elementwise is shown for information.
// sd::compile (runtime/compile.hpp) on the same expression: a call with a cached signature
// against the plain call (the runtime's own overhead, target <= 1 us), and a recompile: the guards
// of a new signature and its insertion into the cache (target <= 100 us).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

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

// Median over rounds of a fresh compiled callable met with 8 sizes (7 recompiles, the default
// limit's worth): the recompile cost its stats measure, and the extra wall time of a call with a
// new signature over a call with a cached one (both in ns).
std::pair<double, double> recompile_ns() {
  auto relu_affine = [](sd::Tensor<float, 1> const& x) { return sd::relu(x * 2.f + 1.f); };
  std::vector<sd::Tensor<float, 1>> inputs;
  for (std::int64_t k = 0; k < 8; ++k) inputs.push_back(sd::rand<float>(sd::shape(n - 8 * k), -1.f, 1.f));
  std::vector<double> guards, calls;
  using clock = std::chrono::steady_clock;
  for (int round = 0; round < 501; ++round) {
    auto f = sd::compile(relu_affine);
    f(inputs[0]);
    auto const t0 = clock::now();
    for (std::size_t k = 1; k < inputs.size(); ++k) benchmark::DoNotOptimize(f(inputs[k]).data());
    auto const t1 = clock::now();
    for (std::size_t k = 1; k < inputs.size(); ++k) benchmark::DoNotOptimize(f(inputs[k]).data());
    auto const t2 = clock::now();
    auto const st = f.stats();
    guards.push_back(static_cast<double>(st.recompile_time.count()) / static_cast<double>(st.recompiles));
    calls.push_back(std::chrono::duration<double, std::nano>((t1 - t0) - (t2 - t1)).count() / (inputs.size() - 1));
  }
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  return {median(guards), median(calls)};
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
  auto compiled = sd::compile([&d](sd::Tensor<float, 1> const& x) {
    d.y = sd::relu(x * 2.f + 1.f);
    return d.y;
  });
  sb::add("BM_compiled_relu_affine", ns, bytes, [&] { return compiled(d.x).data(); });
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
  double const c = rep.median_ns("BM_compiled_relu_affine");
  if (t > 0 && c > 0)
    std::printf("sd::compile: %.0f ns per call with a cached signature, %.0f ns above the plain call "
                "(target <= 1000 ns) %s\n", c, c - t, c - t <= 1000 ? "MET" : "NOT MET");
  auto const [recompile, new_call] = recompile_ns();
  std::printf("sd::compile: a recompile costs %.0f ns (guards and cache insertion; target <= 100000 ns) %s; "
              "a call with a new signature takes %.0f ns more than a cached one\n",
              recompile, recompile <= 100000 ? "MET" : "NOT MET", new_call);
  return 0;
}
