// Optimizers (optim/optimizers.hpp): SGD (momentum, dampening, Nesterov, weight decay), Adam and
// AdamW against PyTorch's update rules written as double-precision loops, one kernel per
// parameter and step; a two-layer perceptron trained by sd::value_and_grad and each optimizer
// against PyTorch's own run of it (tests/fixtures/training.txt, tools/make_training_fixture.py);
// and the misuse that is refused.
#include "reference.hpp"

#include <cmath>
#include <fstream>
#include <thread>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace sd = solder;

namespace {

// PyTorch's rules, one element at a time, in double.
struct Reference {
  std::vector<double> p, buf, m, v;
  int t = 0;
  void sgd(std::vector<double> const& g, sd::optim::SGDOptions const& o) {
    if (buf.empty()) buf.assign(p.size(), 0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = t == 0 ? d : o.momentum * buf[i] + (1 - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * d;
    }
    ++t;
  }
  template <class O>
  void adam(std::vector<double> const& g, O const& o, bool decoupled) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0);
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      double d = g[i];
      if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
      else d += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * d;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * d * d;
      double const c1 = 1 - std::pow(o.beta1, t), c2 = 1 - std::pow(o.beta2, t);
      p[i] -= o.lr / c1 * m[i] / (std::sqrt(v[i]) / std::sqrt(c2) + o.eps);
    }
  }
};

template <class TT>
std::vector<double> values(TT const& t) {
  auto a = ref::of(t);
  return a.v;
}

void check_same(std::vector<double> const& got, std::vector<double> const& want, double tol, char const* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) ++bad;
  CHECK(bad == 0);
}

// Three steps of `opt` on a [37, 5] matrix and a [5] vector, with random gradients, against
// `ref_step` on each (one kernel per parameter and step).
template <class Opt, class RefStep>
void three_steps(Opt& opt, sd::Tensor<float, 2>& w, sd::Tensor<float, 1>& b, RefStep const& ref_step) {
  Reference rw, rb;
  rw.p = values(w);
  rb.p = values(b);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    auto gw = ref::uniform<float>(-1, 1, 37, 5);
    auto gb = ref::uniform<float>(-1, 1, 5);
    auto const before = sd::detail::kernels_run();
    opt.step(std::make_tuple(gw, gb));
    CHECK(sd::detail::kernels_run() - before == 2);
    ref_step(rw, values(gw));
    ref_step(rb, values(gb));
    check_same(values(w), rw.p, 2e-6, "w");
    check_same(values(b), rb.p, 2e-6, "b");
  }
}

// tests/fixtures/training.txt: name -> values.
std::map<std::string, std::vector<double>> training_fixture() {
  std::ifstream f(SOLDER_TESTS_SOURCE_DIR "/fixtures/training.txt");
  REQUIRE(f);
  std::map<std::string, std::vector<double>> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line.substr(line.find(':') + 1));
    std::string name = line.substr(0, line.find(' '));
    std::vector<double> v;
    for (std::string s; in >> s;) v.push_back(std::stod(s));
    out[name] = std::move(v);
  }
  return out;
}

template <int R>
sd::Tensor<float, R> tensor_of(std::vector<double> const& v, std::array<std::int64_t, R> shape) {
  sd::Tensor<float, R> t = sd::zeros<float>(sd::Shape<sd::dynamic_extents<R>()>{shape});
  for (std::size_t i = 0; i < v.size(); ++i) t.data()[i] = static_cast<float>(v[i]);
  return t;
}

}  // namespace

TEST_CASE("optim: SGD, plain, with momentum and dampening, and Nesterov with weight decay", "[optim]") {
  for (sd::optim::SGDOptions o : {sd::optim::SGDOptions{.lr = 0.1},
                                  sd::optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.3},
                                  sd::optim::SGDOptions{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.01,
                                                        .nesterov = true}}) {
    INFO("momentum " << o.momentum << ", nesterov " << o.nesterov);
    auto w = ref::uniform<float>(-1, 1, 37, 5);
    auto b = ref::uniform<float>(-1, 1, 5);
    sd::optim::SGD opt(std::tie(w, b), o);
    static_assert(std::is_same_v<decltype(opt), sd::optim::SGD<float, sd::Host>>);
    three_steps(opt, w, b, [&](Reference& r, std::vector<double> const& g) { r.sgd(g, o); });
  }
}

TEST_CASE("optim: Adam and AdamW", "[optim]") {
  auto w = ref::uniform<float>(-1, 1, 37, 5);
  auto b = ref::uniform<float>(-1, 1, 5);
  sd::optim::AdamOptions const adam_options{.lr = 0.01, .weight_decay = 0.1};
  sd::optim::Adam adam(std::tie(w, b), adam_options);
  three_steps(adam, w, b, [&](Reference& r, std::vector<double> const& g) { r.adam(g, adam_options, false); });

  sd::optim::AdamWOptions const adamw_options{.lr = 0.02};
  CHECK(adamw_options.weight_decay == 1e-2);  // PyTorch's default for AdamW
  sd::optim::AdamW adamw(std::tie(w, b), adamw_options);
  three_steps(adamw, w, b, [&](Reference& r, std::vector<double> const& g) { r.adam(g, adamw_options, true); });
}

// The training loop on a plain function: sd::value_and_grad, then the optimizer's step, five
// times, against PyTorch's autograd and torch.optim on the same perceptron and data.
TEST_CASE("optim: a perceptron trained as PyTorch trains it", "[optim][torch]") {
  auto const fx = training_fixture();
  auto const x = tensor_of<2>(fx.at("x"), {8, 4});
  sd::Tensor<float, 2> onehot = sd::zeros<float>(8, 3);
  for (std::int64_t i = 0; i < 8; ++i) onehot(i, static_cast<std::int64_t>(fx.at("labels")[i])) = 1;
  auto loss = [&](auto const& w1, auto const& b1, auto const& w2, auto const& b2) {
    auto h = sd::relu(sd::linear(x, w1, b1));
    return -sd::mean(sd::sum(sd::log_softmax(sd::linear(h, w2, b2), -1) * onehot, 1));
  };
  auto run = [&](std::string const& name, auto make) {
    INFO(name);
    auto w1 = tensor_of<2>(fx.at("w1"), {16, 4});
    auto b1 = tensor_of<1>(fx.at("b1"), {16});
    auto w2 = tensor_of<2>(fx.at("w2"), {3, 16});
    auto b2 = tensor_of<1>(fx.at("b2"), {3});
    auto opt = make(std::tie(w1, b1, w2, b2));
    for (int k = 0; k < 5; ++k) {
      INFO("step " << k);
      auto [value, grads] = sd::value_and_grad(loss)(w1, b1, w2, b2);
      CHECK(value.item() == Approx(fx.at(name + ".loss" + std::to_string(k))[0]).epsilon(1e-5));
      if (name == "sgd_clipped") {
        double const norm = sd::nn::utils::clip_grad_norm_(grads, 0.5);
        CHECK(norm == Approx(fx.at("clip." + name + ".norm" + std::to_string(k))[0]).epsilon(1e-5));
      }
      opt.step(grads);
    }
    check_same(values(w1), fx.at(name + ".w1"), 1e-5, "w1");
    check_same(values(b1), fx.at(name + ".b1"), 1e-5, "b1");
    check_same(values(w2), fx.at(name + ".w2"), 1e-5, "w2");
    check_same(values(b2), fx.at(name + ".b2"), 1e-5, "b2");
  };
  run("adamw", [](auto params) { return sd::optim::AdamW(params, {.lr = 1e-2}); });
  run("adam", [](auto params) { return sd::optim::Adam(params, {.lr = 1e-2, .weight_decay = 1e-3}); });
  run("sgd", [](auto params) {
    return sd::optim::SGD(params, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
  });
  run("adamw_amsgrad", [](auto params) { return sd::optim::AdamW(params, {.lr = 1e-2, .amsgrad = true}); });
  run("sgd_clipped", [](auto params) { return sd::optim::SGD(params, {.lr = 0.5, .momentum = 0.9}); });
}

// The rates of StepLR, CosineAnnealingLR and LinearLR over 12 epochs against lr_scheduler's.
TEST_CASE("optim: learning-rate schedules", "[optim][torch]") {
  auto const fx = training_fixture();
  auto schedule = [&](std::string const& name, auto make) {
    INFO(name);
    sd::Tensor<float, 1> p = sd::zeros<float>(1);
    sd::optim::SGD opt(std::tie(p), {.lr = 0.1});
    auto sched = make(opt);
    std::vector<double> rates{opt.lr()};
    for (int epoch = 0; epoch < 12; ++epoch) {
      sched.step();
      rates.push_back(sched.get_last_lr());
    }
    check_same(rates, fx.at("sched." + name), 1e-12, "rates");
  };
  using Opt = sd::optim::SGD<float, sd::Host>;
  schedule("step", [](Opt& o) { return sd::optim::StepLR(o, 3, 0.5); });
  schedule("cosine", [](Opt& o) { return sd::optim::CosineAnnealingLR(o, 10, 0.01); });
  schedule("linear", [](Opt& o) { return sd::optim::LinearLR(o, 0.25, 1.0, 4); });
}

// The losses of torch.nn.functional (expr/losses.hpp) against PyTorch's values, and their
// gradients through sd::grad against torch.autograd's.
TEST_CASE("losses: cross_entropy, nll_loss, mse_loss, l1_loss, binary_cross_entropy_with_logits", "[optim][torch]") {
  auto const fx = training_fixture();
  auto z = tensor_of<2>(fx.at("loss.z"), {6, 4});
  auto const t = tensor_of<2>(fx.at("loss.target"), {6, 4});
  sd::Tensor<std::int64_t, 1> y = sd::zeros<std::int64_t>(6);
  for (std::int64_t i = 0; i < 6; ++i) y(i) = static_cast<std::int64_t>(fx.at("loss.labels")[i]);
  auto check = [&](std::string const& name, auto const& f) {
    INFO(name);
    check_same(values(sd::eval(f(z))), fx.at("loss." + name), 2e-6, "value");
    if constexpr (decltype(sd::eval(f(z)))::rank == 0) {
      auto const [g] = sd::grad(f)(z);
      check_same(values(g), fx.at("loss." + name + ".grad"), 2e-6, "gradient");
    }
  };
  check("ce", [&](auto const& a) { return sd::cross_entropy(a, y); });
  check("ce_sum", [&](auto const& a) { return sd::cross_entropy<sd::Reduction::sum>(a, y); });
  check("ce_none", [&](auto const& a) { return sd::cross_entropy<sd::Reduction::none>(a, y); });
  check("ce_smooth", [&](auto const& a) { return sd::cross_entropy(a, y, {.label_smoothing = 0.1}); });
  check("nll", [&](auto const& a) { return sd::nll_loss(sd::log_softmax(a, -1), y); });
  check("mse", [&](auto const& a) { return sd::mse_loss(a, t); });
  check("l1", [&](auto const& a) { return sd::l1_loss<sd::Reduction::sum>(a, t); });
  check("bce", [&](auto const& a) { return sd::binary_cross_entropy_with_logits(a, t); });
  sd::Tensor<std::int64_t, 1> y2 = sd::eval(sd::maximum(y, std::int64_t(0)));  // no label ignored
  auto const oh = sd::eval(sd::one_hot(y2, 4));
  static_assert(std::is_same_v<decltype(oh)::value_type, std::int64_t>);
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t c = 0; c < 4; ++c) CHECK(oh(i, c) == (y2(i) == c ? 1 : 0));
  sd::Tensor<std::int64_t, 1> bad = sd::eval(y * 0 + 4);
  CHECK_THROWS_WITH(sd::cross_entropy(z, bad), Catch::Contains("cross_entropy: target 4 is out of bounds for 4 classes"));
  CHECK_THROWS_WITH(sd::one_hot(y, 4), Catch::Contains("one_hot: target -100 is out of bounds"));
}

// Training is thread-safe: two threads, each training its own copy of the perceptron, end with
// the parameters one thread gets alone (the backward's scope of stored results is per thread).
TEST_CASE("optim: two threads train two models at once as one thread does", "[optim][threads]") {
  auto const fx = training_fixture();
  auto const x = tensor_of<2>(fx.at("x"), {8, 4});
  sd::Tensor<std::int64_t, 1> labels = sd::zeros<std::int64_t>(8);
  for (std::int64_t i = 0; i < 8; ++i) labels(i) = static_cast<std::int64_t>(fx.at("labels")[i]);
  auto train = [&] {
    auto w1 = tensor_of<2>(fx.at("w1"), {16, 4});
    auto b1 = tensor_of<1>(fx.at("b1"), {16});
    auto w2 = tensor_of<2>(fx.at("w2"), {3, 16});
    auto b2 = tensor_of<1>(fx.at("b2"), {3});
    auto loss = [&](auto const& p1, auto const& q1, auto const& p2, auto const& q2) {
      return sd::cross_entropy(sd::linear(sd::relu(sd::linear(x, p1, q1)), p2, q2), labels);
    };
    sd::optim::AdamW opt(std::tie(w1, b1, w2, b2), {.lr = 1e-2});
    for (int k = 0; k < 20; ++k) opt.step(sd::grad(loss)(w1, b1, w2, b2));
    std::vector<double> all;
    for (auto const& part : {values(w1), values(b1), values(w2), values(b2)}) all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  auto const alone = train();
  std::vector<double> first, second;
  std::thread a([&] { first = train(); }), b([&] { second = train(); });
  a.join();
  b.join();
  CHECK(first == alone);
  CHECK(second == alone);
}

// A module whose forward is one expression (nn::Linear) is differentiated as the expression it
// writes; one that stores a block's result on the way is refused, not given lost gradients.
TEST_CASE("value_and_grad through modules", "[optim][nn]") {
  auto const x = ref::uniform<float>(-1, 1, 5, 4);
  sd::nn::Linear fc(4, 3);
  auto const [gw, gb] = sd::grad([&](auto const&, auto const&) { return sd::sum(sd::tanh(fc(x))); })(fc.weight, fc.bias.value);
  auto const [pw, pb] = sd::grad([&](auto const& w, auto const& b) { return sd::sum(sd::tanh(sd::linear(x, w, b))); })(
      fc.weight, fc.bias.value);
  check_same(values(gw), values(pw), 0, "weight");
  check_same(values(gb), values(pb), 0, "bias");
  CHECK_THROWS_WITH(sd::grad([&](auto const& w) { return sd::sum(sd::materialize(x * w)); })(x),
                    Catch::Contains("value_and_grad: the function materializes a block"));
}

TEST_CASE("optim: misuse is refused with the details", "[optim][errors]") {
  auto w = ref::uniform<float>(-1, 1, 4, 6);
  auto b = ref::uniform<float>(-1, 1, 6);
  auto wt = sd::transpose(w, 0, 1);
  CHECK_THROWS_WITH(sd::optim::SGD(std::tie(wt), {.lr = 0.1}), Catch::Contains("is not contiguous"));
  CHECK_THROWS_WITH(sd::optim::SGD(std::tie(w), {.lr = 0.1, .nesterov = true}),
                    Catch::Contains("Nesterov momentum requires a momentum"));
  CHECK_THROWS_WITH(sd::optim::Adam(std::tie(w), {.lr = -1}), Catch::Contains("out of range"));
  sd::optim::AdamW opt(std::tie(w, b));
  CHECK_THROWS_WITH(opt.step(std::make_tuple(b)), Catch::Contains("step got 1 gradients for 2 parameters"));
  CHECK_THROWS_WITH(opt.step(std::make_tuple(b, b)), Catch::Contains("the gradient of parameter 0 has 6 elements"));
}
