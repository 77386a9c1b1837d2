// The host executor: runs one planned kernel as OpenMP loops. Four shapes of loop, chosen
// at run time among compiled variants (STYLE.md §2):
//   * contiguous runs: the inputs and the output walk a trailing block of axes as one run
//     (the whole tensor when everything is contiguous) with a vectorized inner loop;
//   * lines: fused reductions are prepared once per line, then the line is written
//     (softmax, layer norm: reductions broadcast back along the axes they reduced);
//   * columns: a reduction whose input ends in kept dims folds a tile of outputs a row at a
//     time (column sums, sum(x, 1) of [B, T, C]);
//   * general: any strides and broadcasts, index by index.
// Only the loops a kernel can take are compiled for it (LineKind): a reduction at the root never
// writes runs. Work is split statically over threads, so results are deterministic for a
// thread count; small kernels never fork threads. Large outputs of kernels bound by memory are
// written with non-temporal stores (store_run).
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "evaluators.hpp"
#include "gemm.hpp"

namespace solder::detail::host {

inline constexpr std::int64_t parallel_threshold = 32768;  // elements: below, one thread

template <int D>
void unravel(std::int64_t o, std::array<bool, D> const& inner, Index<D> const& dom,
             Index<D>& idx) {
  for (int a = D - 1; a >= 0; --a) {
    if (inner[a]) {
      idx[a] = 0;
      continue;
    }
    idx[a] = o % dom[a];
    o /= dom[a];
  }
}

// This thread's share [begin, end) of n items, in whole multiples of `grain`.
inline std::array<std::int64_t, 2> my_share(std::int64_t n, std::int64_t grain) {
  int t = 0, threads = 1;
#if defined(_OPENMP)
  t = omp_get_thread_num();
  threads = omp_get_num_threads();
#endif
  std::int64_t chunk = ((n + threads - 1) / threads + grain - 1) / grain * grain;
  std::int64_t b = std::min(n, t * chunk);
  return {b, std::min(n, b + chunk)};
}

// out[j] = the line's value b + j for j in [0, n), its inputs read the way R says: the
// vectorized loop, one compiled variant per Read.
template <Read R, class Out, class Ev>
SOLDER_INLINE void write_run(Out out, Ev const& e, std::int64_t b, std::int64_t n) {
  using OutT = out_value_t<Out>;
  SOLDER_SIMD
  for (std::int64_t j = 0; j < n; ++j) out[j] = static_cast<OutT>(e.template line<R>(b + j));
}

// Large outputs of kernels bound by memory are streamed past the caches: the output would not
// stay there anyway, and a plain store first reads its cache line from memory, a third of the
// traffic. The loop writes a chunk into a buffer in L1, copied out with non-temporal stores.
// Light: the kernel has no heavy maths (ops::Heavy; kernels bound by arithmetic were 5% slower
// so), and only then is the streaming loop compiled; `stream` says whether this output is.
inline constexpr std::int64_t stream_chunk_bytes = 4096;

// The size of one last-level cache (cache_sizes, gemm.hpp: sysfs, 32 MiB where it cannot be
// read): outputs of at least this many bytes are streamed. A reference, so that tests can
// lower it.
inline std::int64_t& stream_min_bytes() {
  static std::int64_t bytes = cache_sizes().last;
  return bytes;
}

// Copies `bytes` bytes to out: 64-byte blocks of out with non-temporal stores, the rest
// plainly. (Not inlined: one copy serves every kernel.)
[[gnu::noinline]] inline void stream_copy(void* out, void const* from, std::int64_t bytes) {
  auto* d = static_cast<unsigned char*>(out);
  auto const* s = static_cast<unsigned char const*>(from);
  std::int64_t const head = std::min<std::int64_t>(bytes, (0 - reinterpret_cast<std::uintptr_t>(d)) % 64);
  std::int64_t const body_end = head + (bytes - head) / 64 * 64;
  std::memcpy(d, s, static_cast<std::size_t>(head));
  for (std::int64_t i = head; i < body_end; i += 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
#elif defined(__AVX__)
    for (int k = 0; k < 64; k += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + k),
                          _mm256_loadu_si256(reinterpret_cast<__m256i const*>(s + i + k)));
#elif defined(__SSE2__)
    for (int k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + k),
                       _mm_loadu_si128(reinterpret_cast<__m128i const*>(s + i + k)));
#else
    std::memcpy(d + i, s + i, 64);
#endif
  }
  std::memcpy(d + body_end, s + body_end, static_cast<std::size_t>(bytes - body_end));
}

// write_run, streamed when `stream`: a chunk at a time into a buffer, copied out. (One call
// of the inlined loop for both: a second would cost every light kernel its compile time.)
// Several outputs are never streamed (run_eval).
template <bool Light, Read R, class Out, class Ev>
SOLDER_INLINE void store_run(Out out, Ev const& e, std::int64_t b, std::int64_t n, bool stream) {
  if constexpr (Light && std::is_pointer_v<Out>) {
    using OutT = out_value_t<Out>;
    alignas(64) OutT buffer[stream_chunk_bytes / sizeof(OutT)];
    std::int64_t const chunk = stream ? std::int64_t(stream_chunk_bytes / sizeof(OutT)) : n;
    for (std::int64_t c = 0; c < n; c += chunk) {
      std::int64_t m = std::min(chunk, n - c);
      write_run<R>(stream ? buffer : out + c, e, b + c, m);
      if (stream) stream_copy(out + c, buffer, m * std::int64_t(sizeof(OutT)));
    }
  } else {
    write_run<R>(out, e, b, n);
  }
}
// store_run on a copy of `ev` (kept in registers): out[j] = the value b + j of the line ev is
// at, for j in [0, n). One copy per kernel type, out of line, for the callers that write a run
// in parts (threads' shares, chunks of repeating inputs).
template <bool Light, class Out, class Ev>
[[gnu::noinline]] void write_part(Out out, Ev const& ev, std::int64_t b, std::int64_t n,
                                  bool stream) {
  Ev e = ev;
  store_run<Light, Read::plain>(out, e, b, n, stream);
}
// Streamed stores are weakly ordered: each thread fences its own before the output is read.
SOLDER_INLINE void end_stores(bool stream) {
#if defined(__SSE2__)
  if (stream) _mm_sfence();
#endif
}

// Element-wise kernels whose inputs repeat along their lines (Read::repeat): the plain loop a
// chunk at a time, each repeating input reading a buffer of its value (RepeatInputs). These
// work on a copy of the evaluator of their own: collecting its inputs takes their addresses,
// which in write_lines would keep its copy in memory instead of registers.
inline constexpr std::int64_t repeat_chunk = 1024;  // a few KiB of each repeating value, in L1

// out[b, end) of the line e is at.
template <bool Light, class Out, class Ev>
void write_repeating(Out out, Ev const& e, RepeatInputs& in, std::int64_t b, std::int64_t end,
                     bool stream) {
  in.begin(std::min(repeat_chunk, end - b));
  in.advance(b);
  for (std::int64_t c = b; c < end; c += repeat_chunk) {
    write_part<Light>(out + c, e, 0, std::min(repeat_chunk, end - c), stream);
    in.advance(repeat_chunk);
  }
}

// Lines [o_begin, o_end) of the output, contiguous lines of len.
template <bool Light, int D, class Out, class Ev>
void write_repeating_lines(Ev const& ev, Out out, Index<D> const& ost, Index<D> const& dom,
                           std::array<bool, D> const& inner, std::int64_t len, std::int64_t o_begin,
                           std::int64_t o_end, bool stream) {
  Ev e = ev;
  RepeatInputs in(e, std::min(len, repeat_chunk));
  Index<D> idx{};
  for (std::int64_t o = o_begin; o < o_end; ++o) {
    unravel<D>(o, inner, dom, idx);
    e.begin_line(idx);
    write_repeating<Light>(out + dot<D>(idx, ost), e, in, 0, len, stream);
  }
}

// out[b, end) of the one line at `at`, a thread's share of it.
template <bool Light, int D, class Out, class Ev>
void write_repeating_share(Ev const& ev, Out out, Index<D> const& at, std::int64_t b,
                           std::int64_t end, bool stream) {
  Ev e = ev;
  RepeatInputs in(e, repeat_chunk);
  e.begin_line(at);
  write_repeating<Light>(out, e, in, b, end, stream);
}

// What a kernel's lines can be, known at compile time: only the loops that can run are
// compiled (each is a vectorized loop or two per kernel type).
enum class LineKind {
  outputs,      // one output each: a reduction at the kernel's root
  runs,         // contiguous runs too: no reduction fused, so no input is shared
  shared_runs,  // contiguous runs whose shared inputs may be recorded (Read::shared)
};

// Lines [o_begin, o_end) of the output: prepare each line's reductions, then write it.
// Works on its own copy of the evaluator: a local whose address never escapes, so the
// compiler keeps its per-line values (reductions, pointers) in registers and hoists what
// depends only on them (layer norm's rsqrt) out of the vectorized loop.
template <bool Light, LineKind K, int D, class Out, class Ev>
void write_lines(Ev const& ev, Out out, Index<D> const& ost, Index<D> const& dom,
                 std::array<bool, D> const& inner, bool contiguous, Read read, bool stream,
                 std::int64_t len, std::int64_t o_begin, std::int64_t o_end) {
  if constexpr (K != LineKind::outputs) {
    if (contiguous && read == Read::repeat)
      return write_repeating_lines<Light, D>(ev, out, ost, dom, inner, len, o_begin, o_end, stream);
  }
  Ev e = ev;
  Links links;  // the copy's reductions link to each other, shared inputs to their records
  if (contiguous) links.set_line(len, dom);
  e.link(links);
  bool const shared = links.resolve();
  if constexpr (K == LineKind::shared_runs)
    if (shared) read = Read::shared;
  // The next line's inputs and output are requested while this one is computed: the hardware
  // prefetcher stops at page boundaries, and a line of a few KiB is a page or two. (Short lines
  // would pay more for it than they wait; long ones stream.)
  using OutT = out_value_t<Out>;
  constexpr std::int64_t out_size = sizeof(OutT);
  bool prefetch = contiguous && len * out_size >= prefetch_min && len * out_size <= prefetch_max;
  bool prefetch_out = prefetch && !stream;  // streamed stores go around the cache
  Index<D> idx{}, next{};
  if (o_begin < o_end) unravel<D>(o_begin, inner, dom, idx);
  for (std::int64_t o = o_begin; o < o_end; idx = next, ++o) {
    bool more = o + 1 < o_end;
    if (more) unravel<D>(o + 1, inner, dom, next);  // once per line, for the prefetch and the loop
    if (prefetch && more) {
      e.prefetch_line(next, len);
      if (prefetch_out) prefetch_run(out + dot<D>(next, ost), len, true);
    }
    e.prepare(idx);
    if constexpr (K != LineKind::outputs) {
      if (contiguous) {
        e.begin_line(idx);
        Out op = out + dot<D>(idx, ost);
        if constexpr (K == LineKind::shared_runs) {
          if (read == Read::shared) {
            store_run<Light, Read::shared>(op, e, 0, len, stream);
            continue;
          }
        }
        store_run<Light, Read::plain>(op, e, 0, len, stream);
        continue;
      }
    }
    for (std::int64_t j = 0; j < len; ++j) {  // odometer over the inner axes
      out[dot<D>(idx, ost)] = static_cast<OutT>(e.at(idx));
      for (int a = D - 1; a >= 0; --a) {
        if (!inner[a]) continue;
        if (++idx[a] < dom[a]) break;
        idx[a] = 0;
      }
    }
  }
}

// Writes `ev` over the output tensor. `inner` marks the axes walked inside one line;
// `contiguous` says those axes form a trailing block that every input and the output walk
// as one run, read the way `read` says, its stores streamed when `stream`. Serial kernels
// never enter an OpenMP region (entering one costs microseconds).
template <bool Light, LineKind K, int D, class Out, class Ev>
void drive(Out out, Index<D> const& ost, Index<D> const& dom, Ev& ev,
           std::array<bool, D> const& inner, bool contiguous, Read read, bool stream,
           std::int64_t work) {
  std::int64_t len = 1, outer = 1;
  for (int a = 0; a < D; ++a) (inner[a] ? len : outer) *= dom[a];
  if (len == 0 || outer == 0) return;
  int threads = work >= parallel_threshold ? get_num_threads() : 1;

  if (threads == 1) {
    ev.set_split(false);
    write_lines<Light, K, D>(ev, out, ost, dom, inner, contiguous, read, stream, len, 0, outer);
    end_stores(stream);
    return;
  }
  if constexpr (K != LineKind::outputs) {
    if (outer == 1 && contiguous) {
      // One long run: prepare it once, then split the run itself across threads.
      ev.set_split(false);
      Links links;
      ev.link(links);
      Index<D> zero{};
      ev.prepare(zero);
      SOLDER_OMP(parallel) {
        auto [b, end] = my_share(len, 16);  // whole cache lines
        if (read == Read::repeat) {
          write_repeating_share<Light, D>(ev, out, zero, b, end, stream);
        } else {
          Ev e = ev;
          e.begin_line(zero);
          write_part<Light>(out + b, e, b, end - b, stream);
        }
        end_stores(stream);
      }
      return;
    }
  }
  if (outer < threads) {
    // Too few lines to share out: a lone reduction splits its own work instead.
    ev.set_split(true);
    write_lines<Light, K, D>(ev, out, ost, dom, inner, contiguous, read, stream, len, 0, outer);
    end_stores(stream);
  } else {
    ev.set_split(false);
    SOLDER_OMP(parallel) {
      auto [b, end] = my_share(outer, 1);
      write_lines<Light, K, D>(ev, out, ost, dom, inner, contiguous, read, stream, len, b, end);
      end_stores(stream);
    }
  }
}

// Decides the loop for a built evaluator and runs it. Light: the kernel has no ops::Heavy maths;
// K: runs, or shared_runs where a reduction is fused.
template <bool Light, LineKind K, class OutTensor, class Ev>
void run_eval(OutTensor& out, Ev& ev, Lines<OutTensor::rank> const& lines, std::int64_t work) {
  constexpr int D = OutTensor::rank;
  using OutT = typename OutTensor::value_type;
  Index<D> const& dom = out.shape();
  std::array<bool, D> inner{};
  bool contiguous = false;
  Read read = Read::plain;
  if (lines.any()) {  // reductions broadcast along their lines
    inner = lines.axis;
    int first = D;
    while (first > 0 && inner[first - 1]) --first;
    bool trailing = std::count(inner.begin(), inner.end(), true) == D - first;
    contiguous = trailing && ev.contiguous(first, dom) && contiguous_from<D>(first, out.strides(), dom);
  } else if constexpr (K == LineKind::runs) {  // element-wise: the longest trailing block as one run
    auto run_start = [&](auto walks) {
      int from = D;
      while (from > 0 && walks(from - 1) && contiguous_from<D>(from - 1, out.strides(), dom)) --from;
      return from;
    };
    int plain = run_start([&](int a) { return ev.contiguous(a, dom); });
    int any = run_start([&](int a) { return ev.runs(a, dom); });  // broadcast inputs repeat
    int from = std::min(plain, any);
    if (any < plain) read = Read::repeat;
    if (from < D || D == 0) {
      for (int a = from; a < D; ++a) inner[a] = true;
      contiguous = true;
    } else if constexpr (D > 0) {
      inner[D - 1] = true;
    }
  }  // else: a reduction kernel, one output per line
  std::int64_t const out_bytes = numel_of<D>(dom) * std::int64_t(sizeof(OutT));
  bool stream = Light && std::is_pointer_v<decltype(out.data())> && contiguous && out_bytes >= stream_min_bytes();
  drive<Light, K, D>(out.data(), out.strides(), dom, ev, inner, contiguous, read, stream, work);
}

// A reduction at the kernel's root: one output per line, each folded in prepare().
template <class OutTensor, class Ev>
void run_reduce(OutTensor& out, Ev& ev, std::int64_t work) {
  constexpr int D = OutTensor::rank;
  drive<false, LineKind::outputs, D>(
      out.data(), out.strides(), out.shape(), ev, std::array<bool, D>{}, false, Read::plain, false,
      work);
}

// A reduction whose input ends in kept dims that are one contiguous run (column sums, sum(x, 1)
// of [B, T, C]), into a contiguous output: outputs are folded side by side, a row at a time,
// instead of each walking its column with a stride; threads share out the outputs. Each output takes its terms
// in the same order as in prepare(), so the results are the same. False: not that shape.
template <class OutTensor, class Ev>
bool write_columns(OutTensor& out, Ev const& ev, std::int64_t work) {
  constexpr int D = OutTensor::rank;
  std::int64_t m = ev.columns();
  if (m < 0 || !contiguous_from<D>(0, out.strides(), out.shape())) return false;
  auto* o = out.data();
  if (work < parallel_threshold || get_num_threads() == 1) {
    ev.write_columns(o, 0, m);
    return true;
  }
  SOLDER_OMP(parallel) {
    auto [b, e] = my_share(m, 16);
    ev.write_columns(o, b, e);
  }
  return true;
}

// Runs the kernel rooted at `root` (a fused expression, already shape-checked) into `out`, as
// its configuration (plan.hpp: configure) says.
template <class OutTensor, class N>
void run_kernel(OutTensor& out, N const& root) {
  constexpr int D = N::rank;
  Index<D> const& dom = out.shape();
  KernelConfig<D> const config = configure(root);
  Temps temps;
  if constexpr (may_split<N>()) {
    if (config.split != RunTimeBreak::none) {  // the reductions get kernels of their own
      if constexpr (N::kind == NodeKind::reduce) {
        auto ev = make_reduce_eval<D, true>(root, temps);
        if (!write_columns(out, ev, config.work)) run_reduce(out, ev, config.work);
      } else {
        auto ev = make_eval<D, false, true>(root, dom, temps);
        run_eval<!heavy_maths<N, D, false>(), LineKind::runs>(out, ev, Lines<D>{}, config.work);
      }
      return;
    }
  }
  auto ev = make_eval<D, false, false, shared_root<N, D>>(root, dom, temps);
  if constexpr (N::kind == NodeKind::reduce) {  // (nested ones would need preparing per output: split)
    using C = child_t<N>;
    if constexpr (!has_fused_reduce<C, C::rank, true>())
      if (write_columns(out, ev, config.work)) return;
    run_reduce(out, ev, config.work);
  } else {
    constexpr auto kind = has_fused_reduce<N, D, false>() ? LineKind::shared_runs : LineKind::runs;
    run_eval<!heavy_maths<N, D, false>(), kind>(out, ev, config.lines, config.work);
  }
}

}  // namespace solder::detail::host
