// reduce_overhead on CUDA tensors (DESIGN.md §4): a call's kernel sequence is captured once as a
// CUDA graph and replayed, one graph launch in place of a launch per kernel, as torch.compile's
// "reduce-overhead" mode does. The contract (docs/runtime.md, "CUDA graphs"):
//   * a graph serves one set of sizes and numbers, which it bakes in (a generic specialization
//     holds a graph per set it meets);
//   * inputs: a graph reads its own buffers, one per tensor argument; a call copies its
//     arguments into them (torch's static inputs) and launches the graph;
//   * outputs: a call returns views of the graph's memory, which its next replay overwrites; a
//     graph whose outputs or input buffers the caller still holds is not replayed: another graph
//     is taken or captured (the host workspace's rule), so a kept result is never overwritten;
//   * what cannot be captured (a forward that synchronizes: item(), a copy to the host,
//     sd::cuda::synchronize(); one that draws random numbers; an argument that is neither a
//     tensor nor a number) runs uncaptured, said once on the perf_hints log and counted.
// The first call of a set of sizes runs once uncaptured on the graph's buffers (a warm-up:
// cuBLAS's handle and heuristics, kernels loaded on first use), then is captured and launched.
//
// Above the CUDA part: what a specialization holds without CUDA's headers (compile.hpp).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../core/device.hpp"
#include "../core/tensor.hpp"

namespace solder::runtime {

template <class A>
constexpr bool is_cuda_tensor() {
  if constexpr (TensorType<A>) return std::is_same_v<typename A::device_type, Cuda>;
  else return false;
}
// Whether a call with arguments A... goes to the CUDA graphs: a tensor argument is on the GPU.
template <class... A>
inline constexpr bool on_cuda = (false || ... || is_cuda_tensor<A>());

// The graphs of one signature, as a specialization holds them; what they did.
class CudaGraphs {
 public:
  virtual ~CudaGraphs() = default;
  std::uint64_t captured() const { return captured_.load(std::memory_order_relaxed); }
  std::uint64_t replays() const { return replays_.load(std::memory_order_relaxed); }
  std::uint64_t fallbacks() const { return fallbacks_.load(std::memory_order_relaxed); }
  std::size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 protected:
  std::atomic<std::uint64_t> captured_{0}, replays_{0}, fallbacks_{0};
  std::atomic<std::size_t> bytes_{0};  // the graphs' memory and input buffers
};

template <class R, class... A>
class GraphPool;  // with the CUDA backend, below

}  // namespace solder::runtime

#if defined(__CUDACC__)
#include <algorithm>
#include <bit>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../backend/cuda/runtime.hpp"
#include "../core/random.hpp"
#include "../plan/explain.hpp"
#include "logs.hpp"

namespace solder::runtime {

// The device memory of one graph, handed out while its call is captured. A buffer freed during
// the capture is taken again by a later allocation that fits it (best fit, at most twice the
// size): the graph's kernels run in the order they were captured, so a buffer is free for them
// where it was free for the capture. Others come from cudaMalloc. Freed with the last tensor
// that uses it.
class GraphMemory final : public solder::detail::CudaStorage, public std::enable_shared_from_this<GraphMemory> {
 public:
  GraphMemory() = default;
  GraphMemory(GraphMemory const&) = delete;
  GraphMemory& operator=(GraphMemory const&) = delete;
  // cudaFree waits for the device: no replay still uses the memory. A destructor cannot throw;
  // at process exit the runtime may already be gone. A failure is cleared, so that no later
  // check blames another call for it.
  ~GraphMemory() {
    for (Buffer const& b : buffers_)
      if (cudaFree(b.data) != cudaSuccess) static_cast<void>(cudaGetLastError());
  }

  std::shared_ptr<void> allocate(std::size_t bytes) override {
    auto const [i, data] = take(bytes);
    // Made without the lock, which its deleter takes (and runs at once should making it fail).
    std::shared_ptr<void> handed(data, [memory = shared_from_this(), i](void*) { memory->release(i); });
    std::lock_guard lock(mutex_);
    buffers_[i].handed = handed;
    return handed;
  }

  // The buffers in use (after the capture: the outputs), to watch for a caller that keeps them.
  std::vector<std::weak_ptr<void>> in_use() const {
    std::lock_guard lock(mutex_);
    std::vector<std::weak_ptr<void>> live;
    for (Buffer const& b : buffers_)
      if (b.used) live.push_back(b.handed);
    return live;
  }
  std::size_t bytes() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (Buffer const& b : buffers_) n += b.bytes;
    return n;
  }

 private:
  struct Buffer {
    void* data;
    std::size_t bytes;
    bool used = false;
    std::weak_ptr<void> handed;
  };
  // A free buffer of at least `bytes` (best fit, at most twice the size) or a new one, marked used.
  std::pair<std::size_t, void*> take(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    std::size_t best = buffers_.size();
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      Buffer const& b = buffers_[i];
      bool const fits = !b.used && b.bytes >= bytes && b.bytes <= 2 * bytes;
      if (fits && (best == buffers_.size() || b.bytes < buffers_[best].bytes)) best = i;
    }
    if (best == buffers_.size()) {
      // cudaMalloc is refused during a capture unless this thread relaxes it (as PyTorch's
      // graph pools do): it is no work of the graph's.
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      SOLDER_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
      void* p = nullptr;
      cudaError_t made = cudaMalloc(&p, bytes);
      if (made == cudaErrorMemoryAllocation) {  // the pool keeps freed memory (the warm-up's): give it back
        static_cast<void>(cudaGetLastError());
        made = cudaMemPoolTrimTo(solder::detail::cuda::device_info().pool, 0);
        if (made == cudaSuccess) made = cudaMalloc(&p, bytes);
      }
      SOLDER_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
      SOLDER_CUDA_CHECK(made);
      buffers_.push_back({p, bytes, false, {}});
    }
    buffers_[best].used = true;
    return {best, buffers_[best].data};
  }
  void release(std::size_t i) {
    std::lock_guard lock(mutex_);
    buffers_[i].used = false;
  }

  mutable std::mutex mutex_;
  std::vector<Buffer> buffers_;
};

// One captured call: its input buffers, its memory, the result its replays write, and the
// executable graph.
template <class R, class... A>
class Graph {
 public:
  explicit Graph(A const&... a) : inputs_(buffer(a)...) {}
  Graph(Graph const&) = delete;
  Graph& operator=(Graph const&) = delete;
  ~Graph() {
    if (exec_) static_cast<void>(cudaGraphExecDestroy(exec_));  // (freed when a launch in flight ends)
  }

  // Copies the arguments into the input buffers on this thread's stream. A graph last launched
  // on another queue waits for the device first: work queued there on its results (since
  // released) may still read its memory — the rule of the memory pool's releases.
  void copy_in(A const&... a) {
    if (launched_ && !solder::detail::cuda::same_queue(solder::cuda::stream(), last_stream_, last_thread_))
      SOLDER_CUDA_CHECK(cudaDeviceSynchronize());
    std::apply([&](auto&... in) { (copy(in, a), ...); }, inputs_);
  }

  // The forward on the input buffers, uncaptured: its result is not kept.
  template <class Forward>
  void warm_up(Forward const& forward) const {
    std::apply(forward, inputs_);
  }

  // Captures forward(input buffers...) on a stream of its own; returns "" or why it could not.
  template <class Forward>
  std::string capture(Forward const& forward) {
    cudaStream_t s = nullptr;
    SOLDER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));  // (the legacy stream cannot capture)
    std::uint64_t const draws = solder::detail::rng_state().offset;
    std::string why;
    cudaGraph_t graph = nullptr;
    if (cudaError_t const e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
      why = std::string("cudaStreamBeginCapture failed: ") + cudaGetErrorString(e);
    } else {
      {
        Capturing on(s, *memory_);
        try {
          result_.emplace(std::apply(forward, inputs_));
        } catch (std::exception const& e) {  // (an error of the forward itself recurs in the uncaptured run)
          why = e.what();
        } catch (...) {
          why = "the forward threw an exception that is not a std::exception";
        }
      }
      cudaError_t const ended = cudaStreamEndCapture(s, &graph);
      if (why.empty() && ended != cudaSuccess)
        why = std::string("the capture was invalidated: ") + cudaGetErrorName(ended);
    }
    if (why.empty() && solder::detail::rng_state().offset != draws)
      why = "the forward draws random numbers (sd::rand, sd::randn): a graph would replay the same ones";
    if (why.empty()) {
      static_cast<void>(cudaGraphGetNodes(graph, nullptr, &nodes_));  // (for the log)
      if (cudaError_t const e = cudaGraphInstantiate(&exec_, graph, 0); e != cudaSuccess)
        why = std::string("cudaGraphInstantiate failed: ") + cudaGetErrorName(e);
    }
    if (graph) static_cast<void>(cudaGraphDestroy(graph));
    static_cast<void>(cudaStreamDestroy(s));
    static_cast<void>(cudaGetLastError());  // a refused call inside the capture is not this call's error
    if (!why.empty()) {
      result_.reset();
      return why;
    }
    // From here, a storage used by more than now is held by the caller.
    auto watch = [&](std::weak_ptr<void> w) { watched_.emplace_back(w, w.use_count()); };
    std::apply([&](auto const&... in) { (watch_input(in, watch), ...); }, inputs_);
    for (auto& w : memory_->in_use()) watch(std::move(w));
    return "";
  }

  // Whether the caller still holds a result of this graph (or a view of an input buffer).
  bool held() const {
    return std::any_of(watched_.begin(), watched_.end(), [](auto const& w) { return w.first.use_count() > w.second; });
  }

  R launch() {
    cudaStream_t const s = solder::cuda::stream();
    SOLDER_CUDA_CHECK(cudaGraphLaunch(exec_, s));
    launched_ = true;
    last_stream_ = s;
    last_thread_ = solder::detail::cuda::thread_token();
    return *result_;
  }

  std::size_t nodes() const { return nodes_; }
  std::size_t memory_bytes() const { return memory_->bytes(); }
  std::size_t input_bytes() const {
    std::size_t n = 0;
    std::apply([&](auto const&... in) { ((n += bytes_of(in)), ...); }, inputs_);
    return n;
  }

 private:
  // Installs the capture's stream and memory on this thread, for the forward.
  class Capturing {
   public:
    Capturing(cudaStream_t s, GraphMemory& memory)
        : stream_(solder::cuda::stream()), storage_(solder::detail::cuda_storage()) {
      solder::cuda::set_stream(s);
      solder::detail::cuda_storage() = &memory;
      solder::detail::cuda::capturing() = true;
    }
    ~Capturing() {
      solder::cuda::set_stream(stream_);
      solder::detail::cuda_storage() = storage_;
      solder::detail::cuda::capturing() = false;
    }
    Capturing(Capturing const&) = delete;
    Capturing& operator=(Capturing const&) = delete;

   private:
    cudaStream_t stream_;
    solder::detail::CudaStorage* storage_;
  };

  // A tensor argument's buffer: a contiguous tensor of its type and shape; a number as it is
  // (the graph's key holds its value).
  template <class X>
  static X buffer(X const& x) {
    if constexpr (TensorType<X>) return X(x.shape());
    else return x;
  }
  template <class X>
  static void copy(X& in, X const& x) {
    if constexpr (TensorType<X>) solder::detail::assign(in, x);
  }
  template <class X, class Watch>
  static void watch_input(X const& in, Watch const& watch) {
    if constexpr (TensorType<X>) watch(std::weak_ptr<void>(in.storage()));
  }
  template <class X>
  static std::size_t bytes_of(X const& in) {
    if constexpr (TensorType<X>) return static_cast<std::size_t>(in.numel()) * sizeof(typename X::value_type);
    else return 0;
  }

  std::tuple<A...> inputs_;
  std::shared_ptr<GraphMemory> memory_ = std::make_shared<GraphMemory>();
  std::optional<R> result_;
  cudaGraphExec_t exec_ = nullptr;
  std::size_t nodes_ = 0;
  std::vector<std::pair<std::weak_ptr<void>, long>> watched_;  // storage, its use count unheld
  bool launched_ = false;
  cudaStream_t last_stream_ = nullptr;
  std::uint64_t last_thread_ = 0;
};

// The most graphs one signature makes: one per set of sizes, one more per result kept across
// the next call, one per thread calling at once. Past it, a call that finds none free runs
// uncaptured.
inline constexpr std::size_t max_graphs = 8;

// The graphs of one signature (R: the forward's result, A...: its arguments), shared by the
// threads that call it.
template <class R, class... A>
class GraphPool final : public CudaGraphs {
 public:
  explicit GraphPool(std::string name) : name_(std::move(name)) {}

  // The call's result: a free graph of its sizes replayed, a new one captured, or the forward
  // run uncaptured where no graph can serve it. forward(logged, args...) runs the forward,
  // logged (the signature's first call: compile.hpp's plan) when `logged`; the first run of a
  // call is the logged one.
  template <class Forward>
  R call(Forward const& forward, A const&... a) {
    bool first_run = true;
    auto run = [&](A const&... x) { return forward(std::exchange(first_run, false), x...); };
    if constexpr (!capturable) {
      refuse_once(not_capturable, "not captured as a CUDA graph: an argument is neither a tensor on the GPU "
                                  "nor a number (what it holds is not guarded, and a graph would bake it in)");
      return run(a...);
    } else {
      Key const key = key_of(a...);
      std::unique_ptr<G> graph;
      bool refused = false, busy = false, warm = false;
      {
        std::lock_guard lock(mutex_);
        Entry& e = entries_[key];
        refused = !e.refused.empty();
        warm = e.warm;
        if (!refused) {
          auto it = std::find_if(e.idle.begin(), e.idle.end(), [](auto const& g) { return !g->held(); });
          if (it != e.idle.end()) {
            graph = std::move(*it);
            e.idle.erase(it);
          } else if (count_ < max_graphs) {
            ++count_;  // a place for the graph this call makes
          } else {
            busy = true;
          }
        }
      }
      if (refused) {
        ++fallbacks_;
        return run(a...);
      }
      if (busy) {
        refuse_once(all_busy, std::to_string(max_graphs) + " CUDA graphs made, none free for " + text_of(a...) +
                                  " (each serves one set of sizes, one caller at a time, and is not replayed while "
                                  "the caller holds its last result): such calls run uncaptured");
        return run(a...);
      }
      if (graph) {
        Lease lease{*this, key, std::move(graph)};
        lease.graph->copy_in(a...);
        R r = lease.graph->launch();
        ++replays_;
        return r;
      }
      return capture(key, warm, run, a...);
    }
  }

 private:
  using G = Graph<R, A...>;
  using Key = std::vector<std::int64_t>;  // the arguments' sizes and numbers
  struct Entry {
    std::vector<std::unique_ptr<G>> idle;
    std::string refused;  // why these sizes cannot be captured: their calls run uncaptured
    bool warm = false;    // warmed up once: later graphs of these sizes capture at once
  };
  // A graph taken for a call goes back among the idle ones however the call ends.
  struct Lease {
    GraphPool& pool;
    Key const& key;
    std::unique_ptr<G> graph;
    ~Lease() {
      if (!graph) return;
      std::lock_guard lock(pool.mutex_);
      pool.entries_[key].idle.push_back(std::move(graph));
    }
  };

  static constexpr bool capturable = ((is_cuda_tensor<A>() || std::is_arithmetic_v<A>) && ...);

  // A new graph for `key`: its buffers filled, warmed up on the first graph of these sizes,
  // captured and launched; where the capture fails, the sizes are refused and the forward runs
  // uncaptured on the arguments.
  template <class Run>
  R capture(Key const& key, bool warm, Run const& run, A const&... a) {
    struct Place {  // the place counted for the graph is given up unless the graph is made
      GraphPool& pool;
      bool kept = false;
      ~Place() {
        if (kept) return;
        std::lock_guard lock(pool.mutex_);
        --pool.count_;
      }
    } place{*this};
    auto graph = std::make_unique<G>(a...);
    graph->copy_in(a...);
    if (!warm) {
      graph->warm_up(run);
      std::lock_guard lock(mutex_);
      entries_[key].warm = true;
    }
    if (std::string const why = graph->capture(run); !why.empty()) {
      {
        std::lock_guard lock(mutex_);
        entries_[key].refused = why;
      }
      ++fallbacks_;
      solder::detail::write_log(Log::perf_hints, name_ + ": " + text_of(a...) + ": not captured as a CUDA graph: " +
                                                     why + "; calls with these sizes run uncaptured");
      return run(a...);
    }
    place.kept = true;
    ++captured_;
    bytes_ += graph->memory_bytes() + graph->input_bytes();
    if (log_enabled(Log::output_code)) {
      auto bytes = [](std::size_t n) { return solder::detail::human_bytes(static_cast<std::int64_t>(n)); };
      solder::detail::write_log(Log::output_code, name_ + ": " + text_of(a...) + ": captured a CUDA graph of " +
                                                      std::to_string(graph->nodes()) + " nodes (" +
                                                      bytes(graph->memory_bytes()) + " of memory, " +
                                                      bytes(graph->input_bytes()) +
                                                      " of input buffers); later calls with these sizes replay it");
    }
    Lease lease{*this, key, std::move(graph)};
    return lease.graph->launch();
  }

  // Says once, on perf_hints, why calls run uncaptured, and counts the call.
  void refuse_once(std::once_flag& said, std::string const& why) {
    ++fallbacks_;
    std::call_once(said, [&] { solder::detail::write_log(Log::perf_hints, name_ + ": " + why); });
  }

  static Key key_of(A const&... a) {
    Key k;
    auto add = [&](auto const& x) {
      using X = std::remove_cvref_t<decltype(x)>;
      if constexpr (TensorType<X>) k.insert(k.end(), x.shape().begin(), x.shape().end());
      else if constexpr (std::is_floating_point_v<X>) k.push_back(std::bit_cast<std::int64_t>(static_cast<double>(x)));
      else k.push_back(static_cast<std::int64_t>(x));
    };
    (add(a), ...);
    return k;
  }
  // "arg0 [8, 16], arg1 = 0.5": the sizes a graph serves, for the logs.
  static std::string text_of(A const&... a) {
    std::ostringstream os;
    int arg = 0;
    auto add = [&](auto const& x) {
      using X = std::remove_cvref_t<decltype(x)>;
      if (arg) os << ", ";
      os << "arg" << arg++;
      if constexpr (TensorType<X>) os << ' ' << shape_string<X::rank>(x.shape());
      else os << " = " << x;
    };
    (add(a), ...);
    return os.str();
  }

  std::string name_;
  std::mutex mutex_;
  std::map<Key, Entry> entries_;
  std::size_t count_ = 0;  // graphs made (idle or in use) and being made
  std::once_flag not_capturable, all_busy;
};

}  // namespace solder::runtime
#endif
