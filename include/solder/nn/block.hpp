// Blocks: where a network's expression is cut. A child module used as a block (an element of
// Sequential or ModuleList, a repeated block in a model) receives a materialized tensor, so its
// forward is compiled once for that tensor type however often the block repeats — the C++ form
// of regional compilation — and no network is one giant type. Inside a block everything fuses
// by the planner's rules.
//
// sd::explain(module, inputs...) runs a forward and lists every block's plan: the kernels, the
// nodes fused into each, the bytes moved, the breaks and their reasons. sd::eager(module,
// inputs...) runs the same forward with every block's expression evaluated node by node (one
// kernel per node, as sd::eager(e)): the baseline the fused forward is measured against.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "../backend/assign.hpp"
#include "../backend/eager.hpp"
#include "../plan/explain.hpp"
#include "module.hpp"

namespace solder::nn {

namespace detail {

// The blocks of the forward that sd::explain(module, ...) is running on this thread.
struct ForwardLog {
  std::vector<std::string> plans;                                 // each block's explain text
  std::vector<std::vector<solder::detail::KernelInfo>> blocks;   // and its kernels
  int kernels = 0;
};
inline ForwardLog*& forward_log() {
  thread_local ForwardLog* log = nullptr;
  return log;
}

// Set while sd::eager(module, ...) runs a forward on this thread.
inline bool& eager_forward() {
  thread_local bool on = false;
  return on;
}

template <class X>
void log_block(X const& x) {
  if (ForwardLog* log = forward_log()) {
    auto kernels = solder::detail::plan_kernels(x);
    log->plans.push_back(solder::detail::explain_text(kernels, eager_kernel_count<node_t<X>>));
    log->kernels += static_cast<int>(kernels.size());
    log->blocks.push_back(std::move(kernels));
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
    using Result = BasicTensor<solder::detail::canonical_t<typename N::value_type>, dynamic_extents<N::rank>(),
                               typename N::device_type>;
    detail::log_block(x);
    if (detail::eager_forward()) return Result(eager(x));
    return Result(x);
  }
}

}  // namespace solder::nn

namespace solder {

namespace nn::detail {
// A forward's result as values: an expression materialized, anything else (a struct of
// tensors such as BertOutput) as it is.
template <class R>
auto finish(R const& r) {
  if constexpr (Lazy<R>) return materialize(r);
  else return r;
}

// Runs f with the forward logged into `log` (or nullptr) and eager_forward set to `eager`.
template <class F>
auto run_forward(ForwardLog* log, bool eager, F const& f) {
  struct Restore {
    ForwardLog* log;
    bool eager;
    ~Restore() { forward_log() = log, eager_forward() = eager; }
  } restore{forward_log(), eager_forward()};
  forward_log() = log;
  eager_forward() = eager;
  return f();
}
}  // namespace nn::detail

// A module's forward with one kernel per node (sd::eager(e) for every block): the baseline.
template <nn::Module M, class... In>
  requires(sizeof...(In) > 0)
auto eager(M const& module, In const&... inputs) {
  return nn::detail::run_forward(nullptr, true, [&] { return nn::detail::finish(module.forward(inputs...)); });
}

// The plan of a module's whole forward on these inputs: it runs the forward once and lists the
// blocks in the order they ran, each with its kernels.
template <nn::Module M, class... In>
  requires(sizeof...(In) > 0)
std::string explain(M const& module, In const&... inputs) {
  nn::detail::ForwardLog log;
  nn::detail::run_forward(&log, false, [&] { return nn::detail::finish(module.forward(inputs...)); });
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
