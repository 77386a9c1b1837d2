// A profile of forwards by kernel kind (issue 38 #4): while a Profile lives, every kernel that
// solder runs on this thread is timed (the tracer hook of backend/assign.hpp: run_kernel, one
// thread-local load per kernel when no one listens) and added to its kind's row
// (backend/cost.hpp: conv k x k, conv 1 x 1, depthwise, GEMM, attention, row ops, element-wise,
// pools, gather) with its flops and bytes. Times are exclusive: a kernel that runs the kernels
// of its inputs first does not count theirs. A block's time outside its kernels (allocation,
// the forward's own code) goes to `between`.
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"

namespace solder_bench {

class Profile final : public solder::detail::Tracer {
 public:
  struct Row {
    double seconds = 0, flops = 0, bytes = 0;
    std::int64_t kernels = 0;
  };
  std::array<Row, solder::detail::kernel_kinds> rows{};
  std::map<std::string, Row> kernels;  // by kind, root op and shape ("GEMM: add [8, 197, 3072]")
  double between = 0;                  // seconds in blocks outside their kernels

  Profile() : previous_(solder::detail::tracer()) { solder::detail::tracer() = this; }
  ~Profile() { solder::detail::tracer() = previous_; }
  Profile(Profile const&) = delete;
  Profile& operator=(Profile const&) = delete;

  void start() override { open_.push_back({Clock::now(), 0}); }
  void kernel_cost(solder::detail::KernelCost const& k) override { cost_ = k; }
  void stop_kernel(std::string_view, std::string root, std::string shape, std::string_view) override {
    double const seconds = stop();
    std::string const name = std::string(solder::detail::kernel_kind_names[static_cast<std::size_t>(cost_.kind)]);
    for (Row* r : {&rows[static_cast<std::size_t>(cost_.kind)], &kernels[name + ": " + root + " " + shape]})
      r->seconds += seconds, r->flops += cost_.flops, r->bytes += cost_.bytes, ++r->kernels;
  }
  void stop_block(std::string, std::string_view) override { between += stop(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Open {
    Clock::time_point begin;
    double inner;  // seconds of the spans nested in it
  };
  // The closing span's own seconds; its whole time counts as nested in the one around it.
  double stop() {
    Open const o = open_.back();
    open_.pop_back();
    double const total = std::chrono::duration<double>(Clock::now() - o.begin).count();
    if (!open_.empty()) open_.back().inner += total;
    return total - o.inner;
  }
  solder::detail::Tracer* previous_;
  std::vector<Open> open_;
  solder::detail::KernelCost cost_;
};

// Prints p, gathered over `forwards` forwards that took `wall` seconds in all, per forward:
// each kind's time, share, GFLOP/s against the FMA peak (kinds with flops) and GB/s against the
// copy speed (a product of one row is bound by its weight's bytes), both measured in the same
// run (GFLOP/s, GB/s).
inline void print_profile(std::string const& title, Profile const& p, int forwards, double wall, double peak,
                          double copy, int top = 0) {
  double kernels = p.between;
  for (auto const& r : p.rows) kernels += r.seconds;
  std::printf("\n%s: %.2f ms per forward, %d threads, %s (FMA peak %.1f GFLOP/s, copy %.1f GB/s)\n", title.c_str(),
              wall / forwards * 1e3, threads, isa, peak, copy);
  std::printf("  %-14s %9s %6s %8s %9s %7s %8s %7s\n", "kind", "ms", "share", "kernels", "GFLOP/s", "of peak", "GB/s",
              "of copy");
  // (a kernel's name after its numbers)
  auto row = [&](std::string const& name, Profile::Row const& r, bool kernel = false) {
    double const gflops = r.flops / r.seconds * 1e-9, gbs = r.bytes / r.seconds * 1e-9;
    std::printf("  %-14s %9.3f %6.3f %8.2f", kernel ? "" : name.c_str(), r.seconds / forwards * 1e3, r.seconds / wall,
                double(r.kernels) / forwards);
    if (r.flops > 0) std::printf(" %9.1f %7.3f", gflops, peak > 0 ? gflops / peak : 0);
    else std::printf(" %9s %7s", "", "");
    std::printf(" %8.1f %7.3f", gbs, copy > 0 ? gbs / copy : 0);
    std::printf("%s%s\n", kernel ? "  " : "", kernel ? name.c_str() : "");
  };
  for (int i = 0; i < solder::detail::kernel_kinds; ++i)
    if (p.rows[static_cast<std::size_t>(i)].kernels > 0)
      row(std::string(solder::detail::kernel_kind_names[i]), p.rows[static_cast<std::size_t>(i)]);
  std::printf("  %-14s %9.3f %6.3f\n", "between", p.between / forwards * 1e3, p.between / wall);
  std::printf("  %-14s %9.3f %6.3f\n", "outside", (wall - kernels) / forwards * 1e3, (wall - kernels) / wall);
  if (top <= 0) return;
  // The `top` kernels that took longest, by kind, root op and shape.
  std::vector<std::pair<std::string, Profile::Row>> longest(p.kernels.begin(), p.kernels.end());
  std::sort(longest.begin(), longest.end(), [](auto const& a, auto const& b) { return a.second.seconds > b.second.seconds; });
  longest.resize(std::min<std::size_t>(longest.size(), static_cast<std::size_t>(top)));
  for (auto const& [name, r] : longest) row(name, r, true);
}

}  // namespace solder_bench
