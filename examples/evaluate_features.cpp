// The function of reference/004, `relu(mm(data, w.unsqueeze(1))).squeeze()`, as solder writes
// it: an expression, fused at build time into one kernel (the product, with the relu and the
// squeeze as its epilogue), run eagerly (one kernel per op) and fused, with its plan printed.
//   evaluate_features [rows] [cols]   (default 64 x 128, the reference's sizes)
#include <solder/solder.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace sd = solder;

// torch's squeeze() drops every dim of size 1, so its result's rank depends on the shapes; in
// C++ the rank is part of the type, so the dim is named: the product's last.
template <class Data, class Weight>
auto evaluate_features(Data const& data_matrix, Weight const& weight_vector) {
  auto projected = sd::mm(data_matrix, sd::unsqueeze(weight_vector, 1));
  auto normalized = sd::relu(projected);
  return sd::squeeze(normalized, -1);
}

template <class F>
double time_us(int runs, F&& f) {
  f();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) f();
  std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - t0;
  return d.count() / runs;
}

int main(int argc, char** argv) {
  std::int64_t rows = argc > 1 ? std::atoll(argv[1]) : 64, cols = argc > 2 ? std::atoll(argv[2]) : 128;
  sd::Tensor<float, 2> data = sd::randn<float>(sd::shape(rows, cols));
  sd::Tensor<float, 1> weight = sd::randn<float>(sd::shape(cols));

  auto features = evaluate_features(data, weight);
  static_assert(sd::kernel_count<decltype(features)> == 1, "one kernel: the relu is the product's epilogue");
  std::cout << "The plan (sd::explain):\n" << sd::explain(features) << '\n';

  sd::Tensor<float, 1> fused = features;
  sd::Tensor<float, 1> eager = sd::eager(features);
  float worst = sd::eval(sd::amax(sd::abs(fused - eager))).item();
  int runs = 2000;
  double t_eager = time_us(runs, [&] { eager = sd::eager(features); });
  double t_fused = time_us(runs, [&] { fused = features; });
  std::printf("[%lld, %lld] x [%lld]: eager (%d kernels) %.2f us, fused (1 kernel) %.2f us; "
              "largest difference %g\n",
              static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(cols),
              sd::eager_kernel_count<decltype(features)>, t_eager, t_fused, static_cast<double>(worst));
  return worst <= 1e-4f ? 0 : 1;
}
