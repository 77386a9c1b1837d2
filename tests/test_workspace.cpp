// runtime::Workspace (reduce_overhead on the host): the first call of a plan is recorded, later
// calls are served from one block planned from the intermediates' lifetimes, and allocate
// nothing — counted here by replacing the global operator new.
#include <solder/solder.hpp>
#include <solder/nn/models/mlp.hpp>
#include <solder/runtime/workspace.hpp>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <optional>

namespace sd = solder;

// Under AddressSanitizer, whose own operator new serves the C++ runtime library, a replacement
// would free memory it did not allocate: there the counts are not checked.
namespace {
long allocations = 0;
}  // namespace
#if defined(__SANITIZE_ADDRESS__)
constexpr bool counting = false;
#else
constexpr bool counting = true;

namespace {
void* counted(std::size_t n, std::size_t alignment) {
  ++allocations;
  std::size_t const a = std::max(alignment, alignof(std::max_align_t));
  if (void* p = std::aligned_alloc(a, (std::max<std::size_t>(n, 1) + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted(n, alignof(std::max_align_t)); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

namespace {
// Allocations made by f.
template <class F>
long allocations_of(F&& f) {
  if constexpr (counting) {
    long const before = allocations;
    f();
    return allocations - before;
  } else {
    f();
    return 0;
  }
}
}  // namespace

TEST_CASE("workspace: after the recorded call, a forward allocates nothing", "[runtime][workspace]") {
  auto mlp = sd::models::mlp({.in_channels = 64, .hidden_channels = {64, 64, 64, 10}});
  auto const x = sd::rand<float>({4, 64});
  sd::Tensor<float, 2> const want = mlp(x);
  sd::runtime::Workspace w;
  for (int call = 0; call < 4; ++call) {
    std::optional<sd::Tensor<float, 2>> y;
    long const n = allocations_of([&] {
      sd::runtime::Workspace::Call scope(w);
      y.emplace(mlp(x));
    });
    INFO("call " << call);
    if (call > 0) CHECK(n == 0);
    CHECK(sd::to_vector(*y) == sd::to_vector(want));
  }
  CHECK(w.calls_recorded() == 1);
  // Three intermediates of 4 x 64 floats, at most two alive at once: two buffers' worth.
  CHECK(w.unplanned_bytes() == 3 * 1024);
  CHECK(w.bytes() == 2 * 1024);
}

TEST_CASE("workspace: an output the caller keeps is never overwritten", "[runtime][workspace]") {
  sd::nn::Linear fc{8, 8};
  sd::runtime::Workspace w;
  auto run = [&](auto const& x) {
    sd::runtime::Workspace::Call scope(w);
    return sd::nn::materialize(fc(sd::relu(fc(x))));
  };
  auto const a = sd::rand<float>({2, 8}), b = sd::rand<float>({2, 8});
  auto const ya = run(a);
  auto const first = sd::to_vector(ya);
  auto const yb = run(b);
  auto const yc = run(a);
  CHECK(sd::to_vector(ya) == first);
  CHECK(sd::to_vector(yc) == first);
  CHECK(ya.data() != yb.data());
  CHECK(sd::to_vector(yb) == sd::to_vector(sd::nn::materialize(fc(sd::relu(fc(b))))));
}

TEST_CASE("workspace: a call that allocates differently finishes on the heap and is recorded again",
          "[runtime][workspace]") {
  sd::nn::Linear fc{8, 8};
  sd::runtime::Workspace w;
  auto run = [&](auto const& x) {
    sd::runtime::Workspace::Call scope(w);
    return sd::nn::materialize(fc(sd::relu(fc(x))));
  };
  run(sd::rand<float>({2, 8}));
  CHECK(w.planned());
  auto const big = sd::rand<float>({5, 8});
  auto const y = run(big);
  CHECK_FALSE(w.planned());
  CHECK(sd::to_vector(y) == sd::to_vector(sd::nn::materialize(fc(sd::relu(fc(big))))));
  run(big);
  CHECK(w.planned());
  CHECK(w.calls_recorded() == 2);
}

TEST_CASE("workspace: sd::compile's reduce_overhead allocates nothing in its steady state", "[runtime][workspace]") {
  auto mlp = sd::models::mlp({.in_channels = 64, .hidden_channels = {64, 64, 10}});
  auto planned = sd::compile(mlp, {.mode = sd::Mode::reduce_overhead});
  auto const x = sd::rand<float>({8, 64});
  sd::Tensor<float, 2> const want = mlp(x);
  for (int call = 0; call < 2; ++call) CHECK(sd::to_vector(planned(x)) == sd::to_vector(want));
  float first = 0;
  CHECK(allocations_of([&] { first = planned(x)(0, 0); }) == 0);
  CHECK(first == want(0, 0));
  CHECK(planned.stats().workspace_bytes > 0);
}
