// What a traced kernel reports of itself (backend/cost.hpp, the Tracer's kernel_cost): the kind
// a profile files it under, the flops of its anchor and the bytes it moves, for each kind.
#include <solder/solder.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace sd = solder;
using sd::detail::KernelKind;

namespace {

// Records the cost of every kernel run on this thread while it lives.
class Recorder final : public sd::detail::Tracer {
 public:
  std::vector<sd::detail::KernelCost> costs;
  Recorder() : previous_(sd::detail::tracer()) { sd::detail::tracer() = this; }
  ~Recorder() { sd::detail::tracer() = previous_; }
  Recorder(Recorder const&) = delete;
  Recorder& operator=(Recorder const&) = delete;
  void start() override {}
  void kernel_cost(sd::detail::KernelCost const& k) override { costs.push_back(k); }
  void stop_kernel(std::string_view, std::string, std::string, std::string_view) override {}
  void stop_block(std::string, std::string_view) override {}

 private:
  sd::detail::Tracer* previous_;
};

// The cost of the one kernel that assigning e runs.
template <class T, class E>
sd::detail::KernelCost cost_of(T& out, E const& e) {
  Recorder r;
  out = e;
  REQUIRE(r.costs.size() == 1);
  return r.costs[0];
}

}  // namespace

TEST_CASE("kernel_cost: a product with its epilogue is a GEMM; its flops and bytes", "[cost]") {
  sd::Tensor<float, 2> x = sd::randn<float>(sd::shape(4, 8)), w = sd::randn<float>(sd::shape(16, 8)), y(4, 16);
  sd::Tensor<float, 1> b = sd::randn<float>(sd::shape(16));
  auto const k = cost_of(y, sd::relu(sd::linear(x, w, b)));
  CHECK(k.kind == KernelKind::gemm);
  CHECK(k.flops == 2.0 * 4 * 16 * 8);
  CHECK(k.bytes == 4.0 * (4 * 16 + 4 * 8 + 16 * 8 + 16));  // y, x, w, b
}

TEST_CASE("kernel_cost: convolutions by window and groups, pools, attention", "[cost]") {
  sd::Tensor<float, 4> x = sd::randn<float>(sd::shape(2, 4, 8, 8)), y(2, 6, 8, 8), yd(2, 4, 8, 8), yp(2, 4, 4, 4);
  sd::Tensor<float, 4> w3 = sd::randn<float>(sd::shape(6, 4, 3, 3)), w1 = sd::randn<float>(sd::shape(6, 4, 1, 1)),
                       wd = sd::randn<float>(sd::shape(4, 1, 3, 3));
  auto const kxk = cost_of(y, sd::conv2d(x, w3, {.padding = 1}));
  CHECK(kxk.kind == KernelKind::conv_kxk);
  CHECK(kxk.flops == 2.0 * 2 * 6 * 8 * 8 * 4 * 9);
  auto const one = cost_of(y, sd::conv2d(x, w1));
  CHECK(one.kind == KernelKind::conv_1x1);
  CHECK(one.flops == 2.0 * 2 * 6 * 8 * 8 * 4);
  auto const dw = cost_of(yd, sd::conv2d(x, wd, {.padding = 1, .groups = 4}));
  CHECK(dw.kind == KernelKind::depthwise);
  CHECK(dw.flops == 2.0 * 2 * 4 * 8 * 8 * 9);
  auto const pool = cost_of(yp, sd::max_pool2d(x, 2));
  CHECK(pool.kind == KernelKind::pool);
  CHECK(pool.flops == 0);
  CHECK(pool.bytes == 4.0 * (2 * 4 * 4 * 4 + 2 * 4 * 8 * 8));

  sd::Tensor<float, 4> q = sd::randn<float>(sd::shape(2, 3, 5, 8)), kv = sd::randn<float>(sd::shape(2, 3, 7, 8)),
                       o(2, 3, 5, 8);
  auto const att = cost_of(o, sd::scaled_dot_product_attention(q, kv, kv));
  CHECK(att.kind == KernelKind::attention);
  CHECK(att.flops == 2.0 * 2 * 3 * 5 * 7 * (8 + 8));  // the scores and their product with v
  CHECK(att.bytes == 4.0 * (2 * 3 * 5 * 8 * 2 + 2 * 3 * 7 * 8));  // o and q; k and v are one tensor
}

TEST_CASE("kernel_cost: a gather reads the rows it picks, not its whole table", "[cost]") {
  sd::Tensor<std::int64_t, 2> ids = sd::zeros<std::int64_t>(4, 5);
  sd::Tensor<float, 2> table = sd::randn<float>(sd::shape(100, 8));
  sd::Tensor<float, 3> y(4, 5, 8);
  auto const k = cost_of(y, sd::embedding(ids, table));
  CHECK(k.kind == KernelKind::gather);
  CHECK(k.bytes == 4.0 * 160 * 2 + 8.0 * 20);  // y and the rows; the indices
}

TEST_CASE("kernel_cost: row kernels and element-wise ones; each tensor read counts once", "[cost]") {
  sd::Tensor<float, 2> x = sd::randn<float>(sd::shape(6, 10)), y(6, 10);
  auto const rows = cost_of(y, sd::softmax(x, -1));
  CHECK(rows.kind == KernelKind::rows);
  CHECK(rows.flops == 0);
  CHECK(rows.bytes == 4.0 * 2 * 60);
  auto const map = cost_of(y, x * x + 1.f);
  CHECK(map.kind == KernelKind::elementwise);
  CHECK(map.bytes == 4.0 * 2 * 60);
}

TEST_CASE("kernel_cost: BatchNorm2d's training forward, a convolution with its sums, then its epilogue alone",
          "[cost][batchnorm]") {
  sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU> block{{4, 6, 3, {.padding = 1, .bias = false}},
                                                                             {6}, {}};
  sd::nn::train(block);
  sd::Tensor<float, 4> x = sd::randn<float>(sd::shape(2, 4, 8, 8)), y(2, 6, 8, 8);
  Recorder r;
  y = block(x);
  REQUIRE(r.costs.size() == 2);
  // The convolution, its output stored and its sums of y and y * y folded: x, w read, y written
  // (the zero bias, the epilogue's, read too).
  CHECK(r.costs[0].kind == KernelKind::conv_kxk);
  CHECK(r.costs[0].flops == 2.0 * 2 * 6 * 8 * 8 * 4 * 9);
  CHECK(r.costs[0].bytes == 4.0 * (2 * 6 * 8 * 8 + 2 * 4 * 8 * 8 + 6 * 4 * 9 + 6));
  // The normalization and the ReLU over the stored output: no flops of the convolution's.
  CHECK(r.costs[1].kind == KernelKind::elementwise);
  CHECK(r.costs[1].flops == 0);
  CHECK(r.costs[1].bytes == 4.0 * (2 * 6 * 8 * 8 * 2 + 6 + 6 + 6));  // y written, the stored output, bias, scale, shift
}
