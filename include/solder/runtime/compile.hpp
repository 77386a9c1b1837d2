// sd::compile(callable_or_module, sd::Options{...}): the runtime of DESIGN.md §4. The kernels are
// compiled by the C++ compiler already; what is left at run time is what shapes decide. A call's
// *signature* — per tensor argument its dtype, rank, device, sizes and whether its data is 64-byte
// aligned; per number its value — selects a *specialization* from a cache. A new signature is a
// recompile: counted, logged with the guard that failed, refused under
// sd::Stance::fail_on_recompile; past recompile_limit the callable switches to one generic
// specialization (every size and number "any"), or with .dynamic = false throws. A recompile
// costs the guards and a cache insertion: microseconds, not a JIT's seconds (bench_overhead).
// The modes: reduce_overhead serves each signature's host tensors from a workspace planned on
// its first call (runtime/workspace.hpp: the steady state allocates nothing) and replays its
// calls on CUDA tensors as CUDA graphs (runtime/cuda_graph.hpp); max_autotune
// times the GEMM engine's configurations of every product shape on first use (on CUDA tensors,
// cuBLASLt's and cuDNN's algorithms) and keeps the fastest, in a cache file a later process
// loads (runtime/autotune.hpp). A callable's first call is traced into .trace ($SOLDER_TRACE;
// runtime/trace.hpp); sd::explain(compiled, args...) shows a whole call (runtime/explain.hpp).
#pragma once
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../nn/block.hpp"
#include "autotune.hpp"
#include "cuda_graph.hpp"
#include "dynamic.hpp"
#include "logs.hpp"
#include "trace.hpp"
#include "workspace.hpp"

namespace solder {

// torch.compile's modes; Mode::standard is its "default" (a C++ keyword). On CUDA tensors,
// reduce_overhead captures and replays CUDA graphs, and max_autotune times the algorithms
// cuBLASLt and cuDNN offer for each product and convolution (backend/cuda/contract.hpp,
// conv.hpp).
enum class Mode { standard, reduce_overhead, max_autotune };
// inductor: the fused kernels; eager: every block node by node (sd::eager), to bisect a
// numerical difference between the two.
enum class Backend { inductor, eager };
// torch.compiler.set_stance's: fail_on_recompile makes a new signature throw sd::Error.
enum class Stance { standard, fail_on_recompile };

struct Options {
  Mode mode = Mode::standard;
  // unset: one specialization per signature; true: one generic specialization from the start;
  // false: static specializations only, and past recompile_limit a new signature throws.
  std::optional<bool> dynamic{};
  // A break the planner makes is an error: the call throws when a block of the forward is more
  // than one kernel (checked on a signature's first call). The blocks themselves, cut by
  // sd::materialize or nn::materialize, are user breaks: allowed. For a compile-time error where
  // the callable returns an expression, pass sd::fullgraph.
  bool fullgraph = false;
  int recompile_limit = 8;  // static specializations before the generic one
  Backend backend = Backend::inductor;
  std::string name{};  // in logs and errors; default "compiled#<n>"
  // max_autotune's tuner: default the process's, whose choices persist under SOLDER_CACHE_DIR.
  runtime::Autotuner* tuner = nullptr;
  // A file (Chrome trace, runtime/trace.hpp) that the callable's first call is traced into;
  // default $SOLDER_TRACE as it is when the callable is compiled.
  std::string trace{};
};

// sd::compile(f, sd::fullgraph, {...}): .fullgraph, and a callable that returns an expression of
// more than one kernel is a compile error.
struct Fullgraph {
  explicit constexpr Fullgraph() = default;  // so that compile(f, {}) means Options
};
inline constexpr Fullgraph fullgraph{};

inline std::atomic<Stance>& stance_state() {
  static std::atomic<Stance> s{Stance::standard};
  return s;
}
// Sets the stance of every compiled callable; returns the previous one.
inline Stance set_stance(Stance s) { return stance_state().exchange(s); }

struct CompileStats {
  std::uint64_t calls = 0;
  std::uint64_t recompiles = 0;  // new signatures after the first
  std::size_t specializations = 0;
  bool generic = false;  // the generic specialization is in use (.dynamic = true, or past the limit)
  std::chrono::nanoseconds recompile_time{0};  // guards and cache insertion, not the forwards
  std::size_t workspace_bytes = 0;  // reduce_overhead: the planned workspaces' blocks and the
                                    // CUDA graphs' memory, together
  // reduce_overhead on CUDA tensors: graphs captured, calls that replayed one, and calls that
  // ran uncaptured (a forward that cannot be captured, or no graph free).
  std::uint64_t cuda_graphs = 0, graph_replays = 0, graph_fallbacks = 0;
};

struct SpecializationInfo {
  std::string signature;  // "arg0: float32[32, dyn] host aligned, arg1 = 0.5"
  std::uint64_t calls = 0;
  std::string plan;  // its blocks' plans, when its first call captured them (fusion or
                     // graph_breaks log on, or fullgraph)
};

namespace detail {

// One guard of a signature; a signature is an array of them, compared as bytes (no padding).
enum class GuardKind : std::uint8_t { types, dtype, rank, device, size, aligned, value };
struct Guard {
  std::int64_t value = 0;    // a size (dyn: any), a number (double's bits when floating), a code
  std::uint16_t arg = 0;
  GuardKind kind{};
  std::uint8_t dim = 0;      // size: its dim; value: 1 when floating-point
  std::uint8_t dynamic = 0;  // value: any number
  std::uint8_t unused[3] = {};
};
static_assert(sizeof(Guard) == 16 && std::has_unique_object_representations_v<Guard>);

inline constexpr std::string_view dtype_codes[] = {"float32", "float64", "int32", "int64",
                                                   "bool",    "float16", "bfloat16"};
template <class T>
constexpr std::int64_t dtype_code() {
  for (std::size_t i = 0; i < std::size(dtype_codes); ++i)
    if (dtype_codes[i] == dtype_name<T>()) return static_cast<std::int64_t>(i);
  return -1;
}

template <class A>
constexpr std::size_t guard_count() {
  if constexpr (TensorType<A>) return 4 + A::rank;  // dtype, rank, device, sizes, aligned
  else if constexpr (std::is_arithmetic_v<A>) return 1;
  else return 0;  // not guarded
}

template <class A>
void add_guards(Guard*& g, std::uint16_t arg, A const& a) {
  if constexpr (TensorType<A>) {
    using T = typename A::value_type;
    *g++ = {.value = dtype_code<T>(), .arg = arg, .kind = GuardKind::dtype};
    *g++ = {.value = A::rank, .arg = arg, .kind = GuardKind::rank};
    *g++ = {.value = std::is_same_v<typename A::device_type, Host> ? 0 : 1, .arg = arg, .kind = GuardKind::device};
    std::uint64_t const marked = marked_dims(a);
    for (int d = 0; d < A::rank; ++d)
      *g++ = {.value = (marked >> d) & 1 ? dyn : a.shape()[d], .arg = arg, .kind = GuardKind::size,
              .dim = static_cast<std::uint8_t>(d)};
    bool const aligned = reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0;
    *g++ = {.value = aligned, .arg = arg, .kind = GuardKind::aligned};
  } else if constexpr (std::is_floating_point_v<A>) {
    *g++ = {.value = std::bit_cast<std::int64_t>(static_cast<double>(a)), .arg = arg, .kind = GuardKind::value, .dim = 1};
  } else if constexpr (std::is_arithmetic_v<A>) {
    *g++ = {.value = static_cast<std::int64_t>(a), .arg = arg, .kind = GuardKind::value};
  }
}

// The generic form of a signature: every size and number any.
inline void make_generic(std::span<Guard> guards) {
  for (Guard& g : guards) {
    if (g.kind == GuardKind::size) g.value = dyn;
    if (g.kind == GuardKind::value) g.value = 0, g.dynamic = 1;
  }
}

// The signature of a call with arguments A...: their guards, then the argument types (another
// instantiation of the callable is another specialization, whatever its guards say).
template <class... A>
struct Signature {
  std::array<Guard, 1 + (0 + ... + guard_count<A>())> guards;
  std::string_view key() const { return {reinterpret_cast<char const*>(guards.data()), sizeof(guards)}; }
};
template <class... A>
Signature<A...> signature(bool generic, A const&... a) {
  Signature<A...> s;
  Guard* g = s.guards.data();
  std::uint16_t arg = 0;
  (add_guards(g, arg++, a), ...);
  *g = {.value = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(type_key<std::tuple<A...>>())),
        .kind = GuardKind::types};
  if (generic) make_generic(s.guards);
  return s;
}

inline std::vector<Guard> guards_of_key(std::string_view key) {
  std::vector<Guard> g(key.size() / sizeof(Guard));
  std::memcpy(g.data(), key.data(), key.size());
  return g;
}

inline std::string guard_value(Guard const& g) {
  switch (g.kind) {
    case GuardKind::dtype: return std::string(dtype_codes[g.value]);
    case GuardKind::device: return g.value ? "cuda" : "host";
    case GuardKind::aligned: return g.value ? "true" : "false";
    case GuardKind::size: return g.value == dyn ? "dyn" : std::to_string(g.value);
    case GuardKind::value: {
      if (g.dynamic) return "dyn";
      if (!g.dim) return std::to_string(g.value);
      std::ostringstream os;
      os << std::bit_cast<double>(g.value);
      return os.str();
    }
    default: return std::to_string(g.value);
  }
}
inline std::string guard_text(Guard const& g) {
  std::string arg = "arg" + std::to_string(g.arg);
  switch (g.kind) {
    case GuardKind::dtype: return arg + ".dtype";
    case GuardKind::rank: return arg + ".dim()";
    case GuardKind::device: return arg + ".device";
    case GuardKind::size: return arg + ".size(" + std::to_string(g.dim) + ")";
    case GuardKind::aligned: return arg + ".is_aligned(64)";
    default: return arg;
  }
}

// Why a call with signature `now` does not match specialization `was`: its first failed guard.
inline std::string failed_guard(std::string_view was, std::string_view now) {
  auto const a = guards_of_key(was), b = guards_of_key(now);
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(Guard)) == 0) continue;
    if (a[i].arg != b[i].arg || a[i].kind != b[i].kind || a[i].dim != b[i].dim || a[i].kind == GuardKind::types) break;
    return guard_text(a[i]) + " == " + guard_value(a[i]) + " failed (got " + guard_value(b[i]) + ")";
  }
  return "the argument types changed (another instantiation of the callable)";
}

// "arg0: float32[32, dyn] host aligned, arg1 = 0.5"
inline std::string signature_text(std::string_view key) {
  std::string s, device;
  for (Guard const& g : guards_of_key(key)) {
    std::string const v = guard_value(g), arg = (s.empty() ? "arg" : ", arg") + std::to_string(g.arg);
    switch (g.kind) {
      case GuardKind::dtype: s += arg + ": " + v + "["; break;
      case GuardKind::device: device = v; break;
      case GuardKind::size: s += (g.dim ? ", " : "") + v; break;
      case GuardKind::aligned: s += "] " + device + (g.value ? " aligned" : " unaligned"); break;
      case GuardKind::value: s += arg + " = " + v; break;
      default: break;
    }
  }
  return s.empty() ? "no guarded arguments" : s;
}

// The breaks in a block's plan: "kernel 1: materialized because ...".
inline std::vector<std::string> plan_breaks(std::vector<detail::KernelInfo> const& kernels) {
  std::vector<std::string> breaks;
  for (std::size_t k = 0; k < kernels.size(); ++k)
    if (!kernels[k].reason.empty())
      breaks.push_back("kernel " + std::to_string(k) + ": materialized because " + kernels[k].reason);
  return breaks;
}
// Below this, a kernel's fork and launch cost more than its memory traffic (a few microseconds).
inline constexpr std::int64_t small_kernel_bytes = 16 << 10;

// A hint when a kernel's innermost extent leaves a ragged tail on every line of 64-byte
// vectors: padding it to a multiple (sd::pad_to) keeps the lines whole.
inline std::string ragged(detail::KernelInfo const& k) {
  if (k.extents.empty()) return "";
  std::int64_t const inner = k.extents.back();
  std::int64_t const lanes = k.dtype == "float64" || k.dtype == "int64" ? 8 : k.dtype == "bool" ? 64 : 16;
  if (inner >= lanes * 4 || inner % lanes == 0 || inner < 2) return "";
  return "the innermost extent " + std::to_string(inner) + " is not a multiple of " + std::to_string(lanes) +
         " (one 64-byte vector): every line ends in a partial vector; sd::pad_to<" + std::to_string(lanes) +
         "> (with its mask) makes the lines whole";
}

// The first graph break the planner made in a forward, or "" when each block is one kernel.
// fullgraph refuses it; the boundaries between blocks are user breaks (sd::materialize), which
// it allows: where a forward is cut is its author's choice, as torch.compiler.disable is.
inline std::string planner_break(nn::detail::ForwardLog const& log) {
  for (std::size_t b = 0; b < log.blocks.size(); ++b) {
    if (log.blocks[b].size() <= 1) continue;
    auto const found = plan_breaks(log.blocks[b]);
    return "block " + std::to_string(b) + " is " + std::to_string(log.blocks[b].size()) +
           " kernels, not one (a graph break the planner made): " +
           (found.empty() ? "kernel 0: " + log.blocks[b].front().kind : found.front()) +
           "; sd::materialize on the part it materializes would make it a user break";
  }
  return "";
}

struct Specialization {
  std::string_view signature;  // its key in the cache
  std::atomic<std::uint64_t> calls{0};
  // Its first call runs alone (others with the signature wait): it captures the plan and
  // checks fullgraph; a throw leaves it to the next call.
  std::mutex first_call;
  std::atomic<bool> ready{false};
  std::string plan;  // written once, before `ready`
  // reduce_overhead: a workspace per thread calling at once, each planned on its first call;
  // on CUDA tensors, the signature's graphs instead (made on its first call).
  std::mutex workspaces_mutex;
  std::unique_ptr<runtime::CudaGraphs> graphs;
  std::vector<std::unique_ptr<runtime::Workspace>> idle_workspaces;
  std::size_t workspace_bytes = 0;  // the largest planned

  std::unique_ptr<runtime::Workspace> take_workspace() {
    std::lock_guard lock(workspaces_mutex);
    if (idle_workspaces.empty()) return std::make_unique<runtime::Workspace>();
    auto w = std::move(idle_workspaces.back());
    idle_workspaces.pop_back();
    return w;
  }
  void give_back(std::unique_ptr<runtime::Workspace> w) {
    std::lock_guard lock(workspaces_mutex);
    workspace_bytes = std::max(workspace_bytes, w->bytes());
    idle_workspaces.push_back(std::move(w));
  }
  SpecializationInfo info() const {
    return {signature_text(signature), calls.load(std::memory_order_relaxed),
            ready.load(std::memory_order_acquire) ? plan : std::string()};
  }
  template <class Pool>
  Pool& graph_pool(std::string const& name) {
    std::lock_guard lock(workspaces_mutex);
    if (!graphs) graphs = std::make_unique<Pool>(name);
    return static_cast<Pool&>(*graphs);  // (one argument tuple, hence one Pool, per signature)
  }
};

// The cache of one compiled callable, shared by its copies and its threads.
class CompileCache {
 public:
  explicit CompileCache(Options o) : options_(std::move(o)), generic_(options_.dynamic == true) {
    static std::atomic<int> counter{0};
    if (options_.name.empty()) options_.name = "compiled#" + std::to_string(++counter);
    check(options_.recompile_limit >= 1, "compile: ", options_.name, ": recompile_limit must be at least 1, got ",
          options_.recompile_limit);
    if (char const* path = std::getenv("SOLDER_TRACE"); path && options_.trace.empty()) options_.trace = path;
    trace_pending_ = !options_.trace.empty();
  }

  Options const& options() const { return options_; }
  bool generic() const { return generic_.load(std::memory_order_acquire); }
  // Whether this call is the one to trace (the callable's first, on a first call's path).
  bool take_trace() { return trace_pending_.load(std::memory_order_relaxed) && trace_pending_.exchange(false); }

  Specialization* find(std::string_view key) {
    std::shared_lock lock(mutex_);
    auto it = cache_.find(key);
    return it == cache_.end() ? nullptr : &it->second;
  }
  // The specialization that serves a call's signature: its own, or the generic one past the
  // switch (`sig` is then made generic); null when the call would be new.
  template <class Sig>
  Specialization* lookup(Sig& sig) {
    Specialization* s = find(sig.key());
    if (!s && generic()) {
      make_generic(sig.guards);
      s = find(sig.key());
    }
    return s;
  }

  // A signature that find() missed: another thread's insertion, the generic specialization, or
  // a new specialization — or sd::Error when the stance or .dynamic = false forbids one.
  Specialization* add(std::string_view key) {
    auto const start = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return &it->second;
    std::string k(key);
    auto to_generic = [&] {
      auto g = guards_of_key(k);
      make_generic(g);
      k.assign(reinterpret_cast<char const*>(g.data()), k.size());
      return cache_.find(k);
    };
    if (generic_)
      if (auto it = to_generic(); it != cache_.end()) return &it->second;
    std::string message;
    if (!cache_.empty()) {
      std::string const& name = options_.name;
      std::string const why = failed_guard(last_->signature, k);
      check(stance_state() != Stance::fail_on_recompile, name,
            ": recompile refused (sd::Stance::fail_on_recompile): ", why);
      if (!generic_ && static_count_ >= options_.recompile_limit) {
        check(options_.dynamic != false, name, ": recompile_limit (", options_.recompile_limit,
              ") reached with .dynamic = false: ", why);
        generic_.store(true, std::memory_order_release);
        if (auto it = to_generic(); it != cache_.end()) return &it->second;
        message = name + ": recompile_limit (" + std::to_string(options_.recompile_limit) + ") reached: " + why +
                  "; switching to one generic dynamic-shape specialization";
      } else {
        message = name + ": recompiling (" + std::to_string(cache_.size() + 1) +
                  (generic_ ? ", generic" : " of " + std::to_string(options_.recompile_limit)) + "): " + why;
      }
      ++recompiles_;
    }
    auto it = cache_.try_emplace(std::move(k)).first;
    it->second.signature = it->first;
    last_ = &it->second;
    if (!generic_) ++static_count_;
    if (!message.empty()) recompile_time_ += std::chrono::steady_clock::now() - start;
    lock.unlock();
    if (!message.empty()) write_log(Log::recompiles, message);
    return &it->second;
  }

  // Whether a signature's first call runs with the forward log (nn/block.hpp).
  bool captures() const {
    return options_.fullgraph || log_enabled(Log::fusion) || log_enabled(Log::graph_breaks) ||
           log_enabled(Log::perf_hints) || log_enabled(Log::output_code);
  }

  // A signature's first call ran with `blocks` logged: its plan, the fusion and graph_breaks
  // logs, and fullgraph's verdict (sd::Error: planner_break).
  void first_call(Specialization& s, nn::detail::ForwardLog const& blocks) const {
    std::string const& name = options_.name;
    std::string plan = std::to_string(blocks.kernels) + (blocks.kernels == 1 ? " kernel in " : " kernels in ") +
                       std::to_string(blocks.plans.size()) + (blocks.plans.size() == 1 ? " block\n" : " blocks\n");
    std::string breaks;
    for (std::size_t b = 0; b < blocks.plans.size(); ++b) {
      std::string const block = "block " + std::to_string(b);
      std::istringstream lines(blocks.plans[b]);
      for (std::string line; std::getline(lines, line);) plan += block + ": " + line + "\n";
      if (b + 1 < blocks.plans.size())
        breaks += name + ": " + block + " is materialized before the result, a user break (sd::materialize): the " +
                  "blocks after it read it from memory\n";
      for (auto const& brk : plan_breaks(blocks.blocks[b])) breaks += name + ": " + block + ", " + brk + "\n";
    }
    if (log_enabled(Log::fusion)) {
      std::istringstream lines("first call of " + signature_text(s.signature) +
                               (options_.backend == Backend::eager ? " (backend eager: node by node): " : ": ") + plan);
      std::string text;
      for (std::string line; std::getline(lines, line);) text += name + ": " + line + "\n";
      write_log(Log::fusion, text);
    }
    write_log(Log::graph_breaks, breaks);
    write_log(Log::perf_hints, perf_hints(blocks));
    if (log_enabled(Log::output_code)) write_log(Log::output_code, output_code(blocks));
    if (options_.fullgraph)
      if (std::string const why = planner_break(blocks); !why.empty()) fail(name, ": fullgraph: ", why);
    s.plan = std::move(plan);
  }

  // What a user can change, from the kernels a signature's first call ran.
  std::string perf_hints(nn::detail::ForwardLog const& log) const {
    std::ostringstream os;
    for (std::size_t b = 0; b < log.blocks.size(); ++b) {
      auto const& kernels = log.blocks[b];
      std::string const block = options_.name + ": block " + std::to_string(b);
      bool element_wise = !kernels.empty();
      for (std::size_t k = 0; k < kernels.size(); ++k) {
        auto const& info = kernels[k];
        std::string const at = block + ", kernel " + std::to_string(k) + " (" + info.expr.substr(0, 60) + ")";
        element_wise = element_wise && info.loop == detail::KernelInfo::Loop::element_wise;
        if (info.split_from == RunTimeBreak::leading_dims)
          os << at << ": a reduction over a dim that is not the innermost runs as a kernel of its own; transposing "
                "the input once (or reducing the last dim) lets it fuse\n";
        else if (!info.reason.empty())
          os << at << ": materialized because " << info.reason << ": a round trip through memory ("
             << human_bytes(info.written) << ")\n";
        if (info.read + info.written < small_kernel_bytes)
          os << at << ": moves " << human_bytes(info.read + info.written)
             << ", too little to be worth a kernel of its own; fuse it into its neighbours or batch the inputs\n";
        if (std::string const tail = ragged(info); !tail.empty()) os << at << ": " << tail << "\n";
      }
      if (element_wise && b > 0)
        os << block << " is element-wise only, yet materialized on its own: "
           << human_bytes(kernels.front().read) << " go through memory and back; written in the same expression as the "
           << "block before it (or as an element-wise module inside a Sequential) it would be its epilogue\n";
    }
    return os.str();
  }
  // The kernels of the first call as the planner chose them: the loop over which shape, the
  // nodes fused into it, the bytes. Every line names the callable, as every log's does.
  std::string output_code(nn::detail::ForwardLog const& log) const {
    std::ostringstream os;
    std::string const& name = options_.name;
    for (std::size_t b = 0; b < log.blocks.size(); ++b)
      for (std::size_t k = 0; k < log.blocks[b].size(); ++k) {
        auto const& info = log.blocks[b][k];
        os << name << ": block " << b << ", kernel " << k << ": " << info.kind << " over " << info.shape << ' '
           << info.dtype << "\n" << name << ":   " << info.expr << "\n";
      }
    return os.str();
  }

  CompileStats stats() const {
    std::shared_lock lock(mutex_);
    CompileStats st{.recompiles = recompiles_, .specializations = cache_.size(), .generic = generic(),
                    .recompile_time = recompile_time_};
    for (auto& [key, s] : cache_) {
      st.calls += s.calls.load(std::memory_order_relaxed);
      std::lock_guard workspaces(s.workspaces_mutex);
      st.workspace_bytes += s.workspace_bytes;
      if (s.graphs) {
        st.workspace_bytes += s.graphs->bytes();
        st.cuda_graphs += s.graphs->captured();
        st.graph_replays += s.graphs->replays();
        st.graph_fallbacks += s.graphs->fallbacks();
      }
    }
    return st;
  }
  std::vector<SpecializationInfo> specializations() const {
    std::shared_lock lock(mutex_);
    std::vector<SpecializationInfo> out;
    for (auto const& [key, s] : cache_) out.push_back(s.info());
    return out;
  }

 private:
  Options options_;
  mutable std::shared_mutex mutex_;
  mutable std::map<std::string, Specialization, std::less<>> cache_;  // signature bytes -> specialization
  Specialization const* last_ = nullptr;  // the newest: guards report against it
  std::atomic<bool> generic_;
  std::atomic<bool> trace_pending_;
  int static_count_ = 0;
  std::uint64_t recompiles_ = 0;
  std::chrono::nanoseconds recompile_time_{0};
};

template <class T>
inline constexpr bool is_reference_wrapper = false;
template <class T>
inline constexpr bool is_reference_wrapper<std::reference_wrapper<T>> = true;

// A module's forward, or the callable itself.
template <class F, class... A>
decltype(auto) call_forward(F const& f, A const&... a) {
  if constexpr (is_reference_wrapper<F>) return call_forward(f.get(), a...);
  else if constexpr (requires { f.forward(a...); }) return f.forward(a...);
  else return std::invoke(f, a...);
}

}  // namespace detail

template <class F, bool StaticFullgraph>
class Compiled;

namespace detail {
// A call planned without being made (sd::explain's): the forward run outside the cache with its
// blocks logged, the call's signature, and the specialization that serves it, if any.
struct CallPlan {
  nn::detail::ForwardLog blocks;
  std::string signature;
  std::optional<SpecializationInfo> specialization;
};
template <class F, bool S, class... A>
CallPlan plan_call(Compiled<F, S> const& compiled, A const&... a);
}  // namespace detail

// What sd::compile returns: call it as the callable. Copies share the cache.
template <class F, bool StaticFullgraph>
class Compiled {
 public:
  Compiled(F f, Options o) : f_(std::move(f)), cache_(std::make_shared<detail::CompileCache>(std::move(o))) {}

  template <class... A>
  auto operator()(A const&... a) const {
    using R = std::remove_cvref_t<decltype(detail::call_forward(f_, a...))>;
    static_assert(!std::is_void_v<R>, "solder: compile: the callable returns nothing");
    if constexpr (StaticFullgraph && Expr<R>)
      static_assert(kernel_count<R> == 1, "solder: compile with sd::fullgraph: the callable returns an expression "
                                          "of more than one kernel (a break: sd::explain(e) names it)");
    auto& c = *cache_;
    auto sig = detail::signature(c.options().dynamic == true, a...);
    detail::Specialization* s = c.lookup(sig);
    if (!s) s = c.add(sig.key());
    s->calls.fetch_add(1, std::memory_order_relaxed);
    if (!s->ready.load(std::memory_order_acquire)) return first_call(*s, a...);
    return forward(*s, nn::detail::forward_log(), a...);
  }

  CompileStats stats() const { return cache_->stats(); }
  std::vector<SpecializationInfo> specializations() const { return cache_->specializations(); }
  Options const& options() const { return cache_->options(); }

 private:
  template <class G, bool S, class... A>
  friend detail::CallPlan detail::plan_call(Compiled<G, S> const&, A const&...);

  // A signature's first call runs alone (others with the signature wait for it). It captures the
  // plan when a log or fullgraph needs it (a throw leaves that to the next call), and is traced
  // when it is the callable's first call and a trace file is set.
  template <class... A>
  auto first_call(detail::Specialization& s, A const&... a) const {
    auto& c = *cache_;
    std::lock_guard lock(s.first_call);
    if (s.ready.load(std::memory_order_relaxed)) return forward(s, nn::detail::forward_log(), a...);
    std::optional<detail::TracedCall> traced;  // (inside an sd::trace, that one records the call)
    if (!detail::tracer() && c.take_trace())
      traced.emplace(c.options().name + ": " + detail::signature_text(s.signature));
    bool const captures = c.captures();
    if (!captures) s.ready.store(true, std::memory_order_release);
    nn::detail::ForwardLog blocks;
    auto r = forward(s, captures ? &blocks : nn::detail::forward_log(), a...);
    if (traced) traced->write(c.options().trace);
    if (!captures) return r;
    if (auto* outer = nn::detail::forward_log()) {  // a forward logged around this call
      outer->plans.insert(outer->plans.end(), blocks.plans.begin(), blocks.plans.end());
      outer->blocks.insert(outer->blocks.end(), blocks.blocks.begin(), blocks.blocks.end());
      outer->kernels += blocks.kernels;
    }
    c.first_call(s, blocks);
    s.ready.store(true, std::memory_order_release);
    return r;
  }

  // The forward in the mode's setting: a workspace or the CUDA graphs (reduce_overhead) or the
  // tuner (max_autotune) installed on this thread for the call.
  template <class... A>
  auto forward(detail::Specialization& s, nn::detail::ForwardLog* log, A const&... a) const {
    auto run_on = [&](nn::detail::ForwardLog* l, A const&... x) {
      return nn::detail::run_forward(l, cache_->options().backend == Backend::eager,
                                     [&] { return nn::detail::finish(detail::call_forward(f_, x...)); });
    };
    auto run = [&] { return run_on(log, a...); };
    switch (cache_->options().mode) {
      case Mode::reduce_overhead: {
        if constexpr (runtime::on_cuda<A...>) {
          using Pool = runtime::GraphPool<decltype(run()), A...>;
          auto& graphs = s.graph_pool<Pool>(cache_->options().name);
          return graphs.call([&](bool logged, A const&... x) { return run_on(logged ? log : nullptr, x...); }, a...);
        } else {
          struct Lease {  // the workspace goes back to the pool however the call ends
            detail::Specialization& s;
            std::unique_ptr<runtime::Workspace> w;
            ~Lease() { s.give_back(std::move(w)); }
          } lease{s, s.take_workspace()};
          runtime::Workspace::Call call(*lease.w);
          return run();
        }
      }
      case Mode::max_autotune: {
        auto* tuner = cache_->options().tuner;
        runtime::Autotuner::Call call(tuner ? *tuner : runtime::Autotuner::global());
        return run();
      }
      default: return run();
    }
  }

  F f_;
  std::shared_ptr<detail::CompileCache> cache_;
};

template <class F, bool S, class... A>
detail::CallPlan detail::plan_call(Compiled<F, S> const& compiled, A const&... a) {
  CallPlan p;
  nn::detail::run_forward(&p.blocks, compiled.options().backend == Backend::eager,
                          [&] { return nn::detail::finish(call_forward(compiled.f_, a...)); });
  auto sig = signature(compiled.options().dynamic == true, a...);
  p.signature = signature_text(sig.key());
  if (Specialization const* s = compiled.cache_->lookup(sig)) p.specialization = s->info();
  return p;
}

namespace detail {
// An lvalue module is referenced, as torch.compile(module) wraps the module itself: weights
// loaded after compiling are seen. Anything else is kept by value.
template <class F>
using compiled_callable_t =
    std::conditional_t<nn::Module<std::remove_cvref_t<F>> && std::is_lvalue_reference_v<F>,
                       std::reference_wrapper<std::remove_cvref_t<F> const>, std::decay_t<F>>;
}  // namespace detail

// sd::compile(f), sd::compile(module, {.dynamic = true}), sd::compile(f, sd::fullgraph).
template <class F>
auto compile(F&& f, Options o = {}) {
  return Compiled<detail::compiled_callable_t<F>, false>(std::forward<F>(f), std::move(o));
}
template <class F>
auto compile(F&& f, Fullgraph, Options o = {}) {
  o.fullgraph = true;
  return Compiled<detail::compiled_callable_t<F>, true>(std::forward<F>(f), std::move(o));
}

}  // namespace solder
