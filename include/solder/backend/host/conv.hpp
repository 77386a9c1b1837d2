// The host engines of conv2d and the 2-d pools (expr/conv.hpp), kernel anchors like a matrix
// product (contract.hpp): each computes blocks of its output — runs of pixels (oh * OW + ow) of
// one or more channel planes — and hands them to the kernel's element-wise epilogue
// (store_planes), which writes them into the output from the cache. The engines' loops are
// templates of the element type only; the epilogue is a function pointer (Sink), so a new
// fused expression over a convolution compiles only its epilogue.
//   * conv2d: an implicit GEMM on the GEMM engine (gemm.hpp), one batch per group:
//     out^T[N * pixels, C_out/g] = cols^T[N * pixels, K] x W_g^T[K, C_out/g], K = C_in/g * kH * kW.
//     cols^T is never stored whole: a gemm::Producer (fill_patches) writes each block of it the
//     engine asks for straight from x, zeros for the padding; W^T is the weight read in place
//     (w seen as [C_out, K] is contiguous). A 1x1 convolution with stride 1 and no padding is a
//     plain product: x of image n seen as [pixels, C_in] is strided memory (batch = N).
//     The engine's blocks are [pixels x channels]; they go to the epilogue transposed a tile at
//     a time, so that the epilogue writes contiguous runs of the NCHW output.
//   * depthwise conv2d (groups == C_in > 1; C_out a multiple of it): direct, per output plane a
//     block of rows at a time, tap by tap over each row (vectorized along ow).
//   * pools: direct loops per (image, channel) plane, a block of rows at a time.
// The direct engines' threads share out (plane, row block) tasks statically; every output is
// computed by one task in a fixed order, so results do not depend on the thread count (the
// GEMM engine's are deterministic for a thread count). Small problems run on the calling
// thread.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "../../expr/conv.hpp"
#include "contract.hpp"

namespace solder::detail::host {

namespace conv {

// An [N, C, H, W] (or [C, H, W]: N = 1) operand in memory, any strides.
template <class T>
struct Planes {
  T const* data;
  std::int64_t n, c, h, w;
  std::int64_t sn, sc, sh, sw;
  T const* plane(std::int64_t i, std::int64_t ch) const { return data + i * sn + ch * sc; }
};
template <class TT>
Planes<typename TT::value_type> planes(TT const& t) {
  constexpr int R = TT::rank;
  auto const &s = t.shape(), &st = t.strides();
  return {t.data(), R == 4 ? s[0] : 1, s[R - 3], s[R - 2], s[R - 1],
          R == 4 ? st[0] : 0, st[R - 3], st[R - 2], st[R - 1]};
}

// Receives blocks of the output: `channels` planes of image n, channel c0 + k's pixels
// [p0, p0 + len) at v + k * ldv.
template <class T>
struct Sink {
  void (*store)(void* ctx, std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0,
                std::int64_t len, T const* v, std::int64_t ldv);
  void* ctx;
  void operator()(std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0, std::int64_t len,
                  T const* v, std::int64_t ldv) const {
    store(ctx, n, c0, channels, p0, len, v, ldv);
  }
};

// The output columns [lo, hi) whose tap at offset `off` (input column ox * s + off) lies in
// [0, w): the rest read padding.
inline std::array<std::int64_t, 2> inside(std::int64_t off, std::int64_t s, std::int64_t w, std::int64_t ow) {
  std::int64_t const lo = off < 0 ? std::min(ow, (-off + s - 1) / s) : 0;
  std::int64_t const hi = w - 1 - off < 0 ? 0 : std::min(ow, (w - 1 - off) / s + 1);
  return {lo, std::max(lo, hi)};
}

// f(ox, row[first + ox * step]) for ox in [lo, hi): one tap of the kernel along an output row.
// Steps 1 and 2 (stride 1 or 2 over contiguous rows) are loops of their own, with constant
// steps the compiler vectorizes; any other step reads element by element.
template <class T, class F>
SOLDER_INLINE void along_row(T const* row, std::int64_t first, std::int64_t step, std::int64_t lo,
                             std::int64_t hi, F const& f) {
  if (step == 1) {
    for (std::int64_t ox = lo; ox < hi; ++ox) f(ox, row[first + ox]);
  } else if (step == 2) {
    for (std::int64_t ox = lo; ox < hi; ++ox) f(ox, row[first + 2 * ox]);
  } else {
    for (std::int64_t ox = lo; ox < hi; ++ox) f(ox, row[first + ox * step]);
  }
}

// f(buffer, n, c, y0, y1) for every image n, channel c and block [y0, y1) of output rows, the
// threads sharing the blocks statically; the buffer holds a block (rows of ow), the thread's.
// `work`: the values read, which decides the threads.
inline constexpr std::int64_t block_values = 4096;
template <class T, class F>
void for_row_blocks(std::int64_t images, std::int64_t channels, std::int64_t oh, std::int64_t ow,
                    std::int64_t work, F const& f) {
  if (images == 0 || channels == 0 || oh == 0 || ow == 0) return;
  std::int64_t const rows = std::clamp<std::int64_t>(block_values / ow, 1, oh);
  std::int64_t const per_plane = (oh + rows - 1) / rows, tasks = images * channels * per_plane;
  [[maybe_unused]] bool const parallel = work >= parallel_threshold && tasks > 1 && get_num_threads() > 1;
  SOLDER_OMP(parallel if(parallel)) {
    std::vector<T> buffer(static_cast<std::size_t>(rows * ow));
    SOLDER_OMP(for schedule(static))
    for (std::int64_t t = 0; t < tasks; ++t) {
      std::int64_t const plane = t / per_plane, y0 = t % per_plane * rows;
      f(buffer.data(), plane / channels, plane % channels, y0, std::min(oh, y0 + rows));
    }
  }
}

// ---- conv2d on the GEMM engine --------------------------------------------------------------

// The patch matrix cols^T of group g: row i = (n, oy, ox) over the output pixels of all images,
// column k = (ci, a, b) over the group's channels and the kernel's taps; its value is
// x[n, g * cin + ci, oy * sh - ph + a * dh, ox * sw - pw + b * dw], 0 in the padding.
template <class T>
struct Patches {
  Planes<T> x;
  Window2d win;
  std::int64_t cin, oh, ow;  // channels per group; the output's rows and columns
};

// gemm::Producer: rows [i0, i0 + mc) x columns [k0, k0 + kc) of group g's patch matrix into dst,
// a chunk of columns at a time: rows whose window lies inside x read each column's tap at its
// offset, the others check each tap against the padding.
template <class T>
void fill_patches(void const* ctx, std::int64_t g, std::int64_t i0, std::int64_t k0, std::int64_t mc,
                  std::int64_t kc, T* dst, std::int64_t ld) {
  auto const& p = *static_cast<Patches<T> const*>(ctx);
  auto const& x = p.x;
  auto const& w = p.win;
  std::int64_t const taps = w.kh * w.kw, pixels = p.oh * p.ow;
  constexpr std::int64_t chunk = 128;
  std::int64_t off[chunk], dy[chunk], dx[chunk];  // per column: x's offset from the window's origin, its tap
  for (std::int64_t q0 = 0; q0 < kc; q0 += chunk) {
    std::int64_t const qn = std::min(chunk, kc - q0);
    std::int64_t k = k0 + q0, ci = k / taps, a = k % taps / w.kw, b = k % w.kw;
    for (std::int64_t q = 0; q < qn; ++q) {
      dy[q] = a * w.dh, dx[q] = b * w.dw;
      off[q] = ci * x.sc + dy[q] * x.sh + dx[q] * x.sw;
      if (++b == w.kw) {
        b = 0;
        if (++a == w.kh) a = 0, ++ci;
      }
    }
    std::int64_t n = i0 / pixels, oy = i0 % pixels / p.ow, ox = i0 % p.ow;
    for (std::int64_t r = 0; r < mc; ++r) {
      T* d = dst + r * ld + q0;
      std::int64_t const iy = oy * w.sh - w.ph, ix = ox * w.sw - w.pw;
      T const* src = x.plane(n, g * p.cin);
      std::int64_t const o = iy * x.sh + ix * x.sw;
      if (iy >= 0 && ix >= 0 && iy + (w.kh - 1) * w.dh < x.h && ix + (w.kw - 1) * w.dw < x.w) {
        SOLDER_SIMD  // (gathers where the ISA has them: 1.5x faster fills with AVX-512)
        for (std::int64_t q = 0; q < qn; ++q) d[q] = src[o + off[q]];
      } else {
        for (std::int64_t q = 0; q < qn; ++q) {
          std::int64_t const y = iy + dy[q], xx = ix + dx[q];
          d[q] = y >= 0 && y < x.h && xx >= 0 && xx < x.w ? src[o + off[q]] : T(0);
        }
      }
      if (++ox == p.ow) {
        ox = 0;
        if (++oy == p.oh) oy = 0, ++n;
      }
    }
  }
}

// Where the engine's blocks lie in the output: batch b's row i is pixel row_bs * b + i of all
// images' pixels (n * pixels + p), its column j channel col_bs * b + j.
template <class T>
struct GemmBlocks {
  Sink<T> sink;
  std::int64_t pixels, row_bs, col_bs;
};

// gemm::Epilogue: block [i0, i0 + mt) x [j0, j0 + nt) of batch b (c[r * ldc + q]), to the sink
// a tile of pixels x channels at a time, transposed (pixels contiguous), each tile within one
// image.
template <class T>
void store_gemm_block(void* ctx, std::int64_t b, std::int64_t i0, std::int64_t j0, std::int64_t mt,
                      std::int64_t nt, T const* c, std::int64_t ldc) {
  auto const& g = *static_cast<GemmBlocks<T> const*>(ctx);
  constexpr std::int64_t tile_pixels = 256, tile_channels = 16;
  alignas(64) T tile[tile_pixels * tile_channels];
  for (std::int64_t r = 0; r < mt;) {
    std::int64_t const row = g.row_bs * b + i0 + r, n = row / g.pixels, p = row % g.pixels;
    std::int64_t const len = std::min({tile_pixels, mt - r, g.pixels - p});
    for (std::int64_t q0 = 0; q0 < nt; q0 += tile_channels) {
      std::int64_t const nc = std::min(tile_channels, nt - q0);
      for (std::int64_t i = 0; i < len; ++i)
        for (std::int64_t q = 0; q < nc; ++q) tile[q * len + i] = c[(r + i) * ldc + q0 + q];
      g.sink(n, g.col_bs * b + j0 + q0, nc, p, len, tile, len);
    }
    r += len;
  }
}

// Depthwise: output channel co reads input channel co / mult, its taps w[co, 0, a, b].
template <class T>
void depthwise(Planes<T> const& x, Planes<T> const& w, Window2d const& win, std::int64_t oh, std::int64_t ow,
               Sink<T> const& sink) {
  std::int64_t const mult = w.n / x.c;
  for_row_blocks<T>(x.n, w.n, oh, ow, x.n * w.n * oh * ow * win.kh * win.kw,
                    [&](T* buf, std::int64_t n, std::int64_t co, std::int64_t y0, std::int64_t y1) {
    T const* src = x.plane(n, co / mult);
    T const* taps = w.plane(co, 0);
    for (std::int64_t y = y0; y < y1; ++y) {
      T* acc = buf + (y - y0) * ow;
      std::fill(acc, acc + ow, T(0));
      for (std::int64_t a = 0; a < win.kh; ++a) {
        std::int64_t const iy = y * win.sh - win.ph + a * win.dh;
        if (iy < 0 || iy >= x.h) continue;
        T const* row = src + iy * x.sh;
        for (std::int64_t b = 0; b < win.kw; ++b) {
          T const wv = taps[a * w.sh + b * w.sw];
          std::int64_t const off = b * win.dw - win.pw;
          auto const [lo, hi] = inside(off, win.sw, x.w, ow);
          along_row(row, off * x.sw, win.sw * x.sw, lo, hi, [&](std::int64_t ox, T v) { acc[ox] += wv * v; });
        }
      }
    }
    sink(n, co, 1, y0 * ow, (y1 - y0) * ow, buf, 0);
  });
}

// `pre`: the weight packed ahead of time, for the products (a weight read in place only).
template <class T>
void conv2d(Planes<T> const& x, Planes<T> const& w, Window2d const& win, std::int64_t groups, std::int64_t oh,
            std::int64_t ow, Sink<T> const& sink, gemm::Prepacked<T> pre = {}) {
  if (groups == x.c && groups > 1) return depthwise(x, w, win, oh, ow, sink);
  std::int64_t const pixels = oh * ow, cout = w.n / groups, k = w.c * w.h * w.w;
  bool const pointwise = w.h == 1 && w.w == 1 && win.sh == 1 && win.sw == 1 && win.ph == 0 && win.pw == 0 &&
                         groups == 1 && (x.h == 1 || x.sh == x.w * x.sw);
  if (pointwise) {  // x of image n as [pixels, C_in]: a plain product per image
    GemmBlocks<T> blocks{sink, pixels, pixels, 0};
    gemm::Left<T> left;
    left.memory = {x.data, x.sw, x.sc, x.sn};
    gemm::run<T>({x.n, pixels, cout, k}, left, {w.data, w.sc, w.sn, 0}, {&store_gemm_block<T>, &blocks}, pre);
    return;
  }
  // W^T read in place needs w's [C_in/g, kH, kW] as one run; else a contiguous copy (rare: a
  // view of a weight).
  std::vector<T> copy;
  Planes<T> wk = w;
  if (!((w.w == 1 || w.sw == 1) && (w.h == 1 || w.sh == w.w) && (w.c == 1 || w.sc == w.h * w.w))) {
    copy.resize(static_cast<std::size_t>(w.n * k));
    for (std::int64_t co = 0, i = 0; co < w.n; ++co)
      for (std::int64_t ci = 0; ci < w.c; ++ci)
        for (std::int64_t a = 0; a < w.h; ++a)
          for (std::int64_t b = 0; b < w.w; ++b)
            copy[static_cast<std::size_t>(i++)] = w.plane(co, ci)[a * w.sh + b * w.sw];
    wk = {copy.data(), w.n, w.c, w.h, w.w, k, w.h * w.w, w.w, 1};
    pre = {};  // (the copy is made anew each call)
  }
  Patches<T> const patches{x, win, w.c, oh, ow};
  GemmBlocks<T> blocks{sink, pixels, 0, cout};
  gemm::Left<T> left;
  left.producer = {&fill_patches<T>, &patches};
  gemm::run<T>({groups, x.n * pixels, cout, k}, left, {wk.data, 1, wk.sn, cout * wk.sn},
               {&store_gemm_block<T>, &blocks}, pre);
}

// ---- pools ----------------------------------------------------------------------------------

// max_pool2d and avg_pool2d: per output row, tap by tap, each tap's valid columns at once.
template <PoolKind K, class T>
void pool2d(Planes<T> const& x, PoolParams const& p, std::int64_t oh, std::int64_t ow, Sink<T> const& sink) {
  auto const& w = p.win;
  for_row_blocks<T>(x.n, x.c, oh, ow, x.n * x.c * oh * ow * w.kh * w.kw,
                    [&](T* buf, std::int64_t n, std::int64_t c, std::int64_t y0, std::int64_t y1) {
    T const* src = x.plane(n, c);
    for (std::int64_t y = y0; y < y1; ++y) {
      T* acc = buf + (y - y0) * ow;
      std::fill(acc, acc + ow, K == PoolKind::max ? -std::numeric_limits<T>::infinity() : T(0));
      for (std::int64_t a = 0; a < w.kh; ++a) {
        std::int64_t const iy = y * w.sh - w.ph + a * w.dh;
        if (iy < 0 || iy >= x.h) continue;
        T const* row = src + iy * x.sh;
        for (std::int64_t b = 0; b < w.kw; ++b) {
          std::int64_t const off = b * w.dw - w.pw;
          auto const [lo, hi] = inside(off, w.sw, x.w, ow);
          along_row(row, off * x.sw, w.sw * x.sw, lo, hi, [&](std::int64_t ox, T v) {
            if constexpr (K == PoolKind::max) acc[ox] = (v > acc[ox]) | (v != v) ? v : acc[ox];  // NaN wins
            else acc[ox] += v;
          });
        }
      }
      if constexpr (K == PoolKind::avg) {  // PyTorch's divisor: the window clipped to the padded input, or the input
        std::int64_t const y_0 = y * w.sh - w.ph, y_1 = std::min(y_0 + w.kh, x.h + w.ph);
        std::int64_t const rows =
            p.count_include_pad ? y_1 - y_0 : std::min(y_1, x.h) - std::max<std::int64_t>(y_0, 0);
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          std::int64_t const x_0 = ox * w.sw - w.pw, x_1 = std::min(x_0 + w.kw, x.w + w.pw);
          std::int64_t const cols =
              p.count_include_pad ? x_1 - x_0 : std::min(x_1, x.w) - std::max<std::int64_t>(x_0, 0);
          acc[ox] /= static_cast<T>(p.divisor ? p.divisor : rows * cols);
        }
      }
    }
    sink(n, c, 1, y0 * ow, (y1 - y0) * ow, buf, 0);
  });
}

// adaptive_avg_pool2d: output (y, ox) averages rows [y * H / OH, ceil((y + 1) * H / OH)) and
// the columns likewise.
template <class T>
void adaptive_avg_pool2d(Planes<T> const& x, std::int64_t oh, std::int64_t ow, Sink<T> const& sink) {
  for_row_blocks<T>(x.n, x.c, oh, ow, x.n * x.c * x.h * x.w,
                    [&](T* buf, std::int64_t n, std::int64_t c, std::int64_t y0, std::int64_t y1) {
    T const* src = x.plane(n, c);
    for (std::int64_t y = y0; y < y1; ++y) {
      std::int64_t const r0 = y * x.h / oh, r1 = ((y + 1) * x.h + oh - 1) / oh;
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        std::int64_t const c0 = ox * x.w / ow, c1 = ((ox + 1) * x.w + ow - 1) / ow;
        T sum = 0;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t q = c0; q < c1; ++q) sum += src[r * x.sh + q * x.sw];
        buf[(y - y0) * ow + ox] = sum / static_cast<T>((r1 - r0) * (c1 - c0));
      }
    }
    sink(n, c, 1, y0 * ow, (y1 - y0) * ow, buf, 0);
  });
}

}  // namespace conv

// ---- the epilogue ---------------------------------------------------------------------------

// The kernel's element-wise rest over blocks of a [.., C, OH, OW] anchor. `from` is the first
// axis of the runs it writes: D - 2 when the inputs and the output walk whole planes as one
// run, D - 1 for rows, D for element by element; `repeat`: some input repeats one value along
// a run (a per-channel [1, C, 1, 1]) and is read from a buffer (Read::repeat).
template <class Ev, class OutT, int D>
struct PlaneEpilogue {
  Ev const* ev;
  OutT* out;
  Index<D> ost;
  std::int64_t ow;
  int from;
  bool repeat;
};

template <class T, class Ev, class OutTensor>
PlaneEpilogue<Ev, typename OutTensor::value_type, OutTensor::rank> plane_epilogue(Ev& ev, OutTensor& out) {
  constexpr int D = OutTensor::rank;
  Index<D> const& dom = out.shape();
  Index<D> const zero{};
  BlockSetter<T, D> strides{nullptr, dom[D - 1], D - 2, D - 1, zero};  // a block's, for the checks below
  ev.link(strides);
  auto first_axis = [&](auto walks) {
    int from = D;
    while (from > D - 2 && walks(from - 1) && contiguous_from<D>(from - 1, out.strides(), dom)) --from;
    return from;
  };
  int const plain = first_axis([&](int a) { return ev.contiguous(a, dom); });
  int const any = first_axis([&](int a) { return ev.runs(a, dom); });
  return {&ev, out.data(), out.strides(), dom[D - 1], any, any < plain};
}

// conv::Sink: the kernel's expression over a block, stored into the output.
template <class Ev, class OutT, int D, class T>
void store_planes(void* ctx, std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0,
                  std::int64_t len, T const* v, std::int64_t ldv) {
  auto const& r = *static_cast<PlaneEpilogue<Ev, OutT, D> const*>(ctx);
  Ev e = *r.ev;
  std::optional<RepeatInputs> in;  // (points into e)
  if (r.repeat) in.emplace(e, repeat_chunk);
  Index<D> idx{};
  if constexpr (D == 4) idx[0] = n;
  auto run = [&](std::int64_t count) {
    e.begin_line(idx);
    OutT* o = r.out + dot<D>(idx, r.ost);
    if (in) write_repeating<false>(o, e, *in, 0, count, false);
    else write_run<Read::plain>(o, e, 0, count);
  };
  for (std::int64_t k = 0; k < channels; ++k) {
    idx[D - 3] = c0 + k;
    idx[D - 2] = p0 / r.ow, idx[D - 1] = p0 % r.ow;
    BlockSetter<T, D> block{v + k * ldv, r.ow, D - 2, D - 1, idx};
    e.link(block);
    if (r.from == D - 2) {
      run(len);
    } else if (r.from == D - 1) {
      for (std::int64_t p = p0, end = p0 + len; p < end; p += r.ow - idx[D - 1]) {
        idx[D - 2] = p / r.ow, idx[D - 1] = p % r.ow;
        run(std::min(r.ow - idx[D - 1], end - p));
      }
    } else {
      for (std::int64_t p = p0; p < p0 + len; ++p) {
        idx[D - 2] = p / r.ow, idx[D - 1] = p % r.ow;
        r.out[dot<D>(idx, r.ost)] = static_cast<OutT>(e.at(idx));
      }
    }
  }
}

template <class X, class W>
struct AnchorEngine<Conv2d<X, W>> {
  template <class OutTensor, class Ev>
  static void run(Conv2d<X, W> const& anchor, OutTensor& out, Ev& ev, Temps&) {
    constexpr int D = OutTensor::rank;
    using T = typename Conv2d<X, W>::value_type;
    auto const x = in_memory(anchor.x);
    auto const w = in_memory(anchor.w);
    auto epilogue = plane_epilogue<T>(ev, out);
    conv::Sink<T> const sink{&store_planes<Ev, typename OutTensor::value_type, D, T>, &epilogue};
    PackSource source{anchor.w_pack.get(), w.storage()};
    conv::conv2d<T>(conv::planes(x), conv::planes(w), anchor.win, anchor.groups, out.shape()[D - 2],
                    out.shape()[D - 1], sink, prepacked<T>(source));
  }
};

template <PoolKind K, class X>
struct AnchorEngine<Pool2d<K, X>> {
  template <class OutTensor, class Ev>
  static void run(Pool2d<K, X> const& anchor, OutTensor& out, Ev& ev, Temps&) {
    constexpr int D = OutTensor::rank;
    using T = typename Pool2d<K, X>::value_type;
    auto const x = in_memory(anchor.x);
    auto epilogue = plane_epilogue<T>(ev, out);
    conv::Sink<T> const sink{&store_planes<Ev, typename OutTensor::value_type, D, T>, &epilogue};
    std::int64_t const oh = out.shape()[D - 2], ow = out.shape()[D - 1];
    if constexpr (K == PoolKind::adaptive_avg) conv::adaptive_avg_pool2d<T>(conv::planes(x), oh, ow, sink);
    else conv::pool2d<K, T>(conv::planes(x), anchor.params, oh, ow, sink);
  }
};

}  // namespace solder::detail::host
