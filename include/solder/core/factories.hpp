// Factories (zeros, ones, full, arange, rand, randn, from a vector or a pointer) and the way
// back out (to_vector). Shapes are sd::shape(...) values or plain sizes.
#pragma once
#include <cmath>
#include <vector>

#include "../core/math.hpp"
#include "random.hpp"
#include "tensor.hpp"
#include "threads.hpp"

namespace solder {

namespace detail {

namespace cuda {
template <class T, class F>
void fill(T* p, std::int64_t n, F f);  // a kernel writing f(i) (backend/cuda/executor.hpp)
}  // namespace cuda

// A new tensor whose element i (row-major) is f(i). On sd::Cuda, f runs in a kernel: it is a
// functor whose call operator is SOLDER_HD.
template <class T, class Device = Host, auto E, class F>
BasicTensor<T, E, Device> generate(Shape<E> const& s, F const& f) {
  BasicTensor<T, E, Device> t(s);
  T* p = t.data();
  std::int64_t n = t.numel();
  if constexpr (std::is_same_v<Device, Host>) {
    SOLDER_OMP(parallel for schedule(static) if (n > 65536))
    for (std::int64_t i = 0; i < n; ++i) p[i] = f(i);
  } else {
    cuda::fill(p, n, f);
  }
  return t;
}

template <class T>
struct Constant {
  T value;
  SOLDER_HD T operator()(std::int64_t) const { return value; }
};

// rand's and randn's element i: a pure function of (seed, counter base, i), the same on the
// host and in a CUDA kernel (explicit fma: no contraction may change a rounding).
template <class T>
struct Uniform {
  std::uint64_t seed, base;
  T low, high;
  SOLDER_HD T operator()(std::int64_t i) const {
    auto b = Philox::generate(seed, base + static_cast<std::uint64_t>(i) / 4);
    T v = static_cast<T>(std::fma(high - low, static_cast<T>(Philox::to_unit(b[i % 4])), low));
    return v < high ? v : below(high);  // rounding can reach high: keep [low, high)
  }
  SOLDER_HD static T below(T x) {  // the largest value below x (std::nextafter(x, -inf))
    using namespace math::detail;
    if (x == T(0)) return -from_bits<T>(1);
    return from_bits<T>(x > T(0) ? to_bits(x) - 1 : to_bits(x) + 1);
  }
};
template <class T>
struct Normal {  // Box-Muller on Philox pairs
  std::uint64_t seed, base;
  SOLDER_HD T operator()(std::int64_t i) const {
    auto b = Philox::generate(seed, base + static_cast<std::uint64_t>(i) / 2);
    int k = static_cast<int>(i % 2) * 2;
    float u1 = 1.0f - Philox::to_unit(b[k]);  // (0, 1]: log stays finite
    float u2 = Philox::to_unit(b[k + 1]);
    float r = math::sqrt(-2.0f * math::log(u1));
    return static_cast<T>(r * math::cos(6.2831853071795864769f * u2));
  }
};

template <class... I>
auto shape_of(I... sizes) {
  return shape(static_cast<std::int64_t>(sizes)...);
}
// A braced list of sizes, as torch.zeros((2, 3)): zeros<float>({2, 3}).
template <std::size_t N>
auto shape_of(std::int64_t const (&sizes)[N]) {
  return Shape<dynamic_extents<static_cast<int>(N)>()>{std::to_array(sizes)};
}

}  // namespace detail

template <Element T, class Device = Host, auto E>
auto full(Shape<E> const& s, T value) {
  return detail::generate<T, Device>(s, detail::Constant<T>{value});
}
template <Element T, class Device = Host, auto E>
auto zeros(Shape<E> const& s) {
  return full<T, Device>(s, T(0));
}
template <Element T, class Device = Host, auto E>
auto ones(Shape<E> const& s) {
  return full<T, Device>(s, T(1));
}
template <Element T, class Device = Host, std::size_t N>
auto full(std::int64_t const (&sizes)[N], T value) {
  return full<T, Device>(detail::shape_of(sizes), value);
}
template <Element T, class Device = Host, std::size_t N>
auto zeros(std::int64_t const (&sizes)[N]) {
  return zeros<T, Device>(detail::shape_of(sizes));
}
template <Element T, class Device = Host, std::size_t N>
auto ones(std::int64_t const (&sizes)[N]) {
  return ones<T, Device>(detail::shape_of(sizes));
}
template <Element T, std::integral... I>
auto zeros(I... sizes) {
  return zeros<T>(detail::shape_of(sizes...));
}
template <Element T, std::integral... I>
auto ones(I... sizes) {
  return ones<T>(detail::shape_of(sizes...));
}

// arange(start, end, step): [start, end) in steps, as torch.arange.
template <Element T>
auto arange(double start, double end, double step = 1) {
  detail::check(step != 0, "arange: step must be non-zero");
  detail::check(step > 0 ? end >= start : end <= start, "arange: the range [", start, ", ", end,
                ") is inconsistent with the sign of step ", step);  // as torch.arange
  double n = std::ceil((end - start) / step);
  std::int64_t count = n > 0 ? static_cast<std::int64_t>(n) : 0;
  return detail::generate<T>(shape(count), [=](std::int64_t i) { return static_cast<T>(start + i * step); });
}
template <Element T>
auto arange(double end) {
  return arange<T>(0, end);
}

// rand: uniform in [low, high); randn: standard normal. The same seed gives the same numbers on
// every device: sd::rand<float, sd::Cuda>(s) equals sd::rand<float>(s).to<sd::Cuda>().
template <std::floating_point T, class Device = Host, auto E>
auto rand(Shape<E> const& s, T low = T(0), T high = T(1)) {
  auto& st = detail::rng_state();
  detail::Uniform<T> f{st.seed, st.offset, low, high};
  st.offset += static_cast<std::uint64_t>(numel_of<rank_of<E>>(s.dims) + 3) / 4;
  return detail::generate<T, Device>(s, f);
}
template <std::floating_point T, class Device = Host, std::size_t N>
auto rand(std::int64_t const (&sizes)[N], T low = T(0), T high = T(1)) {
  return rand<T, Device>(detail::shape_of(sizes), low, high);
}
template <std::floating_point T, class Device = Host, auto E>
auto randn(Shape<E> const& s) {
  auto& st = detail::rng_state();
  detail::Normal<T> f{st.seed, st.offset};
  st.offset += static_cast<std::uint64_t>(numel_of<rank_of<E>>(s.dims) + 1) / 2;
  return detail::generate<T, Device>(s, f);
}

template <std::floating_point T, class Device = Host, std::size_t N>
auto randn(std::int64_t const (&sizes)[N]) {
  return randn<T, Device>(detail::shape_of(sizes));
}

// Copies: from a vector (rank 1, or reshaped to `s`) or from a pointer to numel(s) values.
template <Element T, auto E>
auto from_pointer(T const* data, Shape<E> const& s) {
  return detail::generate<T>(s, [data](std::int64_t i) { return data[i]; });
}
template <Element T>
auto from_vector(std::vector<T> const& v) {
  // Element by element: std::vector<bool> has no data().
  return detail::generate<T>(shape(static_cast<std::int64_t>(v.size())),
                             [&v](std::int64_t i) { return T(v[static_cast<std::size_t>(i)]); });
}
template <Element T, auto E>
auto from_vector(std::vector<T> const& v, Shape<E> const& s) {
  detail::check(static_cast<std::int64_t>(v.size()) == numel_of<rank_of<E>>(s.dims),
                "from_vector: ", v.size(), " values for shape ",
                shape_string<rank_of<E>>(s.dims));
  return detail::generate<T>(s, [&v](std::int64_t i) { return T(v[static_cast<std::size_t>(i)]); });
}

// The elements in row-major order, whatever the tensor's strides.
template <TensorType TT>
std::vector<typename TT::value_type> to_vector(TT const& t) {
  if constexpr (!std::is_same_v<typename TT::device_type, Host>) {
    return to_vector(t.template to<Host>());
  } else {
    constexpr int R = TT::rank;
    std::vector<typename TT::value_type> out(static_cast<std::size_t>(t.numel()));
    Index<R> idx{};
    for (std::size_t k = 0; k < out.size(); ++k) {
      out[k] = t.data()[t.offset_of(idx)];
      for (int a = R - 1; a >= 0; --a) {
        if (++idx[a] < t.shape()[a]) break;
        idx[a] = 0;
      }
    }
    return out;
  }
}

}  // namespace solder
