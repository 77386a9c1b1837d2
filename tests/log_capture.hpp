// Collects solder's log lines for one test (test_runtime, tests/cuda/test_cuda_graphs).
#pragma once
#include <solder/solder.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

// Turns logs on and collects their lines for one test; restores stderr and no logs after.
struct LogCapture {
  std::vector<std::string> lines;
  explicit LogCapture(std::string_view spec) {
    solder::set_logs(spec);
    solder::set_log_sink([this](std::string_view line) { lines.emplace_back(line); });
  }
  ~LogCapture() {
    solder::set_log_sink({});
    solder::set_logs("");
  }
  LogCapture(LogCapture const&) = delete;
  LogCapture& operator=(LogCapture const&) = delete;
  std::vector<std::string> starting(std::string const& prefix) const {
    std::vector<std::string> out;
    for (auto const& l : lines)
      if (l.starts_with(prefix)) out.push_back(l);
    return out;
  }
  std::size_t count(std::string const& what) const {
    std::size_t n = 0;
    for (auto const& l : lines) n += l.find(what) != std::string::npos;
    return n;
  }
};
