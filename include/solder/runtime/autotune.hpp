// max_autotune on the host: every matrix product (and every convolution, which runs on the
// same engine) is timed in each configuration the engine has for it (gemm::choices: B packed
// in rounds or just in time, the thread grid, the C block's height, one thread) the first time
// its shape is seen, and the fastest is kept. On the GPU, the CUDA backend asks the same tuner
// (choose_on_device) to time the algorithms cuBLASLt's and cuDNN's heuristics offer for a
// product or a convolution (backend/cuda/contract.hpp, conv.hpp). The choices persist in a
// versioned cache file keyed by the machine, the GPU's in a section of their own keyed by the
// GPU (name, compute capability, driver), which a later process loads so that it starts at
// full speed; a corrupt, truncated or foreign file is ignored with a warning, never trusted,
// and a section of another GPU is kept but never read.
//   file: $SOLDER_CACHE_DIR/autotune-<machine hash>.txt (default ~/.cache/solder, or
//         $XDG_CACHE_HOME/solder)
//         solder-autotune 2
//         machine <CPU model> | <ISA>
//         <host product key>\t<jit> <tm> <mc_shift> <serial>      (gemm::Choice)
//         gpu <name> | sm_<cc> | driver <version>
//         <device problem key>\t<index in the library's heuristic list>
//         end <entries>
//   sd::save_cache_artifacts() / sd::load_cache_artifacts(bytes): the same text, to ship a
//         deployment's tuning (torch's mega-cache)
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../backend/device_tuner.hpp"
#include "../core/files.hpp"
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

inline std::string cache_dir() {
  if (char const* d = std::getenv("SOLDER_CACHE_DIR")) return d;
  if (char const* x = std::getenv("XDG_CACHE_HOME")) return solder::detail::join_path(x, "solder");
  if (char const* h = std::getenv("HOME")) return solder::detail::join_path(solder::detail::join_path(h, ".cache"), "solder");
  return solder::detail::join_path(solder::detail::temp_dir(), "solder");
}

constexpr char const* cache_format = "solder-autotune 2";  // 2: with the GPUs' sections

}  // namespace detail

class Autotuner : solder::detail::host::gemm::Tuner, solder::detail::DeviceTuner {
 public:
  // Installs the tuner on this thread for one call: the host's GEMM engine and the CUDA
  // backend ask it.
  class Call {
   public:
    explicit Call(Autotuner& t)
        : saved_(solder::detail::host::gemm::tuner()), saved_device_(solder::detail::device_tuner()) {
      solder::detail::host::gemm::tuner() = &t;
      solder::detail::device_tuner() = &t;
    }
    ~Call() {
      solder::detail::host::gemm::tuner() = saved_;
      solder::detail::device_tuner() = saved_device_;
    }
    Call(Call const&) = delete;
    Call& operator=(Call const&) = delete;

   private:
    solder::detail::host::gemm::Tuner* saved_;
    solder::detail::DeviceTuner* saved_device_;
  };

  static Autotuner& global() {
    static Autotuner t(detail::cache_dir());
    return t;
  }
  // A tuner whose choices persist in `dir` (nothing read or written when empty).
  explicit Autotuner(std::string dir = {}) : dir_(std::move(dir)) {
    if (dir_.empty()) return;
    std::ifstream f(file(), std::ios::binary);
    if (!f) return;
    std::ostringstream bytes;
    bytes << f.rdbuf();
    if (!load(bytes.str()))
      std::fprintf(stderr, "solder: warning: ignoring the autotune cache %s: corrupt, truncated or from another machine\n",
                   file().c_str());
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
    std::map<std::string, detail::Choice> host;
    std::map<DeviceKey, int> device;
    std::string gpu;  // the section being read: empty for the host's
    while (std::getline(in, line)) {
      if (line.rfind("end ", 0) == 0)  // the count of entries: a truncated file has none
        return line == "end " + std::to_string(host.size() + device.size()) && in.peek() == EOF &&
               merge(host, device);
      if (line.rfind("gpu ", 0) == 0) {
        gpu = line.substr(4);
        if (gpu.empty()) return false;
        continue;
      }
      auto const tab = line.find('\t');
      if (tab == std::string::npos || tab == 0) return false;
      std::istringstream fields(line.substr(tab + 1));
      std::string rest;
      if (!gpu.empty()) {
        int index;
        if (!(fields >> index) || (fields >> rest) || index < 0 || index > max_device_index) return false;
        device[{gpu, line.substr(0, tab)}] = index;
        continue;
      }
      int jit, tm, shift, serial;
      if (!(fields >> jit >> tm >> shift >> serial) || (fields >> rest)) return false;
      if (jit < -1 || jit > 1 || tm < 0 || tm > 127 || shift < -4 || shift > 4 || serial < 0 || serial > 1) return false;
      host[line.substr(0, tab)] = {std::int8_t(jit), std::int8_t(tm), std::int8_t(shift), serial == 1};
    }
    return false;
  }

  // The choices cached: the host's and every GPU's.
  std::size_t tuned() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return chosen_.size() + device_chosen_.size();
  }
  std::string file() const {
    return solder::detail::join_path(dir_, "autotune-" + std::to_string(std::hash<std::string>{}(detail::machine())) + ".txt");
  }

  // A GPU library's configuration for a problem (backend/device_tuner.hpp), timed as the host's
  // configurations are and kept in the GPU's section of the cache.
  int choose_on_device(std::string const& gpu, std::string const& key, std::vector<int> const& choices,
                       std::function<double(int)> const& time,
                       std::function<std::string(int)> const& describe) override {
    return choose_in(device_chosen_, DeviceKey{gpu, key}, key, choices, time, describe);
  }

 private:
  // A GPU's entry: the GPU, then the problem (the file groups a GPU's entries in its section).
  using DeviceKey = std::pair<std::string, std::string>;
  static constexpr int max_device_index = 255;

  detail::Choice choose(std::string const& key, std::vector<detail::Choice> const& choices,
                        std::function<double(detail::Choice)> const& time) override {
    return choose_in(chosen_, key, key, choices, time, describe);
  }

  // The choice kept in `chosen` for `key` where it is still one of `choices`; else each choice
  // run once to warm up, then the best of three runs, and the fastest kept (and written to the
  // file). `name` is the problem in the log.
  template <class K, class C, class Describe>
  C choose_in(std::map<K, C>& chosen, K const& key, std::string const& name, std::vector<C> const& choices,
              std::function<double(C)> const& time, Describe const& describe) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = chosen.find(key);
      if (it != chosen.end() && std::find(choices.begin(), choices.end(), it->second) != choices.end())
        return it->second;
    }
    auto const start = std::chrono::steady_clock::now();
    C best = choices.front();
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
    solder::detail::write_log(Log::autotune, name + ": " + describe(best) + " of" + times.str());
    if (took > 1) std::fprintf(stderr, "solder: autotuning %s took %.1f s\n", name.c_str(), took);
    std::lock_guard<std::mutex> lock(mutex_);
    chosen[key] = best;
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
    std::string const* gpu = nullptr;
    for (auto const& [key, index] : device_chosen_) {
      if (!gpu || *gpu != key.first) os << "gpu " << key.first << "\n";
      gpu = &key.first;
      os << key.second << '\t' << index << "\n";
    }
    os << "end " << chosen_.size() + device_chosen_.size() << "\n";
    return os.str();
  }
  bool merge(std::map<std::string, detail::Choice> const& host, std::map<DeviceKey, int> const& device) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto const& [k, c] : host) chosen_[k] = c;
    for (auto const& [k, i] : device) device_chosen_[k] = i;
    return true;
  }
  // Called with the mutex held: writes the file whole, through a temporary and a rename.
  void persist() const {
    if (dir_.empty() || !solder::detail::make_dirs(dir_)) return;
    solder::detail::write_whole(file(), text());
  }

  std::string dir_;
  mutable std::mutex mutex_;
  std::map<std::string, detail::Choice> chosen_;
  std::map<DeviceKey, int> device_chosen_;
};

// The process's tuning as bytes, to ship with a deployment, and back.
inline std::string save_cache_artifacts() { return runtime::Autotuner::global().save(); }
inline bool load_cache_artifacts(std::string const& bytes) { return runtime::Autotuner::global().load(bytes); }

}  // namespace solder::runtime

namespace solder {
using runtime::load_cache_artifacts;
using runtime::save_cache_artifacts;
}  // namespace solder
