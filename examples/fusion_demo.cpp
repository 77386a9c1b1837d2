// The coffee shop of reference/000: in eager mode the barista walks back to the counter after
// every step (one kernel per op, each reading and writing a whole temporary); compiled, the
// same order is one continuous movement (one fused kernel). Same expression, both ways.
#include <solder/solder.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>

namespace sd = solder;

template <class F>
double time_ms(int runs, F&& f) {
  f();  // first cup: eager has no warm-up to do either, but page-faults its temporaries here
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) f();
  std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - t0;
  return d.count() / runs;
}

int main(int argc, char** argv) {
  std::int64_t n = argc > 1 ? std::atoll(argv[1]) : (1 << 24);
  int runs = 100;
  sd::Tensor<float, 1> x = sd::rand<float>(sd::shape(n), -1.f, 1.f);
  sd::Tensor<float, 1> y(x.shape());

  // grind, tamp, pull the shot, steam the milk, pour: nine steps
  auto order = sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
  static_assert(sd::kernel_count<decltype(order)> == 1, "one continuous movement");

  std::printf("solder fusion demo: %lld floats, %d threads, %d runs each\n\n",
              static_cast<long long>(n), sd::get_num_threads(), runs);
  std::cout << "The plan (sd::explain):\n" << sd::explain(order) << '\n';

  double eager = time_ms(runs, [&] { y = sd::eager(order); });
  sd::Tensor<float, 1> from_eager = y.clone();
  double fused = time_ms(runs, [&] { y = order; });

  float worst = sd::eval(sd::amax(sd::abs(y - from_eager))).item();
  std::printf("eager (barista walks back after each of %d steps): %8.3f ms per cup\n",
              sd::eager_kernel_count<decltype(order)>, eager);
  std::printf("fused (one continuous movement, %d kernel):          %8.3f ms per cup\n",
              sd::kernel_count<decltype(order)>, fused);
  std::printf("speed-up: %.1fx   (largest difference between the two: %.2g)\n", eager / fused,
              static_cast<double>(worst));
  return worst < 1e-5f ? 0 : 1;
}
