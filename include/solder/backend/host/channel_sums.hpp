// Per-channel sums of a convolution's output folded in its epilogue (backend/results.hpp:
// sd::assign(std::tie(y, s, ss), c, sd::sum(c, {0, 2, 3}), sd::sum(c * c, {0, 2, 3}))): the
// engine (conv.hpp) hands each block of the output to the sink, which stores the first
// expression into y as any epilogue does (store_planes, store_pixels) and evaluates each summed
// expression over the same block, from the cache, adding it into partial sums in double. One
// kernel: the convolution is computed once.
//
// Determinism: the engine runs in tasks fixed by the shapes alone (conv::fixed_pixels), each on
// one thread, seeing its blocks in a fixed order; each task has its own partials per channel,
// and the partials are added up task by task after the engine. So the sums have the same bits
// for any thread count. Within a run of a block the values go to 8 lanes in turn, the lanes
// then added in a fixed tree (lane_sum; a run's bounds are fixed by the shapes too). Everything is in
// double: about 1e-16 relative per addition, against the float cascade's 1e-7 (cascade.hpp).
#pragma once
#include <tuple>
#include <vector>

#include "conv.hpp"

namespace solder::detail::host {

// The sum of v[0, m) in double: the values go to 8 lanes in turn, the lanes added in a fixed
// tree (the same bits wherever m values are summed so).
template <class V>
double lane_sum(V const* v, std::int64_t m) {
  double lane[8] = {};
  std::int64_t j = 0;
  for (; j + 8 <= m; j += 8)
    for (int l = 0; l < 8; ++l) lane[l] += static_cast<double>(v[j + l]);
  for (int l = 0; j < m; ++j, ++l) lane[l] += static_cast<double>(v[j]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// The partial sums: for each task of the engine (`size` pixels of an image, conv::fixed_pixels),
// each summed expression and each channel, one double.
struct SumSlots {
  std::vector<double> partial;
  std::int64_t sums, channels, size, per_image;

  SumSlots(std::int64_t images, std::int64_t pixels, std::int64_t size_, std::int64_t sums_, std::int64_t channels_)
      : sums(sums_), channels(channels_), size(size_), per_image((pixels + size_ - 1) / size_) {
    partial.assign(static_cast<std::size_t>(images * per_image * sums * channels), 0.0);
  }
  std::int64_t tasks() const { return sums * channels == 0 ? 0 : std::int64_t(partial.size()) / (sums * channels); }
  // Sum k's partials of the task that holds pixel p of image n, indexed by channel.
  double* at(std::int64_t n, std::int64_t p, std::int64_t k) {
    return partial.data() + ((n * per_image + p / size) * sums + k) * channels;
  }
  // v[0, len): channel c's pixels [p, p + len) of image n (within one image), into sum k.
  template <class V>
  void add_plane_run(std::int64_t k, std::int64_t n, std::int64_t c, std::int64_t p, std::int64_t len, V const* v) {
    while (len > 0) {
      std::int64_t const m = std::min(len, (p / size + 1) * size - p);  // the rest of this task's pixels
      at(n, p, k)[c] += lane_sum(v, m);
      v += m, p += m, len -= m;
    }
  }
  // v[0, m): pixel p of image n's channels [c0, c0 + m), into sum k.
  template <class V>
  void add_pixel(std::int64_t k, std::int64_t n, std::int64_t p, std::int64_t c0, std::int64_t m, V const* v) {
    double* s = at(n, p, k) + c0;
    SOLDER_SIMD
    for (std::int64_t q = 0; q < m; ++q) s[q] += static_cast<double>(v[q]);
  }
};

// A kernel's sink context: the stored expression's epilogue and the summed expressions', each
// planned over the output as the stored one is (plane_epilogue: how a block's runs go).
template <class T, int D, class EvY, class OutT, class... EvF>
struct ChannelSums {
  PlaneEpilogue<EvY, OutT, D> y;
  std::tuple<PlaneEpilogue<EvF, OutT, D>...> f;
  SumSlots* slots;
};

// A run's values, in a buffer of this thread's.
template <class V>
V* run_buffer(std::int64_t n) {
  thread_local std::vector<V> buffer;
  if (std::int64_t(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

template <class Ev, int D>
using eval_value_t = std::remove_cvref_t<decltype(std::declval<Ev const&>().at(std::declval<Index<D> const&>()))>;

// Sum k over a planes block (conv::Sink): each channel's runs as store_planes writes them.
template <class T, int D, class Ev, class OutT>
void sum_planes(PlaneEpilogue<Ev, OutT, D> const& r, SumSlots& slots, std::int64_t k, std::int64_t n, std::int64_t c0,
                std::int64_t channels, std::int64_t p0, std::int64_t len, T const* v, std::int64_t ldv) {
  using V = eval_value_t<Ev, D>;
  Ev e = *r.ev;
  std::optional<RepeatInputs> in;  // (points into e)
  if (r.repeat) in.emplace(e, repeat_chunk);
  V* buf = run_buffer<V>(len);
  Index<D> idx{};
  if constexpr (D == 4) idx[0] = n;
  auto run = [&](std::int64_t count) {
    e.begin_line(idx);
    if (in) write_repeating<false>(buf, e, *in, 0, count, false);
    else write_run<Read::plain>(buf, e, 0, count);
  };
  for (std::int64_t q = 0; q < channels; ++q) {
    std::int64_t const c = c0 + q;
    idx[D - 3] = c;
    idx[D - 2] = p0 / r.ow, idx[D - 1] = p0 % r.ow;
    BlockSetter<T, D> block{v + q * ldv, r.ow, D - 2, D - 1, idx};
    e.link(block);
    if (r.from == D - 2) {
      run(len);
      slots.add_plane_run(k, n, c, p0, len, buf);
    } else if (r.from == D - 1) {
      for (std::int64_t p = p0, end = p0 + len; p < end; p += r.ow - idx[D - 1]) {
        idx[D - 2] = p / r.ow, idx[D - 1] = p % r.ow;
        std::int64_t const count = std::min(r.ow - idx[D - 1], end - p);
        run(count);
        slots.add_plane_run(k, n, c, p, count, buf);
      }
    } else {
      for (std::int64_t p = p0; p < p0 + len; ++p) {
        idx[D - 2] = p / r.ow, idx[D - 1] = p % r.ow;
        buf[p - p0] = e.at(idx);
      }
      slots.add_plane_run(k, n, c, p0, len, buf);
    }
  }
}

// Sum k over a pixels block: a pixel's channels as one run where they are (channel_runs).
template <class T, int D, class Ev, class OutT>
void sum_pixels(PlaneEpilogue<Ev, OutT, D> const& r, SumSlots& slots, std::int64_t k, std::int64_t n, std::int64_t c0,
                std::int64_t channels, std::int64_t p0, std::int64_t len, T const* v, std::int64_t ldv) {
  using V = eval_value_t<Ev, D>;
  Ev e = *r.ev;
  V* buf = run_buffer<V>(channels);
  Index<D> idx{};
  if constexpr (D == 4) idx[0] = n;
  idx[D - 3] = c0, idx[D - 2] = p0 / r.ow, idx[D - 1] = p0 % r.ow;
  PixelBlock<T, D> block{v, ldv, r.ow, idx};
  e.link(block);
  for (std::int64_t p = p0; p < p0 + len; ++p) {
    idx[D - 3] = c0, idx[D - 2] = p / r.ow, idx[D - 1] = p % r.ow;
    if (r.channel_runs) {
      e.begin_line(idx);
      write_run<Read::plain>(buf, e, 0, channels);
    } else {
      for (std::int64_t q = 0; q < channels; ++q, ++idx[D - 3]) buf[q] = e.at(idx);
    }
    slots.add_pixel(k, n, p, c0, channels, buf);
  }
}

// conv::Sink's functions: the block stored, then summed.
template <class T, int D, class EvY, class OutT, class... EvF>
void store_planes_summed(void* ctx, std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0,
                         std::int64_t len, T const* v, std::int64_t ldv) {
  auto& s = *static_cast<ChannelSums<T, D, EvY, OutT, EvF...>*>(ctx);
  store_planes<EvY, OutT, D, T>(&s.y, n, c0, channels, p0, len, v, ldv);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (sum_planes<T, D>(std::get<K>(s.f), *s.slots, K, n, c0, channels, p0, len, v, ldv), ...);
  }(std::index_sequence_for<EvF...>{});
}
template <class T, int D, class EvY, class OutT, class... EvF>
void store_pixels_summed(void* ctx, std::int64_t n, std::int64_t c0, std::int64_t channels, std::int64_t p0,
                         std::int64_t len, T const* v, std::int64_t ldv) {
  auto& s = *static_cast<ChannelSums<T, D, EvY, OutT, EvF...>*>(ctx);
  store_pixels<EvY, OutT, D, T>(&s.y, n, c0, channels, p0, len, v, ldv);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (sum_pixels<T, D>(std::get<K>(s.f), *s.slots, K, n, c0, channels, p0, len, v, ldv), ...);
  }(std::index_sequence_for<EvF...>{});
}

// The sink that stores and sums each block: a channels-last output takes pixel blocks as they
// are (image_sink's rule).
template <class T, int D, class EvY, class OutT, class... EvF>
conv::Sink<T> summed_sink(ChannelSums<T, D, EvY, OutT, EvF...>& s) {
  return {&store_planes_summed<T, D, EvY, OutT, EvF...>, &store_pixels_summed<T, D, EvY, OutT, EvF...>, &s,
          s.y.channel_runs && s.y.ost[D - 3] == 1};
}

// The kernel: conv2d `anchor` with `stored` (an element-wise expression over it, the anchor's
// node standing for its value) written into y, and for each summed expression f, its sums per
// channel over the other axes, one double per task and channel (SumSlots), returned added up
// task by task: [sum][channel].
template <class X, class W, class Y, class E, class... F>
std::vector<std::vector<double>> conv2d_channel_sums(Conv2d<X, W> const& anchor, Y& y, E const& stored, F const&... f) {
  constexpr int D = Y::rank;
  using A = Conv2d<X, W>;
  using T = typename A::value_type;
  Temps temps;
  Index<D> const& dom = y.shape();
  // Root A: every node of A's type on an expression's element-wise path reads the blocks
  // (the caller checked that they are this one node).
  auto ev = make_eval<D, false, false, A>(stored, dom, temps);
  auto evs = std::make_tuple(make_eval<D, false, false, A>(f, dom, temps)...);
  auto const x = in_memory(anchor.x);
  auto const w = in_memory(anchor.w);
  conv::Planes<T> const px = conv::planes(x), pw = conv::planes(w);
  std::int64_t const oh = dom[D - 2], ow = dom[D - 1], channels = dom[D - 3];
  std::int64_t const fixed = conv::fixed_pixels(px, pw, anchor.groups, oh, ow);
  SumSlots slots(px.n, oh * ow, fixed, std::int64_t(sizeof...(F)), channels);
  auto context = std::apply(
      [&](auto&... e) {
        return ChannelSums<T, D, decltype(ev), typename Y::value_type, std::remove_cvref_t<decltype(e)>...>{
            plane_epilogue<T>(ev, y), {plane_epilogue<T>(e, y)...}, &slots};
      },
      evs);
  conv::Sink<T> const sink = summed_sink(context);
  PackSource weights{anchor.w_pack.get(), w.storage()};
  conv::conv2d<T>(px, pw, anchor.win, anchor.groups, oh, ow, sink, weights, fixed);
  std::vector<std::vector<double>> total(sizeof...(F), std::vector<double>(static_cast<std::size_t>(channels), 0.0));
  std::size_t const per_task = sizeof...(F) * static_cast<std::size_t>(channels);
  for (std::int64_t t = 0; t < slots.tasks(); ++t)
    for (std::size_t i = 0; i < per_task; ++i)
      total[i / static_cast<std::size_t>(channels)][i % static_cast<std::size_t>(channels)] +=
          slots.partial[static_cast<std::size_t>(t) * per_task + i];
  return total;
}

}  // namespace solder::detail::host
