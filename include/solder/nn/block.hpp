// Blocks: where a network's expression is cut. A child module used as a block (an element of
// Sequential or ModuleList, a repeated block in a model) receives a materialized tensor, so its
// forward is compiled once for that tensor type however often the block repeats — the C++ form
// of regional compilation — and no network is one giant type. Inside a block everything fuses
// by the planner's rules.
//
// sd::explain(module, inputs...) runs a forward and lists every block's plan: the kernels, the
// nodes fused into each, the bytes moved, the breaks and their reasons.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "../backend/assign.hpp"
#include "../plan/explain.hpp"
#include "module.hpp"

namespace solder::nn {

namespace detail {

// The blocks of the forward that sd::explain(module, ...) is running on this thread.
struct ForwardLog {
  std::vector<std::string> plans;
  int kernels = 0;
};
inline ForwardLog*& forward_log() {
  thread_local ForwardLog* log = nullptr;
  return log;
}

template <class X>
void log_block(X const& x) {
  if (ForwardLog* log = forward_log()) {
    log->plans.push_back(explain(x));
    log->kernels += static_cast<int>(kernel_count<node_t<X>>);
  }
}

}  // namespace detail

// The value of an expression as a tensor of its own (dynamic extents: one block type for every
// input size); a tensor is returned as it is.
template <Lazy X>
auto materialize(X const& x) {
  if constexpr (TensorType<X>) {
    return x;
  } else {
    using N = node_t<X>;
    detail::log_block(x);
    return BasicTensor<solder::detail::canonical_t<typename N::value_type>, dynamic_extents<N::rank>(),
                       typename N::device_type>(x);
  }
}

}  // namespace solder::nn

namespace solder {

// The plan of a module's whole forward on these inputs: it runs the forward once and lists the
// blocks in the order they ran, each with its kernels.
template <nn::Module M, class... In>
  requires(sizeof...(In) > 0)
std::string explain(M const& module, In const&... inputs) {
  nn::detail::ForwardLog log;
  nn::detail::forward_log() = &log;
  try {
    nn::materialize(module.forward(inputs...));
  } catch (...) {
    nn::detail::forward_log() = nullptr;
    throw;
  }
  nn::detail::forward_log() = nullptr;
  std::ostringstream os;
  os << "solder forward: " << log.kernels << (log.kernels == 1 ? " kernel" : " kernels") << " in "
     << log.plans.size() << (log.plans.size() == 1 ? " block" : " blocks") << "\n";
  for (std::size_t i = 0; i < log.plans.size(); ++i) {
    os << "block " << i << ": ";
    std::istringstream lines(log.plans[i]);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      os << (first ? "" : "  ") << line << "\n";
      first = false;
    }
  }
  return os.str();
}

}  // namespace solder
