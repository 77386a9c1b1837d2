// Training a perceptron the way PyTorch code does, on a plain function: three interleaved
// spirals in the plane, a 2-64-64-3 network with gelu, cross-entropy, AdamW. sd::value_and_grad
// derives the backward from the loss's expression at compile time; each optimizer step is one
// kernel per parameter. Prints the loss and the accuracy as they change, with a progress bar;
// exits non-zero if the network did not learn the spirals.
//   train_mlp [steps]   (default 400)
#include <solder/solder.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sd = solder;

int main(int argc, char** argv) {
  int const steps = argc > 1 ? std::atoi(argv[1]) : 400;
  sd::manual_seed(0);

  // 3 arms of 200 points each: radius t, angle 2 pi c / 3 + 4 t, a little noise.
  constexpr std::int64_t per_class = 200, classes = 3, n = per_class * classes;
  sd::Tensor<float, 2> noise = sd::randn<float>(sd::shape(n, 2));
  sd::Tensor<float, 2> x = sd::zeros<float>(n, 2);
  sd::Tensor<std::int64_t, 1> labels = sd::zeros<std::int64_t>(n);
  for (std::int64_t c = 0; c < classes; ++c)
    for (std::int64_t i = 0; i < per_class; ++i) {
      std::int64_t const k = c * per_class + i;
      float const t = float(i) / per_class, angle = 2.0944f * float(c) + 4.f * t;
      x(k, 0) = t * std::cos(angle) + 0.03f * noise(k, 0);
      x(k, 1) = t * std::sin(angle) + 0.03f * noise(k, 1);
      labels(k) = c;
    }

  // PyTorch's nn.Linear initialization: uniform in +-1/sqrt(in_features).
  auto init = [](std::int64_t out, std::int64_t in) {
    float const bound = 1.f / std::sqrt(float(in));
    return std::pair{sd::Tensor<float, 2>(sd::rand<float>(sd::shape(out, in), -bound, bound)),
                     sd::Tensor<float, 1>(sd::rand<float>(sd::shape(out), -bound, bound))};
  };
  auto [w1, b1] = init(64, 2);
  auto [w2, b2] = init(64, 64);
  auto [w3, b3] = init(classes, 64);

  auto logits = [&](auto const& v1, auto const& c1, auto const& v2, auto const& c2, auto const& v3, auto const& c3) {
    auto h = sd::gelu(sd::linear(x, v1, c1));
    return sd::linear(sd::gelu(sd::linear(h, v2, c2)), v3, c3);
  };
  auto loss = [&](auto const&... p) { return sd::cross_entropy(logits(p...), labels); };

  auto accuracy = [&] {
    sd::Tensor<std::int64_t, 1> predicted = sd::argmax(logits(w1, b1, w2, b2, w3, b3), 1);
    std::int64_t right = 0;
    for (std::int64_t k = 0; k < n; ++k) right += predicted(k) == labels(k);
    return double(right) / n;
  };

  sd::optim::AdamW opt(std::tie(w1, b1, w2, b2, w3, b3), {.lr = 1e-2});
  float first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    auto [value, grads] = sd::value_and_grad(loss)(w1, b1, w2, b2, w3, b3);
    opt.step(grads);
    last = value.item();
    if (step == 0) first = last;
    if (step % 50 == 0 || step == steps - 1) {
      int const done = 30 * (step + 1) / steps;
      std::printf("[%-30s] step %4d  loss %.4f  accuracy %5.1f%%\n", std::string(std::size_t(done), '#').c_str(), step,
                  last, 100 * accuracy());
    }
  }
  double const final_accuracy = accuracy();
  std::printf("loss %.4f -> %.4f, training accuracy %.1f%%\n", first, last, 100 * final_accuracy);
  return final_accuracy >= 0.9 ? 0 : 1;
}
