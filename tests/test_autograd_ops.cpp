// Reverse-mode derivation (autograd/): the reductions and the row ops built of them, views,
// matrix products, a two-layer perceptron's loss and shared subexpressions, checked against
// central differences as in test_autograd.cpp (which holds the element-wise ops; two files so
// that they build in parallel).
#include "autograd_check.hpp"

using namespace autograd_check;

TEST_CASE("autograd: reductions and the row ops built of them", "[autograd]") {
  auto x = points(4, 7);
  auto w = points(4, 7);
  auto gamma = ref::uniform<double>(0.5, 1.5, 7);
  auto beta = ref::uniform<double>(-1, 1, 7);
  check_grad("sum over a dim", [&](auto const& a) { return sd::sum(sd::exp(sd::sum(a * w, 1) * 0.1)); }, x);
  check_grad("mean over dims, keepdim", [&](auto const& a) {
    return sd::sum(sd::sin(sd::mean(a, {0}, sd::keepdim) * a));
  }, x);
  check_grad("max and amin", [&](auto const& a) {
    return sd::sum(sd::max(a * w, 1) * 2.0) + sd::sum(sd::amin(a, 0, sd::keepdim));
  }, x);
  check_grad("var", [&](auto const& a) { return sd::sum(sd::var(a, 1) * sd::mean(w, 1)); }, x);
  check_grad("softmax", [&](auto const& a) { return sd::sum(sd::softmax(a, -1) * w); }, x);
  check_grad("softmax over dim 0", [&](auto const& a) { return sd::sum(sd::softmax(a, 0) * w); }, x);
  check_grad("log_softmax", [&](auto const& a) { return sd::sum(sd::log_softmax<-1>(a) * w); }, x);
  check_grad("layer_norm", [&](auto const& a, auto const& g, auto const& b) {
    return sd::sum(sd::layer_norm(a, g, b) * w);
  }, x, gamma, beta);
}

TEST_CASE("autograd: views take the gradient back through their strides", "[autograd]") {
  auto x = points(4, 6);
  auto w = points(6, 4);
  auto w2 = points(2, 6);
  auto v = ref::uniform<double>(-1, 1, 6);
  check_grad("transpose, of an element-wise expression", [&](auto const& a) {
    return sd::sum(sd::exp(sd::transpose(a * 0.5, 0, 1)) * w);
  }, x);
  check_grad("transpose, of a reduction's row op (a view node)", [&](auto const& a) {
    return sd::sum(sd::transpose(sd::softmax(a, 1), 0, 1) * w);
  }, x);
  check_grad("a strided slice and narrow", [&](auto const& a) {
    return sd::sum(sd::slice(a, 0, 1, 4, 2) * w2) + sd::sum(sd::sin(sd::narrow(a, 1, 2, 3)));
  }, x);
  check_grad("select, unsqueeze, flatten, reshape", [&](auto const& a) {
    return sd::sum(sd::select(a, 0, 2) * v) + sd::sum(sd::unsqueeze(a, 1) * 0.5) +
           sd::sum(sd::flatten<0>(a) * sd::flatten<0>(w)) +
           sd::sum(sd::reshape(sd::softmax(a, 1), {3, 8}) * sd::reshape(w, {3, 8}));
  }, x);
  // An expanded view reads each element several times: its gradient is their sum.
  check_grad("expand", [&](auto const& r) { return sd::sum(sd::tanh(sd::expand(r, {4, 6}) * x)); }, v);
  auto square = points(5, 5);
  check_grad("an argument read through a view of itself", [](auto const& a) {
    return sd::sum(a * sd::transpose(a, 0, 1));
  }, square);
}

TEST_CASE("autograd: matrix products, batched and with vectors", "[autograd]") {
  auto a = points(3, 4);
  auto b = points(4, 5);
  auto batch = ref::uniform<double>(-1, 1, 2, 3, 4);
  auto u = ref::uniform<double>(-1, 1, 4);
  auto v = ref::uniform<double>(-1, 1, 5);
  auto bias = ref::uniform<double>(-1, 1, 5);
  auto wt = points(5, 4);
  auto out = points(3, 5);
  check_grad("mm", [&](auto const& p, auto const& q) { return sd::sum(sd::mm(p, q) * out); }, a, b);
  check_grad("matmul with a broadcast batch", [&](auto const& p, auto const& q) {
    return sd::sum(sd::sin(sd::matmul(p, q)));
  }, batch, b);
  check_grad("vector @ matrix, matrix @ vector, vector @ vector", [&](auto const& p, auto const& q, auto const& r,
                                                                       auto const& s) {
    return sd::sum(sd::matmul(r, q) * s) + sd::sum(sd::matmul(p, r)) + sd::matmul(r, r);
  }, a, b, u, v);
  check_grad("linear over 3 dims, with bias", [&](auto const& x, auto const& w, auto const& c) {
    return sd::mean(sd::gelu(sd::linear(x, w, c)));
  }, batch, wt, bias);
}

// A two-layer perceptron with a cross-entropy loss written out (log_softmax of the logits,
// Embedding's backward adds each row of the gradient to the row its index picked (ids repeat
// here), the same bits for any thread count.
TEST_CASE("autograd: embedding", "[autograd]") {
  auto table = points(7, 5);
  sd::Tensor<std::int64_t, 2> ids = sd::zeros<std::int64_t>(3, 4);
  for (std::int64_t i = 0; i < 12; ++i) ids.data()[i] = (i * 5) % 7 == 3 ? 3 : (i * 3) % 7;
  auto w = ref::uniform<double>(-1, 1, 3, 4, 5);
  check_grad("embedding", [&](auto const& t) { return sd::sum(sd::tanh(sd::embedding(ids, t) * 2.0) * w); }, table);

  sd::Tensor<std::int64_t, 1> many = sd::eval(sd::cast<std::int64_t>(sd::rand<float>(sd::shape(20000), 0.f, 9.99f)));
  auto big = ref::uniform<float>(-1, 1, 10, 64);
  auto f = [&](auto const& t) { return sd::sum(sd::embedding(many, t) * sd::embedding(many, t)); };
  int const threads = sd::get_num_threads();
  sd::set_num_threads(1);
  auto const [one] = sd::grad(f)(big);
  sd::set_num_threads(std::max(2, threads));
  auto const [two] = sd::grad(f)(big);
  sd::set_num_threads(threads);
  ref::check_equal(two, ref::of(one), "the same bits for 1 and 2 threads");
}

TEST_CASE("autograd: a two-layer perceptron's loss", "[autograd]") {
  auto x = points(6, 5);
  auto w1 = points(8, 5, -0.5, 0.5);
  auto b1 = ref::uniform<double>(-0.1, 0.1, 8);
  auto w2 = points(3, 8, -0.5, 0.5);
  auto b2 = ref::uniform<double>(-0.1, 0.1, 3);
  sd::Tensor<double, 2> onehot = sd::zeros<double>(6, 3);
  for (std::int64_t i = 0; i < 6; ++i) onehot(i, i % 3) = 1;
  auto loss = [&](auto const& p1, auto const& q1, auto const& p2, auto const& q2) {
    auto h = sd::relu(sd::linear(x, p1, q1));
    return -sd::mean(sd::sum(sd::log_softmax(sd::linear(h, p2, q2), -1) * onehot, 1));
  };
  check_grad("mlp", loss, w1, b1, w2, b2);
  auto [value, grads] = sd::value_and_grad(loss)(w1, b1, w2, b2);
  CHECK(value.item() == Approx(sd::eval(loss(w1, b1, w2, b2)).item()).epsilon(1e-14));
  static_assert(std::tuple_size_v<decltype(grads)> == 4);
}

TEST_CASE("autograd: a shared subexpression, and an argument used twice", "[autograd]") {
  auto x = points(3, 4);
  auto w = points(3, 4);
  check_grad("share", [&](auto const& a) {
    auto s = sd::share(sd::softmax(a * w, 1));
    return sd::sum(s * s + s * w);
  }, x);
  check_grad("x * sigmoid(x)", [](auto const& a) { return sd::sum(a * sd::sigmoid(a) + a); }, x);
}

