// Convolution layers of ResNet-50 and MobileNetV2 at batch 8, NCHW float, each with its
// epilogue (a batch norm folded to a per-channel scale and shift, or a bias, then the
// activation): solder fused (one kernel: the epilogue runs on each block of the convolution's
// output), solder eager (sd::eager of the same expression: the convolution, then one kernel per
// element-wise node), and oneDNN when it is found (SOLDER_HAVE_DNNL): its convolution primitive
// with the same epilogue as post-ops, in the layouts it picks itself (format_tag::any; the
// input and weight reorders are done once, outside the timing).
//   stem        7x7 stride 2, 3 -> 64, 224x224, relu(conv * scale + shift)
//   conv3x3     3x3, 64 -> 64, 56x56, relu(conv * scale + shift)
//   conv1x1     1x1, 256 -> 64, 56x56, relu(conv + bias)
//   conv3x3s2   3x3 stride 2, 128 -> 128, 56x56 -> 28x28, relu(conv + bias)
//   dwconv3x3   depthwise 3x3, 144 channels, 56x56 (MobileNetV2), clamp(conv * scale + shift, 0, 6)
//   maxpool     ResNet's stem pool, 3x3 stride 2 padding 1 over [8, 64, 112, 112] (GB/s)
// Each layer runs twice in solder: NCHW in and out ("fused"), and channels-last in and out
// ("cl": sd::contiguous(x, sd::channels_last), NHWC strides, as the CNN models run), the weights
// as they are (PyTorch's [C_out, C_in, kH, kW]).
// Each is checked once before any timing: solder fused against double-precision loops on a
// sample of outputs, eager, channels-last and oneDNN against solder fused.
// Run with OMP_WAIT_POLICY=passive when oneDNN is timed too (as bench_linear).
// Target (issue 38): channels-last solder >= 0.95x oneDNN in total, no layer below 0.8x (per
// layer here; the total is the sum of the medians).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include <solder/solder.hpp>

#include "common.hpp"

#if defined(SOLDER_HAVE_DNNL)
#include <dnnl.hpp>
#endif

namespace sd = solder;
namespace sb = solder_bench;

namespace {

enum class Epilogue { bn_relu, bias_relu, bn_relu6 };

struct Layer {
  char const* name;
  std::int64_t cin, h, cout, k, stride, pad, groups;
  Epilogue epilogue;
  static constexpr std::int64_t n = 8;
  std::int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  std::int64_t taps() const { return cin / groups * k * k; }
  double flops() const { return 2.0 * n * cout * oh() * oh() * taps(); }
  sd::Conv2dOptions options() const { return {.stride = stride, .padding = pad, .groups = groups}; }
};

Layer const layers[] = {
    {"stem", 3, 224, 64, 7, 2, 3, 1, Epilogue::bn_relu},
    {"conv3x3", 64, 56, 64, 3, 1, 1, 1, Epilogue::bn_relu},
    {"conv1x1", 256, 56, 64, 1, 1, 0, 1, Epilogue::bias_relu},
    {"conv3x3s2", 128, 56, 128, 3, 2, 1, 1, Epilogue::bias_relu},
    {"dwconv3x3", 144, 56, 144, 3, 1, 1, 144, Epilogue::bn_relu6},
};

struct Data {
  Layer l;
  sd::Tensor<float, 4> x, w, scale, shift, y;
  sd::Tensor<float, 1> bias;
  sd::Tensor<float, 4> x_cl, y_cl;  // x and y channels-last
  explicit Data(Layer const& layer)
      : l(layer),
        x(sd::randn<float>(sd::shape(Layer::n, l.cin, l.h, l.h))),
        w(sd::randn<float>(sd::shape(l.cout, l.cin / l.groups, l.k, l.k)) * (1.f / std::sqrt(float(l.taps())))),
        scale(sd::rand<float>(sd::shape(1, l.cout, 1, 1), 0.5f, 1.5f)),
        shift(sd::rand<float>(sd::shape(1, l.cout, 1, 1), -0.5f, 0.5f)),
        y(Layer::n, l.cout, l.oh(), l.oh()),
        bias(sd::rand<float>(sd::shape(l.cout), -0.5f, 0.5f)),
        x_cl(sd::contiguous(x, sd::channels_last)),
        y_cl(sd::contiguous(y, sd::channels_last)) {}
  // The epilogue on one value of channel c.
  double epilogue(double v, std::int64_t c) const {
    if (l.epilogue == Epilogue::bias_relu) return std::max(v + bias.data()[c], 0.0);
    double t = v * scale.data()[c] + shift.data()[c];
    return l.epilogue == Epilogue::bn_relu ? std::max(t, 0.0) : std::clamp(t, 0.0, 6.0);
  }
};

// The layer over x (d.x, or d.x_cl: the same type, other strides).
template <Epilogue E>
auto expression(Data const& d, sd::Tensor<float, 4> const& x) {
  if constexpr (E == Epilogue::bias_relu) return sd::relu(sd::conv2d(x, d.w, d.bias, d.l.options()));
  else if constexpr (E == Epilogue::bn_relu)
    return sd::relu(sd::conv2d(x, d.w, d.l.options()) * d.scale + d.shift);
  else return sd::clamp(sd::conv2d(x, d.w, d.l.options()) * d.scale + d.shift, 0.f, 6.f);
}

// Every 97th output against double loops, within the bound of a dot product of the layer's
// taps (its scale: the terms' |x w| summed, times the epilogue's scale).
void check_reference(Data const& d) {
  auto const& l = d.l;
  std::int64_t const oh = l.oh(), cin_g = l.cin / l.groups, cout_g = l.cout / l.groups, total = d.y.numel();
  double worst = 0;
  for (std::int64_t o = 0; o < total; o += 97) {
    std::int64_t const ox = o % oh, oy = o / oh % oh, co = o / (oh * oh) % l.cout, n = o / (oh * oh * l.cout);
    double s = 0, scale = 0;
    for (std::int64_t ci = 0; ci < cin_g; ++ci)
      for (std::int64_t a = 0; a < l.k; ++a)
        for (std::int64_t b = 0; b < l.k; ++b) {
          std::int64_t y = oy * l.stride - l.pad + a, z = ox * l.stride - l.pad + b;
          if (y < 0 || y >= l.h || z < 0 || z >= l.h) continue;
          double t = double(d.x.data()[((n * l.cin + co / cout_g * cin_g + ci) * l.h + y) * l.h + z]) *
                     d.w.data()[((co * cin_g + ci) * l.k + a) * l.k + b];
          s += t;
          scale += std::fabs(t);
        }
    double const want = d.epilogue(s, co), got = d.y.data()[o];
    double const bound = (double(l.taps()) + 4) * 1.2e-7 * (scale * 1.5 + 1) + 1e-30;
    if (!(std::fabs(got - want) <= bound)) {
      std::fprintf(stderr, "check %s: FAILED at %lld: %.9g vs %.9g\n", l.name, static_cast<long long>(o), got,
                   want);
      std::exit(1);
    }
    worst = std::max(worst, std::fabs(got - want) / bound);
  }
  std::string const what = std::string(l.name) + " solder fused";
  std::printf("check %-40s worst error %.3f of the dot-product bound  OK\n", what.c_str(), worst);
}

#if defined(SOLDER_HAVE_DNNL)
dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& dnnl_stream() {
  static dnnl::stream s(dnnl_engine());
  return s;
}

// The layer as one oneDNN primitive: convolution with its epilogue as post-ops (binary mul and
// add of [1, C, 1, 1] for the scale and shift, the bias as the convolution's, then relu or
// clip), in the layouts oneDNN prefers.
struct DnnlConv {
  dnnl::convolution_forward conv;
  dnnl::memory src, weights, bias, dst, out;  // out: the NCHW view of dst, for the check
  std::unordered_map<int, dnnl::memory> args;

  explicit DnnlConv(Data& d) {
    using namespace dnnl;
    using tag = memory::format_tag;
    auto const& l = d.l;
    auto& eng = dnnl_engine();
    auto f32 = memory::data_type::f32;
    memory::dims const src_dims{Layer::n, l.cin, l.h, l.h}, dst_dims{Layer::n, l.cout, l.oh(), l.oh()};
    memory::dims const wei_dims = l.groups > 1
                                      ? memory::dims{l.groups, l.cout / l.groups, l.cin / l.groups, l.k, l.k}
                                      : memory::dims{l.cout, l.cin, l.k, l.k};
    memory::desc const src_md(src_dims, f32, tag::any), wei_md(wei_dims, f32, tag::any),
        dst_md(dst_dims, f32, tag::any);
    memory::desc const bias_md({l.cout}, f32, tag::x), channel_md({1, l.cout, 1, 1}, f32, tag::nchw);
    memory::dims const strides{l.stride, l.stride}, pad{l.pad, l.pad};
    bool const with_bias = l.epilogue == Epilogue::bias_relu;
    auto const inference = prop_kind::forward_inference;
    auto const direct = algorithm::convolution_direct;
    auto const desc =
        with_bias ? convolution_forward::desc(inference, direct, src_md, wei_md, bias_md, dst_md, strides, pad, pad)
                  : convolution_forward::desc(inference, direct, src_md, wei_md, dst_md, strides, pad, pad);
    post_ops ops;
    if (!with_bias) {
      ops.append_binary(algorithm::binary_mul, channel_md);
      ops.append_binary(algorithm::binary_add, channel_md);
    }
    if (l.epilogue == Epilogue::bn_relu6) ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
    else ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    primitive_attr attr;
    attr.set_post_ops(ops);
    convolution_forward::primitive_desc const pd(desc, attr, eng);
    conv = convolution_forward(pd);

    auto& s = dnnl_stream();
    auto user = [&](memory::dims const& dims, tag t, float* p) { return memory({dims, f32, t}, eng, p); };
    memory user_src = user(src_dims, tag::nchw, d.x.data());
    memory user_wei = user(wei_dims, l.groups > 1 ? tag::goihw : tag::oihw, d.w.data());
    src = memory(pd.src_desc(), eng);
    weights = memory(pd.weights_desc(), eng);
    dst = memory(pd.dst_desc(), eng);
    out = user(dst_dims, tag::nchw, d.y.data());
    reorder(user_src, src).execute(s, user_src, src);
    reorder(user_wei, weights).execute(s, user_wei, weights);
    s.wait();
    args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (with_bias) {
      args[DNNL_ARG_BIAS] = user({l.cout}, tag::x, d.bias.data());
    } else {
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = memory(channel_md, eng, d.scale.data());
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] = memory(channel_md, eng, d.shift.data());
    }
  }
  void run() {
    conv.execute(dnnl_stream(), args);
    dnnl_stream().wait();
  }
  void to_nchw() {  // dst into d.y
    dnnl::reorder(dst, out).execute(dnnl_stream(), dst, out);
    dnnl_stream().wait();
  }
};
#endif

template <Epilogue E>
void add_layer(Layer const& layer) {
  auto* d = new Data(layer);  // lives as long as the benchmarks
  auto fused = expression<E>(*d, d->x);
  static_assert(sd::kernel_count<decltype(fused)> == 1);
  d->y = fused;
  check_reference(*d);
  sd::Tensor<float, 4> const reference = d->y.clone();
  auto compare = [&](char const* who) {
    std::string what = std::string(layer.name) + " " + who;
    sb::check_close(what.c_str(), d->y.data(), reference.data(), d->y.numel(), 1e-4, 1e-4);
  };
  d->y_cl = expression<E>(*d, d->x_cl);
  d->y = sd::contiguous(d->y_cl);
  compare("solder channels-last");
  d->y = sd::eager(expression<E>(*d, d->x));
  compare("solder eager");
  auto ms = benchmark::kMillisecond;
  std::string const base = std::string("BM_") + layer.name;
  sb::add((base + "_fused").c_str(), ms, 0, [d] {
    d->y = expression<E>(*d, d->x);
    return d->y.data();
  });
  sb::add((base + "_cl").c_str(), ms, 0, [d] {
    d->y_cl = expression<E>(*d, d->x_cl);
    return d->y_cl.data();
  });
  sb::add((base + "_eager").c_str(), ms, 0, [d] {
    d->y = sd::eager(expression<E>(*d, d->x));
    return d->y.data();
  });
#if defined(SOLDER_HAVE_DNNL)
  auto* dn = new DnnlConv(*d);
  dn->run();
  dn->to_nchw();
  compare("oneDNN");
  sb::add((base + "_onednn").c_str(), ms, 0, [dn] {
    dn->run();
    return dn;
  });
#endif
}

struct Pool {
  sd::Tensor<float, 4> x = sd::randn<float>(sd::shape(8, 64, 112, 112));
  sd::Tensor<float, 4> y{8, 64, 56, 56};
  sd::Tensor<float, 4> x_cl = sd::contiguous(x, sd::channels_last), y_cl = sd::contiguous(y, sd::channels_last);
  std::int64_t half = (x.numel() + y.numel()) / 2;  // a copy of this many moves the pool's bytes
  std::vector<float> copy = std::vector<float>(static_cast<std::size_t>(half));
};

}  // namespace

int main(int argc, char** argv) {
  sd::set_num_threads(sb::threads);
  sb::print_wait_policy();
  add_layer<Epilogue::bn_relu>(layers[0]);
  add_layer<Epilogue::bn_relu>(layers[1]);
  add_layer<Epilogue::bias_relu>(layers[2]);
  add_layer<Epilogue::bias_relu>(layers[3]);
  add_layer<Epilogue::bn_relu6>(layers[4]);

  // The stem's pool: memory-bound (GB/s of input and output moved).
  auto* pool = new Pool;
  pool->y = sd::max_pool2d(pool->x, 3, {.stride = 2, .padding = 1});
  double const pool_bytes = double(pool->x.numel() + pool->y.numel()) * sizeof(float);
  sb::add("BM_maxpool_fused", benchmark::kMillisecond, pool_bytes, [pool] {
    pool->y = sd::max_pool2d(pool->x, 3, {.stride = 2, .padding = 1});
    return pool->y.data();
  });
  pool->y_cl = sd::max_pool2d(pool->x_cl, 3, {.stride = 2, .padding = 1});
  sb::check_close("maxpool channels-last", sd::contiguous(pool->y_cl).data(), pool->y.data(), pool->y.numel(), 0, 0);
  sb::add("BM_maxpool_cl", benchmark::kMillisecond, pool_bytes, [pool] {
    pool->y_cl = sd::max_pool2d(pool->x_cl, 3, {.stride = 2, .padding = 1});
    return pool->y_cl.data();
  });
  sb::add("BM_copy_roof", benchmark::kMillisecond, pool_bytes, [pool] {
    sb::peer::copy(pool->x.data(), pool->copy.data(), pool->half);
    return pool->copy.data();
  });

  sb::MedianReporter rep;
  if (!sb::run_benchmarks(argc, argv, rep)) return 1;
  sb::print_medians(rep);
  std::printf("\n%-12s %12s %12s %12s %12s   (GFLOP/s, %s, %d threads)\n", "layer", "fused", "cl", "eager",
              "oneDNN", sb::isa, sb::threads);
  for (Layer const& l : layers) {
    std::string const base = std::string("BM_") + l.name;
    auto rate = [&](char const* which) {
      double ns = rep.median_ns(base + which);
      return ns > 0 ? l.flops() / ns : 0.0;
    };
    std::printf("%-12s %12.1f %12.1f %12.1f %12.1f\n", l.name, rate("_fused"), rate("_cl"), rate("_eager"),
                rate("_onednn"));
  }
  std::printf("\n");
  for (Layer const& l : layers) {
    std::string const base = std::string("BM_") + l.name;
    sb::report_ratio(rep, (std::string(l.name) + " fused/eager").c_str(), (base + "_eager").c_str(),
                     (base + "_fused").c_str(), 0);
#if defined(SOLDER_HAVE_DNNL)
    sb::report_ratio(rep, (std::string(l.name) + " solder/oneDNN").c_str(), (base + "_onednn").c_str(),
                     (base + "_fused").c_str(), 0);
    sb::report_ratio(rep, (std::string(l.name) + " channels-last/oneDNN").c_str(), (base + "_onednn").c_str(),
                     (base + "_cl").c_str(), 0.8);
#endif
  }
  sb::report_fraction(rep, "maxpool vs a copy of its bytes", "BM_copy_roof", "BM_maxpool_fused");
  sb::report_fraction(rep, "channels-last maxpool vs a copy of its bytes", "BM_copy_roof", "BM_maxpool_cl");
  return 0;
}
