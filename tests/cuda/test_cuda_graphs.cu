// sd::compile's reduce_overhead on sd::Cuda tensors (runtime/cuda_graph.hpp): a call captured
// once as a CUDA graph and replayed gives what the uncompiled forward gives, its inputs changing
// from call to call; a result the caller keeps is never overwritten by a replay; other sizes
// capture another graph; a forward that cannot be captured runs uncaptured, said once on
// perf_hints; stats() counts captures, replays and fallbacks; threads call one compiled forward
// at once.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "compare.hpp"
#include "../log_capture.hpp"

namespace {

using gpu_test::close;
using gpu_test::same_bits;
using Matrix = sd::Tensor<float, 2, sd::Cuda>;

Matrix random_matrix(std::int64_t rows, std::int64_t cols) {
  return sd::rand<float>(sd::shape(rows, cols), -1.f, 1.f).to<sd::Cuda>();
}

// Every call a graph serves is a capture, a replay or a call run uncaptured.
void counts_add_up(sd::CompileStats const& s) {
  CHECK(s.calls == s.cuda_graphs + s.graph_replays + s.graph_fallbacks);
}

// A product with its bias and relu (cuBLASLt's epilogue), a row softmax, a row sum and an
// element-wise rest: kernels of each kind in one graph.
struct Chain {
  Matrix w = random_matrix(64, 32);
  sd::Tensor<float, 1, sd::Cuda> b = sd::rand<float>(sd::shape(32), -0.5f, 0.5f).to<sd::Cuda>();
  Matrix operator()(Matrix const& x) const {
    Matrix h = sd::relu(sd::matmul(x, w) + b);
    return sd::softmax(h, -1) * sd::sum(h, 1, sd::keepdim) + sd::tanh(h);
  }
};

}  // namespace

TEST_CASE("graphs: a chain of products, reductions and element-wise kernels replays as the uncompiled forward",
          "[gpu][graphs]") {
  Chain const chain;
  LogCapture logs("output_code");
  auto f = sd::compile(chain, {.mode = sd::Mode::reduce_overhead, .name = "chain"});
  for (int call = 0; call < 5; ++call) {
    INFO("call " << call);
    Matrix const x = random_matrix(16, 64);  // new values, and memory, every call
    close(f(x), chain(x), 1e-5);
  }
  auto const s = f.stats();
  CHECK(s.calls == 5);
  CHECK(s.cuda_graphs == 1);
  CHECK(s.graph_replays == 4);
  CHECK(s.graph_fallbacks == 0);
  CHECK(s.workspace_bytes > 0);
  counts_add_up(s);
  CHECK(logs.count("[solder:output_code] chain: arg0 [16, 64]: captured a CUDA graph of ") == 1);
}

TEST_CASE("graphs: a result the caller keeps is never overwritten", "[gpu][graphs]") {
  Chain const chain;
  auto f = sd::compile(chain, {.mode = sd::Mode::reduce_overhead});
  Matrix const x1 = random_matrix(8, 64), x2 = random_matrix(8, 64);
  {
    Matrix const y1 = f(x1);
    Matrix const y2 = f(x2);  // y1 is held: another graph
    Matrix const y3 = f(x1);  // both are: a third
    close(y1, chain(x1), 1e-5);
    close(y2, chain(x2), 1e-5);
    close(y3, chain(x1), 1e-5);
    CHECK(f.stats().cuda_graphs == 3);
  }
  // y = f(x) holds the last result while the next call runs: two of the graphs take turns.
  Matrix x = x1;
  Matrix y = f(x);
  for (int call = 0; call < 4; ++call) {
    INFO("call " << call);
    Matrix const next = random_matrix(8, 64);
    Matrix const last = y;
    y = f(next);
    close(last, chain(x), 1e-5);
    close(y, chain(next), 1e-5);
    x = next;
  }
  auto const s = f.stats();
  CHECK(s.cuda_graphs == 3);
  CHECK(s.graph_replays == 5);
  counts_add_up(s);

  SECTION("a result that is the graph's input buffer") {
    auto same = sd::compile([](Matrix const& m) { return m; }, {.mode = sd::Mode::reduce_overhead});
    Matrix const a = same(x1);
    Matrix const b = same(x2);  // the next copy into the buffer a views would overwrite a
    same_bits(a, x1.to<sd::Host>());
    same_bits(b, x2.to<sd::Host>());
    counts_add_up(same.stats());
  }
  SECTION("a struct of results, one of them kept") {
    auto both = sd::compile([&](Matrix const& m) { return std::pair<Matrix, Matrix>(chain(m), sd::eval(m * 2.f)); },
                            {.mode = sd::Mode::reduce_overhead});
    Matrix const kept = both(x1).second;
    auto const next = both(x2);
    same_bits(kept, sd::eval(x1 * 2.f).to<sd::Host>());
    same_bits(next.second, sd::eval(x2 * 2.f).to<sd::Host>());
    close(next.first, chain(x2), 1e-5);
  }
}

TEST_CASE("graphs: other sizes and numbers capture another graph", "[gpu][graphs]") {
  auto scaled = [](Matrix const& x, float s) { return sd::eval(sd::exp(x * s) - sd::mean(x, 1, sd::keepdim)); };
  SECTION("a static specialization per signature") {
    auto f = sd::compile(scaled, {.mode = sd::Mode::reduce_overhead});
    for (int round = 0; round < 2; ++round)
      for (std::int64_t rows : {8, 24}) {
        Matrix const x = random_matrix(rows, 40);
        close(f(x, 0.5f), scaled(x, 0.5f), 1e-6);
      }
    auto const s = f.stats();
    CHECK(s.specializations == 2);
    CHECK(s.cuda_graphs == 2);
    CHECK(s.graph_replays == 2);
    counts_add_up(s);
  }
  SECTION("one generic specialization: a graph per set of sizes and numbers") {
    auto f = sd::compile(scaled, {.mode = sd::Mode::reduce_overhead, .dynamic = true});
    for (int round = 0; round < 2; ++round)
      for (float s : {0.5f, 2.f})
        for (std::int64_t rows : {8, 24}) {
          Matrix const x = random_matrix(rows, 40);
          close(f(x, s), scaled(x, s), 1e-6);
        }
    auto const s = f.stats();
    CHECK(s.specializations == 1);
    CHECK(s.cuda_graphs == 4);
    CHECK(s.graph_replays == 4);
    counts_add_up(s);
  }
}

TEST_CASE("graphs: a forward that cannot be captured runs uncaptured, said once", "[gpu][graphs]") {
  Matrix const x = random_matrix(8, 32);
  LogCapture logs("perf_hints");
  SECTION("item(): a copy to the host and a wait") {
    auto by_total = [](Matrix const& m) {
      float const total = sd::eval(sd::sum(m)).item();
      return sd::eval(m * total);
    };
    auto f = sd::compile(by_total, {.mode = sd::Mode::reduce_overhead, .name = "by_total"});
    for (int call = 0; call < 3; ++call) close(f(x), by_total(x), 1e-6);
    auto const s = f.stats();
    CHECK(s.cuda_graphs == 0);
    CHECK(s.graph_fallbacks == 3);
    counts_add_up(s);
    CHECK(logs.count("[solder:perf_hints] by_total: arg0 [8, 32]: not captured as a CUDA graph: ") == 1);
  }
  SECTION("sd::cuda::synchronize()") {
    auto waits = [](Matrix const& m) {
      Matrix r = m + 1.f;
      sd::cuda::synchronize();
      return r;
    };
    auto f = sd::compile(waits, {.mode = sd::Mode::reduce_overhead, .name = "waits"});
    for (int call = 0; call < 3; ++call) same_bits(f(x), waits(x).to<sd::Host>());
    CHECK(f.stats().graph_fallbacks == 3);
    CHECK(logs.count("waits: arg0 [8, 32]: not captured as a CUDA graph: ") == 1);
  }
  SECTION("random numbers, which a replay would repeat") {
    auto noisy = [](Matrix const& m) {
      return sd::eval(m + sd::rand<float, sd::Cuda>(sd::shape(m.size(0), m.size(1))));
    };
    auto f = sd::compile(noisy, {.mode = sd::Mode::reduce_overhead, .name = "noisy"});
    auto const a = sd::to_vector(f(x)), b = sd::to_vector(f(x));
    CHECK(a != b);
    CHECK(f.stats().graph_fallbacks == 2);
    CHECK(logs.count("noisy: arg0 [8, 32]: not captured as a CUDA graph: the forward draws random numbers") == 1);
  }
  SECTION("an argument that is not guarded") {
    auto summed = [](Matrix const& m, std::vector<Matrix> const& more) { return sd::eval(m + more.front()); };
    auto f = sd::compile(summed, {.mode = sd::Mode::reduce_overhead, .name = "summed"});
    for (int call = 0; call < 2; ++call) {
      std::vector<Matrix> const more{random_matrix(8, 32)};
      same_bits(f(x, more), summed(x, more).to<sd::Host>());
    }
    CHECK(f.stats().graph_fallbacks == 2);
    CHECK(logs.count("summed: not captured as a CUDA graph: an argument is neither") == 1);
  }
}

TEST_CASE("graphs: threads call one compiled forward at once", "[gpu][graphs][threads]") {
  Chain const chain;
  auto f = sd::compile(chain, {.mode = sd::Mode::reduce_overhead});
  constexpr int threads = 4, calls = 10;
  std::vector<Matrix> inputs;
  std::vector<sd::Tensor<float, 2>> expected;
  for (int t = 0; t < threads * calls; ++t) {
    inputs.push_back(random_matrix(16, 64));
    expected.push_back(chain(inputs.back()).to<sd::Host>());
  }
  std::vector<std::vector<float>> got(inputs.size());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int c = 0; c < calls; ++c) {
        std::size_t const i = static_cast<std::size_t>(t * calls + c);
        got[i] = sd::to_vector(f(inputs[i]));
      }
    });
  for (auto& th : pool) th.join();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("call " << i);
    close(sd::from_vector(got[i], sd::shape(16, 32)), expected[i], 1e-5);
  }
  auto const s = f.stats();
  CHECK(s.cuda_graphs >= 1);
  CHECK(s.cuda_graphs <= threads);
  CHECK(s.graph_fallbacks == 0);
  counts_add_up(s);
}
