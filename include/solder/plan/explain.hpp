// sd::explain(e): the plan in words — the kernels, the nodes fused into each, the bytes each
// reads and writes, and every break with its reason. sd::explain_dot(e): the same as a
// Graphviz digraph, one cluster per kernel. Both walk the same compile-time plan as the
// executor (plan.hpp), with the expression's run-time shapes.
#pragma once
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <iomanip>

#include "common_reductions.hpp"

namespace solder {

namespace detail {

// One planned kernel as its readers (explain, the runtime's logs, hints and fullgraph verdict)
// use it: they read these fields, never explain's text.
struct KernelInfo {
  enum class Loop { element_wise, reduction, rows, contraction };
  Loop loop = Loop::element_wise;
  std::string kind, shape, dtype, expr, reason, shared;  // kind, shape: loop and extents as text
  std::vector<std::int64_t> extents;
  RunTimeBreak split = RunTimeBreak::none;  // why its reductions run as kernels of their own,
  std::string split_reason;                 // and that in words
  // The run-time break of the kernel that reads it, when that made it a kernel of its own.
  RunTimeBreak split_from = RunTimeBreak::none;
  int fused = 0;
  bool anchored = false;  // the kernel is a contraction, the rest its epilogue (has_anchor)
  std::string apart;      // why its anchor is a kernel of its own instead (fused_epilogue)
  std::string rewrite;    // a pattern the planner ran as another node (attention)
  std::int64_t read = 0, written = 0;
  std::set<void const*> inputs;  // counted once per kernel however often they are used
  std::map<std::uint64_t, int> reductions;  // reduce id -> label number, for reuse (rule 4)
};

struct Explainer {
  std::vector<KernelInfo> kernels;
  std::map<void const*, std::string> names;  // storage -> "in0", "in1", ...
  std::map<std::uint64_t, int> materialized;  // reduction id -> the kernel that produced it
  std::ostringstream dot;
  int dot_id = 0, clusters = 0;

  std::string input_name(void const* p) {
    auto it = names.find(p);
    if (it != names.end()) return it->second;
    return names[p] = "in" + std::to_string(names.size());
  }
  int node(std::string const& label, int cluster) {
    dot << "  subgraph cluster_k" << cluster << " { n" << dot_id << " [label=\"" << label
        << "\"]; }\n";
    return dot_id++;
  }
  void edge(int from, int to) { dot << "  n" << from << " -> n" << to << ";\n"; }
};

template <class V>
std::string scalar_text(V v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<V, bool>) os << (v ? "true" : "false");
  else os << v;
  return os.str();
}

template <class N>
int plan_kernel(N const& n, Explainer& x, std::string reason);
template <class N>
int plan_stored(N const& n, Explainer& x, std::string reason);

template <int D, bool InReduce, bool Split, class N>
std::pair<std::string, int> describe_node(N const& n, Explainer& x, KernelInfo& k, int cl);

// Appends the children of n (dot node `id`) to text, comma-separated. (Index sequences, not a
// lambda: few instantiation levels per level of a deep expression.)
template <int D, bool InReduce, bool Split, class N, std::size_t... I>
void describe_children(N const& n, Explainer& x, KernelInfo& k, int cl, int id, std::string& text,
                       std::index_sequence<I...>) {
  auto one = [&](std::size_t i, std::pair<std::string, int> const& d) {
    x.edge(d.second, id);
    text += (i ? ", " : "") + d.first;
  };
  (one(I, describe<D, InReduce, Split>(n.template child<I>(), x, k, cl)), ...);
}

// Describes node n of kernel k (dot cluster `cl`) as its consumer sees it: fused, or a break
// read back from the kernel that produced it. Returns its text and its dot node.
template <int D, bool InReduce, bool Split, class N>
std::pair<std::string, int> describe(N const& n, Explainer& x, KernelInfo& k, int cl) {
  if constexpr (N::kind == NodeKind::contract && !InReduce && N::rank == D)
    if (k.anchored) return describe_node<D, InReduce, Split>(n, x, k, cl);
  if constexpr (is_break<N, D, InReduce, Split>()) {
    // A reduction that several breaks read is materialized once (backend/eval.hpp).
    auto made = x.materialized.find(n.id);
    int producer = 0;
    if (made != x.materialized.end()) {
      producer = made->second;
    } else {
      bool const anchor = N::kind == NodeKind::contract && !InReduce && N::rank == D;
      producer = plan_kernel(n, x, Split ? n.name() + ": " + k.split_reason + " (run-time break)"
                                   : anchor && !k.apart.empty() ? k.apart
                                                                : break_reason<N, D, InReduce>());
      if constexpr (Split) x.kernels[static_cast<std::size_t>(producer)].split_from = k.split;
      x.materialized[n.id] = producer;
    }
    k.read += numel_of<N::rank>(n.shape()) * static_cast<std::int64_t>(sizeof(typename N::value_type));
    int id = x.node("kernel " + std::to_string(producer) + " result", cl);
    return {"#" + std::to_string(producer), id};
  } else {
    return describe_node<D, InReduce, Split>(n, x, k, cl);
  }
}

template <int D, bool InReduce, bool Split, class N>
std::pair<std::string, int> describe_node(N const& n, Explainer& x, KernelInfo& k, int cl) {
  if constexpr (N::kind == NodeKind::leaf) {
    void const* p = n.tensor.data();
    if (k.inputs.insert(p).second)
      k.read += n.tensor.numel() * static_cast<std::int64_t>(sizeof(typename N::value_type));
    std::string name = x.input_name(p) + std::string(shape_string<N::rank>(n.shape()));
    return {name, x.node(name, cl)};
  } else if constexpr (N::kind == NodeKind::scalar) {
    std::string s = scalar_text(n.value);
    return {s, x.node(s, cl)};
  } else if constexpr (N::kind == NodeKind::map) {
    ++k.fused;
    int id = x.node(N::name(), cl);
    std::string text = std::string(N::name()) + "(";
    describe_children<D, InReduce, Split>(n, x, k, cl, id, text,
                                          std::make_index_sequence<child_count<N>>{});
    return {text + ")", id};
  } else if constexpr (N::kind == NodeKind::reduce) {
    auto seen = k.reductions.find(n.id);
    if (seen != k.reductions.end()) {
      std::string label = std::string(N::name()) + "#" + std::to_string(seen->second);
      return {label + " (reused)", x.node(label + " (reused)", cl)};
    }
    int label = static_cast<int>(k.reductions.size());
    k.reductions[n.id] = label;
    ++k.fused;
    std::string dims;
    for (int a : n.axes) dims += (dims.empty() ? "" : ", ") + std::to_string(a);
    int id = x.node(std::string(N::name()) + " dims=[" + dims + "]", cl);
    auto [s, cid] = describe<decltype(n.input)::rank, true, Split>(n.input, x, k, cl);
    x.edge(cid, id);
    return {std::string(N::name()) + "#" + std::to_string(label) + "(" + s + ", dim=[" + dims + "]" +
                (N::keepdim ? ", keepdim" : "") + ")",
            id};
  } else if constexpr (N::kind == NodeKind::view) {
    // The child is materialized by its own kernels; this kernel reads the view of the result.
    int producer = plan_kernel(n.input, x,
                               n.name() + " of an expression that holds a kernel anchor (or a "
                                          "reshape): views read its materialized result");
    k.read += numel_of<N::rank>(n.shape()) * static_cast<std::int64_t>(sizeof(typename N::value_type));
    std::string s = n.name() + "(#" + std::to_string(producer) + ")";
    return {s, x.node(s, cl)};
  } else if constexpr (N::kind == NodeKind::contract) {
    // The kernel's anchor: its operands come from memory, produced first where they are
    // expressions; the kernel's rest runs on each block of its result.
    ++k.fused;
    int id = x.node(n.name(), cl);
    std::string text = n.name() + "(";
    describe_operands(n, x, k, cl, id, text, std::make_index_sequence<child_count<N>>{});
    if constexpr (requires { n.options(); })  // an anchor's own arguments (conv2d's stride, ...)
      if (auto const o = n.options(); !o.empty()) text += ", " + o;
    return {text + ")", id};
  } else if constexpr (N::kind == NodeKind::shared) {
    // Materialized once, by the kernels of its child, however often it is read.
    auto made = x.materialized.find(n.id);
    int producer = made != x.materialized.end()
                       ? made->second
                       : (x.materialized[n.id] = plan_stored(*n.input, x, n.why));
    k.read += numel_of<N::rank>(n.shape()) * static_cast<std::int64_t>(sizeof(typename N::value_type));
    std::string s = "#" + std::to_string(producer);
    return {s, x.node("kernel " + std::to_string(producer) + " result", cl)};
  } else {
    unhandled_kind<N>("explain");
    return {};
  }
}

// An operand of a kernel's anchor: a tensor, a view of or a shared node's materialized result,
// element-wise maths computed while the left operand is packed (fused_prologue), or an
// expression materialized by kernels of its own first.
template <bool Left, class C>
std::pair<std::string, int> describe_operand(C const& c, Explainer& x, KernelInfo& k, int cl);
template <class N, std::size_t... I>
void describe_operands(N const& n, Explainer& x, KernelInfo& k, int cl, int id, std::string& text,
                       std::index_sequence<I...>) {
  auto one = [&](std::size_t i, std::pair<std::string, int> const& d) {
    x.edge(d.second, id);
    text += (i ? ", " : "") + d.first;
  };
  (one(I, describe_operand<I == 0 && N::prologue>(n.template child<I>(), x, k, cl)), ...);
}
template <bool Left, class C>
std::pair<std::string, int> describe_operand(C const& c, Explainer& x, KernelInfo& k, int cl) {
  constexpr bool prologue = Left && fused_prologue<C, typename C::device_type>();
  if constexpr (C::kind == NodeKind::leaf || C::kind == NodeKind::view || C::kind == NodeKind::shared ||
                prologue) {
    return describe_node<C::rank, false, false>(c, x, k, cl);
  } else {
    int producer = 0;
    char const* why = "an operand of a contraction is read from memory";
    if constexpr (requires { c.id; }) {  // an anchor read twice is materialized once
      auto made = x.materialized.find(c.id);
      producer = made != x.materialized.end() ? made->second : (x.materialized[c.id] = plan_kernel(c, x, why));
    } else {
      producer = plan_kernel(c, x, why);
    }
    k.read += numel_of<C::rank>(c.shape()) * static_cast<std::int64_t>(sizeof(typename C::value_type));
    return {"#" + std::to_string(producer), x.node("kernel " + std::to_string(producer) + " result", cl)};
  }
}

// Kernels are numbered in the order they run: producers (breaks) before their consumer.
template <class N>
int plan_kernel(N const& n, Explainer& x, std::string reason) {
  if constexpr (rewrites_attention<N>()) {
    if (attention_applies(n)) {
      int const id = plan_kernel(rewrite_attention(n), x, std::move(reason));
      x.kernels[static_cast<std::size_t>(id)].rewrite =
          "matmul(softmax(q @ k^T * scale [+ mask], -1), v) written out: runs as scaled_dot_product_attention";
      return id;
    }
  }
  constexpr int D = N::rank;
  KernelInfo k;
  k.reason = std::move(reason);
  int cl = x.clusters++;
  KernelConfig<D> const config = configure(n);
  RunTimeBreak const split = config.split;
  Lines<D> const& lines = config.lines;
  bool agree = split == RunTimeBreak::none;
  k.split = split;
  k.anchored = has_anchor<N>() && agree;
  if constexpr (has_anchor<N>() && !fused_epilogue<N>())
    if (k.anchored) k.anchored = false, k.apart = device_rules<rules_device<N>>::unfused_epilogue(n);
  switch (split) {
    case RunTimeBreak::disagree:
      k.split_reason = "the kernel's reductions are broadcast along different dims for these shapes";
      break;
    case RunTimeBreak::leading_dims:
      k.split_reason = "the kernel's reductions fold leading dims: on their own they read rows, not "
                       "strided columns";
      break;
    case RunTimeBreak::few_long_lines:
      k.split_reason = "the kernel has few lines over a long input: on the GPU each reduction runs "
                       "on its own, over all of the GPU";
      break;
    case RunTimeBreak::broadcast_anchor:
      k.split_reason = "its result is broadcast in its epilogue for these shapes: stored first";
      break;
    case RunTimeBreak::none:
      break;
  }
  k.expr = agree ? describe_node<D, false, false>(n, x, k, cl).first
                 : describe_node<D, false, true>(n, x, k, cl).first;
  k.shape = shape_string<D>(n.shape());
  k.extents.assign(n.shape().begin(), n.shape().end());
  k.dtype = dtype_label<typename N::value_type>();
  k.written = numel_of<D>(n.shape()) * static_cast<std::int64_t>(sizeof(typename N::value_type));
  bool reduces = N::kind == NodeKind::reduce;
  if (agree) for_each_fused_reduce<D, false>(n, [&](auto const&) { reduces = true; });
  if (agree)
    for_each_shared<D, shared_root<N, D>>(n, [&](auto const& s) {
      std::string name = s.name();
      if (k.shared.find(name) == std::string::npos)
        k.shared += (k.shared.empty() ? "" : ", ") + name;
    });
  if (agree && lines.any()) {
    std::string axes;
    for (int a = 0; a < D; ++a)
      if (lines.axis[a]) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
    k.loop = KernelInfo::Loop::rows;
    k.kind = "row kernel (reductions broadcast along dim " + axes + ")";
  } else if (k.anchored) {
    k.loop = KernelInfo::Loop::contraction;
    k.kind = "contraction kernel (the element-wise rest is its epilogue)";
  } else {
    k.loop = reduces ? KernelInfo::Loop::reduction : KernelInfo::Loop::element_wise;
    k.kind = reduces ? "reduction kernel" : "element-wise kernel";
  }
  int id = static_cast<int>(x.kernels.size());
  x.dot << "  subgraph cluster_k" << cl << " { label=\"kernel " << id << ": " << k.kind << "\"; }\n";
  x.kernels.push_back(std::move(k));
  return id;
}

// The kernels that store n (an assignment's root, a shared node's child): a view that keeps its
// child's order is stored by its child's kernels (backend/assign.hpp: store_through_view). The
// number of the last.
template <class N>
int plan_stored(N const& n, Explainer& x, std::string reason) {
  if constexpr (keeps_order<N>()) return plan_stored(n.input, x, std::move(reason));
  else return plan_kernel(n, x, std::move(reason));
}

inline std::string human_bytes(std::int64_t b) {
  std::ostringstream os;
  char const* unit[] = {"B", "KiB", "MiB", "GiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  os << std::setprecision(u ? 3 : 6) << v << ' ' << unit[u];
  return os.str();
}

// The planned kernels of an assignment of e, as explain describes them.
template <Lazy X>
std::vector<KernelInfo> plan_kernels(X const& e) {
  Explainer x;
  with_common_reductions(stored(as_node(e)), [&](auto const& n) { plan_stored(n, x, ""); });
  return std::move(x.kernels);
}

// The bytes of the block that an assignment of e stores its planned results in (plan.hpp).
template <Lazy X>
std::size_t workspace_of(X const& e) {
  return with_common_reductions(stored(as_node(e)), [](auto const& n) { return plan_workspace(n); });
}

inline std::string explain_text(std::vector<KernelInfo> const& kernels, std::size_t eager, std::size_t workspace) {
  std::ostringstream os;
  os << "solder plan: " << kernels.size() << (kernels.size() == 1 ? " kernel" : " kernels")
     << " (eager: " << eager << ")\n";
  if (workspace > 0)
    os << "workspace: " << human_bytes(static_cast<std::int64_t>(workspace))
       << " in one block: the results of the kernels before the last\n";
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    auto const& k = kernels[i];
    os << "kernel " << i << ": " << k.kind << " over " << k.shape << ' ' << k.dtype << ", "
       << k.fused << (k.fused == 1 ? " node" : " nodes") << " fused\n"
       << "  " << k.expr << "\n"
       << "  reads " << detail::human_bytes(k.read) << ", writes " << detail::human_bytes(k.written)
       << "\n";
    if (!k.shared.empty())
      os << "  shared: " << k.shared
         << " (a reduction folds it and the kernel uses it again: the host computes it once "
            "per contiguous line)\n";
    if (!k.rewrite.empty()) os << "  rewrite: " << k.rewrite << "\n";
    if (!k.reason.empty()) os << "  break: materialized because " << k.reason << "\n";
  }
  return os.str();
}
}  // namespace detail

template <Lazy X>
std::string explain(X const& e) {
  return detail::explain_text(detail::plan_kernels(e), eager_kernel_count<node_t<X>>, detail::workspace_of(e));
}

template <Lazy X>
std::string explain_dot(X const& e) {
  detail::Explainer x;
  detail::with_common_reductions(detail::stored(as_node(e)),
                                 [&](auto const& n) { detail::plan_stored(n, x, ""); });
  return "digraph solder {\n  node [shape=box];\n" + x.dot.str() + "}\n";
}

}  // namespace solder
