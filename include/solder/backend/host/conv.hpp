// The host engines of conv2d and the 2-d pools (expr/conv.hpp), kernel anchors like a matrix
// product (contract.hpp): each computes blocks of its output — planes (runs of pixels of one or
// more channels) or pixel blocks (runs of channels of one or more pixels) — and hands them to
// the kernel's element-wise epilogue (Sink: store_planes, store_pixels), which writes them into
// the output from the cache. The engines' loops are templates of the element type only; the
// epilogue is a function pointer, so a new fused expression over a convolution compiles only
// its epilogue. Operands are NCHW or channels-last (NHWC strides, DESIGN.md rule 7), or any
// strides; the output's format decides how blocks are stored.
//   * conv2d: an implicit GEMM on the GEMM engine (gemm.hpp), one batch per group:
//     out^T[N * pixels, C_out/g] = cols^T[N * pixels, K] x W_g^T[K, C_out/g], K = C_in/g * kH * kW.
//     cols^T is never stored whole: a gemm::Producer writes each block of it the engine asks
//     for straight from x, zeros for the padding: over NCHW x (fill_patches) its columns are
//     (channel, tap) and W^T is the weight read in place; over channels-last x
//     (fill_patches_channels_last) they are (tap, channel), each tap's channels one copied run,
//     and the weight is reordered to match once (TapMajor, kept in the module's PackCache). A
//     1x1 convolution with stride 1 and no padding is a plain product: x as [pixels, C_in] per
//     image, or for all images at once over channels-last x. The engine's blocks are
//     [pixels x channels]: pixel blocks.
//   * depthwise conv2d (groups == C_in > 1): over channels-last x with one output channel per
//     input channel, vectorized over channels (windows_channels_last, depthwise_tile: register
//     tiles of pixels x channels); otherwise direct per output plane, a block of rows at a
//     time, tap by tap over each row (vectorized along ow).
//   * pools: over channels-last x vectorized over channels as the depthwise kernel; otherwise
//     direct loops per (image, channel) plane, a block of rows at a time.
// The direct engines' threads share out tasks (rows of planes, or output rows of all channels)
// statically; every output is computed by one task in a fixed order, so results do not depend
// on the thread count (the GEMM engine's are deterministic for a thread count). Small problems
// run on the calling thread.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "../../expr/conv.hpp"
#include "contract.hpp"
#include "simd.hpp"

// SOLDER_GEMM_UNROLL is GCC's pragma, which nvcc's front end warns of (1675) and hands on to the
// host compiler: silenced for this file, as in gemm.hpp.
#if defined(__CUDACC__)
#pragma nv_diag_suppress 1675
#endif

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

// Receives blocks of the output in one of two forms, each stored by a function of the kernel's
// epilogue (store_planes, store_pixels; `ctx` is theirs):
//   planes: `channels` planes of image n, channel c0 + k's pixels [p0, p0 + len) at v + k * ldv;
//   pixels: pixels [p0, p0 + len) of image n, pixel p0 + i's channels [c0, c0 + channels) at
//           v + i * ldv (the GEMM's blocks, the channels-last engines').
// A channels-last output (NHWC strides) takes pixel blocks as they are; into any other, pixels
// go transposed a tile at a time, as planes.
template <class T>
struct Sink {
  using Store = void (*)(void* ctx, std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0,
                         std::int64_t len, T const* v, std::int64_t ldv);
  Store store_planes, store_pixels;
  void* ctx;
  bool channels_last;
  void planes(std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0, std::int64_t len, T const* v,
              std::int64_t ldv) const {
    store_planes(ctx, n, c0, channels, p0, len, v, ldv);
  }
  void pixels(std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0, std::int64_t len, T const* v,
              std::int64_t ldv) const {
    if (channels_last) return store_pixels(ctx, n, c0, channels, p0, len, v, ldv);
    constexpr std::int64_t tile_pixels = 256, tile_channels = 16;
    alignas(64) T tile[tile_pixels * tile_channels];
    for (std::int64_t i0 = 0; i0 < len; i0 += tile_pixels) {
      std::int64_t const m = std::min(tile_pixels, len - i0);
      for (std::int64_t q0 = 0; q0 < channels; q0 += tile_channels) {
        std::int64_t const nc = std::min(tile_channels, channels - q0);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t q = 0; q < nc; ++q) tile[q * m + i] = v[(i0 + i) * ldv + q0 + q];
        store_planes(ctx, n, c0 + q0, nc, p0 + i0, m, tile, m);
      }
    }
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
inline std::int64_t block_rows(std::int64_t oh, std::int64_t ow) {
  return std::clamp<std::int64_t>(block_values / std::max<std::int64_t>(ow, 1), 1, std::max<std::int64_t>(oh, 1));
}
template <class T, class F>
void for_row_blocks(std::int64_t images, std::int64_t channels, std::int64_t oh, std::int64_t ow,
                    std::int64_t work, F const& f) {
  if (images == 0 || channels == 0 || oh == 0 || ow == 0) return;
  std::int64_t const rows = block_rows(oh, ow);
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
  std::int64_t row0 = 0;     // the engine's row 0 is this row of the matrix (a chunk of it)
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
    std::int64_t const row = p.row0 + i0;
    std::int64_t n = row / pixels, oy = row % pixels / p.ow, ox = row % p.ow;
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
  std::int64_t row0 = 0;  // the engine's row 0 is this pixel of all images (a chunk of them)
};

// gemm::Epilogue: block [i0, i0 + mt) x [j0, j0 + nt) of batch b (c[r * ldc + q]), to the sink
// as pixel blocks, each within one image.
template <class T>
void store_gemm_block(void* ctx, std::int64_t b, std::int64_t i0, std::int64_t j0, std::int64_t mt,
                      std::int64_t nt, T const* c, std::int64_t ldc) {
  auto const& g = *static_cast<GemmBlocks<T> const*>(ctx);
  for (std::int64_t r = 0; r < mt;) {
    std::int64_t const row = g.row0 + g.row_bs * b + i0 + r, n = row / g.pixels, p = row % g.pixels;
    std::int64_t const len = std::min(mt - r, g.pixels - p);
    g.sink.pixels(n, g.col_bs * b + j0, nt, p, len, c + r * ldc, ldc);
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
    sink.planes(n, co, 1, y0 * ow, (y1 - y0) * ow, buf, 0);
  });
}

// Whether x's channels are its innermost axis (channels-last, PyTorch's NHWC strides): then the
// engines read runs of channels.
template <class T>
bool channels_innermost(Planes<T> const& x) {
  return x.c > 1 && x.sc == 1 && (x.w == 1 || x.sw >= x.c) && (x.h == 1 || x.sh >= x.w * x.sw);
}

// The windows of channels-last x, vectorized over channels: a task is one output row of one
// image, stored as one pixel block of all channels (pixel ox's at buf + ox * C), computed a
// chunk of channels (two vector registers) at a time. Each pixel folds its window's taps into
// accumulators along the chunk: fold(acc, x's channels at the tap, tap number a * kW + b, c0, m),
// then finish(acc, y, ox, m); `m`, the chunk's length, is a compile-time constant for whole
// chunks. interior(out, n, y, c0, cc, lo, hi) may first compute the pixels from lo on (up to
// hi: those whose every tap column lies inside x) of channels [c0, c0 + cc), pixel ox's at
// out + ox * C, and returns where it stopped. Threads share the rows statically.
template <class T>
inline constexpr std::int64_t channel_chunk = 2 * simd::lanes<T>;
template <class T, class Fold, class Finish, class Interior>
void windows_channels_last(Planes<T> const& x, Window2d const& win, std::int64_t oh, std::int64_t ow, T init,
                           Sink<T> const& sink, Fold const& fold, Finish const& finish, Interior const& interior) {
  std::int64_t const C = x.c, tasks = x.n * oh;
  if (tasks == 0 || C == 0 || ow == 0) return;
  constexpr std::int64_t chunk = channel_chunk<T>;
  std::vector<std::array<std::int64_t, 2>> inside_b;  // per tap column b: the output columns that read inside x
  std::int64_t lo = 0, hi = ow;                        // the columns whose every tap column does
  for (std::int64_t b = 0; b < win.kw; ++b) {
    inside_b.push_back(inside(b * win.dw - win.pw, win.sw, x.w, ow));
    lo = std::max(lo, inside_b.back()[0]), hi = std::min(hi, inside_b.back()[1]);
  }
  [[maybe_unused]] bool const parallel =
      x.n * C * oh * ow * win.kh * win.kw >= parallel_threshold && tasks > 1 && get_num_threads() > 1;
  SOLDER_OMP(parallel if(parallel)) {
    std::vector<T> buffer(static_cast<std::size_t>(ow * C));
    SOLDER_OMP(for schedule(static))
    for (std::int64_t t = 0; t < tasks; ++t) {
      std::int64_t const n = t / oh, y = t % oh;
      for (std::int64_t c0 = 0; c0 < C; c0 += chunk) {
        std::int64_t const cc = std::min(chunk, C - c0);
        T* out = buffer.data() + c0;
        auto pixel = [&](std::int64_t ox, auto m) {
          T acc[chunk];
          std::fill_n(acc, chunk, init);
          for (std::int64_t a = 0; a < win.kh; ++a) {
            std::int64_t const iy = y * win.sh - win.ph + a * win.dh;
            if (iy < 0 || iy >= x.h) continue;
            T const* src = x.data + n * x.sn + iy * x.sh + c0;
            for (std::int64_t b = 0; b < win.kw; ++b)
              if (ox >= inside_b[b][0] && ox < inside_b[b][1])
                fold(acc, src + (ox * win.sw + b * win.dw - win.pw) * x.sw, a * win.kw + b, c0, m);
          }
          finish(acc, y, ox, m);
          std::copy(acc, acc + std::int64_t(m), out + ox * C);
        };
        std::int64_t const stop = lo < hi ? interior(out, n, y, c0, cc, lo, hi) : lo;
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          if (ox >= lo && ox < stop) continue;
          if (cc == chunk) pixel(ox, std::integral_constant<std::int64_t, chunk>{});
          else pixel(ox, cc);
        }
      }
      sink.pixels(n, 0, C, y * ow, ow, buffer.data(), C);
    }
  }
}

// Depthwise's pixels [ox, ox + P) over NV vector registers of channels, from x's pixel ox at xp
// (a step of xstep to the next pixel): P * NV accumulators in registers, each tap's weights
// read once for the P pixels. Tap t: x at xp + x_off[t], its weights at w[t]. Pixel p's
// channels go to out + p * ldo.
template <int P, int NV, class T>
SOLDER_INLINE void depthwise_tile(T const* xp, std::int64_t xstep, std::int64_t const* x_off, T const* const* w,
                                  std::int64_t taps, T* out, std::int64_t ldo) {
  using V = simd::Pack<T>;
  constexpr int L = simd::lanes<T>;
  V acc[P][NV] = {};
  for (std::int64_t t = 0; t < taps; ++t) {
    V wv[NV];
    for (int k = 0; k < NV; ++k) wv[k] = simd::load(w[t] + k * L);
    T const* s = xp + x_off[t];
    SOLDER_GEMM_UNROLL(8)
    for (int p = 0; p < P; ++p)
      for (int k = 0; k < NV; ++k) acc[p][k] += wv[k] * simd::load(s + p * xstep + k * L);
  }
  for (int p = 0; p < P; ++p)
    for (int k = 0; k < NV; ++k) simd::store(out + p * ldo + k * L, acc[p][k]);
}

// Depthwise over channels-last x, one output channel per input channel. The taps are first laid
// out [kH * kW, C] so that a tap's weights are a run too (a copy of C * kH * kW values per call,
// small beside the convolution). Interior pixels go a tile at a time through depthwise_tile, over
// chunks of one or two whole registers.
template <class T>
void depthwise_channels_last(Planes<T> const& x, Planes<T> const& w, Window2d const& win, std::int64_t oh,
                             std::int64_t ow, Sink<T> const& sink) {
  std::int64_t const C = x.c, taps = win.kh * win.kw;
  std::vector<T> wt(static_cast<std::size_t>(taps * C));
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t a = 0; a < win.kh; ++a)
      for (std::int64_t b = 0; b < win.kw; ++b)
        wt[static_cast<std::size_t>((a * win.kw + b) * C + c)] = w.plane(c, 0)[a * w.sh + b * w.sw];
  auto fold = [&](T* acc, T const* xv, std::int64_t tap, std::int64_t c0, auto m) {
    T const* wv = wt.data() + tap * C + c0;
    SOLDER_SIMD
    for (std::int64_t c = 0; c < m; ++c) acc[c] += wv[c] * xv[c];
  };
  auto interior = [&](T* out, std::int64_t n, std::int64_t y, std::int64_t c0, std::int64_t cc, std::int64_t lo,
                      std::int64_t hi) {
    constexpr int L = simd::lanes<T>;
    if (cc != L && cc != 2 * L) return lo;
    std::vector<std::int64_t> x_off;  // the taps of row y that lie in x: x's offset from the pixel, the weights
    std::vector<T const*> w_of;
    for (std::int64_t a = 0; a < win.kh; ++a) {
      std::int64_t const iy = y * win.sh - win.ph + a * win.dh;
      if (iy < 0 || iy >= x.h) continue;
      for (std::int64_t b = 0; b < win.kw; ++b) {
        x_off.push_back(iy * x.sh + (b * win.dw - win.pw) * x.sw);
        w_of.push_back(wt.data() + (a * win.kw + b) * C + c0);
      }
    }
    // Pixels per tile: with AVX-512's 32 registers 8 (16 accumulators: about 10% faster than 4 on
    // MobileNetV2's 3x3 x 144 layer, 0.72-0.82x of oneDNN against 0.61-0.77x), else 4.
    constexpr int P = simd::pack_bytes == 64 ? 8 : 4;
    std::int64_t const xstep = win.sw * x.sw, count = static_cast<std::int64_t>(x_off.size());
    T const* base = x.data + n * x.sn + c0;
    auto pixels = [&](auto tile) {
      std::int64_t ox = lo;
      for (; ox + P <= hi; ox += P) tile(P, ox);
      for (; ox < hi; ++ox) tile(1, ox);
    };
    auto run = [&]<int NV>() {
      pixels([&](int p, std::int64_t ox) {
        if (p == P) depthwise_tile<P, NV>(base + ox * xstep, xstep, x_off.data(), w_of.data(), count, out + ox * C, C);
        else depthwise_tile<1, NV>(base + ox * xstep, xstep, x_off.data(), w_of.data(), count, out + ox * C, C);
      });
    };
    if (cc == 2 * L) run.template operator()<2>();
    else run.template operator()<1>();
    return hi;
  };
  windows_channels_last(x, win, oh, ow, T(0), sink, fold, [](T*, std::int64_t, std::int64_t, auto) {}, interior);
}

// The patch matrix of channels-last x with its columns ordered by tap, then channel: column
// k = (a, b, ci), so that a tap's channels are one run of x (copied as such, or zeros in the
// padding). Its weight is tap-major too (TapMajor).
template <class T>
void fill_patches_channels_last(void const* ctx, std::int64_t g, std::int64_t i0, std::int64_t k0, std::int64_t mc,
                                std::int64_t kc, T* dst, std::int64_t ld) {
  auto const& p = *static_cast<Patches<T> const*>(ctx);
  auto const& x = p.x;
  auto const& w = p.win;
  std::int64_t const pixels = p.oh * p.ow, row = p.row0 + i0;
  std::int64_t n = row / pixels, oy = row % pixels / p.ow, ox = row % p.ow;
  std::int64_t const tap0 = k0 / p.cin, ci0 = k0 % p.cin;
  for (std::int64_t r = 0; r < mc; ++r) {
    T* d = dst + r * ld - k0;
    T const* src = x.data + n * x.sn + g * p.cin;
    std::int64_t const iy = oy * w.sh - w.ph, ix = ox * w.sw - w.pw;
    std::int64_t a = tap0 / w.kw, b = tap0 % w.kw, ci = ci0;
    for (std::int64_t k = k0, end = k0 + kc; k < end;) {
      std::int64_t const len = std::min(p.cin - ci, end - k), y = iy + a * w.dh, xx = ix + b * w.dw;
      if (y >= 0 && y < x.h && xx >= 0 && xx < x.w) std::copy_n(src + y * x.sh + xx * x.sw + ci, len, d + k);
      else std::fill_n(d + k, len, T(0));
      k += len, ci = 0;
      if (++b == w.kw) b = 0, ++a;
    }
    if (++ox == p.ow) {
      ox = 0;
      if (++oy == p.oh) oy = 0, ++n;
    }
  }
}

// A weight [C_out, C_in/g, kH, kW] laid out [C_out, kH, kW, C_in/g] (tap-major: B^T of
// fill_patches_channels_last's product) and packed for the engine from that layout, made once
// per weight and kept in its PackCache (DESIGN.md rule 7: weights reordered once), or made per
// call without the packing for a weight that has no cache.
template <class T>
struct TapMajor {
  std::vector<T> w;
  std::shared_ptr<T const> packed;  // gemm::prepack_b of w, or null
  gemm::Strided<T> b;               // W_g^T of group g: w read as [K, C_out/g] at g * b.bs
};
template <class T>
std::shared_ptr<TapMajor<T>> tap_major(Planes<T> const& w, gemm::Problem const& p, bool pack) {
  auto r = std::make_shared<TapMajor<T>>();
  r->w.resize(static_cast<std::size_t>(w.n * p.k));
  for (std::int64_t co = 0, i = 0; co < w.n; ++co)
    for (std::int64_t a = 0; a < w.h; ++a)
      for (std::int64_t b = 0; b < w.w; ++b)
        for (std::int64_t ci = 0; ci < w.c; ++ci) r->w[static_cast<std::size_t>(i++)] = w.plane(co, ci)[a * w.sh + b * w.sw];
  r->b = {r->w.data(), 1, p.k, p.n * p.k};
  if (pack) r->packed = gemm::prepack_b(p, r->b);
  return r;
}
template <class T>
T const* tap_major_pack(void* ctx, gemm::Problem const&, gemm::Strided<T> const&) {
  return static_cast<TapMajor<T> const*>(ctx)->packed.get();
}

// The pixels of an image that conv2d(..., fixed) computes as whole tasks, each on one thread, in
// an order the shapes alone decide: the blocks a sink sees within such a task, and their order,
// are the same for any thread count (channel_sums.hpp folds its per-task partials in a fixed
// order on this). The direct engines' tasks are so already: rows of one output plane
// (for_row_blocks) or one output row of all channels (windows_channels_last). The GEMM engine
// shares out rows of its own between the threads, so it runs on chunks of an image instead,
// enough of them (64 or more over the batch) for the threads to share.
template <class T>
std::int64_t fixed_pixels(Planes<T> const& x, Planes<T> const& w, std::int64_t groups, std::int64_t oh,
                          std::int64_t ow) {
  if (groups == x.c && groups > 1)
    return w.n == x.c && channels_innermost(x) ? std::max<std::int64_t>(ow, 1) : block_rows(oh, ow) * ow;
  std::int64_t const pixels = std::max<std::int64_t>(oh * ow, 1);
  std::int64_t const per_image = std::clamp<std::int64_t>((64 + x.n - 1) / std::max<std::int64_t>(x.n, 1), 1,
                                                          (pixels + 63) / 64);
  return (pixels + per_image - 1) / per_image;
}

// `weights`: where the weight's packed copies are kept (a module's weight), or no cache.
// `fixed`: 0, or fixed_pixels(...): the GEMM engine runs on those chunks of each image.
template <class T>
void conv2d(Planes<T> const& x, Planes<T> const& w, Window2d const& win, std::int64_t groups, std::int64_t oh,
            std::int64_t ow, Sink<T> const& sink, PackSource& weights, std::int64_t fixed = 0) {
  if (groups == x.c && groups > 1) {
    if (w.n == x.c && channels_innermost(x)) return depthwise_channels_last(x, w, win, oh, ow, sink);
    return depthwise(x, w, win, oh, ow, sink);
  }
  std::int64_t const pixels = oh * ow, cout = w.n / groups, k = w.c * w.h * w.w;
  bool const pointwise = w.h == 1 && w.w == 1 && win.sh == 1 && win.sw == 1 && win.ph == 0 && win.pw == 0 &&
                         groups == 1 && (x.h == 1 || x.sh == x.w * x.sw);
  gemm::Prepacked<T> pre = prepacked<T>(weights);
  // product(n, p0, len): pixels [p0, p0 + len) of image n, with fixed; or all pixels of all
  // images in one engine call (len = 0).
  auto in_chunks = [&](auto const& product) {
    if (fixed == 0) return product(std::int64_t(0), std::int64_t(0), std::int64_t(0));
    std::int64_t const per_image = (pixels + fixed - 1) / fixed;
    run_fixed_tasks(x.n * per_image, x.n * pixels * w.n * k, [&](std::int64_t t) {
      std::int64_t const n = t / per_image, p0 = t % per_image * fixed;
      product(n, p0, std::min(fixed, pixels - p0));
    });
  };
  if (pointwise) {  // x of image n as [pixels, C_in]: a plain product per image, or one for all
    in_chunks([&](std::int64_t n, std::int64_t p0, std::int64_t len) {
      gemm::Left<T> left;
      left.memory = {x.data + n * x.sn + p0 * x.sw, x.sw, x.sc, x.sn};
      std::int64_t batch = x.n, m = pixels;
      if (len > 0) batch = 1, m = len, left.memory.bs = 0;
      else if (x.n == 1 || x.sn == pixels * x.sw) batch = 1, m = x.n * pixels, left.memory.bs = 0;  // (NHWC: all images)
      GemmBlocks<T> blocks{sink, pixels, m, 0, n * pixels + p0};
      gemm::run<T>({batch, m, cout, k}, left, {w.data, w.sc, w.sn, 0}, {&store_gemm_block<T>, &blocks}, pre);
    });
    return;
  }
  Patches<T> const patches{x, win, w.c, oh, ow};
  gemm::Problem const problem{groups, x.n * pixels, cout, k};
  // The implicit GEMM of the chunk (or of everything) with the producer fill and B.
  auto implicit = [&](auto fill, gemm::Strided<T> const& b, gemm::Prepacked<T> const& packed) {
    in_chunks([&](std::int64_t n, std::int64_t p0, std::int64_t len) {
      Patches<T> chunk = patches;
      chunk.row0 = n * pixels + p0;
      GemmBlocks<T> blocks{sink, pixels, 0, cout, chunk.row0};
      gemm::Problem p = problem;
      if (len > 0) p.m = len;
      gemm::Left<T> left;
      left.producer = {fill, &chunk};
      gemm::run<T>(p, left, b, {&store_gemm_block<T>, &blocks}, packed);
    });
  };
  // Runs of at least 16 channels (64 bytes of floats): the tap-major patches and weight; fewer
  // (a stem's 3) are gathered as over NCHW, which took 0.6x the time at ResNet's stem.
  if (channels_innermost(x) && w.c >= 16) {
    std::shared_ptr<TapMajor<T>> made;  // without a cache: this call's
    TapMajor<T> const* tm;
    if (weights.cache) {
      PackCache::Key const key{reinterpret_cast<std::intptr_t>(w.data), -1 /* tap-major */, groups, cout, k,
                               w.sn, w.sc, gemm::k_blocks<T>(k)[0], std::int64_t(sizeof(T)), gemm::nr_of<T>};
      tm = static_cast<TapMajor<T> const*>(weights.cache->get(
          key, weights.storage, [&] { return std::shared_ptr<void const>(tap_major(w, problem, true)); }));
    } else {
      tm = (made = tap_major(w, problem, false)).get();
    }
    gemm::Prepacked<T> const packed{tm->packed ? &tap_major_pack<T> : nullptr, const_cast<TapMajor<T>*>(tm)};
    implicit(&fill_patches_channels_last<T>, tm->b, packed);
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
  implicit(&fill_patches<T>, {wk.data, 1, wk.sn, cout * wk.sn}, pre);
}

// The blocks of an output computed already (Conv2d::output: BatchNorm2d's training forward
// stored it with its channel sums) handed to the sink as the engine would hand them, read in
// place: rows of one output row of all channels where the channels are innermost, else rows of
// planes (a block of rows where a plane is one run). The kernel is then its epilogue alone.
template <class T>
void replay(Planes<T> const& y, Sink<T> const& sink) {
  if (y.n == 0 || y.c == 0 || y.h == 0 || y.w == 0) return;
  bool const pixel_rows = y.c == 1 || (y.sc == 1 && (y.w == 1 || y.sw >= y.c));
  std::int64_t const rows = y.sw == 1 && (y.h == 1 || y.sh == y.w) ? block_rows(y.h, y.w) : 1;
  std::int64_t const per_plane = (y.h + rows - 1) / rows;
  std::int64_t const tasks = pixel_rows ? y.n * y.h : y.n * y.c * per_plane;
  [[maybe_unused]] bool const parallel = y.n * y.c * y.h * y.w >= parallel_threshold && tasks > 1 && get_num_threads() > 1;
  SOLDER_OMP(parallel if(parallel)) {
    std::vector<T> row;  // a row that is not one run (any other strides), copied
    SOLDER_OMP(for schedule(static))
    for (std::int64_t t = 0; t < tasks; ++t) {
      if (pixel_rows) {
        std::int64_t const n = t / y.h, r = t % y.h;
        sink.pixels(n, 0, y.c, r * y.w, y.w, y.data + n * y.sn + r * y.sh, y.sw);
        continue;
      }
      std::int64_t const plane = t / per_plane, r0 = t % per_plane * rows, r1 = std::min(y.h, r0 + rows);
      std::int64_t const n = plane / y.c, c = plane % y.c;
      T const* src = y.plane(n, c) + r0 * y.sh;
      if (y.sw != 1) {
        row.resize(static_cast<std::size_t>(y.w));
        for (std::int64_t b = 0; b < y.w; ++b) row[static_cast<std::size_t>(b)] = src[b * y.sw];
        src = row.data();
      }
      sink.planes(n, c, 1, r0 * y.w, (r1 - r0) * y.w, src, 0);
    }
  }
}

// ---- pools ----------------------------------------------------------------------------------

// avg_pool2d's divisor at output (y, ox), PyTorch's: the window clipped to the padded input, or
// to the input without count_include_pad, or divisor_override.
inline std::int64_t avg_divisor(PoolParams const& p, std::int64_t h, std::int64_t w, std::int64_t y, std::int64_t ox) {
  if (p.divisor) return p.divisor;
  auto const& win = p.win;
  std::int64_t const y0 = y * win.sh - win.ph, y1 = std::min(y0 + win.kh, h + win.ph);
  std::int64_t const x0 = ox * win.sw - win.pw, x1 = std::min(x0 + win.kw, w + win.pw);
  if (p.count_include_pad) return (y1 - y0) * (x1 - x0);
  return (std::min(y1, h) - std::max<std::int64_t>(y0, 0)) * (std::min(x1, w) - std::max<std::int64_t>(x0, 0));
}

// max_pool2d and avg_pool2d over channels-last x: windows_channels_last's vectors of channels.
template <PoolKind K, class T>
void pool2d_channels_last(Planes<T> const& x, PoolParams const& p, std::int64_t oh, std::int64_t ow,
                          Sink<T> const& sink) {
  T const init = K == PoolKind::max ? -std::numeric_limits<T>::infinity() : T(0);
  windows_channels_last(
      x, p.win, oh, ow, init, sink,
      [](T* acc, T const* xv, std::int64_t, std::int64_t, auto m) {
        SOLDER_SIMD
        for (std::int64_t c = 0; c < m; ++c) {
          if constexpr (K == PoolKind::max) acc[c] = (xv[c] > acc[c]) | (xv[c] != xv[c]) ? xv[c] : acc[c];  // NaN wins
          else acc[c] += xv[c];
        }
      },
      [&](T* acc, std::int64_t y, std::int64_t ox, auto m) {
        if constexpr (K == PoolKind::avg) {
          T const d = static_cast<T>(avg_divisor(p, x.h, x.w, y, ox));
          for (std::int64_t c = 0; c < m; ++c) acc[c] /= d;
        }
      },
      [](T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t lo, std::int64_t) { return lo; });
}

// max_pool2d and avg_pool2d: per output row, tap by tap, each tap's valid columns at once.
template <PoolKind K, class T>
void pool2d(Planes<T> const& x, PoolParams const& p, std::int64_t oh, std::int64_t ow, Sink<T> const& sink) {
  if (channels_innermost(x)) return pool2d_channels_last<K>(x, p, oh, ow, sink);
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
      if constexpr (K == PoolKind::avg)
        for (std::int64_t ox = 0; ox < ow; ++ox) acc[ox] /= static_cast<T>(avg_divisor(p, x.h, x.w, y, ox));
    }
    sink.planes(n, c, 1, y0 * ow, (y1 - y0) * ow, buf, 0);
  });
}

// adaptive_avg_pool2d: output (y, ox) averages rows [y * H / OH, ceil((y + 1) * H / OH)) and
// the columns likewise.
// Over channels-last x: per (image, output row), each output's window summed in a run of all
// channels at once, in the same order as the planes' loop (the same values).
template <class T>
void adaptive_avg_pool2d(Planes<T> const& x, std::int64_t oh, std::int64_t ow, Sink<T> const& sink) {
  if (channels_innermost(x)) {
    [[maybe_unused]] bool const parallel = x.n * x.c * x.h * x.w >= parallel_threshold && x.n * oh > 1 &&
                                           get_num_threads() > 1;
    SOLDER_OMP(parallel if(parallel)) {
      std::vector<T> buf(static_cast<std::size_t>(ow * x.c));
      SOLDER_OMP(for schedule(static))
      for (std::int64_t t = 0; t < x.n * oh; ++t) {
        std::int64_t const n = t / oh, y = t % oh;
        std::int64_t const r0 = y * x.h / oh, r1 = ((y + 1) * x.h + oh - 1) / oh;
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          std::int64_t const c0 = ox * x.w / ow, c1 = ((ox + 1) * x.w + ow - 1) / ow;
          T* sum = buf.data() + ox * x.c;
          std::fill(sum, sum + x.c, T(0));
          for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t q = c0; q < c1; ++q) {
              T const* v = x.data + n * x.sn + r * x.sh + q * x.sw;
              SOLDER_SIMD
              for (std::int64_t c = 0; c < x.c; ++c) sum[c] += v[c];
            }
          T const count = static_cast<T>((r1 - r0) * (c1 - c0));
          for (std::int64_t c = 0; c < x.c; ++c) sum[c] /= count;
        }
        sink.pixels(n, 0, x.c, y * ow, ow, buf.data(), x.c);
      }
    }
    return;
  }
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
    sink.planes(n, c, 1, y0 * ow, (y1 - y0) * ow, buf, 0);
  });
}

}  // namespace conv

// ---- the epilogue ----------------------------------------------------------------------------

// The kernel's element-wise rest over blocks of a [.., C, OH, OW] anchor. Planes: `from` is the
// first axis of the runs it writes: D - 2 when the inputs and the output walk whole planes as
// one run, D - 1 for rows, D for element by element; `repeat`: some input repeats one value
// along a run (a per-channel [1, C, 1, 1]) and is read from a buffer (Read::repeat). Pixels:
// `channel_runs` when the output and every input step by 1 along C (channels-last tensors, and
// per-channel ones), so that a pixel's channels are one run; else element by element.
template <class Ev, class OutT, int D>
struct PlaneEpilogue {
  Ev const* ev;
  OutT* out;
  Index<D> ost;
  std::int64_t ow;
  int from;
  bool repeat, channel_runs;
};

// Places the TileEval on a pixel block: channel +1, pixel (a step along OW) +ldv.
template <class T, int D>
struct PixelBlock {
  T const* v;
  std::int64_t ldv, ow;
  Index<D> const& origin;
  void tile(TileEval<T, D>& t) const {
    t.base = v;
    t.st = {};
    t.st[D - 3] = 1, t.st[D - 2] = ow * ldv, t.st[D - 1] = ldv;
    t.step = 1;
    t.off = dot<D>(origin, t.st);
  }
};

template <class T, class Ev, class OutTensor>
PlaneEpilogue<Ev, typename OutTensor::value_type, OutTensor::rank> plane_epilogue(Ev& ev, OutTensor& out) {
  constexpr int D = OutTensor::rank;
  Index<D> const& dom = out.shape();
  Index<D> const zero{};
  PixelBlock<T, D> pixels{nullptr, 1, dom[D - 1], zero};  // a pixel block's strides, for the check below
  ev.link(pixels);
  Index<D> channels = dom;  // runs along C alone
  channels[D - 2] = channels[D - 1] = 1;
  bool const channel_runs = (dom[D - 3] == 1 || out.strides()[D - 3] == 1) && ev.contiguous(D - 3, channels);
  BlockSetter<T, D> strides{nullptr, dom[D - 1], D - 2, D - 1, zero};  // a plane block's
  ev.link(strides);
  auto first_axis = [&](auto walks) {
    int from = D;
    while (from > D - 2 && walks(from - 1) && contiguous_from<D>(from - 1, out.strides(), dom)) --from;
    return from;
  };
  int const plain = first_axis([&](int a) { return ev.contiguous(a, dom); });
  int const any = first_axis([&](int a) { return ev.runs(a, dom); });
  return {&ev, out.data(), out.strides(), dom[D - 1], any, any < plain, channel_runs};
}

// conv::Sink's planes: the kernel's expression over a block, stored into the output.
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

// conv::Sink's pixels: a pixel's channels as one run where they are (channel_runs).
template <class Ev, class OutT, int D, class T>
void store_pixels(void* ctx, std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0,
                  std::int64_t len, T const* v, std::int64_t ldv) {
  auto const& r = *static_cast<PlaneEpilogue<Ev, OutT, D> const*>(ctx);
  Ev e = *r.ev;
  Index<D> idx{};
  if constexpr (D == 4) idx[0] = n;
  idx[D - 3] = c0, idx[D - 2] = p0 / r.ow, idx[D - 1] = p0 % r.ow;
  PixelBlock<T, D> block{v, ldv, r.ow, idx};
  e.link(block);
  for (std::int64_t p = p0; p < p0 + len; ++p) {
    idx[D - 3] = c0, idx[D - 2] = p / r.ow, idx[D - 1] = p % r.ow;
    if (r.channel_runs) {
      e.begin_line(idx);
      write_run<Read::plain>(r.out + dot<D>(idx, r.ost), e, 0, channels);
    } else {
      for (std::int64_t q = 0; q < channels; ++q, ++idx[D - 3])
        r.out[dot<D>(idx, r.ost)] = static_cast<OutT>(e.at(idx));
    }
  }
}

// The sink of a kernel's epilogue: pixel blocks stored as they are where the output is
// channels-last.
template <class T, class Ev, class OutT, int D>
conv::Sink<T> image_sink(PlaneEpilogue<Ev, OutT, D>& epilogue) {
  return {&store_planes<Ev, OutT, D, T>, &store_pixels<Ev, OutT, D, T>, &epilogue,
          epilogue.channel_runs && epilogue.ost[D - 3] == 1};
}

template <class X, class W>
struct AnchorEngine<Conv2d<X, W>> {
  template <class OutTensor, class Ev>
  static void run(Conv2d<X, W> const& anchor, OutTensor& out, Ev& ev, Temps&) {
    constexpr int D = OutTensor::rank;
    using T = typename Conv2d<X, W>::value_type;
    auto epilogue = plane_epilogue<T>(ev, out);
    conv::Sink<T> const sink = image_sink<T>(epilogue);
    if (anchor.output)
      return conv::replay(conv::planes(*static_cast<materialized_t<Conv2d<X, W>> const*>(anchor.output.get())), sink);
    auto const x = in_memory(anchor.x);
    auto const w = in_memory(anchor.w);
    PackSource weights{anchor.w_pack.get(), w.storage()};
    conv::conv2d<T>(conv::planes(x), conv::planes(w), anchor.win, anchor.groups, out.shape()[D - 2],
                    out.shape()[D - 1], sink, weights);
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
    conv::Sink<T> const sink = image_sink<T>(epilogue);
    std::int64_t const oh = out.shape()[D - 2], ow = out.shape()[D - 1];
    if constexpr (K == PoolKind::adaptive_avg) conv::adaptive_avg_pool2d<T>(conv::planes(x), oh, ow, sink);
    else conv::pool2d<K, T>(conv::planes(x), anchor.params, oh, ow, sink);
  }
};

}  // namespace solder::detail::host

#if defined(__CUDACC__)
#pragma nv_diag_default 1675
#endif
