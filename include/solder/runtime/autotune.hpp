// max_autotune on the host: every matrix product (and every convolution, which runs on the
// same engine) is timed in each configuration the engine has for it (gemm::choices: B packed
// in rounds or just in time, the thread grid, the C block's height, one thread) the first time
// its shape is seen, and the fastest is kept. The choices persist in a versioned cache file
// keyed by the machine, which a later process loads so that it starts at full speed; a
// corrupt, truncated or foreign file is ignored with a warning, never trusted.
//   file: $SOLDER_CACHE_DIR/autotune-<machine hash>.txt (default ~/.cache/solder, or
//         $XDG_CACHE_HOME/solder)
//   sd::save_cache_artifacts() / sd::load_cache_artifacts(bytes): the same text, to ship a
//         deployment's tuning (torch's mega-cache)
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "../backend/host/gemm.hpp"
#include "logs.hpp"

namespace solder::runtime {

namespace detail {

using Choice = solder::detail::host::gemm::Choice;

// The machine a tuning belongs to: the CPU's model and the instruction set the program was
// built for (the same shapes tune differently elsewhere).
inline std::string machine() {
  std::string model = "unknown cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 2);
      break;
    }
#if defined(SOLDER_GEMM_AVX512)
  char const* isa = "avx512";
#elif defined(SOLDER_GEMM_AVX2)
  char const* isa = "avx2";
#else
  char const* isa = "generic";
#endif
  return model + " | " + isa;
}

inline std::filesystem::path cache_dir() {
  if (char const* d = std::getenv("SOLDER_CACHE_DIR")) return d;
  if (char const* x = std::getenv("XDG_CACHE_HOME")) return std::filesystem::path(x) / "solder";
  if (char const* h = std::getenv("HOME")) return std::filesystem::path(h) / ".cache" / "solder";
  return std::filesystem::temp_directory_path() / "solder";
}

constexpr char const* cache_format = "solder-autotune 1";

}  // namespace detail

class Autotuner : solder::detail::host::gemm::Tuner {
 public:
  // Installs the tuner on this thread for one call.
  class Call {
   public:
    explicit Call(Autotuner& t) : saved_(solder::detail::host::gemm::tuner()) {
      solder::detail::host::gemm::tuner() = &t;
    }
    ~Call() { solder::detail::host::gemm::tuner() = saved_; }
    Call(Call const&) = delete;
    Call& operator=(Call const&) = delete;

   private:
    solder::detail::host::gemm::Tuner* saved_;
  };

  static Autotuner& global() {
    static Autotuner t(detail::cache_dir());
    return t;
  }

  // A tuner whose choices persist in `dir` (nothing read or written when empty).
  explicit Autotuner(std::filesystem::path dir = {}) : dir_(std::move(dir)) {
    if (dir_.empty()) return;
    std::ifstream f(file(), std::ios::binary);
    if (!f) return;
    std::ostringstream bytes;
    bytes << f.rdbuf();
    if (!load(bytes.str()))
      std::fprintf(stderr, "solder: warning: ignoring the autotune cache %s: corrupt, truncated or from another machine\n",
                   file().string().c_str());
  }

  // The cached choices as text; load(text) merges them (false, and nothing merged, when the
  // text is not a well-formed cache of this machine).
  std::string save() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return text();
  }
  bool load(std::string const& text) {
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != detail::cache_format) return false;
    if (!std::getline(in, line) || line != "machine " + detail::machine()) return false;
    std::map<std::string, detail::Choice> read;
    while (std::getline(in, line)) {
      if (line.rfind("end ", 0) == 0)  // the count of entries: a truncated file has none
        return line == "end " + std::to_string(read.size()) && in.peek() == EOF && merge(read);
      auto const tab = line.find('\t');
      if (tab == std::string::npos || tab == 0) return false;
      std::istringstream fields(line.substr(tab + 1));
      int jit, tm, shift, serial;
      std::string rest;
      if (!(fields >> jit >> tm >> shift >> serial) || (fields >> rest)) return false;
      if (jit < -1 || jit > 1 || tm < 0 || tm > 127 || shift < -4 || shift > 4 || serial < 0 || serial > 1) return false;
      read[line.substr(0, tab)] = {std::int8_t(jit), std::int8_t(tm), std::int8_t(shift), serial == 1};
    }
    return false;
  }

  std::size_t tuned() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return chosen_.size();
  }
  std::filesystem::path file() const { return dir_ / ("autotune-" + std::to_string(std::hash<std::string>{}(detail::machine())) + ".txt"); }

 private:
  detail::Choice choose(std::string const& key, std::vector<detail::Choice> const& choices,
                        std::function<double(detail::Choice)> const& time) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = chosen_.find(key);
      if (it != chosen_.end() && std::find(choices.begin(), choices.end(), it->second) != choices.end())
        return it->second;
    }
    // Each choice once to warm up, then the best of three runs.
    auto const start = std::chrono::steady_clock::now();
    detail::Choice best = choices.front();
    double best_time = 0;
    std::ostringstream times;
    for (auto const& c : choices) {
      time(c);
      double t = time(c);
      for (int r = 0; r < 2; ++r) t = std::min(t, time(c));
      times << ' ' << describe(c) << '=' << t * 1e6 << "us";
      if (best_time == 0 || t < best_time) best = c, best_time = t;
    }
    double const took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    solder::detail::write_log(Log::autotune, key + ": " + describe(best) + " of" + times.str());
    if (took > 1) std::fprintf(stderr, "solder: autotuning %s took %.1f s\n", key.c_str(), took);
    std::lock_guard<std::mutex> lock(mutex_);
    chosen_[key] = best;
    persist();
    return best;
  }

  static std::string describe(detail::Choice const& c) {
    if (c == detail::Choice{}) return "heuristic";
    std::string s;
    if (c.jit >= 0) s += c.jit ? "jit " : "rounds ";
    if (c.tm > 0) s += "grid-rows=" + std::to_string(c.tm) + " ";
    if (c.mc_shift) s += "block-rows*2^" + std::to_string(c.mc_shift) + " ";
    if (c.serial) s += "serial ";
    s.pop_back();
    return s;
  }
  // Called with the mutex held.
  std::string text() const {
    std::ostringstream os;
    os << detail::cache_format << "\nmachine " << detail::machine() << "\n";
    for (auto const& [key, c] : chosen_)
      os << key << '\t' << int(c.jit) << ' ' << int(c.tm) << ' ' << int(c.mc_shift) << ' ' << int(c.serial) << "\n";
    os << "end " << chosen_.size() << "\n";
    return os.str();
  }
  bool merge(std::map<std::string, detail::Choice> const& read) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto const& [k, c] : read) chosen_[k] = c;
    return true;
  }
  // Called with the mutex held: writes the file whole, through a temporary and a rename.
  void persist() const {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    auto const tmp = file().string() + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << text();
      if (!f) return;
    }
    std::filesystem::rename(tmp, file(), ec);
  }

  std::filesystem::path dir_;
  mutable std::mutex mutex_;
  std::map<std::string, detail::Choice> chosen_;
};

// The process's tuning as bytes, to ship with a deployment, and back.
inline std::string save_cache_artifacts() { return runtime::Autotuner::global().save(); }
inline bool load_cache_artifacts(std::string const& bytes) { return runtime::Autotuner::global().load(bytes); }

}  // namespace solder::runtime

namespace solder {
using runtime::load_cache_artifacts;
using runtime::save_cache_artifacts;
}  // namespace solder
