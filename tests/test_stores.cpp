// Streamed stores (backend/host/executor.hpp): the large outputs of kernels without heavy maths
// are written a chunk at a time into a buffer and copied out with non-temporal stores. Here
// the size threshold is lowered so that every such output streams, and each result must equal,
// bit for bit, the same kernel stored plainly: outputs that do not start on a cache line,
// lengths around the chunk and the 64-byte blocks, several threads, every loop that streams
// (one long run, lines, runs with repeating inputs) and every element size.
#include "reference.hpp"

namespace sd = solder;

namespace {

// Sets the streaming threshold for the life of the object.
struct StreamFrom {
  std::int64_t saved = sd::detail::host::stream_min_bytes();
  explicit StreamFrom(std::int64_t bytes) { sd::detail::host::stream_min_bytes() = bytes; }
  ~StreamFrom() { sd::detail::host::stream_min_bytes() = saved; }
};

// Writes f() into [1, 1 + n) of a buffer of n + 2 sentinels, so the output starts 1 element
// past an aligned address, plainly and streamed; checks both agree and the sentinels survive.
template <class T, class F>
void same_streamed(F const& f, std::int64_t n, char const* what) {
  INFO(what << ", n = " << n);
  auto run = [&](std::int64_t threshold) {
    StreamFrom s(threshold);
    auto buf = sd::full<T>(sd::shape(n + 2), T(7));
    auto inner = sd::slice(buf, 0, 1, n + 1);
    inner = f();
    return sd::to_vector(buf);
  };
  std::vector<T> plain = run(std::int64_t(1) << 60), streamed = run(0);
  CHECK(streamed == plain);
  CHECK(streamed.front() == T(7));
  CHECK(streamed.back() == T(7));
}

}  // namespace

TEST_CASE("which kernels have heavy maths", "[stores]") {
  auto x = sd::zeros<float>(4, 8);
  auto g = sd::ones<float>(8);
  auto heavy = [](auto const& e) {
    using N = sd::node_t<decltype(e)>;
    return sd::detail::heavy_maths<N, N::rank, false>();
  };
  CHECK_FALSE(heavy(sd::relu(x * 2.f + 1.f)));
  CHECK_FALSE(heavy(sd::where(x > 0.f, x / 3.f, sd::sqrt(x))));
  CHECK_FALSE(heavy(sd::layer_norm(x, g, g)));
  CHECK(heavy(x * sd::tanh(x)));
  CHECK(heavy(sd::pow(x, 2.f) + 1.f));
  CHECK(heavy(sd::softmax(x, 1)));
  CHECK(heavy(sd::softplus(x)));
  // A break is a kernel of its own: its exp does not make the kernel that reads it heavy.
  CHECK_FALSE(heavy(x * sd::sum(sd::exp(x))));
  CHECK(heavy(x * sd::sum(sd::exp(x), 1, sd::keepdim)));  // fused: the same kernel
}

TEST_CASE("streamed outputs equal plainly stored ones", "[stores]") {
  int threads = GENERATE(1, 2, 3);
  sd::set_num_threads(threads);
  INFO("threads = " << threads);
  // 1024 floats fill one chunk; 100003 is split between threads.
  for (std::int64_t n : {0, 1, 15, 16, 17, 1023, 1024, 1025, 3 * 1024 + 37, 100003}) {
    auto x = ref::uniform<float>(-2, 2, n);
    auto y = ref::uniform<float>(-2, 2, n);
    same_streamed<float>([&] { return sd::relu(x * 0.5f + y); }, n, "float relu(x * 0.5 + y)");
    same_streamed<bool>([&] { return x > y; }, n, "bool x > y");
    auto i = ref::uniform<std::int32_t>(-100, 100, n);
    same_streamed<std::int32_t>([&] { return i * 3 - 1; }, n, "int32 i * 3 - 1");
    auto d = ref::uniform<double>(-2, 2, n);
    same_streamed<double>([&] { return d / 3.0 + 1.0; }, n, "double d / 3 + 1");
  }

  // In place: each chunk of the output is computed from its inputs before it is stored.
  auto base = ref::uniform<float>(-2, 2, 100003);
  auto in_place = [&](std::int64_t threshold) {
    StreamFrom s(threshold);
    auto t = base.clone();
    t = sd::relu(t * 0.5f + 0.25f) - t;
    return sd::to_vector(t);
  };
  CHECK(in_place(0) == in_place(std::int64_t(1) << 60));

  // Runs with a repeating input (a column over the rows) and lines (layer norm's rows of 1029,
  // most not starting on a cache line).
  auto m = ref::uniform<float>(-2, 2, 37, 1029);
  auto gamma = ref::uniform<float>(0.5, 2, 1029), beta = ref::uniform<float>(-1, 1, 1029);
  auto col = ref::uniform<float>(-2, 2, 37, 1);
  // A value folded by a reduction and used again, read back from the line's record (Read::shared).
  auto scaled = m * 2.f / sd::sum(m * 2.f, 1, sd::keepdim);
  REQUIRE(sd::explain(scaled).find("shared: mul") != std::string::npos);
  auto all = [&](std::int64_t threshold) {  // into sentinels: memory may be reused
    StreamFrom s(threshold);
    auto out = sd::full<float>(sd::shape(37, 1029), 7.f), norm = out.clone(), share = out.clone();
    out = m * col + 1.f;
    norm = sd::layer_norm(m, gamma, beta);
    share = scaled;
    return std::array{sd::to_vector(out), sd::to_vector(norm), sd::to_vector(share)};
  };
  auto plain = all(std::int64_t(1) << 60), streamed = all(0);
  CHECK(streamed[0] == plain[0]);
  CHECK(streamed[1] == plain[1]);
  CHECK(streamed[2] == plain[2]);
}
