// The runtime (runtime/): sd::compile's signatures, recompiles and their limit, the generic
// specialization, the stance, mark_dynamic, padding to buckets, modules, the eager backend,
// fullgraph at run time and user breaks, the logs, 8 threads calling one compiled function at
// once, sd::explain and explain_dot of a call, traces (sd::trace, SOLDER_TRACE), sd::compare.
#include <solder/solder.hpp>
#include <solder/nn/models/mlp.hpp>

#include <catch2/catch.hpp>
#include <filesystem>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <latch>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "log_capture.hpp"

namespace sd = solder;

namespace {

struct StanceScope {
  sd::Stance before;
  explicit StanceScope(sd::Stance s) : before(sd::set_stance(s)) {}
  ~StanceScope() { sd::set_stance(before); }
};

using Vec = sd::Tensor<float, 1>;

auto twice() {
  return [](auto const& x) { return x * 2.f; };
}

sd::Tensor<float, 1> plus_one(Vec const& x) { return x + 1.f; }

}  // namespace

TEST_CASE("a new signature is a recompile: counted, and logged with the guard that failed", "[runtime]") {
  LogCapture logs("recompiles");
  auto f = sd::compile(twice(), {.name = "twice"});
  Vec a = sd::ones<float>(32), b = sd::ones<float>(64);
  Vec y = f(a);
  CHECK(y.shape()[0] == 32);
  CHECK(y(31) == 2.f);
  f(a);
  f(b);
  f(b);
  auto const st = f.stats();
  CHECK(st.calls == 4);
  CHECK(st.recompiles == 1);
  CHECK(st.specializations == 2);
  CHECK_FALSE(st.generic);
  CHECK(st.recompile_time.count() > 0);
  REQUIRE(logs.lines.size() == 1);
  CHECK(logs.lines[0] == "[solder:recompiles] twice: recompiling (2 of 8): arg0.size(0) == 32 failed (got 64)");

  // dtype, alignment and numbers are guards too
  f(sd::slice(Vec(sd::ones<float>(65)), 0, 1, 65));
  CHECK(logs.lines.back() ==
        "[solder:recompiles] twice: recompiling (3 of 8): arg0.is_aligned(64) == true failed (got false)");
  f(sd::ones<double>(64));
  CHECK(logs.lines.back() == "[solder:recompiles] twice: recompiling (4 of 8): arg0.dtype == float32 failed (got float64)");
  auto scale = sd::compile([](Vec const& x, float s) { return x * s; }, {.name = "scale"});
  CHECK(scale(a, 0.5f)(0) == 0.5f);
  CHECK(scale(a, 0.25f)(0) == 0.25f);
  CHECK(logs.lines.back() == "[solder:recompiles] scale: recompiling (2 of 8): arg1 == 0.5 failed (got 0.25)");
  CHECK(scale.specializations()[0].signature.starts_with("arg0: float32[32] host aligned, arg1 = 0."));

  // a free function, a struct of tensors returned as it is
  auto g = sd::compile(plus_one);
  CHECK(g(a)(0) == 2.f);
  auto h = sd::compile([](Vec const& x) { return std::pair{sd::eval(x + 1.f), sd::eval(x - 1.f)}; });
  auto [p, m] = h(a);
  CHECK(p(0) == 2.f);
  CHECK(m(0) == 0.f);
}

TEST_CASE("past recompile_limit: one generic specialization, said once", "[runtime]") {
  LogCapture logs("recompiles");
  auto f = sd::compile(twice(), {.recompile_limit = 2, .name = "f"});
  for (int n = 1; n <= 6; ++n) CHECK(f(Vec(sd::ones<float>(n)))(n - 1) == 2.f);
  f(Vec(sd::ones<float>(1)));  // its static specialization still serves it
  auto const st = f.stats();
  CHECK(st.specializations == 3);
  CHECK(st.recompiles == 2);
  CHECK(st.generic);
  CHECK(st.calls == 7);
  REQUIRE(logs.lines.size() == 2);
  CHECK(logs.lines[0] == "[solder:recompiles] f: recompiling (2 of 2): arg0.size(0) == 1 failed (got 2)");
  CHECK(logs.lines[1] ==
        "[solder:recompiles] f: recompile_limit (2) reached: arg0.size(0) == 2 failed (got 3); switching to one "
        "generic dynamic-shape specialization");
  std::vector<std::uint64_t> calls;
  for (auto const& s : f.specializations()) calls.push_back(s.calls);
  CHECK(calls.size() == 3);

  SECTION(".dynamic = false: static specializations only") {
    auto s = sd::compile(twice(), {.dynamic = false, .recompile_limit = 2, .name = "s"});
    s(Vec(sd::ones<float>(1)));
    s(Vec(sd::ones<float>(2)));
    CHECK_THROWS_WITH(s(Vec(sd::ones<float>(3))),
                      "solder: s: recompile_limit (2) reached with .dynamic = false: arg0.size(0) == 2 failed (got 3)");
    CHECK(s.stats().specializations == 2);
    CHECK_FALSE(s.stats().generic);
  }
  SECTION(".dynamic = true: one generic specialization from the start") {
    auto d = sd::compile(twice(), {.dynamic = true});
    for (int n = 1; n <= 5; ++n) d(Vec(sd::ones<float>(n)));
    CHECK(d.stats().specializations == 1);
    CHECK(d.stats().recompiles == 0);
    CHECK(d.stats().generic);
    CHECK(d.specializations()[0].signature == "arg0: float32[dyn] host aligned");
  }
}

TEST_CASE("sd::Stance::fail_on_recompile makes a recompile throw, naming the guard", "[runtime]") {
  auto f = sd::compile(twice(), {.name = "f"});
  Vec a = sd::ones<float>(32), b = sd::ones<float>(64);
  {
    StanceScope scope(sd::Stance::fail_on_recompile);
    f(a);  // the first compile is not a recompile
    f(a);
    CHECK_THROWS_WITH(f(b), "solder: f: recompile refused (sd::Stance::fail_on_recompile): arg0.size(0) == 32 "
                            "failed (got 64)");
    CHECK(f.stats().specializations == 1);
  }
  CHECK(f(b)(0) == 2.f);
  CHECK(f.stats().recompiles == 1);
}

TEST_CASE("mark_dynamic: a new size of a marked dim is no recompile", "[runtime]") {
  LogCapture logs("recompiles");
  auto f = sd::compile(twice(), {.name = "f"});
  sd::Tensor<float, 2> x1 = sd::ones<float>(2, 10), x2 = sd::ones<float>(2, 20);
  sd::mark_dynamic(x1, 1);
  sd::mark_dynamic(x2, -1);
  f(x1);
  f(x2);
  auto const x3 = x2;  // a copy is the same tensor: it keeps the mark
  f(x3);
  CHECK(f.stats().recompiles == 0);
  CHECK(f.specializations()[0].signature == "arg0: float32[2, dyn] host aligned");
  f(sd::Tensor<float, 2>(sd::ones<float>(2, 30)));  // unmarked
  CHECK(logs.lines.back() == "[solder:recompiles] f: recompiling (2 of 8): arg0.size(1) == dyn failed (got 30)");
  // another view of marked storage is another tensor
  CHECK(sd::detail::marked_dims(sd::slice(x2, 1, 0, 5)) == 0);
  CHECK(sd::detail::marked_dims(x3) == 2);

  sd::Tensor<float, sd::ext<2, sd::dyn>> s = sd::ones<float>(sd::shape(sd::fix<2>, 3));
  CHECK_THROWS_WITH(sd::mark_dynamic(s, 0), "solder: mark_dynamic: dim 0 has the static extent 2: it cannot vary");
  CHECK_THROWS_WITH(sd::mark_dynamic(s, 2), Catch::Contains("mark_dynamic: dim 2 out of range"));
}

TEST_CASE("marks of freed storage are dropped", "[runtime]") {
  { sd::mark_dynamic(Vec(sd::ones<float>(4)), 0); }
  CHECK(sd::detail::marked_dims(Vec(sd::ones<float>(4))) == 0);
  CHECK(sd::detail::dynamic_marks().count == 0);
}

TEST_CASE("pad_to and buckets: the padded tensor and its mask", "[runtime]") {
  auto const x = sd::from_vector<float>({1, 2, 3, 4, 5, 6}, sd::shape(2, 3));
  auto [p, mask] = sd::pad_to<4>(x, 1, -1.f);
  CHECK(p.shape() == sd::Index<2>{2, 4});
  CHECK(sd::to_vector(p) == std::vector<float>{1, 2, 3, -1, 4, 5, 6, -1});
  CHECK(mask.shape() == sd::Index<2>{1, 4});
  CHECK(sd::to_vector(mask) == std::vector<bool>{true, true, true, false});
  sd::Tensor<float, 2> masked = sd::where(mask, p, 0.f);  // the mask broadcasts
  CHECK(sd::to_vector(masked) == std::vector<float>{1, 2, 3, 0, 4, 5, 6, 0});

  auto rows = sd::pad_to<4>(x, 0);
  CHECK(rows.tensor.shape() == sd::Index<2>{4, 3});
  CHECK(sd::to_vector(rows.tensor) == std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0});
  CHECK(sd::to_vector(rows.mask) == std::vector<bool>{true, true, false, false});
  auto same = sd::pad_to<3>(x, 1);  // already a multiple: x itself
  CHECK(same.tensor.data() == x.data());
  CHECK(sd::to_vector(same.mask) == std::vector<bool>{true, true, true});

  sd::buckets const b{32, 64, 128, 256};
  CHECK(b.bucket(1) == 32);
  CHECK(b.bucket(64) == 64);
  CHECK(b.bucket(65) == 128);
  auto q = b.pad(x, -1);
  CHECK(q.tensor.shape() == sd::Index<2>{2, 32});
  CHECK(q.mask.shape() == sd::Index<2>{1, 32});
  auto const qm = sd::to_vector(q.mask);
  CHECK(std::count(qm.begin(), qm.end(), true) == 3);
  CHECK(qm[2]);
  CHECK_FALSE(qm[3]);
  CHECK(q.tensor(1, 2) == 6.f);
  CHECK(q.tensor(1, 3) == 0.f);
  CHECK_THROWS_WITH(b.pad(sd::Tensor<float, 2>(sd::zeros<float>(1, 300)), 1),
                    "solder: buckets: a length of 300 is past the largest bucket, 256");
  CHECK_THROWS_WITH((sd::buckets{64, 32}), Catch::Contains("increasing"));

  // bucketed lengths: as many specializations as buckets
  auto f = sd::compile(twice());
  for (std::int64_t n = 1; n <= 200; n += 7) f(b.pad(Vec(sd::ones<float>(n)), 0).tensor);
  CHECK(f.stats().specializations == 4);
}

TEST_CASE("a compiled module: the module's result; the eager backend: the same, node by node", "[runtime][nn]") {
  sd::nn::Sequential<sd::nn::Linear, sd::nn::ReLU, sd::nn::Linear> net{{16, 32}, {}, {32, 4}};
  sd::Tensor<float, 2> const x = sd::rand<float>(sd::shape(8, 16), -1.f, 1.f);
  sd::Tensor<float, 2> const want = net(x);
  auto compiled = sd::compile(net, {.name = "mlp"});
  auto const k0 = sd::detail::kernels_run();
  sd::Tensor<float, 2> got = compiled(x);
  auto const fused = sd::detail::kernels_run() - k0;
  CHECK(fused == 2);  // one per block
  CHECK(sd::to_vector(got) == sd::to_vector(want));

  auto eager = sd::compile(net, {.backend = sd::Backend::eager});
  auto const k1 = sd::detail::kernels_run();
  sd::Tensor<float, 2> slow = eager(x);
  CHECK(sd::detail::kernels_run() - k1 > fused);
  auto const s = sd::to_vector(slow), w = sd::to_vector(want);
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(s[i] == Approx(w[i]).margin(1e-6));

  // the module is referenced: weights changed after compiling are seen
  net.get<2>().bias.value = sd::ones<float>(4);
  sd::Tensor<float, 2> const after = net(x);
  CHECK(sd::to_vector(compiled(x)) == sd::to_vector(after));
}

TEST_CASE("fullgraph at run time: user breaks are allowed, a break the planner makes throws", "[runtime][nn]") {
  // A Sequential materializes each block (nn::materialize): user breaks.
  sd::nn::Sequential<sd::nn::Linear, sd::nn::ReLU, sd::nn::Linear> net{{16, 32}, {}, {32, 4}};
  sd::Tensor<float, 2> const x = sd::rand<float>(sd::shape(8, 16), -1.f, 1.f);
  auto full = sd::compile(net, {.fullgraph = true, .name = "mlp"});
  CHECK(sd::to_vector(full(x)) == sd::to_vector(sd::Tensor<float, 2>(net(x))));
  CHECK(full.specializations()[0].plan.starts_with("2 kernels in 2 blocks"));

  // The planner's break in the result's block, or in a block before it
  auto centred = sd::compile([](Vec const& v) { return v - sd::sum(v); }, {.fullgraph = true, .name = "centred"});
  for (int i = 0; i < 2; ++i)  // every call until one passes, not just the first
    CHECK_THROWS_WITH(centred(Vec(sd::ones<float>(4))),
                      Catch::StartsWith("solder: centred: fullgraph: block 0 is 2 kernels, not one (a graph break the "
                                        "planner made): kernel 0: materialized because sum result (rank 0) is "
                                        "broadcast into a kernel of rank 1; sd::materialize on the part"));
  auto inner = sd::compile([](Vec const& v) { return sd::materialize(v - sd::sum(v)) * 2.f; },
                           {.fullgraph = true, .name = "inner"});
  CHECK_THROWS_WITH(inner(Vec(sd::ones<float>(4))),
                    Catch::StartsWith("solder: inner: fullgraph: block 0 is 2 kernels, not one"));

  // ... made a user break by sd::materialize: allowed
  auto cut = sd::compile([](Vec const& v) { return v - sd::materialize(sd::sum(v)); },
                         {.fullgraph = true, .name = "cut"});
  Vec const v = sd::from_vector<float>({1, 2, 3, 6}, sd::shape(4));
  CHECK(sd::to_vector(cut(v)) == std::vector<float>{-11, -10, -9, -6});
  CHECK(cut.specializations()[0].plan.starts_with("2 kernels in 2 blocks"));
  auto fused = sd::compile([](Vec const& w) { return sd::relu(w * 2.f - 1.f); }, sd::fullgraph);
  CHECK(fused(Vec(sd::ones<float>(4)))(0) == 1.f);
}

TEST_CASE("modes: reduce_overhead plans a workspace per signature, max_autotune tunes every product shape",
          "[runtime]") {
  auto mlp = sd::models::mlp({.in_channels = 32, .hidden_channels = {32, 32, 8}});
  auto const x = sd::rand<float>({4, 32});
  sd::Tensor<float, 2> const want = mlp(x);
  auto planned = sd::compile(mlp, {.mode = sd::Mode::reduce_overhead});
  for (int call = 0; call < 3; ++call) CHECK(sd::to_vector(planned(x)) == sd::to_vector(want));
  // Two intermediates of 4 x 32 floats, both alive while the second is computed.
  CHECK(planned.stats().workspace_bytes == 2 * 512);

  // The process's tuner persists under SOLDER_CACHE_DIR, read when first used.
  auto const dir = std::filesystem::path(SOLDER_TESTS_BINARY_DIR) / "runtime-autotune";
  std::filesystem::remove_all(dir);
  ::setenv("SOLDER_CACHE_DIR", dir.c_str(), 1);
  auto tuned = sd::compile(mlp, {.mode = sd::Mode::max_autotune});
  auto const before = sd::runtime::Autotuner::global().tuned();
  auto const y = tuned(sd::rand<float>({40, 32}));
  CHECK(sd::runtime::Autotuner::global().tuned() > before);
  CHECK(y.shape() == sd::Index<2>{40, 8});
  CHECK(std::filesystem::exists(sd::runtime::Autotuner::global().file()));
  CHECK_THROWS_WITH(sd::compile(twice(), {.recompile_limit = 0}), Catch::Contains("recompile_limit must be"));
}

TEST_CASE("logs: SOLDER_LOGS's syntax, the sink, the prefixes; fusion and graph_breaks on a first call", "[runtime]") {
  sd::set_logs("all,-perf_hints");
  CHECK(sd::log_enabled(sd::Log::fusion));
  CHECK(sd::log_enabled(sd::Log::graph_breaks));
  CHECK_FALSE(sd::log_enabled(sd::Log::perf_hints));
  sd::set_logs(" +recompiles , fusion,-recompiles");
  CHECK(sd::log_enabled(sd::Log::fusion));
  CHECK_FALSE(sd::log_enabled(sd::Log::recompiles));
  CHECK_THROWS_WITH(sd::set_logs("recompiles,guards"), Catch::StartsWith("solder: set_logs: unknown log(s) guards"));
  sd::set_logs("");
  CHECK_FALSE(sd::log_enabled(sd::Log::fusion));

  LogCapture logs("fusion,graph_breaks");
  sd::nn::Sequential<sd::nn::Linear, sd::nn::ReLU, sd::nn::Linear> net{{16, 32}, {}, {32, 4}};
  auto compiled = sd::compile(net, {.name = "mlp"});
  sd::Tensor<float, 2> const x = sd::rand<float>(sd::shape(8, 16), -1.f, 1.f);
  compiled(x);
  auto const fusion = logs.starting("[solder:fusion] mlp: ");
  REQUIRE(fusion.size() > 3);
  CHECK(fusion[0] == "[solder:fusion] mlp: first call of arg0: float32[8, 16] host aligned: 2 kernels in 2 blocks");
  CHECK(fusion[1].starts_with("[solder:fusion] mlp: block 0: solder plan: 1 kernel"));
  CHECK(logs.starting("[solder:graph_breaks] mlp: block 0 is materialized before the result").size() == 1);
  CHECK(logs.starting("[solder:").size() == logs.lines.size());
  CHECK(compiled.specializations()[0].plan.starts_with("2 kernels in 2 blocks\nblock 0: solder plan: 1 kernel"));
  auto const n = logs.lines.size();
  compiled(x);  // a cached signature: nothing to say
  CHECK(logs.lines.size() == n);

  auto centred = sd::compile([](Vec const& v) { return v - sd::sum(v); }, {.name = "centred"});
  centred(Vec(sd::ones<float>(4)));
  CHECK(logs.starting("[solder:graph_breaks] centred: block 0, kernel 0: materialized because sum").size() == 1);
}

TEST_CASE("8 threads calling one compiled function with new signatures at once", "[runtime][threads]") {
  LogCapture logs("recompiles");
  auto f = sd::compile([](Vec const& x) { return x + 1.f; }, {.recompile_limit = 16, .name = "f"});
  constexpr int threads = 8, calls = 50;
  std::vector<Vec> own, shared;
  for (int t = 0; t < threads; ++t) {
    own.push_back(sd::ones<float>(10 + t));
    shared.push_back(sd::ones<float>(100));  // one more signature, met by all threads at once
  }
  std::latch start(threads);
  std::atomic<int> wrong{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < calls; ++i) {
        Vec const y = f(i % 2 ? own[t] : shared[t]);
        if (y(y.shape()[0] - 1) != 2.f) ++wrong;
      }
    });
  for (auto& th : pool) th.join();
  CHECK(wrong == 0);
  auto const st = f.stats();
  CHECK(st.calls == threads * calls);
  CHECK(st.specializations == threads + 1);
  CHECK(st.recompiles == threads);
  CHECK(logs.lines.size() == threads);
  std::set<std::string> signatures;
  std::uint64_t total = 0;
  for (auto const& s : f.specializations()) {
    signatures.insert(s.signature);
    total += s.calls;
    CHECK(s.calls == (s.signature == "arg0: float32[100] host aligned" ? threads * calls / 2 : calls / 2));
  }
  CHECK(signatures.size() == threads + 1);
  CHECK(total == threads * calls);
}

TEST_CASE("logs: perf_hints name what a user can change; output_code lists the kernels", "[runtime]") {
  std::vector<std::string> lines;
  auto const previous = sd::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  sd::set_logs("perf_hints,output_code");
  using M = sd::Tensor<float, 2>;
  auto columns = sd::compile([](M const& m) { return sd::softmax(m, 0); }, {.name = "columns"});
  columns(M(sd::rand<float>({64, 33})));
  sd::set_logs("");
  sd::set_log_sink(previous);
  auto has = [&](std::string const& prefix, std::string const& text) {
    for (auto const& l : lines)
      if (l.rfind(prefix, 0) == 0 && l.find(text) != std::string::npos) return true;
    return false;
  };
  CHECK(has("[solder:perf_hints] columns: block 0, kernel 0", "a reduction over a dim that is not the innermost"));
  CHECK(has("[solder:perf_hints] columns: block 0, kernel 0", "too little to be worth a kernel of its own"));
  CHECK(has("[solder:perf_hints] columns: block 0, kernel 2", "the innermost extent 33 is not a multiple of 16"));
  CHECK(has("[solder:output_code] columns: block 0, kernel 2: element-wise kernel over [64, 33] float32", ""));
}

namespace {

bool contains(std::string const& text, std::string const& part) { return text.find(part) != std::string::npos; }

using Mlp = sd::nn::Sequential<sd::nn::Linear, sd::nn::ReLU, sd::nn::Linear>;

}  // namespace

TEST_CASE("explain(compiled, args...): the call's blocks, breaks, recompiles and workspace", "[runtime][nn]") {
  Mlp net{{16, 32}, {}, {32, 4}};
  auto compiled = sd::compile(net, {.mode = sd::Mode::reduce_overhead, .name = "mlp"});
  sd::Tensor<float, 2> const x = sd::rand<float>(sd::shape(8, 16), -1.f, 1.f);
  compiled(x);
  compiled(x);
  compiled(sd::Tensor<float, 2>(sd::rand<float>(sd::shape(2, 16))));
  auto const before = compiled.stats();
  std::string const text = sd::explain(compiled, x);
  INFO(text);
  CHECK(text.starts_with("solder call: mlp(arg0: float32[8, 16] host aligned): 2 kernels in 2 blocks, 1 user break, "
                         "0 planner breaks\nspecialization: arg0: float32[8, 16] host aligned, 2 calls\n"
                         "compiled: 2 specializations, 1 recompile (limit 8), workspace "));
  CHECK(contains(text, "workspace " + sd::detail::human_bytes(static_cast<std::int64_t>(before.workspace_bytes)) +
                           "; mode reduce_overhead, backend inductor\nfullgraph (off): allowed: user breaks only\n"));
  CHECK(before.workspace_bytes > 0);
  CHECK(contains(text, "\nblock 0: solder plan: 1 kernel (eager: 3)\n  kernel 0: contraction kernel"));
  CHECK(contains(text, "  reads 2.62 KiB, writes 1 KiB\n  user break: sd::materialize stores the block's result"));
  CHECK(contains(text, "\nblock 1: solder plan: 1 kernel"));
  CHECK(compiled.stats().calls == before.calls);  // explain is not a call
  CHECK(compiled.stats().specializations == before.specializations);

  // a signature not seen yet; the planner's breaks, which fullgraph would refuse
  auto centred = sd::compile([](Vec const& v) { return v - sd::sum(v); }, {.name = "centred"});
  std::string const planned = sd::explain(centred, Vec(sd::ones<float>(4)));
  INFO(planned);
  CHECK(planned.starts_with("solder call: centred(arg0: float32[4] host aligned): 2 kernels in 1 block, "
                            "0 user breaks, 1 planner break\nspecialization: none yet"));
  CHECK(contains(planned, "compiled: 0 specializations, 0 recompiles (limit 8), workspace 0 B; mode standard"));
  CHECK(contains(planned, "fullgraph (off): would refuse: block 0 is 2 kernels, not one"));
  CHECK(contains(planned, "  break: materialized because sum result (rank 0) is broadcast"));
  auto full = sd::compile([](Vec const& v) { return v - sd::sum(v); }, {.fullgraph = true});
  CHECK(contains(sd::explain(full, Vec(sd::ones<float>(4))), "fullgraph (on): refused: block 0"));
}

TEST_CASE("explain_dot(compiled, args...): a cluster per block, a node per kernel", "[runtime][nn]") {
  Mlp net{{16, 32}, {}, {32, 4}};
  auto compiled = sd::compile(net, {.name = "mlp"});
  std::string const dot = sd::explain_dot(compiled, sd::Tensor<float, 2>(sd::rand<float>(sd::shape(8, 16))));
  INFO(dot);
  CHECK(dot.starts_with("digraph solder_call {\n  label=\"mlp: arg0: float32[8, 16] host aligned\";\n"));
  CHECK(dot.ends_with("}\n"));
  CHECK(contains(dot, "  subgraph cluster_b0 {\n    label=\"block 0\";\n"
                      "    b0k0 [label=\"kernel 0: contraction kernel"));
  CHECK(contains(dot, "  b0k0 -> b1k0 [lhead=cluster_b1, style=dashed, label=\"user break\"];\n"));
  // Well formed: braces balance, every line's quotes pair up.
  CHECK(std::count(dot.begin(), dot.end(), '{') == std::count(dot.begin(), dot.end(), '}'));
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    int quotes = 0;
    for (std::size_t i = 0; i < line.size(); ++i) quotes += line[i] == '"' && (i == 0 || line[i - 1] != '\\');
    CHECK(quotes % 2 == 0);
  }

  // a kernel that reads another's result: an edge between them
  auto columns = sd::compile([](sd::Tensor<float, 2> const& m) { return sd::softmax(m, 0); });
  std::string const split = sd::explain_dot(columns, sd::Tensor<float, 2>(sd::rand<float>({64, 33})));
  INFO(split);
  CHECK(contains(split, "  b0k0 -> b0k1;\n"));
  CHECK(contains(split, "\\nbreak: "));
}

namespace {

// The "ph": "X" events of a trace file, by category.
std::map<std::string, std::vector<sd::io::json::Value>> trace_events(std::filesystem::path const& path) {
  std::ifstream in(path);
  std::string const text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto const trace = sd::io::json::parse(text, path.string(), 16);
  std::map<std::string, std::vector<sd::io::json::Value>> events;
  for (auto const& e : *trace.find("traceEvents")->array()) {
    REQUIRE(e.find("ph")->string());
    if (*e.find("ph")->string() != "X") continue;
    for (char const* field : {"ts", "dur", "pid", "tid"}) CHECK(e.find(field)->is_number());
    events[*e.find("cat")->string()].push_back(e);
  }
  return events;
}

std::filesystem::path trace_path(std::string const& name) {
  auto const dir = std::filesystem::path(SOLDER_TESTS_BINARY_DIR) / "runtime-trace";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return dir / name;
}

}  // namespace

TEST_CASE("sd::trace: a Chrome trace with an event per kernel that ran, per block and for the call", "[runtime]") {
  Mlp net{{16, 32}, {}, {32, 4}};
  auto compiled = sd::compile(net, {.name = "mlp"});
  sd::Tensor<float, 2> const x = sd::rand<float>(sd::shape(8, 16), -1.f, 1.f);
  compiled(x);
  auto const path = trace_path("mlp.json");
  auto const k0 = sd::detail::kernels_run();
  sd::Tensor<float, 2> const y = sd::trace(path.string(), [&] { return compiled(x); });
  auto const ran = sd::detail::kernels_run() - k0;
  CHECK(y.shape() == sd::Index<2>{8, 4});
  auto events = trace_events(path);
  REQUIRE(events["kernel"].size() == ran);
  CHECK(events["block"].size() == 2);
  REQUIRE(events["call"].size() == 1);
  CHECK(*events["call"][0].find("name")->string() == "sd::trace");
  auto const& first = events["kernel"][0];
  CHECK(*first.find("name")->string() == "contraction kernel: relu [8, 32]");
  CHECK(*first.find("args")->find("shape")->string() == "[8, 32]");
  CHECK(*first.find("args")->find("dtype")->string() == "float32");
  CHECK(*events["block"][1].find("name")->string() == "block 1");

  // a kernel whose input is a break: the break's kernel runs (and is traced) inside it
  sd::Tensor<float, 1> const v = sd::rand<float>({100});
  auto const k1 = sd::detail::kernels_run();
  sd::trace(path.string(), [&] { return sd::Tensor<float, 1>(v - sd::sum(v)); });
  CHECK(sd::detail::kernels_run() - k1 == 2);
  events = trace_events(path);  // both calls, each a track of its own
  CHECK(events["call"].size() == 2);
  CHECK(events["kernel"].size() == ran + 2);
  CHECK(*events["kernel"].back().find("name")->string() == "element-wise kernel: sub [100]");

  // an unwritable path: a warning on stderr, not an error in the call
  std::fflush(stderr);
  int const saved = dup(2);
  auto const err = trace_path("stderr.txt");
  FILE* file = std::fopen(err.c_str(), "w");
  dup2(fileno(file), 2);
  auto const z = sd::trace("/nonexistent-dir/trace.json", [&] { return compiled(x); });
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(file);
  CHECK(z.shape() == sd::Index<2>{8, 4});
  std::ifstream warning(err);
  std::string line;
  std::getline(warning, line);
  CHECK(line.starts_with("[solder:trace] /nonexistent-dir/trace.json: the trace is not written: "));
}

TEST_CASE("SOLDER_TRACE: the first call of a compiled callable, from any of the threads calling it",
          "[runtime][threads]") {
  auto const path = trace_path("first-call.json");
  ::setenv("SOLDER_TRACE", path.c_str(), 1);
  auto f = sd::compile([](Vec const& v) { return sd::relu(v * 2.f - 1.f); }, {.name = "f"});
  ::unsetenv("SOLDER_TRACE");
  CHECK(f.options().trace == path.string());
  constexpr int threads = 4;
  std::latch start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      Vec const v = sd::ones<float>(10 + t);
      start.arrive_and_wait();
      for (int i = 0; i < 3; ++i) f(v);
    });
  for (auto& th : pool) th.join();
  auto events = trace_events(path);
  REQUIRE(events["call"].size() == 1);
  CHECK(events["call"][0].find("name")->string()->starts_with("f: arg0: float32[1"));
  CHECK(events["kernel"].size() == 1);
  CHECK(events["block"].size() == 1);
}

TEST_CASE("sd::compare: the largest difference per output; compiled against its eager backend", "[runtime][nn]") {
  Mlp net{{16, 32}, {}, {32, 4}};
  sd::Tensor<float, 2> const x = sd::rand<float>(sd::shape(8, 16), -1.f, 1.f);
  auto compiled = sd::compile(net);
  auto eager = sd::compile(net, {.backend = sd::Backend::eager});
  auto const same = sd::compare(compiled, eager, x);
  REQUIRE(same.outputs.size() == 1);
  CHECK(same.outputs[0].output == "output");
  CHECK(same.outputs[0].same_shape);
  CHECK(same.outputs[0].max_abs < 1e-5);
  CHECK(same.outputs[0].max_rel < 1e-4);
  CHECK(same.text().starts_with("solder compare: 1 output\n  output: [8, 4] float32: max abs "));

  // an injected difference, found where it is
  Vec const v = sd::full<float>({4}, 2.f);
  Vec const bump = sd::from_vector<float>({0, 0, 0.5f, 0}, sd::shape(4));
  auto shifted = [&](Vec const& w) { return w + bump; };
  auto const d = sd::compare(sd::compile(twice()), [](Vec const& w) { return w * 2.f; }, v);
  CHECK(d.outputs[0].max_abs == 0);
  auto const diff = sd::compare(shifted, [](Vec const& w) { return w; }, v);
  CHECK(diff.outputs[0].max_abs == 0.5);
  CHECK(diff.outputs[0].max_rel == 0.25);
  CHECK(diff.outputs[0].at == "[2]");
  CHECK(diff.text() == "solder compare: 1 output\n  output: [4] float32: max abs 0.5, max rel 0.25 at [2]\n");

  // tuples, pairs and structs of tensors; shapes that differ are reported
  auto pair = [](Vec const& w) { return std::pair{sd::eval(w + 1.f), sd::eval(w - 1.f)}; };
  auto other = [](Vec const& w) { return std::pair{sd::eval(w + 1.f), Vec(sd::zeros<float>(5))}; };
  auto const pairs = sd::compare(pair, other, v);
  REQUIRE(pairs.outputs.size() == 2);
  CHECK(pairs.outputs[0].output == "output[0]");
  CHECK(pairs.outputs[0].max_abs == 0);
  CHECK_FALSE(pairs.outputs[1].same_shape);
  CHECK(pairs.outputs[1].max_abs == std::numeric_limits<double>::infinity());
  CHECK(contains(pairs.text(), "  output[1]: shapes differ: [4] against [5]\n"));
  struct Two {
    Vec a;
    std::tuple<Vec, sd::Tensor<float, 2>> b;
  };
  auto two = [](Vec const& w) { return Two{w, {sd::eval(w * 3.f), sd::zeros<float>(2, 2)}}; };
  auto const structs = sd::compare(two, two, v);
  REQUIRE(structs.outputs.size() == 3);
  CHECK(structs.outputs[2].output == "output[1][1]");
  CHECK(structs.outputs[2].shape == "[2, 2]");
}
