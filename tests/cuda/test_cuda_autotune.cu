// max_autotune on sd::Cuda tensors (runtime/autotune.hpp; backend/cuda/contract.hpp, conv.hpp):
// the algorithms cuBLASLt's and cuDNN's heuristics offer are timed on a problem's first call and
// the fastest kept, with the standard mode's results (within the bounds of test_cuda_contract
// and test_cuda_conv); the choices go to the GPU's section of the cache file, which a second
// process reads, while a section of another GPU is never read. And the descriptors each problem
// keeps (lt_plans, conv_plans): a repeated call makes none and gives the same bits, each call's
// bias is the one read, across shapes and threads.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "compare.hpp"

using namespace gpu_test;

namespace {

constexpr double eps = std::numeric_limits<float>::epsilon();

template <int R>
using Device = sd::Tensor<float, R, sd::Cuda>;

// The problems of these tests: a product alone (in cuBLASLt under max_autotune), a linear layer
// with cuBLASLt's bias and relu epilogue, and a convolution (cuDNN). The second process makes
// the same shapes: its keys must be the first one's.
struct Problems {
  sd::Tensor<float, 2> a = host_rand<float>(64, 48), b = host_rand<float>(48, 80);
  sd::Tensor<float, 2> x = host_rand<float>(129, 67), w = host_rand<float>(95, 67);
  sd::Tensor<float, 1> bias = host_rand<float>(95);
  sd::Tensor<float, 4> image = host_rand<float>(2, 8, 14, 14), filter = host_rand<float>(16, 8, 3, 3);
};

struct Results {
  Device<2> product, linear;
  Device<4> conv;
};

auto product = [](auto const& a, auto const& b) { return sd::matmul(a, b); };
auto linear = [](auto const& x, auto const& w, auto const& b) { return sd::relu(sd::linear(x, w, b)); };
auto conv = [](auto const& x, auto const& w) { return sd::conv2d(x, w, {.padding = 1}); };

// The three problems on the GPU, each a callable compiled with options o.
Results run(Problems const& p, sd::Options const& o) {
  auto const a = p.a.to<sd::Cuda>(), b = p.b.to<sd::Cuda>(), x = p.x.to<sd::Cuda>(), w = p.w.to<sd::Cuda>();
  auto const bias = p.bias.to<sd::Cuda>();
  auto const image = p.image.to<sd::Cuda>(), filter = p.filter.to<sd::Cuda>();
  return {sd::compile([](Device<2> const& l, Device<2> const& r) { return product(l, r); }, o)(a, b),
          sd::compile([](Device<2> const& l, Device<2> const& r, Device<1> const& c) { return linear(l, r, c); },
                      o)(x, w, bias),
          sd::compile([](Device<4> const& l, Device<4> const& r) { return conv(l, r); }, o)(image, filter)};
}

// Each result against the host's, within the bounds of test_cuda_contract (a dot product's
// rounding of sum |a||b|) and test_cuda_conv (1000 eps of sum |x w|, cuDNN's algorithms).
void check_results(Results const& r, Problems const& p) {
  close(r.product, sd::eval(product(p.a, p.b)), sd::eval(product(sd::abs(p.a), sd::abs(p.b))), 50 * eps);
  close(r.linear, sd::eval(linear(p.x, p.w, p.bias)),
        sd::eval(sd::linear(sd::abs(p.x), sd::abs(p.w), sd::abs(p.bias))), 71 * eps);
  close(r.conv, sd::eval(conv(p.image, p.filter)), sd::eval(conv(sd::abs(p.image), sd::abs(p.filter))),
        1000 * eps);
}

// The autotune log's lines while f runs.
template <class F>
std::vector<std::string> autotune_lines(F&& f) {
  std::vector<std::string> lines;
  sd::set_logs("autotune");
  auto const previous = sd::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  f();
  sd::set_log_sink(previous);
  sd::set_logs("");
  return lines;
}

bool starts(std::string const& s, std::string const& what) { return s.rfind(what, 0) == 0; }
bool contains(std::string const& s, std::string const& what) { return s.find(what) != std::string::npos; }

// The text of a cache with the index of the entry whose key contains `what` replaced.
std::string with_index(std::string text, std::string const& what, char const* index) {
  auto const at = text.find(what);
  REQUIRE(at != std::string::npos);
  auto const tab = text.find('\t', at), end = text.find('\n', at);
  return text.replace(tab + 1, end - tab - 1, index);
}

std::size_t lt_plan_count() {
  auto& cache = sd::detail::cuda::lt_plans();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.plans.size();
}
std::size_t conv_plan_count() {
  std::lock_guard<std::mutex> lock(sd::detail::cuda::dnn_lock());
  return sd::detail::cuda::conv_plans().size();
}

}  // namespace

TEST_CASE("max_autotune on sd::Cuda tensors: each problem timed once, the results the standard mode's",
          "[gpu][autotune]") {
  Problems const p;
  sd::runtime::Autotuner tuner;
  sd::Options const tuned{.mode = sd::Mode::max_autotune, .tuner = &tuner};
  std::vector<Results> calls;
  auto const lines = autotune_lines([&] {
    calls.push_back(run(p, tuned));
    calls.push_back(run(p, tuned));
  });
  Results const& first = calls[0];
  Results const& again = calls[1];
  CHECK(tuner.tuned() == 3);
  REQUIRE(lines.size() == 3);  // timed on the first call only
  int products = 0, linears = 0, convs = 0;
  for (auto const& l : lines) {
    INFO(l);
    CHECK(contains(l, ": #"));
    CHECK(contains(l, " of #0["));  // every algorithm timed, from the heuristic's first
    products += starts(l, "[solder:autotune] cublasLt ") && contains(l, "epilogue=none");
    linears += starts(l, "[solder:autotune] cublasLt ") && contains(l, "epilogue=bias+relu");
    convs += starts(l, "[solder:autotune] cudnn ") && contains(l, " conv2d float32 x=[2,8,14,14]");
  }
  CHECK(products == 1);
  CHECK(linears == 1);
  CHECK(convs == 1);
  check_results(first, p);
  check_results(run(p, {}), p);
  // The choice kept: the second call ran the first one's algorithms.
  same_bits(again.product, first.product);
  same_bits(again.linear, first.linear);
  same_bits(again.conv, first.conv);
}

TEST_CASE("max_autotune on sd::Cuda tensors: the GPU's section of the cache file, read by a second process",
          "[gpu][autotune]") {
  auto const dir = std::filesystem::temp_directory_path() / "solder-test-cuda-autotune";
  std::filesystem::remove_all(dir);
  Problems const p;
  std::string text;
  {
    sd::runtime::Autotuner writer(dir);
    run(p, {.mode = sd::Mode::max_autotune, .tuner = &writer});
    REQUIRE(std::filesystem::exists(writer.file()));
    text = writer.save();
  }
  std::string const gpu = "\ngpu " + sd::detail::cuda::gpu_key() + "\n";
  INFO(text);
  CHECK(contains(text, gpu));
  CHECK(contains(text, "\ncublasLt "));
  CHECK(contains(text, "\ncudnn "));
  CHECK(contains(text, "\nend 3\n"));

  SECTION("a second process starts with them") {
    auto const exe = std::filesystem::read_symlink("/proc/self/exe");
    std::string const command =
        "SOLDER_CACHE_DIR='" + dir.string() + "' '" + exe.string() + "' '[.second-process]'";
    CHECK(std::system(command.c_str()) == 0);
  }
  SECTION("another GPU's section is kept, never read") {
    std::string foreign = text;
    foreign.replace(foreign.find(gpu), gpu.size(), "\ngpu Another GPU | sm_00 | driver 1\n");
    sd::runtime::Autotuner other;
    REQUIRE(other.load(foreign));
    CHECK(other.tuned() == 3);
    sd::Options const tuned{.mode = sd::Mode::max_autotune, .tuner = &other};
    auto const lines = autotune_lines([&] { check_results(run(p, tuned), p); });
    CHECK(lines.size() == 3);  // timed again
    CHECK(other.tuned() == 6);
    CHECK(contains(other.save(), gpu));
    CHECK(contains(other.save(), "\ngpu Another GPU | sm_00 | driver 1\n"));
  }
  SECTION("a choice the heuristic no longer offers is timed again") {
    sd::runtime::Autotuner other;
    REQUIRE(other.load(with_index(text, "epilogue=none", "200")));
    sd::Options const tuned{.mode = sd::Mode::max_autotune, .tuner = &other};
    auto const lines = autotune_lines([&] { check_results(run(p, tuned), p); });
    REQUIRE(lines.size() == 1);
    CHECK(contains(lines[0], "epilogue=none"));
  }
  SECTION("a corrupt section is refused") {
    sd::runtime::Autotuner other;
    CHECK_FALSE(other.load(with_index(text, "epilogue=none", "256")));   // out of range
    CHECK_FALSE(other.load(with_index(text, "epilogue=none", "1 2")));   // a host entry's form
    CHECK_FALSE(other.load(with_index(text, "epilogue=none", "")));
    std::string nameless = text;
    nameless.replace(nameless.find(gpu), gpu.size(), "\ngpu \n");
    CHECK_FALSE(other.load(nameless));
    CHECK(other.tuned() == 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("max_autotune on sd::Cuda tensors: (run by the test above in a process of its own)", "[.second-process]") {
  auto& global = sd::runtime::Autotuner::global();
  CHECK(global.tuned() == 3);
  Problems const p;
  auto const lines = autotune_lines([&] { check_results(run(p, {.mode = sd::Mode::max_autotune}), p); });
  CHECK(lines.empty());  // every choice read from the file
  CHECK(global.tuned() == 3);
}

TEST_CASE("cuBLASLt's and cuDNN's descriptors are kept per problem", "[gpu][plans]") {
  // Shapes of this test only: each first call makes a plan.
  auto const x = host_rand<float>(37, 29), w = host_rand<float>(23, 29), x2 = host_rand<float>(41, 29);
  auto const b = host_rand<float>(23), b2 = host_rand<float>(23);
  auto const dx = x.to<sd::Cuda>(), dw = w.to<sd::Cuda>(), dx2 = x2.to<sd::Cuda>();
  auto const db = b.to<sd::Cuda>(), db2 = b2.to<sd::Cuda>();
  auto mag = [&](auto const& xs, auto const& bs) { return sd::eval(sd::linear(sd::abs(xs), sd::abs(w), sd::abs(bs))); };

  SECTION("cuBLASLt: a repeated product makes no plan, reads its own bias, gives the same bits") {
    auto const before = lt_plan_count();
    Device<2> const r1 = linear(dx, dw, db);
    CHECK(lt_plan_count() == before + 1);
    Device<2> const r2 = linear(dx, dw, db);
    Device<2> const r3 = linear(dx, dw, db2);  // another bias, the same plan
    CHECK(lt_plan_count() == before + 1);
    Device<2> const s1 = linear(dx2, dw, db);  // another shape, another plan
    CHECK(lt_plan_count() == before + 2);
    Device<2> const r4 = linear(dx, dw, db);
    Device<2> const s2 = linear(dx2, dw, db);
    CHECK(lt_plan_count() == before + 2);
    close(r1, sd::eval(linear(x, w, b)), mag(x, b), 33 * eps);
    close(r3, sd::eval(linear(x, w, b2)), mag(x, b2), 33 * eps);
    close(s1, sd::eval(linear(x2, w, b)), mag(x2, b), 33 * eps);
    same_bits(r2, r1);
    same_bits(r4, r1);
    same_bits(s2, s1);
  }
  SECTION("cuBLASLt: threads share the plans, each call with its own bias") {
    Device<2> const want[] = {linear(dx, dw, db), linear(dx, dw, db2)};
    std::vector<std::vector<Device<2>>> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) got[t].emplace_back(linear(dx, dw, (t + i) % 2 ? db2 : db));
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t)
      for (int i = 0; i < 25; ++i) {
        INFO("thread " << t << ", call " << i);
        same_bits(got[t][i], want[(t + i) % 2]);
      }
  }
  SECTION("cuDNN: a repeated convolution makes no plan and gives the same bits") {
    auto const image = host_rand<float>(1, 5, 9, 11), filter = host_rand<float>(7, 5, 3, 3), image2 = host_rand<float>(3, 5, 9, 11);
    auto const di = image.to<sd::Cuda>(), df = filter.to<sd::Cuda>(), di2 = image2.to<sd::Cuda>();
    auto const before = conv_plan_count();
    Device<4> const c1 = conv(di, df);
    CHECK(conv_plan_count() == before + 1);
    Device<4> const c2 = conv(di, df);
    Device<4> const d1 = conv(di2, df);
    CHECK(conv_plan_count() == before + 2);
    Device<4> const c3 = conv(di, df);
    Device<4> const d2 = conv(di2, df);
    CHECK(conv_plan_count() == before + 2);
    close(c1, sd::eval(conv(image, filter)), sd::eval(conv(sd::abs(image), sd::abs(filter))), 1000 * eps);
    close(d1, sd::eval(conv(image2, filter)), sd::eval(conv(sd::abs(image2), sd::abs(filter))), 1000 * eps);
    same_bits(c2, c1);
    same_bits(c3, c1);
    same_bits(d2, d1);
  }
}
