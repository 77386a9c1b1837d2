// sd::explain(compiled, args...): the whole call of a compiled callable in words — its blocks
// and their kernels, the nodes fused into each, the bytes each moves, every break with its
// reason (user breaks between blocks, the planner's inside them) and fullgraph's verdict on
// them, with the callable's recompiles so far and its workspace. sd::explain_dot(compiled,
// args...): the same as a Graphviz digraph, a cluster per block and a node per kernel.
//
// Both run the forward once on the arguments, outside the callable's cache: the call is not
// counted, makes no specialization and throws nothing under fullgraph (it reports instead).
#pragma once
#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "compile.hpp"

namespace solder {

namespace detail {

inline std::string_view mode_name(Mode m) {
  switch (m) {
    case Mode::reduce_overhead:
      return "reduce_overhead";
    case Mode::max_autotune:
      return "max_autotune";
    default:
      return "standard";
  }
}

// "1 kernel", "2 kernels".
inline std::string counted(std::uint64_t n, std::string_view what) {
  return std::to_string(n) + " " + std::string(what) + (n == 1 ? "" : "s");
}

// The kernels whose results a kernel reads, from explain's text of it: "#2" is kernel 2's
// result, while "sum#0" labels a reduction fused into the kernel.
inline std::set<int> results_read(std::string const& expr) {
  std::set<int> kernels;
  for (std::size_t at = expr.find('#'); at != std::string::npos; at = expr.find('#', at + 1)) {
    std::size_t end = at + 1;
    while (end < expr.size() && std::isdigit(static_cast<unsigned char>(expr[end]))) ++end;
    bool const label = at > 0 && (std::isalnum(static_cast<unsigned char>(expr[at - 1])) || expr[at - 1] == '_');
    if (!label && end > at + 1) kernels.insert(std::stoi(expr.substr(at + 1, end - at - 1)));
  }
  return kernels;
}

// `s` inside a Graphviz string, at most `most` characters of it.
inline std::string dot_text(std::string s, std::size_t most = 120) {
  if (s.size() > most) s = s.substr(0, most - 3) + "...";
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace detail

template <class F, bool S, class... A>
std::string explain(Compiled<F, S> const& compiled, A const&... a) {
  detail::CallPlan const call = detail::plan_call(compiled, a...);
  auto const& log = call.blocks;
  Options const& o = compiled.options();
  CompileStats const st = compiled.stats();
  std::size_t planner_breaks = 0;
  std::int64_t read = 0, written = 0;
  for (auto const& kernels : log.blocks) {
    planner_breaks += kernels.empty() ? 0 : kernels.size() - 1;
    for (auto const& k : kernels) read += k.read, written += k.written;
  }
  std::string const refused = detail::planner_break(log);

  std::ostringstream os;
  os << "solder call: " << o.name << "(" << call.signature << "): " << detail::counted(log.kernels, "kernel") << " in "
     << detail::counted(log.plans.size(), "block") << ", "
     << detail::counted(log.plans.empty() ? 0 : log.plans.size() - 1, "user break") << ", "
     << detail::counted(planner_breaks, "planner break") << "\n";
  if (call.specialization)
    os << "specialization: " << call.specialization->signature << ", "
       << detail::counted(call.specialization->calls, "call") << "\n";
  else
    os << "specialization: none yet (a call with these arguments compiles one)\n";
  os << "compiled: " << detail::counted(st.specializations, "specialization") << ", "
     << detail::counted(st.recompiles, "recompile") << " (limit " << o.recompile_limit
     << (st.generic ? ", generic in use" : "") << "), workspace "
     << detail::human_bytes(static_cast<std::int64_t>(st.workspace_bytes)) << "; mode " << detail::mode_name(o.mode)
     << ", backend " << (o.backend == Backend::eager ? "eager" : "inductor") << "\n";
  os << "fullgraph (" << (o.fullgraph ? "on" : "off") << "): ";
  if (refused.empty())
    os << "allowed: user breaks only\n";
  else
    os << (o.fullgraph ? "refused: " : "would refuse: ") << refused << "\n";
  os << "moves: reads " << detail::human_bytes(read) << ", writes " << detail::human_bytes(written) << "\n"
     << nn::detail::blocks_text(log);
  return os.str();
}

template <class F, bool S, class... A>
std::string explain_dot(Compiled<F, S> const& compiled, A const&... a) {
  detail::CallPlan const call = detail::plan_call(compiled, a...);
  auto const& blocks = call.blocks.blocks;
  std::ostringstream os;
  os << "digraph solder_call {\n  label=\"" << detail::dot_text(compiled.options().name + ": " + call.signature)
     << "\";\n  compound=true;\n  node [shape=box];\n";
  auto node = [](std::size_t b, std::size_t k) { return "b" + std::to_string(b) + "k" + std::to_string(k); };
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    os << "  subgraph cluster_b" << b << " {\n    label=\"block " << b << "\";\n";
    for (std::size_t k = 0; k < blocks[b].size(); ++k) {
      auto const& info = blocks[b][k];
      os << "    " << node(b, k) << " [label=\"kernel " << k << ": " << detail::dot_text(info.kind) << "\\n"
         << info.shape << ' ' << info.dtype << "\\n"
         << detail::dot_text(info.expr) << "\\nreads " << detail::human_bytes(info.read) << ", writes "
         << detail::human_bytes(info.written)
         << (info.reason.empty() ? "" : "\\nbreak: " + detail::dot_text(info.reason)) << "\"];\n";
    }
    os << "  }\n";
    for (std::size_t k = 0; k < blocks[b].size(); ++k)
      for (int from : detail::results_read(blocks[b][k].expr))
        os << "  " << node(b, static_cast<std::size_t>(from)) << " -> " << node(b, k) << ";\n";
    if (b > 0 && !blocks[b - 1].empty() && !blocks[b].empty())
      os << "  " << node(b - 1, blocks[b - 1].size() - 1) << " -> " << node(b, 0) << " [lhead=cluster_b" << b
         << ", style=dashed, label=\"user break\"];\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace solder
