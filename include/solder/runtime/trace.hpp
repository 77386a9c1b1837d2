// A Chrome/Perfetto trace of a call (the Trace Event Format, read by chrome://tracing and
// ui.perfetto.dev): SOLDER_TRACE=file.json traces the first call of each compiled callable,
// sd::trace(path, f) whatever f runs. Each kernel that ran is a complete event ("ph": "X") named
// as sd::explain names it, each block (nn::materialize) another, both inside a span of the
// whole call; every traced call is a track of its own. A file collects the calls this process
// traced into it and is rewritten whole, through a temporary and a rename, after each; a file
// that cannot be written is a warning on stderr, never an error in the call.
//
// The kernels are timed where every planned kernel starts (backend/assign.hpp: run_kernel): on
// the host the wall time, on the GPU between two waits for solder's stream. A kernel whose
// inputs are breaks runs them first: their events nest inside its own.
#pragma once
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/assign.hpp"
#include "../core/files.hpp"
#include "../io/json.hpp"

namespace solder {
namespace detail {

using TraceClock = std::chrono::steady_clock;

// A time in the Trace Event Format's unit, microseconds; timestamps count from the process's
// first trace.
inline std::string trace_microseconds(TraceClock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", std::chrono::duration<double, std::micro>(d).count());
  return text;
}
inline TraceClock::time_point trace_origin() {
  static TraceClock::time_point const origin = TraceClock::now();
  return origin;
}

inline std::string trace_quote(std::string_view s) { return io::json::quote(s, "a trace event's text"); }

// The events traced into each file so far, and the number of traced calls (each call's track).
struct TraceFiles {
  std::mutex mutex;
  std::map<std::string, std::string> events;  // path -> its events, comma-separated
  int calls = 0;
};
inline TraceFiles& trace_files() {
  static TraceFiles files;
  return files;
}

// One traced call: this thread's tracer (backend/assign.hpp) from construction to destruction,
// collecting a span per kernel and per block.
class TracedCall final : public Tracer {
 public:
  // `name` names the call's track ("mlp: arg0: float32[8, 16] host aligned").
  explicit TracedCall(std::string name)
      : name_(std::move(name)), previous_(tracer()), begin_((trace_origin(), TraceClock::now())) {
    tracer() = this;
  }
  ~TracedCall() { tracer() = previous_; }
  TracedCall(TracedCall const&) = delete;
  TracedCall& operator=(TracedCall const&) = delete;

  void start() override { open_.push_back(TraceClock::now()); }
  void stop_kernel(std::string_view kind, std::string root, std::string shape, std::string_view dtype) override {
    // "contraction kernel: add [8, 32]" (its root op; sd::explain has the whole expression)
    stop(std::string(kind) + " kernel: " + root + " " + shape, "kernel",
         "\"shape\": " + trace_quote(shape) + ", \"dtype\": " + trace_quote(dtype) + ", \"kind\": " +
             trace_quote(kind) + ", \"root\": " + trace_quote(root));
  }
  void stop_block(std::string shape, std::string_view dtype) override {
    stop("block " + std::to_string(blocks_++), "block",
         "\"shape\": " + trace_quote(shape) + ", \"dtype\": " + trace_quote(dtype));
  }

  // Ends the call: adds it to the trace of `path` and rewrites that file. A file that cannot be
  // written is a warning on stderr.
  void write(std::string const& path) {
    auto const end = TraceClock::now();
    auto& files = trace_files();
    std::lock_guard lock(files.mutex);
    try {
      std::string const track = ", \"pid\": 1, \"tid\": " + std::to_string(files.calls + 1);
      std::string call = ",\n{\"name\": \"thread_name\", \"ph\": \"M\"" + track +
                         ", \"args\": {\"name\": " + trace_quote(name_) + "}},\n" +
                         event({name_, "call", "", begin_, end}, track);
      for (Span const& s : spans_) call += ",\n" + event(s, track);
      std::string& events = files.events[path];
      if (events.empty())
        events = "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"solder\"}}";
      events += call;
      ++files.calls;
      check(write_whole(path, "{\"traceEvents\": [\n" + events + "\n]}\n"), "cannot write the trace ", path);
    } catch (std::exception const& e) {
      std::fprintf(stderr, "[solder:trace] %s: the trace is not written: %s\n", path.c_str(), e.what());
    }
  }

 private:
  struct Span {
    std::string name;
    char const* category;
    std::string args;
    TraceClock::time_point begin, end;
  };

  void stop(std::string name, char const* category, std::string args) {
    spans_.push_back({std::move(name), category, std::move(args), open_.back(), TraceClock::now()});
    open_.pop_back();
  }
  static std::string event(Span const& s, std::string const& track) {
    return "{\"name\": " + trace_quote(s.name) + ", \"cat\": \"" + s.category +
           "\", \"ph\": \"X\", \"ts\": " + trace_microseconds(s.begin - trace_origin()) +
           ", \"dur\": " + trace_microseconds(s.end - s.begin) + track + ", \"args\": {" + s.args + "}}";
  }

  std::string name_;
  Tracer* previous_;
  TraceClock::time_point begin_;
  std::vector<TraceClock::time_point> open_;  // the spans begun and not yet ended
  std::vector<Span> spans_;
  int blocks_ = 0;
};

}  // namespace detail

// Runs f() on this thread with its kernels and blocks traced, adds the call to the trace file
// `path` and returns f's result. Kernels f runs on other threads are not
// traced.
template <class F>
auto trace(std::string const& path, F&& f) {
  detail::TracedCall call("sd::trace");
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    call.write(path);
  } else {
    auto result = f();
    call.write(path);
    return result;
  }
}

}  // namespace solder
