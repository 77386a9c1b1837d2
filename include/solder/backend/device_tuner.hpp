// What sd::compile's max_autotune installs on the thread of a call for the GPU libraries'
// configurations (runtime/autotune.hpp implements it), as gemm::Tuner is for the host's GEMM
// engine: the CUDA backend asks it which of the algorithms cuBLASLt's or cuDNN's heuristic
// offers for a problem to run (backend/cuda/contract.hpp, conv.hpp). No CUDA headers: the
// runtime implements it in a build without them.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace solder::detail {

struct DeviceTuner {
  // Of `choices` (indices into the list the library's heuristic gives for the problem `key`),
  // the one to run on the GPU `gpu` (its name, compute capability and driver), timing each
  // (time(c): seconds on the GPU, infinity where it cannot run) the first time the pair is seen;
  // describe(c) names a choice in the log.
  virtual int choose_on_device(std::string const& gpu, std::string const& key, std::vector<int> const& choices,
                               std::function<double(int)> const& time,
                               std::function<std::string(int)> const& describe) = 0;

 protected:
  ~DeviceTuner() = default;
};

// The tuner installed on this thread, or null: not under max_autotune.
inline DeviceTuner*& device_tuner() {
  thread_local DeviceTuner* t = nullptr;
  return t;
}

}  // namespace solder::detail
