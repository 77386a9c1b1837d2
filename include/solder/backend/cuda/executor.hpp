// The CUDA executor: one __global__ kernel template per kind of planned kernel, instantiated
// once per fused expression type, with the variant picked at run time inside it:
//   elementwise_kernel  no fused reduction: a grid-stride loop over the output, vector loads and
//                       stores (16 bytes of 4- and 8-byte types, 4 values of smaller ones) when
//                       every input and the output are contiguous and aligned (one load per
//                       value where the inputs of one type are all one tensor: x * x),
//                       scalar contiguous loads otherwise, or the general strided/broadcast walk;
//   lines_kernel        fused reductions: one group of threads per line (softmax's row, a
//                       reduction's output), a warp when there are many lines, else the block;
//                       the group computes the line's reductions, then writes the line, with
//                       vector loads and stores where the line is aligned; also an
//                       element-wise kernel whose broadcast inputs are contiguous along its
//                       rows (x + bias), when the rows are many and long (broadcast_rows);
//   a reduction at the root that a group per output would not serve well runs apart
//   (fold_apart): few long lines in chunks (chunk_kernel), columns a warp per 32 outputs
//   (columns_kernel), the parts merged by merge_kernel;
//   a kernel with few long lines runs each reduction on its own (RunTimeBreak::few_long_lines),
//   one over all dims on CUB's device-wide reduce over the fused input expression;
//   fill_kernel         the factories (rand, randn, full): element i is f(i).
// Kernels are queued on solder's stream (sd::cuda::stream()) and checked when launched.
#pragma once
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cub/device/device_reduce.cuh>
#include <string>

#include "epilogue.hpp"
#include "evaluators.hpp"
#include "runtime.hpp"

namespace solder::detail::cuda {

// The index of element i (below the domain's size) of a row-major walk over dom.
template <int D>
SOLDER_HD SOLDER_INLINE void unravel_all(std::int64_t i, Index<D> const& dom, Index<D>& idx) {
  SOLDER_UNROLL
  for (int a = D - 1; a > 0; --a) {
    idx[a] = i % dom[a];
    i /= dom[a];
  }
  if constexpr (D > 0) idx[0] = i;  // what is left: below dom[0], no division
}

// shared: the vector walk, where the inputs of one type are all one tensor (x * x).
enum class Walk : int { vector, shared, contiguous, strided };

// Stores v at p (aligned for it) as one instruction: a plain store of the struct may be split
// into one store per value (nvcc did so in lines_kernel: four 4-byte stores for every float4).
template <class T, int V>
__device__ SOLDER_INLINE void store_vec(T* p, Vec<T, V> const& v) {
  constexpr std::size_t size = sizeof(Vec<T, V>);
  using Bits = std::conditional_t<size == 16, int4, std::conditional_t<size == 8, int2, int>>;
  static_assert(sizeof(Bits) == size);
  Bits b;
  std::memcpy(&b, &v, size);
  __stwb(reinterpret_cast<Bits*>(p), b);  // st.global.wb: the default store, as one vector
}

// Writes the run out[0, n) of a contiguous line, this thread taking every step-th value from
// `first`: vec_width values at a time when `vec` (every input and `out` aligned, and n at most
// max_run), then the rest one by one. J: the vector walk's index type, 32-bit (unsigned gives
// the element-wise chain's loop fewer instructions; signed gives the row kernels' loops fewer:
// the compiler then steps their line pointers instead of recomputing each address). I: the
// index type of the rest, 32-bit where the caller knows the run is short enough. S > 0: every
// thread takes S vector steps (n and step known at compile time). Several outputs (OutPointers)
// are written a value at a time.
template <int U, class J, class I, int S = 0, class Out, class Ev>
__device__ SOLDER_INLINE void write_run(Ev const& ev, Out out, I n, I first, I step, bool vec) {
  using OutT = out_value_t<Out>;
  constexpr int V = vec_width<OutT>;
  I done = 0;
  if constexpr (std::is_pointer_v<Out>) {
    if (vec) {
      auto const nv = static_cast<J>(n / V);
      auto each = [&](J i) {
        auto v = ev.template line_vec<V>(std::int64_t(i) * V);
        Vec<OutT, V> o;
        SOLDER_UNROLL
        for (int k = 0; k < V; ++k) o.v[k] = static_cast<OutT>(v.v[k]);
        store_vec(out + std::int64_t(i) * V, o);
      };
      if constexpr (S > 0)
        for_count<S, static_steps<Ev, S>>(static_cast<J>(first), static_cast<J>(step), each);
      else for_steps<U>(static_cast<J>(first), nv, static_cast<J>(step), each);
      done = static_cast<I>(nv * V);
    }
  }
  for (I j = done + first; j < n; j += step) out[j] = static_cast<OutT>(ev.line(j));
}

// Whether an evaluator is element-wise all through (no reduction fused into it).
template <class Ev>
inline constexpr bool elementwise_eval = false;
template <class T, int D>
inline constexpr bool elementwise_eval<LeafEval<T, D>> = true;
template <class T, int D>
inline constexpr bool elementwise_eval<ScalarEval<T, D>> = true;
template <class T, int D>
inline constexpr bool elementwise_eval<TileEval<T, D>> = true;  // a stored product (contract.hpp)
template <class Op, class C, int D, class... E>
inline constexpr bool elementwise_eval<MapEval<Op, C, D, E...>> = (true && ... && elementwise_eval<E>);

template <class Out, int D, class Ev>
__global__ void __launch_bounds__(block_threads)
    elementwise_kernel(Ev ev, Out out, Index<D> ost, Index<D> dom, std::int64_t n, Walk walk) {
  using OutT = out_value_t<Out>;
  std::uint32_t const run = static_cast<std::uint32_t>(n);  // n <= max_run (launch)
  if (walk == Walk::shared) {
    if constexpr (repeated_leaf<Ev>)
      write_run<1, std::uint32_t>(sharing_leaves(ev), out, run,
                                  blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x,
                                  true);
    return;
  }
  if (walk != Walk::strided) {
    write_run<1, std::uint32_t>(ev, out, run, blockIdx.x * blockDim.x + threadIdx.x,
                                gridDim.x * blockDim.x, walk == Walk::vector);
    return;
  }
  std::int64_t const step = std::int64_t(gridDim.x) * blockDim.x;
  std::int64_t const first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t i = first; i < n; i += step) {
    Index<D> idx;
    unravel_all<D>(i, dom, idx);
    out[dot<D>(idx, ost)] = static_cast<OutT>(ev.at(idx));
  }
}

// One group of `group` threads per line (group_fold in evaluators.hpp): the group computes the
// line's reductions, then writes the line. Four blocks per SM, said explicitly: that caps a
// kernel at 64 registers, so 32 warps fit on an SM and rows of [4096, 1024] take one round on
// an H100 (at 76 registers, layer norm's kernel took two: 0.45 of a copy's bandwidth; 0.60 with
// the cap).
// Without a minimum, ptxas for sm_90 caps layer norm's kernel at 40 registers and spills.
// With `records` (shared inputs kept in shared memory), the group synchronizes before it writes a
// line, whose records other threads may have written, and before it folds the next.
// L > 0: the static-length variant (launch_lines checked that it applies): the lines are
// contiguous runs of L values, the group a warp, and every reduction folds one such run, so
// every loop of a line has compile-time bounds and unrolls fully, and no thread tests a bound.
template <class Out, int D, int L, class Ev>
__global__ void __launch_bounds__(block_threads, 4)
    lines_kernel(Ev ev, Out out, Index<D> ost, Index<D> dom, std::array<bool, D> inner,
                 int outermost, std::int64_t len, std::int64_t outer, bool contiguous, int group,
                 bool records) {
  using OutT = out_value_t<Out>;
  constexpr int V = vec_width<OutT>;
  constexpr int S = L > 0 && L % (warp_threads * V) == 0 ? L / (warp_threads * V) : 0;
  int const g = L > 0 ? warp_threads : group;
  std::int64_t const n = L > 0 ? L : len;
  int const per_block = block_threads >> __popc(static_cast<unsigned>(g - 1));
  int const rank = group_rank(g);
  for (std::int64_t o = std::int64_t(blockIdx.x) * per_block + group_index(g); o < outer;
       o += std::int64_t(gridDim.x) * per_block) {
    Index<D> idx{};
    std::int64_t r = o;
    SOLDER_UNROLL
    for (int a = D - 1; a >= 0; --a) {
      if (inner[a]) continue;
      if (a == outermost) {  // what is left of o: no division
        idx[a] = r;
      } else {
        idx[a] = r % dom[a];
        r /= dom[a];
      }
    }
    prepare_line<L>(ev, idx);  // the whole group: its reductions for this line
    if (records) group_sync(g);
    if (L > 0 || contiguous) {
      ev.begin_line(idx);
      Out op = out + dot<D>(idx, ost);
      bool vec = false;
      if constexpr (L == 0) {  // two loops over the line, the vector walk and its scalar rest
        pin_lines(ev);
        if constexpr (std::is_pointer_v<Out>) op = pin_line(out, op);
      }
      if constexpr (std::is_pointer_v<Out>)
        vec = n <= max_run && aligned_for<OutT, V>(op) && ev.template vec_aligned<V>();
      write_run<steps_in_flight<Ev>, std::int32_t, std::int64_t, S>(ev, op, n, rank, g, vec);
    } else {
      SOLDER_NO_UNROLL  // the kernel's prologue would divide by group for its trip count
      for (std::int64_t j = rank; j < len; j += group) {
        Index<D> k = idx;
        std::int64_t q = j;
        SOLDER_UNROLL
        for (int a = D - 1; a >= 0; --a) {
          if (!inner[a]) continue;
          k[a] = q % dom[a];
          q /= dom[a];
        }
        out[dot<D>(k, ost)] = static_cast<OutT>(ev.at(k));
      }
    }
    if (records) group_sync(g);
  }
}

// Blocks of block_threads that the GPU holds at once.
inline std::int64_t resident_blocks() {
  DeviceInfo const& d = device_info();
  return std::int64_t(d.sm_count) * (d.max_threads_per_sm / block_threads);
}

// Blocks for a grid-stride loop over `work` items: enough to fill every SM, no more.
inline unsigned grid_for(std::int64_t work) {
  std::int64_t full = resident_blocks() * 4;
  std::int64_t need = (work + block_threads - 1) / block_threads;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(need, full)));
}

// A warp per line when there are at least a quarter as many lines as the GPU holds warps;
// fewer lines would leave most warps idle, so each gets a block.
inline int group_for(std::int64_t lines) {
  DeviceInfo const& d = device_info();
  std::int64_t warps = std::int64_t(d.sm_count) * d.max_threads_per_sm / warp_threads;
  return lines >= warps / 4 ? warp_threads : block_threads;
}

// The static length of a row kernel's lines: the last extent of its expression or of the tensor
// it is stored in, where that is static and a warp's lines of it take at most 16 vector steps
// a thread; 0 otherwise, and for several outputs (written a value at a time). launch_lines takes lines_kernel's variant for it when the lines are
// that long at run time (a guard on the shape, as DESIGN.md §4 has it).
template <class N, class OutTensor>
constexpr std::int64_t static_line() {
  constexpr int D = N::rank;
  if constexpr (D == 0 || !std::is_pointer_v<decltype(std::declval<OutTensor&>().data())>) {
    return 0;
  } else {
    constexpr std::int64_t L = N::static_extents[D - 1] != dyn ? N::static_extents[D - 1]
                                                               : OutTensor::static_extents[D - 1];
    constexpr std::int64_t per_step = warp_threads * vec_width<typename OutTensor::value_type>;
    return L > 0 && L % per_step == 0 && L / per_step <= 16 ? L : 0;
  }
}

// lines_kernel over the lines along the `inner` dims of out; L: static_line.
template <std::int64_t L, class OutTensor, class Ev>
void launch_lines(OutTensor& out, Ev& ev, std::array<bool, OutTensor::rank> const& inner) {
  constexpr int D = OutTensor::rank;
  using Out = decltype(out.data());
  Index<D> const& dom = out.shape();
  std::int64_t len = 1, outer = 1;
  for (int a = 0; a < D; ++a) (inner[a] ? len : outer) *= dom[a];
  int first = D, outermost = 0;
  while (first > 0 && inner[first - 1]) --first;
  while (outermost < D - 1 && inner[outermost]) ++outermost;
  bool trailing = std::count(inner.begin(), inner.end(), true) == D - first;
  bool contiguous = trailing && ev.contiguous(first, dom) && contiguous_from<D>(first, out.strides(), dom);
  int const group = group_for(outer);
  GroupLinks links;
  auto link = [&](GroupLinks::Skip skip) {  // true if every use found its record
    links = GroupLinks{};
    links.group = group;
    links.skip = skip;
    if (contiguous) links.set_line(len, dom);
    ev.link(links);
    return links.resolve();
  };
  link(GroupLinks::Skip::mark);
  if (links.relink && (!link(GroupLinks::Skip::keep) || links.relink)) link(GroupLinks::Skip::none);
  std::int64_t per_block = block_threads / links.group;
  std::int64_t blocks = std::min<std::int64_t>((outer + per_block - 1) / per_block,
                                               std::int64_t(device_info().sm_count) * 16);
  auto run = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), block_threads, static_cast<unsigned>(links.record_bytes),
             solder::cuda::stream()>>>(ev, out.data(), out.strides(), dom, inner, outermost, len,
                                       outer, contiguous, links.group, links.record_bytes > 0);
  };
  if constexpr (L > 0) {
    if (contiguous && len == L && links.group == warp_threads && links.folds_lines)
      return run(lines_kernel<Out, D, static_cast<int>(L), Ev>);
  }
  run(lines_kernel<Out, D, 0, Ev>);
}

// The rows of an element-wise kernel with broadcast inputs (x + bias, whose bias repeats along
// dim 0): the trailing dims from the first along which every input and the output are
// contiguous, where the rows are many and long enough that lines_kernel's group per row (with
// vector loads and stores) is busy; none (all false) otherwise, for the strided walk (an index
// computed for every value).
template <int D, class Ev>
std::array<bool, D> broadcast_rows(Ev const& ev, Index<D> const& ost, Index<D> const& dom) {
  std::array<bool, D> rows{};
  for (int first = 1; first < D; ++first) {
    if (!ev.contiguous(first, dom) || !contiguous_from<D>(first, ost, dom)) continue;
    std::int64_t len = 1, outer = 1;
    for (int a = 0; a < D; ++a) (a >= first ? len : outer) *= dom[a];
    std::int64_t const busy = group_for(outer) == warp_threads ? 4 * warp_threads : 4 * block_threads;
    if (2 * outer >= resident_blocks() && len >= busy)
      for (int a = first; a < D; ++a) rows[a] = true;
    break;
  }
  return rows;
}

// (Out is out.data()'s type, never a type read through the node: see element_of in
// backend/eval.hpp.)
// L: static_line, for the lines of a kernel with reductions.
template <std::int64_t L = 0, class OutTensor, class Ev>
void launch(OutTensor& out, Ev& ev, Lines<OutTensor::rank> const& lines) {
  constexpr int D = OutTensor::rank;
  using Out = decltype(out.data());
  Index<D> const& dom = out.shape();
  std::int64_t n = numel_of<D>(dom);
  cudaStream_t s = solder::cuda::stream();
  if constexpr (elementwise_eval<Ev>) {
    Walk walk = Walk::strided;
    if (ev.contiguous(0, dom) && contiguous_from<D>(0, out.strides(), dom)) {
      ev.begin_line(Index<D>{});
      bool vec = false;
      if constexpr (std::is_pointer_v<Out>) {
        constexpr int V = vec_width<out_value_t<Out>>;
        vec = aligned_for<out_value_t<Out>, V>(out.data()) && ev.template vec_aligned<V>();
      }
      walk = !vec ? Walk::contiguous
             : repeated_leaf<Ev> && leaves_shared(ev) ? Walk::shared
                                                      : Walk::vector;
    }
    if (walk == Walk::strided) {
      if constexpr (D > 1) {
        auto const rows = broadcast_rows<D>(ev, out.strides(), dom);
        if (std::find(rows.begin(), rows.end(), true) != rows.end()) {
          launch_lines<0>(out, ev, rows);
          SOLDER_CUDA_CHECK(cudaGetLastError());
          return;
        }
      }
      elementwise_kernel<Out, D><<<grid_for(n), block_threads, 0, s>>>(
          ev, out.data(), out.strides(), dom, n, walk);
    } else {  // runs of at most max_run values, each from where the last ended
      for (std::int64_t start = 0; start < n; start += max_run) {
        std::int64_t const len = std::min(max_run, n - start);
        Index<D> at;
        unravel_all<D>(start, dom, at);
        ev.begin_line(at);
        elementwise_kernel<Out, D><<<grid_for(len), block_threads, 0, s>>>(
            ev, out.data() + start, out.strides(), dom, len, walk);
      }
    }
  } else {
    launch_lines<L>(out, ev, lines.axis);
  }
  SOLDER_CUDA_CHECK(cudaGetLastError());
}

// A reduction at a kernel's root whose outputs a group each would not serve well runs apart,
// in two kernels: the first folds parts of the lines into partial results, merge_kernel merges
// each line's parts in order and finalizes (deterministic for a given device, as CUB's).
//   chunk_kernel    few outputs over long lines (sum(x, 1) of [4, 10^7]; batch norm's statistics
//                   per channel of [N, C, H, W]): a block per output would leave most of the GPU
//                   idle, so each line is folded in chunks, a block per chunk;
//   columns_kernel  a reduction over leading dims that keeps the last one, its inputs
//                   contiguous along it (sum(x, 0) of [R, C], a bias's gradient; the
//                   statistics of channels-last [N, H, W, C]): a warp takes 32 neighbouring
//                   outputs, so that it reads 32 neighbouring values of one input row at a time
//                   (a group per output would read one value from each of 32 rows); a block's
//                   8 warps take every 8th step of a chunk of the lines.
// The first two fold as lines_kernel does, with its bounds (four blocks an SM: ptxas otherwise
// capped a column sum at 48 registers, and spilled).
// (Their template arguments are the evaluator and no type named through it: the host code
// nvcc generates would spell such a type through the node, which g++ cannot parse back; see
// element_of in backend/eval.hpp.)
template <int D, class Ev>
__global__ void __launch_bounds__(block_threads, 4)
    chunk_kernel(Ev ev, typename Ev::A* partials, Index<D> dom, std::int64_t lines, int chunks,
                 std::int64_t chunk) {
  for (std::int64_t b = blockIdx.x; b < lines * chunks; b += gridDim.x) {
    Index<D> idx;
    unravel_all<D>(b / chunks, dom, idx);
    std::int64_t const begin = b % chunks * chunk;
    auto acc = ev.fold_chunk(idx, begin, std::min(begin + chunk, ev.count));
    if (threadIdx.x == 0) partials[b] = acc;
  }
}

// A line's result from all of its fold (acc), as stored.
template <class Ev, class OutT>
__device__ SOLDER_INLINE OutT finalized(typename Ev::A const& acc, std::int64_t count) {
  return static_cast<OutT>(static_cast<typename Ev::R>(Ev::op_type::finalize(acc, count)));
}

// With one chunk (chunks == 1: the lines are short, or so many that their columns fill the GPU)
// a line is folded whole, and its result is stored at once: no partials, no merge_kernel.
// Three blocks per SM, not four: a thread's cascade of partials (backend/cascade.hpp) and a
// rank-4 input's index walk spilled at four's cap of 64 registers.
template <int D, class Ev, class OutT>
__global__ void __launch_bounds__(block_threads, 3)
    columns_kernel(Ev ev, typename Ev::A* partials, OutT* out, Index<D> ost, Index<D> dom,
                   std::int64_t lines, int chunks, std::int64_t chunk) {
  using A = typename Ev::A;
  constexpr int warps = block_threads / warp_threads;
  __shared__ A shares[warps][warp_threads];
  int const lane = static_cast<int>(threadIdx.x) % warp_threads;
  int const warp = static_cast<int>(threadIdx.x) / warp_threads;
  std::int64_t const columns = (lines + warp_threads - 1) / warp_threads;
  for (std::int64_t b = blockIdx.x; b < columns * chunks; b += gridDim.x) {
    std::int64_t const o = b / chunks * warp_threads + lane;  // this thread's output
    std::int64_t const part = b % chunks, begin = part * chunk;
    A acc = Ev::op_type::template identity<A>();
    Index<D> idx{};
    if (o < lines) {
      unravel_all<D>(o, dom, idx);
      acc = ev.fold_steps(idx, begin, std::min(begin + chunk, ev.count), warp, warps);
    }
    shares[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && o < lines) {
      for (int w = 1; w < warps; ++w) acc = Ev::op_type::merge(acc, shares[w][lane]);
      if (chunks == 1) out[dot<D>(idx, ost)] = finalized<Ev, OutT>(acc, ev.count);
      else partials[o * chunks + part] = acc;
    }
    __syncthreads();  // the next pass writes shares again
  }
}

template <int D, class Ev, class OutT>
__global__ void __launch_bounds__(block_threads)
    merge_kernel(typename Ev::A const* partials, OutT* out, Index<D> ost, Index<D> dom,
                 std::int64_t lines, int chunks, std::int64_t count) {
  using Op = typename Ev::op_type;
  std::int64_t const step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t o = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < lines; o += step) {
    ThreadFold<Op, typename Ev::A> acc;  // as many parts as the GPU holds blocks: in chunks too
    acc.in_chunks(0, chunks, 1, [&](int b, int e) {
      for (int c = b; c < e; ++c) acc.chunk() = Op::merge(acc.chunk(), partials[o * chunks + c]);
    });
    Index<D> idx;
    unravel_all<D>(o, dom, idx);
    out[dot<D>(idx, ost)] = finalized<Ev, OutT>(acc.result(), count);
  }
}

// How fold_apart shares out a reduction (host side, no device needed): `units` (lines, or
// groups of 32 of them for columns) times `chunks` parts of `chunk` values each, every part
// non-empty; none (chunks == 0) where lines_kernel serves it better.
struct Parts {
  bool columns = false;
  std::int64_t units = 0, chunks = 0, chunk = 0;
};
// lines: outputs; count: values folded into each; resident: blocks the GPU holds at once;
// columns_possible: the reduction folds leading dims and keeps the input's last one, along
// which its inputs are contiguous (or constant), so that neighbouring outputs are read together.
inline Parts parts_for(std::int64_t lines, std::int64_t count, std::int64_t resident,
                       bool columns_possible) {
  constexpr int warps = block_threads / warp_threads;
  Parts p;
  // Columns: outputs for at least half a warp, and steps for every warp.
  p.columns = columns_possible && lines >= warp_threads / 2 && count >= warps;
  p.units = p.columns ? (lines + warp_threads - 1) / warp_threads : lines;
  std::int64_t const part_min = p.columns ? warps * 4            // 4 steps a warp
                                          : block_threads * 16;  // 16 values a thread
  if (!p.columns && (2 * lines > resident || count < 2 * part_min)) return {};
  p.chunks = std::max<std::int64_t>(1, std::min((resident + p.units - 1) / p.units, count / part_min));
  p.chunk = (count + p.chunks - 1) / p.chunks;
  if (!p.columns) p.chunk = (p.chunk + 15) / 16 * 16;  // as aligned as the line, for vector loads
  p.chunks = (count + p.chunk - 1) / p.chunk;          // none of them empty
  return p;
}

// Runs the reduction `ev` (the kernel's root, with no reduction fused in its input) apart when
// one of the kernels above serves it better than lines_kernel; false if it does not.
template <class OutT, auto E, class Op, class Child, int D, int F, int NA>
bool fold_apart(BasicTensor<OutT, E, Cuda>& out, ReduceEval<Op, Child, D, F, NA>& ev) {
  using Ev = ReduceEval<Op, Child, D, F, NA>;
  std::int64_t const resident = resident_blocks();
  Index<D> const& dom = out.shape();
  std::int64_t const lines = numel_of<D>(dom);
  // (A transposed input, whose rows are its columns, is read along its lines by lines_kernel.)
  bool const columns = !ev.block && F > 1 && ev.src[F - 1] >= 0 && ev.child.runs(F - 1, ev.fdom);
  Parts const p = parts_for(lines, ev.count, resident, columns);
  if (p.chunks == 0) return false;
  GroupLinks links;  // a block per part; no records: nothing but the reduction is written
  ev.link(links);
  links.resolve();
  bool const whole = p.columns && p.chunks == 1;  // stored by columns_kernel
  std::shared_ptr<typename Ev::A> partials;
  if (!whole) partials = cuda_allocate<typename Ev::A>(lines * p.chunks);
  cudaStream_t s = solder::cuda::stream();
  auto const blocks = static_cast<unsigned>(std::min(p.units * p.chunks, resident));
  auto const chunks = static_cast<int>(p.chunks);
  if constexpr (F > 1) {  // (a rank-1 input has no columns: no kernel built for them)
    if (p.columns)
      columns_kernel<D, Ev><<<blocks, block_threads, 0, s>>>(
          ev, partials.get(), out.data(), out.strides(), dom, lines, chunks, p.chunk);
  }
  if (!p.columns)
    chunk_kernel<D, Ev><<<blocks, block_threads, 0, s>>>(ev, partials.get(), dom, lines, chunks,
                                                         p.chunk);
  SOLDER_CUDA_CHECK(cudaGetLastError());
  if (whole) return true;
  merge_kernel<D, Ev><<<grid_for(lines), block_threads, 0, s>>>(
      static_cast<typename Ev::A const*>(partials.get()), out.data(), out.strides(), dom, lines,
      chunks, ev.count);
  SOLDER_CUDA_CHECK(cudaGetLastError());
  return true;
}

// One element of a full reduction's input, as the reduction's first step sees it.
template <class Op, class A, class Child, int F>
struct StepAt {
  Child child;  // positioned at the start (contiguous) or walked by index
  Index<F> fdom;
  bool contiguous;
  __device__ A operator()(std::int64_t n) const {
    if (contiguous) return Op::step(Op::template identity<A>(), child.line(n), n);
    Index<F> idx;
    unravel_all<F>(n, fdom, idx);
    return Op::step(Op::template identity<A>(), child.at(idx), n);
  }
};

template <class Op, class A, class OutT>
__global__ void finalize_kernel(A const* acc, OutT* out, std::int64_t count) {
  *out = static_cast<OutT>(Op::finalize(*acc, count));
}

// A reduction of everything into one value: CUB's device-wide reduce over the fused input
// (deterministic for a given device). Split: a reduction nested in the input (a full var's
// mean) runs first, as a kernel of its own (a run-time break), and the input reads its result.
// (Op is deduced and A read from the evaluator, not from the node's member aliases: see
// element_of in backend/eval.hpp.)
template <bool Split, class OutTensor, class Op, class C, int NA, bool K, bool T>
void device_reduce(OutTensor& out, Reduce<Op, C, NA, K, T> const& root, Temps& temps) {
  constexpr int F = C::rank;
  Index<F> const& fdom = root.input.shape();
  auto child = make_eval<F, true, Split>(root.input, fdom, temps);
  using A = typename Op::template acc<element_of<decltype(child)>>;
  bool contiguous = child.contiguous(0, fdom);
  child.begin_line(Index<F>{});
  StepAt<Op, A, decltype(child), F> step{child, fdom, contiguous};
  auto in = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), step);
  cudaStream_t s = solder::cuda::stream();
  auto acc = cuda_allocate<A>(1);
  std::size_t scratch_bytes = 0;
  SOLDER_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, scratch_bytes, in, acc.get(), root.count,
                                              MergeOp<Op>{}, Op::template identity<A>(), s));
  auto scratch = cuda_allocate<unsigned char>(static_cast<std::int64_t>(scratch_bytes));
  SOLDER_CUDA_CHECK(cub::DeviceReduce::Reduce(scratch.get(), scratch_bytes, in, acc.get(),
                                              root.count, MergeOp<Op>{}, Op::template identity<A>(), s));
  finalize_kernel<Op, A><<<1, 1, 0, s>>>(acc.get(), out.data(), root.count);
  SOLDER_CUDA_CHECK(cudaGetLastError());
}

template <class T, class F>
__global__ void __launch_bounds__(block_threads) fill_kernel(T* p, std::int64_t n, F f) {
  std::int64_t const step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    p[i] = f(i);
}

template <class T, class F>
void fill(T* p, std::int64_t n, F f) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), block_threads, 0, solder::cuda::stream()>>>(p, n, f);
  SOLDER_CUDA_CHECK(cudaGetLastError());
}

// Runs the kernel rooted at `root` (a fused expression, already shape-checked) into `out`, as
// its configuration (plan.hpp: configure, with device_rules<Cuda> below) says.
template <class OutTensor, class N>
void run_kernel(OutTensor& out, N const& root) {
  constexpr int D = N::rank;
  Index<D> const& dom = out.shape();
  if (numel_of<D>(dom) == 0) return;
  KernelConfig<D> const config = configure(root);
  Temps temps;  // breaks' storage: freed in stream order after this kernel
  if constexpr (N::kind == NodeKind::reduce) {
    using C = child_t<N>;
    // CUB, device-wide. Only for a reduction over all dims: its kernels are the largest built
    // for a reduction, and one over some dims that meets a single output at run time ([1, n]
    // summed over dim 1) runs as well in chunks (fold_apart).
    if constexpr (N::naxes == C::rank) {
      if (config.split == RunTimeBreak::few_long_lines) {
        device_reduce<has_fused_reduce<C, C::rank, true>()>(out, root, temps);
        return;
      }
    }
  }
  if constexpr (may_split<N>()) {
    if (config.split != RunTimeBreak::none) {  // the reductions get kernels of their own
      if constexpr (N::kind == NodeKind::reduce) {
        auto ev = make_reduce_eval<D, true>(root, temps);
        if (!fold_apart(out, ev)) launch(out, ev, Lines<D>{});
      } else {
        auto ev = make_eval<D, false, true>(root, dom, temps);
        launch(out, ev, Lines<D>{});
      }
      return;
    }
  }
  auto ev = make_eval<D, false, false, shared_root<N, D>>(root, dom, temps);
  if constexpr (N::kind == NodeKind::reduce) {  // (a nested one would be folded again for every part)
    using C = child_t<N>;
    if constexpr (!has_fused_reduce<C, C::rank, true>())
      if (fold_apart(out, ev)) return;
  }
  launch<static_line<N, OutTensor>()>(out, ev, config.lines);
}

}  // namespace solder::detail::cuda

namespace solder::detail {

// The GPU's own run-time break (RunTimeBreak::few_long_lines): a kernel with few lines that
// folds a long input (softmax over [4, 10^7], the var of a vector, sqrt(mean(x * x))). A block per
// line would leave most of the GPU idle, so each reduction runs on its own, over all of the GPU
// (device-wide when it folds all dims, in chunks otherwise), and the rest reads their results.
template <>
struct device_rules<Cuda> {
  static constexpr bool may_split = true;
  static constexpr bool fuses_prologue = false;  // contractions read their operands from memory
  // cuBLASLt's own epilogues and cuDNN's fused bias, residual and activation (epilogue.hpp);
  // any other rest runs after the anchor, as an element-wise kernel that reads it
  // (backend/cuda/contract.hpp). The other anchors' engines (solder's pool, embedding and
  // attention kernels) take no epilogue.
  template <class N>
  static constexpr bool fuses_epilogue() {
    return N::kind == NodeKind::contract || cuda::lt_epilogue<N>::value || cuda::dnn_epilogue<N>::value;
  }
  // Why the anchor of the kernel rooted at `root` is a kernel of its own (explain).
  template <class N>
  static std::string unfused_epilogue(N const& root) {
    std::string why;
    with_anchor<N::rank>(root, [&](auto const& anchor) {
      if constexpr (is_matmul<std::remove_cvref_t<decltype(anchor)>>)
        why = "the element-wise rest runs after the product: cuBLAS does not take this epilogue";
      else
        why = "the element-wise rest runs after " + std::string(anchor.name()) +
              ", which is stored first: its engine on the GPU does not take this epilogue";
    });
    return why;
  }
  // Fewer lines than this, with a fold of at least long_line_min values: a block per line
  // would use fewer than 1 in 16 of an H100's blocks.
  static constexpr std::int64_t few_lines = 64;
  static constexpr std::int64_t long_line_min = 1 << 16;
  template <int D, class N>
  static RunTimeBreak split(N const& root, Lines<D> const& lines, Index<D> const& domain) {
    std::int64_t longest = 0, outer = 1;
    for_each_fused_reduce<D, false>(root, [&](auto const& r) { longest = std::max(longest, r.count); });
    for (int i = 0; i < D; ++i)
      if (!lines.axis[i]) outer *= domain[i];
    return outer < few_lines && longest >= long_line_min ? RunTimeBreak::few_long_lines
                                                         : RunTimeBreak::none;
  }
};

}  // namespace solder::detail
