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
#include "../autograd/value_and_grad.hpp"
#include "../backend/eager.hpp"
#include "../expr/memory_format.hpp"
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
    log->plans.push_back(solder::detail::explain_text(kernels, eager_kernel_count<node_t<X>>,
                                                            solder::detail::workspace_of(x)));
    log->kernels += static_cast<int>(kernels.size());
    log->blocks.push_back(std::move(kernels));
  }
}

}  // namespace detail

// The value of an expression as a tensor of its own (dynamic extents: one block type for every
// input size); a tensor is returned as it is. Each is a block, and its boundary a *user break*:
// sd::compile's fullgraph allows it (runtime/compile.hpp). A 4-d host result is stored
// channels-last when `f` asks for it or the expression reads a channels-last tensor
// (expr/memory_format.hpp: the CNNs' layout, DESIGN.md rule 7).
template <Lazy X>
auto materialize(X const& x, MemoryFormat f) {
  using N = node_t<X>;
  constexpr bool may_be_channels_last = N::rank == 4 && std::is_same_v<typename N::device_type, Host>;
  if constexpr (TensorType<X>) {
    if constexpr (may_be_channels_last)
      if (f == channels_last) return contiguous(x, f);
    return x;
  } else {
    using Result = BasicTensor<solder::detail::canonical_t<typename N::value_type>, dynamic_extents<N::rank>(),
                               typename N::device_type>;
    solder::detail::check(solder::detail::autograd::deriving() == 0,
                          "value_and_grad: the function materializes a block (sd::materialize, or a module's forward "
                          "that stores a block's result, as Sequential does between its modules): the derivation "
                          "cannot see past a stored result, and the gradients before it would be lost; write the "
                          "forward as one expression (the backward through blocks is not built yet)");
    detail::log_block(x);
    solder::detail::Tracer* const traced = solder::detail::tracer();
    if (traced) traced->start();
    Result r = [&] {
      if (detail::eager_forward()) return Result(eager(x));
      if constexpr (may_be_channels_last) {
        if (f == channels_last || solder::detail::reads_channels_last(as_node(x))) {
          Result nhwc = solder::detail::empty_channels_last<Result>(x.shape());
          nhwc = x;
          return nhwc;
        }
      }
      return Result(x);
    }();
    if (traced)
      traced->stop_block(std::string(shape_string<N::rank>(r.shape())), dtype_name<typename Result::value_type>());
    return r;
  }
}
// (Not a default argument: the one-argument form must stay more constrained than
// solder::detail::materialize, which argument-dependent lookup also finds.)
template <Lazy X>
auto materialize(X const& x) {
  return materialize(x, contiguous_format);
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

// A forward's blocks in the order they ran, each with its kernels; every block before the
// last ends in a user break.
inline std::string blocks_text(ForwardLog const& log) {
  std::ostringstream os;
  for (std::size_t i = 0; i < log.plans.size(); ++i) {
    os << "block " << i << ": ";
    std::istringstream lines(log.plans[i]);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      os << (first ? "" : "  ") << line << "\n";
      first = false;
    }
    if (i + 1 < log.plans.size())
      os << "  user break: sd::materialize stores the block's result; the blocks after it read it from memory\n";
  }
  return os.str();
}
}  // namespace nn::detail

// sd::materialize(e): an explicit graph break, torch.compiler.disable's analog on a region: e
// is evaluated into a tensor, a block of its own (nn::materialize). fullgraph allows it, and
// explain shows it as a user break. (An object, not a function: argument-dependent lookup in
// solder's own namespaces must go on finding detail::materialize.)
namespace detail {
struct UserBreak {
  template <Lazy X>
  auto operator()(X const& x) const {
    return nn::materialize(x);
  }
};
}  // namespace detail
inline constexpr detail::UserBreak materialize{};

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
     << log.plans.size() << (log.plans.size() == 1 ? " block" : " blocks") << "\n"
     << nn::detail::blocks_text(log);
  return os.str();
}

}  // namespace solder
