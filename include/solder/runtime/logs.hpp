// Logs: SOLDER_LOGS=recompiles,fusion,... (TORCH_LOGS's form) or sd::set_logs("...") picks
// which events print. Each event is one line, "[solder:<log>] <text>", on stderr or on the sink
// sd::set_log_sink installs; lines from different threads never interleave.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "../core/error.hpp"

namespace solder {

enum class Log : std::uint32_t {
  fusion = 1u << 0,        // the plan of each block a signature's first call ran
  recompiles = 1u << 1,    // a new signature, with the guard that failed
  perf_hints = 1u << 2,    // what a user can change: reductions apart, tiny kernels, ragged lines, lone blocks
  autotune = 1u << 3,      // each product shape max_autotune timed: its choice and every time
  output_code = 1u << 4,   // each kernel of a signature's first call: its loop, shape and fused nodes
  graph_breaks = 1u << 5,  // block boundaries and the planner's breaks of a signature's first call
};

namespace detail {

inline constexpr std::pair<std::string_view, Log> log_names[] = {
    {"fusion", Log::fusion},         {"recompiles", Log::recompiles},   {"perf_hints", Log::perf_hints},
    {"autotune", Log::autotune},     {"output_code", Log::output_code}, {"graph_breaks", Log::graph_breaks},
};

inline std::string_view log_name(Log which) {
  for (auto const& [name, log] : log_names)
    if (log == which) return name;
  return "?";
}

// The logs a spec turns on, read left to right: "name" or "+name" on, "-name" off, "all" every
// log. Unknown names are collected in `unknown` (comma-separated), not fatal here.
inline std::uint32_t parse_logs(std::string_view spec, std::string& unknown) {
  std::uint32_t mask = 0;
  while (!spec.empty()) {
    std::size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    bool on = true;
    if (!item.empty() && (item.front() == '+' || item.front() == '-')) {
      on = item.front() == '+';
      item.remove_prefix(1);
    }
    if (item.empty()) continue;
    std::uint32_t bits = 0;
    for (auto const& [name, log] : log_names)
      if (item == name || item == "all") bits |= static_cast<std::uint32_t>(log);
    if (bits == 0) unknown += (unknown.empty() ? "" : ", ") + std::string(item);
    mask = on ? mask | bits : mask & ~bits;
  }
  return mask;
}

inline std::string known_logs() {
  std::string s = "all";
  for (auto const& [name, log] : log_names) s += ", " + std::string(name);
  return s;
}

struct LogState {
  std::atomic<std::uint32_t> mask;
  std::mutex mutex;  // the sink, and whole lines
  std::function<void(std::string_view)> sink;

  // SOLDER_LOGS, read once: an unknown name there is a warning, not an exception at first use.
  LogState() : mask(0) {
    if (char const* env = std::getenv("SOLDER_LOGS")) {
      std::string unknown;
      mask = parse_logs(env, unknown);
      if (!unknown.empty())
        std::fprintf(stderr, "[solder:logs] SOLDER_LOGS: unknown log(s) %s ignored (known: %s)\n",
                     unknown.c_str(), known_logs().c_str());
    }
  }
};
inline LogState& log_state() {
  static LogState state;
  return state;
}

}  // namespace detail

// Replaces the set of logs on: sd::set_logs("recompiles,graph_breaks"), "" for none.
inline void set_logs(std::string_view spec) {
  std::string unknown;
  std::uint32_t mask = detail::parse_logs(spec, unknown);
  detail::check(unknown.empty(), "set_logs: unknown log(s) ", unknown, " (known: ", detail::known_logs(), ")");
  detail::log_state().mask.store(mask, std::memory_order_relaxed);
}

inline bool log_enabled(Log which) {
  return (detail::log_state().mask.load(std::memory_order_relaxed) & static_cast<std::uint32_t>(which)) != 0;
}

// Where log lines go (each without its newline); an empty function restores stderr. Returns the
// sink it replaces. The sink runs under the logs' lock: it must not log itself.
inline std::function<void(std::string_view)> set_log_sink(std::function<void(std::string_view)> sink) {
  auto& s = detail::log_state();
  std::lock_guard lock(s.mutex);
  std::swap(s.sink, sink);
  return sink;
}

namespace detail {

// Emits `text` under `which` when that log is on: each of its lines is one event line.
inline void write_log(Log which, std::string_view text) {
  if (!log_enabled(which)) return;
  auto& s = log_state();
  std::string const prefix = "[solder:" + std::string(log_name(which)) + "] ";
  std::lock_guard lock(s.mutex);
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string line = prefix + std::string(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (s.sink) {
      s.sink(line);
    } else {
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stderr);
    }
  }
}

}  // namespace detail
}  // namespace solder
