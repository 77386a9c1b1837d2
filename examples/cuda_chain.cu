// The element-wise chain, two row ops (over rows of any length, then of a static length) and two
// kinds of statistics on the GPU: the same
// expressions as on the CPU, built by nvcc into one __global__ kernel each. Times fused against
// eager (one kernel and one temporary per op) and against a device-to-device copy of the same
// bytes (the bandwidth limit), and checks the GPU's results against the host's. Needs a GPU;
// without one it says so and exits 1.
// tests/cuda/check_kernels.cmake reads what ptxas reports for this file.
#include <solder/solder.hpp>

#include <cstdio>

namespace sd = solder;

template <class X>
auto chain(X const& x) {
  return sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
}

// Mean milliseconds per run of f over `runs` runs, timed with events on solder's stream.
template <class F>
float time_ms(int runs, F&& f) {
  f();
  cudaEvent_t start, stop;
  SOLDER_CUDA_CHECK(cudaEventCreate(&start));
  SOLDER_CUDA_CHECK(cudaEventCreate(&stop));
  SOLDER_CUDA_CHECK(cudaEventRecord(start, sd::cuda::stream()));
  for (int i = 0; i < runs; ++i) f();
  SOLDER_CUDA_CHECK(cudaEventRecord(stop, sd::cuda::stream()));
  SOLDER_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  SOLDER_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / runs;
}

// The bandwidth limit: a device-to-device copy of a tensor's bytes.
template <class DeviceTensor>
void copy_bytes(DeviceTensor& dst, DeviceTensor const& src) {
  SOLDER_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.numel() * sizeof(*src.data()),
                                    cudaMemcpyDeviceToDevice, sd::cuda::stream()));
}

template <class A, class B>
float max_diff(A const& gpu, B const& host) {
  return sd::eval(sd::amax(sd::abs(gpu.template to<sd::Host>() - host))).item();
}

int main() {
  try {
    constexpr std::int64_t n = 1 << 24, rows = 4096, cols = 1024;
    constexpr int runs = 100;
    sd::Tensor<float, 1, sd::Cuda> x = sd::rand<float, sd::Cuda>(sd::shape(n), -1.f, 1.f);
    sd::Tensor<float, 1, sd::Cuda> y(x.shape()), copy(x.shape());
    static_assert(sd::kernel_count<decltype(chain(x))> == 1);

    float fused = time_ms(runs, [&] { y = chain(x); });
    float eager = time_ms(runs, [&] { y = sd::eager(chain(x)); });
    float bytes = 2.f * n * sizeof(float);
    float roof = time_ms(runs, [&] { copy_bytes(copy, x); });
    y = chain(x);
    std::printf("chain on %lld floats: fused %.3f ms, eager %.3f ms (%.1fx), copy %.3f ms "
                "(fused at %.2f of copy bandwidth, %.0f GB/s); max |gpu - host| = %g\n",
                static_cast<long long>(n), fused, eager, eager / fused, roof, roof / fused,
                bytes / fused / 1e6f, max_diff(y, chain(x.to<sd::Host>())));

    auto m = sd::randn<float, sd::Cuda>(sd::shape(rows, cols));
    auto gamma = sd::rand<float, sd::Cuda>(sd::shape(cols));
    auto beta = sd::rand<float, sd::Cuda>(sd::shape(cols));
    sd::Tensor<float, 2, sd::Cuda> out(m.shape()), mcopy(m.shape());
    float mroof = time_ms(runs, [&] { copy_bytes(mcopy, m); });
    auto mh = m.to<sd::Host>();
    // Softmax and layer norm over the rows of `in` into `dst`, timed and checked.
    auto row_ops = [&](char const* label, auto const& in, auto& dst) {
      float soft = time_ms(runs, [&] { dst = sd::softmax(in, 1); });
      float norm = time_ms(runs, [&] { dst = sd::layer_norm(in, gamma, beta); });
      dst = sd::softmax(in, 1);
      float soft_err = max_diff(dst, sd::softmax(mh, 1));
      dst = sd::layer_norm(in, gamma, beta);
      float norm_err = max_diff(dst, sd::layer_norm(mh, gamma.to<sd::Host>(), beta.to<sd::Host>()));
      std::printf("rows [%lld, %lld]%s: softmax %.3f ms (%.2f of copy), layer_norm %.3f ms (%.2f "
                  "of copy), copy %.3f ms; max |gpu - host| = %g, %g\n",
                  static_cast<long long>(rows), static_cast<long long>(cols), label, soft,
                  mroof / soft, norm, mroof / norm, mroof, soft_err, norm_err);
    };
    row_ops("", m, out);
    // The same rows with their length static: the row kernels' variant whose loops unroll.
    sd::Tensor<float, sd::ext<sd::dyn, cols>, sd::Cuda> ms = m, sout = out;
    row_ops(", length static", ms, sout);

    // Statistics: batch norm's, per column (reductions over the leading dim), and one value of
    // all of x (device-wide). var reads m twice (the mean, then the squares about it), as much
    // as a copy moves; the root mean square reads x once: half a copy's time is its limit.
    sd::Tensor<float, 1, sd::Cuda> stats(sd::shape(cols)), one(sd::shape(1));
    float columns = time_ms(runs, [&] { stats = sd::var(m, 0); });
    float whole = time_ms(runs, [&] { one = sd::sqrt(sd::mean(x * x, {0}, sd::keepdim)); });
    float col_err = max_diff(stats, sd::var(mh, 0));
    float whole_err = max_diff(one, sd::sqrt(sd::mean(x.to<sd::Host>() * x.to<sd::Host>(), {0}, sd::keepdim)));
    std::printf("statistics: var(m, 0) of [%lld, %lld] %.3f ms (%.2f of a copy), "
                "root mean square of %lld floats %.3f ms (%.2f of half a copy); max |gpu - host| "
                "= %g, %g\n",
                static_cast<long long>(rows), static_cast<long long>(cols), columns,
                mroof / columns, static_cast<long long>(n), whole, roof / 2 / whole, col_err,
                whole_err);
    return 0;
  } catch (sd::Error const& e) {
    std::printf("cuda_chain: %s\n", e.what());
    return 1;
  }
}
