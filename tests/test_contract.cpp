// Contractions (expr/contract.hpp, backend/host/contract.hpp): matmul, mm, bmm and linear with
// torch.matmul's shape rules, and rule 3 — the element-wise expression over a contraction runs
// as its epilogue, in the same kernel. Every value is checked against double-precision loops
// (ref::matmul) within the error bound of a float dot product, every kernel count against
// explain() and the kernels that run.
#include "reference.hpp"

#include <string>

namespace sd = solder;
using ref::Array;
using ref::contains;
using ref::run_counted;

namespace {

// |got - exact| <= (k + 2) * eps * sum|a||b| + 2 ulp: the bound of a dot product of k terms.
template <class TT>
void check_product(TT const& got, ref::Product const& p, std::int64_t k, std::string const& what) {
  ref::check_close(got, p.value, ref::Tol{2, 0, static_cast<double>(k + 2)}, what, &p.scale);
}

Array relu(Array const& a) {
  return ref::map([](double v) { return v > 0 ? v : 0; }, a);
}

}  // namespace

TEMPLATE_TEST_CASE("matmul of matrices against double loops", "[contract]", float, double) {
  struct Case {
    std::int64_t m, n, k;
  };
  for (Case c : {Case{1, 1, 1}, Case{1, 7, 13}, Case{13, 1, 7}, Case{7, 13, 1}, Case{31, 29, 37},
                 Case{64, 64, 64}, Case{97, 130, 257}, Case{300, 5, 301}, Case{2, 300, 17}}) {
    auto a = ref::uniform<TestType>(-1, 1, c.m, c.k);
    auto b = ref::uniform<TestType>(-1, 1, c.k, c.n);
    auto p = ref::matmul(ref::of(a), ref::of(b));
    std::string what = "matmul [" + std::to_string(c.m) + ", " + std::to_string(c.k) + "] x [" +
                       std::to_string(c.k) + ", " + std::to_string(c.n) + "]";
    check_product(run_counted(sd::matmul(a, b)), p, c.k, what);
    check_product(run_counted(sd::mm(a, b)), p, c.k, "mm: " + what);
  }
}

TEST_CASE("matmul reads transposed, sliced and broadcast operands in place", "[contract]") {
  auto at = ref::uniform<float>(-1, 1, 23, 19);  // a = at^T: [19, 23], rows strided
  auto bb = ref::uniform<float>(-1, 1, 23, 34);  // b = every other column: [23, 17]
  auto a = sd::transpose(at, 0, 1);
  auto b = sd::slice(bb, 1, 0, 34, 2);
  auto p = ref::matmul(ref::of(a), ref::of(b));
  check_product(run_counted(sd::matmul(a, b)), p, 23, "transposed x sliced");
  auto col = ref::uniform<float>(-1, 1, 23, 1);  // an expanded operand: stride 0 along N
  auto e = sd::expand(col, {23, 5});
  check_product(run_counted(sd::matmul(a, e)), ref::matmul(ref::of(a), ref::of(e)), 23, "expanded");
}

TEST_CASE("matmul of vectors and batches follows torch.matmul", "[contract]") {
  auto v = ref::uniform<float>(-1, 1, 7);
  auto w = ref::uniform<float>(-1, 1, 7);
  auto m = ref::uniform<float>(-1, 1, 5, 7);
  auto mt = ref::uniform<float>(-1, 1, 7, 4);
  auto dot = run_counted(sd::matmul(v, w));  // [7] x [7]: a number
  static_assert(decltype(dot)::rank == 0);
  check_product(dot, ref::matmul(ref::of(v), ref::of(w)), 7, "vector . vector");
  CHECK(sd::matmul(v, w).item() == Approx(ref::matmul(ref::of(v), ref::of(w)).value[0]).epsilon(1e-5));
  check_product(run_counted(sd::matmul(m, v)), ref::matmul(ref::of(m), ref::of(v)), 7, "matrix x vector");
  check_product(run_counted(sd::matmul(v, mt)), ref::matmul(ref::of(v), ref::of(mt)), 7, "vector x matrix");

  auto b4 = ref::uniform<float>(-1, 1, 4, 1, 5, 7);
  auto b3 = ref::uniform<float>(-1, 1, 3, 7, 2);
  auto r = run_counted(sd::matmul(b4, b3));  // batch dims [4, 1] and [3] broadcast to [4, 3]
  REQUIRE(r.shape() == sd::Index<4>{4, 3, 5, 2});
  check_product(r, ref::matmul(ref::of(b4), ref::of(b3)), 7, "[4, 1, 5, 7] x [3, 7, 2]");
  auto x3 = ref::uniform<float>(-1, 1, 2, 5, 7);
  check_product(run_counted(sd::matmul(x3, mt)), ref::matmul(ref::of(x3), ref::of(mt)), 7, "[2, 5, 7] x [7, 4]");
  check_product(run_counted(sd::matmul(m, b3)), ref::matmul(ref::of(m), ref::of(b3)), 7, "[5, 7] x [3, 7, 2]");
  check_product(run_counted(sd::matmul(x3, v)), ref::matmul(ref::of(x3), ref::of(v)), 7, "[2, 5, 7] x [7]");
  check_product(run_counted(sd::matmul(v, b3)), ref::matmul(ref::of(v), ref::of(b3)), 7, "[7] x [3, 7, 2]");
  auto y3 = ref::uniform<float>(-1, 1, 2, 7, 3);
  check_product(run_counted(sd::bmm(x3, y3)), ref::matmul(ref::of(x3), ref::of(y3)), 7, "bmm");
  // A batch of operands that is not one stride apart (a sliced batch dim): one call per batch.
  auto big = ref::uniform<float>(-1, 1, 4, 3, 5, 7);
  auto sl = sd::slice(big, 1, 0, 3, 2);  // [4, 2, 5, 7], batch strides 105 and 70
  check_product(run_counted(sd::matmul(sl, mt)), ref::matmul(ref::of(sl), ref::of(mt)), 7, "sliced batch");
}

TEST_CASE("linear is x times the weight transposed plus the bias", "[contract]") {
  auto x = ref::uniform<float>(-1, 1, 6, 11);
  auto w = ref::uniform<float>(-1, 1, 9, 11);  // [out, in], as nn.Linear
  auto b = ref::uniform<float>(-1, 1, 9);
  auto p = ref::matmul(ref::of(x), ref::transpose(ref::of(w), 0, 1));
  check_product(run_counted(sd::linear(x, w)), p, 11, "linear without bias");
  Array with_bias = ref::map([](double v, double c) { return v + c; }, p.value, ref::of(b));
  auto y = run_counted(sd::linear(x, w, b));
  ref::check_close(y, with_bias, ref::Tol{2, 0, 13}, "linear", &p.scale);
  auto x3 = ref::uniform<float>(-1, 1, 2, 3, 11);  // [batch, tokens, in]
  auto p3 = ref::matmul(ref::of(x3), ref::transpose(ref::of(w), 0, 1));
  check_product(run_counted(sd::linear(x3, w)), p3, 11, "linear over [2, 3, 11]");
}

TEST_CASE("element-wise maths over a contraction is its epilogue: one kernel", "[contract][fusion]") {
  auto x = ref::uniform<float>(-1, 1, 33, 20);
  auto w = ref::uniform<float>(-1, 1, 17, 20);
  auto b = ref::uniform<float>(-1, 1, 17);
  auto scale = ref::uniform<float>(0.5, 1.5, 17);
  auto residual = ref::uniform<float>(-1, 1, 33, 17);
  auto p = ref::matmul(ref::of(x), ref::transpose(ref::of(w), 0, 1));

  auto e = sd::relu(sd::linear(x, w, b));
  static_assert(sd::kernel_count<decltype(e)> == 1);
  static_assert(sd::eager_kernel_count<decltype(e)> == 3);
  CHECK(contains(sd::explain(e), "contraction kernel"));
  Array expect = relu(ref::map([](double v, double c) { return v + c; }, p.value, ref::of(b)));
  ref::check_close(run_counted(e), expect, ref::Tol{2, 0, 24}, "relu(linear)", &p.scale);

  auto f = sd::relu(sd::matmul(x, sd::transpose(w, 0, 1)) * scale + b + residual);
  static_assert(sd::kernel_count<decltype(f)> == 1);
  Array fx = relu(ref::map([](double v, double s, double c, double r) { return v * s + c + r; }, p.value,
                           ref::of(scale), ref::of(b), ref::of(residual)));
  Array fscale = ref::map([](double v, double s) { return v * s; }, p.scale, ref::of(scale));
  ref::check_close(run_counted(f), fx, ref::Tol{4, 0, 24}, "relu(mm * scale + shift + residual)", &fscale);

  // Fused and eager agree.
  ref::check_close(sd::eager(e), expect, ref::Tol{2, 0, 24}, "eager relu(linear)", &p.scale);

  // A column broadcast along the rows ([33, 1]) and an output written through a transposed view:
  // the epilogue walks elements instead of runs.
  auto rowscale = ref::uniform<float>(0.5, 1.5, 33, 1);
  sd::Tensor<float, 2> out(17, 33);
  auto out_t = sd::transpose(out, 0, 1);
  auto before = sd::detail::kernels_run();
  out_t = sd::gelu(sd::linear(x, w) * rowscale);
  CHECK(sd::detail::kernels_run() - before == 1);
  Array g = ref::map(
      [](double v, double s) {
        double t = v * s;
        return 0.5 * t * (1 + std::erf(t / std::sqrt(2.0)));
      },
      p.value, ref::of(rowscale));
  Array gscale = ref::map([](double v, double s) { return v * s; }, p.scale, ref::of(rowscale));
  ref::check_close(out_t, g, ref::Tol{8, 0, 24}, "gelu(linear * column) into a transposed view", &gscale);
}

TEST_CASE("contractions that cannot be an epilogue's anchor are stored first", "[contract][fusion]") {
  auto a = ref::uniform<float>(-1, 1, 8, 6);
  auto b = ref::uniform<float>(-1, 1, 6, 5);
  auto c = ref::uniform<float>(-1, 1, 5, 4);
  auto d = ref::uniform<float>(-1, 1, 8, 5);
  Array A = ref::of(a), B = ref::of(b), C = ref::of(c);

  // A contraction of a contraction: the inner one is materialized (rule 4), the outer anchors.
  auto chain = sd::relu(sd::matmul(sd::matmul(a, b), c));
  static_assert(sd::kernel_count<decltype(chain)> == 2);
  CHECK(contains(sd::explain(chain), "an operand of a contraction is read from memory"));
  auto inner = ref::matmul(A, B);
  auto outer = ref::matmul(inner.value, C);
  auto outer_scale = ref::matmul(inner.scale, ref::map([](double v) { return std::fabs(v); }, C));
  ref::check_close(run_counted(chain), relu(outer.value), ref::Tol{2, 0, 16}, "relu(mm(mm))", &outer_scale.value);

  // Two contractions in one expression: neither anchors, both are stored, the add is a kernel.
  auto two = sd::matmul(a, b) + sd::matmul(a, b) * 2.f;
  static_assert(sd::kernel_count<decltype(two)> == 3);
  auto p = ref::matmul(A, B);
  Array three = ref::map([](double v) { return 3 * v; }, p.value);
  Array three_scale = ref::map([](double v) { return 3 * v; }, p.scale);
  ref::check_close(run_counted(two), three, ref::Tol{2, 0, 8}, "mm + mm * 2", &three_scale);

  // Reduced, or under a reduction in the same kernel: stored, then the reduction reads it.
  auto sm = sd::softmax(sd::matmul(a, b) * 0.5f, -1);
  static_assert(sd::kernel_count<decltype(sm)> == 2);
  auto s = run_counted(sm);
  for (int i = 0; i < 8; ++i) {
    double m = -1e300, z = 0;
    for (int j = 0; j < 5; ++j) m = std::max(m, 0.5 * p.value[i * 5 + j]);
    for (int j = 0; j < 5; ++j) z += std::exp(0.5 * p.value[i * 5 + j] - m);
    for (int j = 0; j < 5; ++j) CHECK(s(i, j) == Approx(std::exp(0.5 * p.value[i * 5 + j] - m) / z).epsilon(1e-5));
  }
  auto total = sd::sum(sd::matmul(a, b) + d);
  static_assert(sd::kernel_count<decltype(total)> == 2);
  double expect = 0;
  for (int i = 0; i < 40; ++i) expect += p.value[i] + ref::of(d)[i];
  CHECK(run_counted(total).item() == Approx(expect).epsilon(1e-5));

  // An element-wise left operand is computed while the engine packs it (prologue); a right
  // one, or a left one that holds a reduction, is materialized first.
  auto gelu = [](Array const& v) {
    return ref::map([](double t) { return 0.5 * t * (1 + std::erf(t / std::sqrt(2.0))); }, v);
  };
  auto pro = sd::relu(sd::matmul(sd::gelu(a * 2.f), b));
  static_assert(sd::kernel_count<decltype(pro)> == 1);
  auto pg = ref::matmul(gelu(ref::map([](double v) { return 2 * v; }, A)), B);
  ref::check_close(run_counted(pro), relu(pg.value), ref::Tol{4, 0, 10}, "relu(gelu(2a) @ b)", &pg.scale);
  auto right = sd::matmul(a, sd::gelu(b));
  static_assert(sd::kernel_count<decltype(right)> == 2);
  check_product(run_counted(right), ref::matmul(A, gelu(B)), 6, "a @ gelu(b)");
  auto l4 = ref::uniform<float>(-1, 1, 3, 1, 4, 6);
  auto r3 = ref::uniform<float>(-1, 1, 2, 6, 5);
  auto batched = sd::matmul(sd::exp(l4), r3);
  static_assert(sd::kernel_count<decltype(batched)> == 1);
  auto bb = run_counted(batched);
  REQUIRE(bb.shape() == sd::Index<4>{3, 2, 4, 5});
  auto bp = ref::matmul(ref::map([](double v) { return std::exp(v); }, ref::of(l4)), ref::of(r3));
  check_product(bb, bp, 6, "exp(l) batched, broadcast over the right's batch");
  auto reduced = sd::matmul(sd::softmax(a, -1), b);
  static_assert(sd::kernel_count<decltype(reduced)> == 2);
  run_counted(reduced);

  // A view of an epilogue: the kernel, then the view of its result.
  auto data = ref::uniform<float>(-1, 1, 10, 6);
  auto wv = ref::uniform<float>(-1, 1, 6);
  auto features = sd::squeeze(sd::relu(sd::mm(data, sd::unsqueeze(wv, 1))), -1);
  auto fr = run_counted(features);
  REQUIRE(fr.shape() == sd::Index<1>{10});
  auto fp = ref::matmul(ref::of(data), ref::of(wv));
  ref::check_close(fr, relu(fp.value), ref::Tol{2, 0, 8}, "squeeze(relu(mm(data, w.unsqueeze(1))))", &fp.scale);
}

TEST_CASE("a contraction broadcast in its epilogue is a run-time break", "[contract][fusion]") {
  auto row = ref::uniform<float>(-1, 1, 1, 6);
  auto w = ref::uniform<float>(-1, 1, 6, 5);
  auto x = ref::uniform<float>(-1, 1, 4, 5);
  auto e = sd::matmul(row, w) + x;  // [1, 5] + [4, 5]
  static_assert(sd::kernel_count<decltype(e)> == 1);
  std::string text = sd::explain(e);
  INFO(text);
  CHECK(contains(text, "solder plan: 2 kernels"));
  CHECK(contains(text, "run-time break"));
  auto before = sd::detail::kernels_run();
  sd::Tensor<float, 2> y = e;
  CHECK(sd::detail::kernels_run() - before == 2);
  auto p = ref::matmul(ref::of(row), ref::of(w));
  Array expect = ref::map([](double v, double c) { return v + c; }, p.value, ref::of(x));
  Array scale = ref::map([](double v, double) { return v; }, p.scale, ref::of(x));
  ref::check_close(y, expect, ref::Tol{2, 0, 8}, "[1, 5] product broadcast", &scale);
}

TEST_CASE("an output that is also a contraction's operand is written after the product", "[contract][alias]") {
  auto y = ref::uniform<float>(-1, 1, 9, 9);
  auto w = ref::uniform<float>(-1, 1, 9, 9);
  auto p = ref::matmul(ref::of(y), ref::of(w));
  y = sd::relu(sd::matmul(y, w));
  ref::check_close(y, relu(p.value), ref::Tol{2, 0, 11}, "y = relu(y @ w)", &p.scale);
  auto q = ref::matmul(ref::of(w), ref::of(w));
  w = sd::matmul(w, w);
  check_product(w, q, 9, "w = w @ w");
}

TEST_CASE("contractions with k = 0, m = 0 and n = 0", "[contract][edges]") {
  auto a = ref::uniform<float>(-1, 1, 3, 0);
  auto b = ref::uniform<float>(-1, 1, 0, 4);
  auto z = run_counted(sd::matmul(a, b) + 1.f);  // sums of no terms: 0, as PyTorch
  ref::check_equal(z, Array({3, 4}, 1.0), "k = 0");
  auto e = run_counted(sd::matmul(ref::uniform<float>(-1, 1, 0, 5), ref::uniform<float>(-1, 1, 5, 4)));
  CHECK(e.shape() == sd::Index<2>{0, 4});
}

TEST_CASE("matmul results do not depend on the run for a thread count", "[contract][threads]") {
  auto a = ref::uniform<float>(-1, 1, 150, 301);
  auto b = ref::uniform<float>(-1, 1, 301, 129);
  sd::Tensor<float, 2> r1 = sd::matmul(a, b), r2 = sd::matmul(a, b);
  CHECK(std::memcmp(r1.data(), r2.data(), sizeof(float) * 150 * 129) == 0);
}

TEST_CASE("contractions refuse shapes that do not multiply, naming the op and the shapes", "[contract][errors]") {
  auto a = ref::uniform<float>(-1, 1, 3, 4);
  auto b = ref::uniform<float>(-1, 1, 5, 6);
  std::string m = ref::error_message([&] { (void)sd::matmul(a, b); });
  CHECK(contains(m, "matmul"));
  CHECK(contains(m, "[3, 4]"));
  CHECK(contains(m, "[5, 6]"));
  CHECK(contains(m, "inner dims"));
  auto x = ref::uniform<float>(-1, 1, 2, 3, 4), y = ref::uniform<float>(-1, 1, 3, 4, 2);
  CHECK(contains(ref::error_message([&] { (void)sd::matmul(x, y); }), "batch dims"));
  CHECK(contains(ref::error_message([&] { (void)sd::bmm(x, y); }), "bmm"));
  auto w = ref::uniform<float>(-1, 1, 6, 4);
  auto bias = ref::uniform<float>(-1, 1, 5);
  std::string l = ref::error_message([&] { (void)sd::linear(a, w, bias); });
  CHECK(contains(l, "linear"));
  CHECK(contains(l, "[5]"));
  CHECK(contains(ref::error_message([&] { (void)sd::linear(a, b); }), "linear"));
}
