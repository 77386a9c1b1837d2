// GPU benchmarks, as ratios inside one run (bench/common.hpp): the element-wise chain of
// bench_elementwise on 16M floats fused against eager and against a device-to-device copy of the
// same bytes (the bandwidth limit); softmax and layer_norm over rows of [4096, 1024] (16 MiB,
// which stays in an H100's L2 cache between calls) and of [16384, 1024] (the chain's bytes, read
// from HBM) against a copy of their bytes, as tensors of any row length and of a static one
// (sd::ext<sd::dyn, 1024>: the row kernels' variant whose loops unroll); for information, a bias added to the rows of
// [16384, 1024] (a broadcast input) and two statistics: var(m, 0) of [16384, 1024] (batch
// norm's, reductions over the leading dim) and the root mean square of the 16M floats
// (device-wide). Kernels are timed with CUDA events (manual time).
// Needs a GPU: without one it prints "skipped: no CUDA device: ..." and exits 0.
#include <solder/solder.hpp>

#include <cstring>
#include <vector>

#include "common.hpp"

namespace sd = solder;
namespace sb = solder_bench;

namespace {

constexpr std::int64_t n = 1 << 24, rows = 4096, cols = 1024;
constexpr std::int64_t many_rows = n / cols;

template <class X>
auto chain(X const& x) {
  return sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
}

struct Rows {
  explicit Rows(std::int64_t r) : m(sd::randn<float, sd::Cuda>(sd::shape(r, cols))), out{r, cols} {}
  double bytes() const { return 2.0 * static_cast<double>(m.numel()) * sizeof(float); }
  sd::Tensor<float, 2, sd::Cuda> m;
  sd::Tensor<float, 2, sd::Cuda> out;
  // The same storage seen with the row length static.
  sd::Tensor<float, sd::ext<sd::dyn, cols>, sd::Cuda> fixed_m = m, fixed_out = out;
};

struct Data {
  sd::Tensor<float, 1, sd::Cuda> x = sd::rand<float, sd::Cuda>(sd::shape(n), -1.f, 1.f);
  sd::Tensor<float, 1, sd::Cuda> y{n};
  Rows few{rows}, many{many_rows};
  sd::Tensor<float, 1, sd::Cuda> gamma = sd::rand<float, sd::Cuda>(sd::shape(cols));
  sd::Tensor<float, 1, sd::Cuda> beta = sd::rand<float, sd::Cuda>(sd::shape(cols));
  sd::Tensor<float, 1, sd::Cuda> stats{cols}, one{1};
};
Data& data() {
  static Data d;
  return d;
}

// Times f with events on solder's stream: each iteration queues `batch` calls between two events
// and counts their mean, so the host's work for one call (planning, the launch) overlaps the
// GPU's work for the one before, as in a model's stream of ops, and a kernel of a few
// microseconds is not timed together with the host's set-up of it.
constexpr int batch = 20;
template <class F>
void timed(benchmark::State& state, double bytes, F&& f) {
  cudaEvent_t start, stop;
  SOLDER_CUDA_CHECK(cudaEventCreate(&start));
  SOLDER_CUDA_CHECK(cudaEventCreate(&stop));
  f();
  for (auto _ : state) {
    SOLDER_CUDA_CHECK(cudaEventRecord(start, sd::cuda::stream()));
    for (int i = 0; i < batch; ++i) f();
    SOLDER_CUDA_CHECK(cudaEventRecord(stop, sd::cuda::stream()));
    SOLDER_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SOLDER_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3 / batch);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  sb::set_bytes(state, bytes);
}

void copy(void* dst, void const* src, std::size_t bytes) {
  SOLDER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, sd::cuda::stream()));
}

constexpr double chain_bytes = 2.0 * n * sizeof(float);
// The row benchmarks over [4096, 1024] (Many = false) or [16384, 1024].
template <bool Many>
Rows& rows_of() {
  return Many ? data().many : data().few;
}

void BM_chain_fused(benchmark::State& s) {
  timed(s, chain_bytes, [] { data().y = chain(data().x); });
}
void BM_chain_eager(benchmark::State& s) {
  timed(s, chain_bytes, [] { data().y = sd::eager(chain(data().x)); });
}
void BM_chain_copy(benchmark::State& s) {
  timed(s, chain_bytes, [] { copy(data().y.data(), data().x.data(), n * sizeof(float)); });
}
template <bool Many>
void BM_softmax(benchmark::State& s) {
  Rows& r = rows_of<Many>();
  timed(s, r.bytes(), [&r] { r.out = sd::softmax(r.m, 1); });
}
template <bool Many>
void BM_layer_norm(benchmark::State& s) {
  Rows& r = rows_of<Many>();
  timed(s, r.bytes(), [&r] { r.out = sd::layer_norm(r.m, data().gamma, data().beta); });
}
template <bool Many>
void BM_softmax_static(benchmark::State& s) {
  Rows& r = rows_of<Many>();
  timed(s, r.bytes(), [&r] { r.fixed_out = sd::softmax(r.fixed_m, 1); });
}
template <bool Many>
void BM_layer_norm_static(benchmark::State& s) {
  Rows& r = rows_of<Many>();
  timed(s, r.bytes(), [&r] { r.fixed_out = sd::layer_norm(r.fixed_m, data().gamma, data().beta); });
}
void BM_bias_add(benchmark::State& s) {
  Rows& r = data().many;
  timed(s, r.bytes(), [&r] { r.out = r.m + data().beta; });
}
void BM_column_var(benchmark::State& s) {
  Rows& r = data().many;
  timed(s, r.bytes(), [&r] { data().stats = sd::var(r.m, 0); });  // m read twice
}
void BM_root_mean_square(benchmark::State& s) {
  timed(s, chain_bytes / 2, [] { data().one = sd::sqrt(sd::mean(data().x * data().x, {0}, sd::keepdim)); });
}
template <bool Many>
void BM_rows_copy(benchmark::State& s) {
  Rows& r = rows_of<Many>();
  timed(s, r.bytes(), [&r] { copy(r.out.data(), r.m.data(), r.m.numel() * sizeof(float)); });
}

auto* configure(benchmark::internal::Benchmark* b) {
  return b->UseManualTime()->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_chain_fused)->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_chain_eager)->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_chain_copy)->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_softmax<false>)->Name("BM_softmax")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_layer_norm<false>)->Name("BM_layer_norm")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_rows_copy<false>)->Name("BM_rows_copy")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_softmax<true>)->Name("BM_softmax_16k")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_layer_norm<true>)->Name("BM_layer_norm_16k")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_rows_copy<true>)->Name("BM_rows_copy_16k")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_softmax_static<false>)->Name("BM_softmax_static")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_layer_norm_static<false>)->Name("BM_layer_norm_static")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_softmax_static<true>)->Name("BM_softmax_static_16k")->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_layer_norm_static<true>)
    ->Name("BM_layer_norm_static_16k")
    ->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_bias_add)->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_column_var)->Apply([](auto* b) { configure(b); });
BENCHMARK(BM_root_mean_square)->Apply([](auto* b) { configure(b); });

// The GPU's results against the host's, before any timing.
void check() {
  auto& d = data();
  d.y = chain(d.x);
  auto x = d.x.to<sd::Host>();
  sd::Tensor<float, 1> ref = chain(x);
  sb::check_close("chain: device vs host", sd::to_vector(d.y).data(), ref.data(), n, 0);
  Rows& r = d.few;
  r.out = sd::softmax(r.m, 1);
  auto m = r.m.to<sd::Host>();
  sd::Tensor<float, 2> soft = sd::softmax(m, 1);
  sb::check_close("softmax: device vs host", sd::to_vector(r.out).data(), soft.data(), rows * cols, 1e-6, 1e-5);
  r.out = sd::layer_norm(r.m, d.gamma, d.beta);
  sd::Tensor<float, 2> norm = sd::layer_norm(m, d.gamma.to<sd::Host>(), d.beta.to<sd::Host>());
  sb::check_close("layer_norm: device vs host", sd::to_vector(r.out).data(), norm.data(), rows * cols, 1e-5, 1e-5);
  r.fixed_out = sd::softmax(r.fixed_m, 1);
  sb::check_close("softmax, length static: device vs host", sd::to_vector(r.out).data(), soft.data(),
                  rows * cols, 1e-6, 1e-5);
  r.fixed_out = sd::layer_norm(r.fixed_m, d.gamma, d.beta);
  sb::check_close("layer_norm, length static: device vs host", sd::to_vector(r.out).data(),
                  norm.data(), rows * cols, 1e-5, 1e-5);
  d.many.out = d.many.m + d.beta;
  auto many_host = d.many.m.to<sd::Host>();
  sd::Tensor<float, 2> biased = many_host + d.beta.to<sd::Host>();
  sb::check_close("m + bias: device vs host", sd::to_vector(d.many.out).data(), biased.data(),
                  many_rows * cols, 0);
  d.stats = sd::var(d.many.m, 0);
  sd::Tensor<float, 1> var = sd::var(many_host, 0);
  sb::check_close("var(m, 0): device vs host", sd::to_vector(d.stats).data(), var.data(), cols, 1e-5, 1e-5);
  d.one = sd::sqrt(sd::mean(d.x * d.x, {0}, sd::keepdim));
  sd::Tensor<float, 1> rms = sd::sqrt(sd::mean(x * x, {0}, sd::keepdim));
  sb::check_close("root mean square: device vs host", sd::to_vector(d.one).data(), rms.data(), 1, 1e-5, 1e-5);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    data();
  } catch (sd::Error const& e) {
    std::printf("skipped: %s\n", e.what() + std::strlen("solder: "));
    return 0;
  }
  check();
  // Google Benchmark counts the manual time, a batch's mean: 0.01 s of it per repetition is
  // about 0.2 s of wall time (the default of the other programs).
  static char min_time[] = "--benchmark_min_time=0.01";
  std::vector<char*> args{argv[0], min_time};
  args.insert(args.end(), argv + 1, argv + argc);
  int n_args = static_cast<int>(args.size());
  sb::MedianReporter rep;
  if (!sb::run_benchmarks(n_args, args.data(), rep)) return 1;
  std::printf("\n");
  sb::report_ratio(rep, "chain fused/eager", "BM_chain_eager", "BM_chain_fused", 5);
  sb::report_fraction(rep, "chain fused vs device copy", "BM_chain_copy", "BM_chain_fused", 0.9);
  sb::report_fraction(rep, "softmax vs device copy", "BM_rows_copy", "BM_softmax", 0.8);
  sb::report_fraction(rep, "layer_norm vs device copy", "BM_rows_copy", "BM_layer_norm", 0.8);
  sb::report_fraction(rep, "softmax [16384, 1024] vs device copy", "BM_rows_copy_16k",
                      "BM_softmax_16k", 0.8);
  sb::report_fraction(rep, "layer_norm [16384, 1024] vs device copy", "BM_rows_copy_16k",
                      "BM_layer_norm_16k", 0.8);
  sb::report_fraction(rep, "softmax, length static, vs device copy", "BM_rows_copy",
                      "BM_softmax_static", 0.8);
  sb::report_fraction(rep, "layer_norm, length static, vs device copy", "BM_rows_copy",
                      "BM_layer_norm_static", 0.8);
  sb::report_fraction(rep, "softmax [16384, 1024], length static, vs device copy",
                      "BM_rows_copy_16k", "BM_softmax_static_16k", 0.8);
  sb::report_fraction(rep, "layer_norm [16384, 1024], length static, vs device copy",
                      "BM_rows_copy_16k", "BM_layer_norm_static_16k", 0.8);
  sb::report_fraction(rep, "m + bias over [16384, 1024] vs a device copy", "BM_rows_copy_16k",
                      "BM_bias_add");
  // Information: var reads m twice (the mean, then the squares about it), as much as a copy
  // moves; the root mean square reads x once, half a copy's time is its limit.
  sb::report_fraction(rep, "var(m, 0) of [16384, 1024] vs a device copy", "BM_rows_copy_16k",
                      "BM_column_var");
  sb::report_fraction(rep, "root mean square of 16M floats vs half a device copy", "BM_chain_copy",
                      "BM_root_mean_square", 0, 0.5);
  return 0;
}
