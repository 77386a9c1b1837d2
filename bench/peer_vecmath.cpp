// Hand-written reference kernels on glibc's vector maths: what a careful programmer writes
// without a library. Compiled with -ffast-math (bench/CMakeLists.txt) so GCC vectorizes
// std::exp / std::tanh into calls to libmvec (_ZGV?N??v_expf, _ZGV?N??v_tanhf); check with
//   -fopt-info-vec-optimized  and  nm -C <bench> | grep _ZGV
#include <algorithm>
#include <cmath>
#include <limits>

#include "common.hpp"

namespace solder_bench::peer {

void chain(float const* x, float* y, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = std::tanh(v * 0.5f + 0.25f) * (1.0f / (1.0f + std::exp(-v))) + v * v * 0.1f - 0.3f;
  }
}

// The largest of a row's n values: the first pass of both row peers.
static float row_max(float const* xr, std::int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (std::int64_t j = 0; j < n; ++j) m = std::max(m, xr[j]);
  return m;
}

// Three passes per row, as one writes it by hand: max, exp + sum (stored), scale.
void softmax_rows(float const* x, float* y, std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    float const* xr = x + r * cols;
    float* yr = y + r * cols;
    float const m = row_max(xr, cols);
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < cols; ++j) {
      float e = std::exp(xr[j] - m);
      yr[j] = e;
      s += e;
    }
    float inv = 1.0f / s;
#pragma omp simd
    for (std::int64_t j = 0; j < cols; ++j) yr[j] *= inv;
  }
}

// Two passes over the input and one writing, as one writes it by hand: max, sum of exp (not
// stored: the output needs x - max - log(sum), not exp), write.
void log_softmax_rows(float const* x, float* y, std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    float const* xr = x + r * cols;
    float* yr = y + r * cols;
    float const m = row_max(xr, cols);
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
    float shift = m + std::log(s);
#pragma omp simd
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = xr[j] - shift;
  }
}

}  // namespace solder_bench::peer
