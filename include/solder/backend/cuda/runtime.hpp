// The CUDA runtime layer: checked calls, the device's properties (read once), the stream solder
// works on, and storage from the device's stream-ordered memory pool (cudaMallocAsync), which
// keeps freed blocks cached for the next allocation instead of returning them to the driver.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "../../core/error.hpp"

namespace solder::detail::cuda {

// Throws sd::Error naming the call, CUDA's error and where the call was made.
inline void check_call(cudaError_t e, char const* call, char const* file, int line) {
  if (e != cudaSuccess)
    fail("CUDA call ", call, " failed: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e), " (",
         file, ":", line, ")");
}
#define SOLDER_CUDA_CHECK(call) ::solder::detail::cuda::check_call((call), #call, __FILE__, __LINE__)

struct DeviceInfo {
  int sm_count = 0;
  int max_threads_per_sm = 0;
  cudaMemPool_t pool = nullptr;
};

// The current device, checked: with no GPU or no driver this throws "no CUDA device: ...".
inline int current_device() {
  static int const count = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it: the process goes on without CUDA
      fail("no CUDA device: ", cudaGetErrorString(e));
    }
    return n;
  }();
  if (count == 0) fail("no CUDA device: cudaGetDeviceCount found none");
  int id = 0;
  SOLDER_CUDA_CHECK(cudaGetDevice(&id));
  return id;
}

// Properties of the current device, read once per device (launch configuration and the pool).
inline DeviceInfo const& device_info() {
  static std::mutex m;
  static std::map<int, DeviceInfo> infos;
  int id = current_device();
  std::lock_guard<std::mutex> lock(m);
  auto it = infos.find(id);
  if (it != infos.end()) return it->second;
  DeviceInfo d;
  SOLDER_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, id));
  SOLDER_CUDA_CHECK(cudaDeviceGetAttribute(&d.max_threads_per_sm,
                                           cudaDevAttrMaxThreadsPerMultiProcessor, id));
  SOLDER_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&d.pool, id));
  std::uint64_t keep = UINT64_MAX;  // cache freed blocks: no trip to the driver per tensor
  SOLDER_CUDA_CHECK(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &keep));
  return infos.emplace(id, d).first->second;
}

// Every thread starts on the legacy default stream, one queue for the whole process (as
// PyTorch's default stream): a tensor that one thread computes and hands to another is read
// after the kernels that wrote it. A thread that wants its own queue sets one.
inline cudaStream_t& stream_slot() {
  static thread_local cudaStream_t s = cudaStreamLegacy;
  return s;
}

// Set while this thread's work is captured into a CUDA graph (runtime/cuda_graph.hpp). A wait
// for the GPU cannot be captured: asked of CUDA, it invalidates the capture with an error. What
// would wait throws sd::Error instead, and the graph's call runs uncaptured.
inline bool& capturing() {
  static thread_local bool on = false;
  return on;
}
inline void refuse_wait_in_capture(char const* what) {
  check(!capturing(), what, " waits for the GPU, which a CUDA graph cannot capture");
}

// The queue a stream handle names: 0 is the legacy default stream, or the calling thread's
// per-thread stream where the file is built with --default-stream per-thread.
inline cudaStream_t queue_of(cudaStream_t s) {
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  return s == nullptr ? cudaStreamPerThread : s;
#else
  return s == nullptr ? cudaStreamLegacy : s;
#endif
}

// A number for the calling thread that no other thread gets (a std::thread::id may be given
// again once its thread has ended).
inline std::uint64_t thread_token() {
  static std::atomic<std::uint64_t> next{0};
  static thread_local std::uint64_t const token = ++next;
  return token;
}

// Whether work queued on `s` by this thread is queued after what the thread of token `t` queued
// on `at`: the same queue. The per-thread stream is another queue in every thread.
inline bool same_queue(cudaStream_t s, cudaStream_t at, std::uint64_t t) {
  at = queue_of(at);
  return queue_of(s) == at && (at != cudaStreamPerThread || t == thread_token());
}

}  // namespace solder::detail::cuda

namespace solder::cuda {

// Number of usable GPUs; 0 (never an error) without a device or a driver.
inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

// The stream this thread's kernels, copies and allocations go to (default: the legacy default
// stream, shared by all threads). Work is asynchronous; copies to the host and item() wait for
// it. Work on another stream is ordered after this one's only as the caller arranges (events).
inline cudaStream_t stream() { return detail::cuda::stream_slot(); }
inline void set_stream(cudaStream_t s) { detail::cuda::stream_slot() = s; }
inline void synchronize() {
  detail::cuda::refuse_wait_in_capture("sd::cuda::synchronize()");
  SOLDER_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace solder::cuda

namespace solder::detail {

// Where this thread's device tensors get their storage while a call is captured as a CUDA graph
// (runtime/cuda_graph.hpp: sd::compile's reduce_overhead mode); none: the memory pool.
struct CudaStorage {
  virtual std::shared_ptr<void> allocate(std::size_t bytes) = 0;

 protected:
  ~CudaStorage() = default;
};
inline CudaStorage*& cuda_storage() {
  thread_local CudaStorage* storage = nullptr;
  return storage;
}

template <class T>
std::shared_ptr<T> cuda_allocate(std::int64_t n) {
  std::size_t bytes = static_cast<std::size_t>(n > 0 ? n : 1) * sizeof(T);
  if (CudaStorage* s = cuda_storage()) return std::static_pointer_cast<T>(s->allocate(bytes));
  cudaMemPool_t pool = cuda::device_info().pool;
  void* p = nullptr;
  cudaStream_t const at = solder::cuda::stream();
  SOLDER_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, at));
  // Freed in stream order, after the kernels already queued that use it. Released on another
  // queue (another stream, another thread's per-thread stream), the free would not wait for
  // them, and the pool could hand the block out again while they still write it: the device is
  // waited for first. Where that wait fails, the block is not known to be free of them, and is
  // left out of the pool; the error is cleared, so that no later check blames another call for
  // it. A destructor cannot throw; at process exit the runtime may already be gone, which is
  // harmless here.
  return std::shared_ptr<T>(static_cast<T*>(p), [at, thread = cuda::thread_token()](T* q) {
    cudaStream_t const now = solder::cuda::stream();
    if (!cuda::same_queue(now, at, thread) && cudaDeviceSynchronize() != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      return;
    }
    static_cast<void>(cudaFreeAsync(q, now));
  });
}

// Copies between any two of host and device memory (unified addressing picks the direction),
// then waits, so the host may read or free its side at once.
inline void cuda_copy(void* dst, void const* src, std::size_t bytes) {
  if (bytes == 0) return;
  cuda::refuse_wait_in_capture("a copy between the host and the GPU (item(), to<>(), an index check)");
  SOLDER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, solder::cuda::stream()));
  SOLDER_CUDA_CHECK(cudaStreamSynchronize(solder::cuda::stream()));
}

}  // namespace solder::detail
