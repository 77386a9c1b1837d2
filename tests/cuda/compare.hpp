// Comparing what the GPU computes with what the host computes from the same inputs, for the
// tests that need a GPU (test_cuda_*.cu): element-wise maths must agree bit for bit (one functor
// on both sides, no fma contraction), reductions within a tolerance (another fold order).
#pragma once
#include <catch2/catch.hpp>
#include <solder/solder.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

namespace sd = solder;

namespace gpu_test {

// Inputs with the special values every op must handle, then random ones of both signs.
template <class T>
sd::Tensor<T, 2> inputs(std::int64_t rows, std::int64_t cols, T scale) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::vector<T> specials{T(0), -T(0), T(1), T(-1), inf, -inf, std::numeric_limits<T>::quiet_NaN(),
                          std::numeric_limits<T>::denorm_min(), T(1e-30), T(-88.5), T(89.5), T(700)};
  auto r = sd::rand<T>(sd::shape(rows, cols), -scale, scale);
  auto v = sd::to_vector(r);
  for (std::size_t i = 0; i < specials.size() && i < v.size(); ++i) v[i] = specials[i];
  return sd::from_vector(v, sd::shape(rows, cols));
}

// One assertion per comparison, whatever the size: how many elements differ and the first few
// (an assertion per element made the large cases take minutes in a -O0 host build).
// agrees(i): element i agrees; describe(i): what it holds on each side.
template <class Agrees, class Describe>
void all_agree(std::size_t n, Agrees const& agrees, Describe const& describe) {
  std::size_t differ = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < n; ++i) {
    if (agrees(i)) continue;
    if (differ < 5) first << "\n  element " << i << ": " << describe(i);
    ++differ;
  }
  INFO(differ << " of " << n << " elements differ" << first.str());
  CHECK(differ == 0);
}

template <class A, class B>
void same_bits(A const& device, B const& host) {
  auto d = sd::to_vector(device);
  auto h = sd::to_vector(host);
  REQUIRE(d.size() == h.size());
  all_agree(
      d.size(),
      [&](std::size_t i) {
        if constexpr (sd::is_floating_v<typename decltype(d)::value_type>) {
          if (std::isnan(static_cast<double>(h[i]))) return std::isnan(static_cast<double>(d[i]));
          return std::memcmp(&d[i], &h[i], sizeof(d[i])) == 0;
        } else {
          return d[i] == h[i];
        }
      },
      [&](std::size_t i) {
        std::ostringstream os;
        os << "device " << static_cast<double>(d[i]) << ", host " << static_cast<double>(h[i]);
        return os.str();
      });
}

template <class A, class B>
void close(A const& device, B const& host, double rel) {
  auto d = sd::to_vector(device);
  auto h = sd::to_vector(host);
  REQUIRE(d.size() == h.size());
  all_agree(
      d.size(),
      [&](std::size_t i) {
        double dv = static_cast<double>(d[i]), hv = static_cast<double>(h[i]);
        return std::isnan(hv) ? std::isnan(dv) : std::abs(dv - hv) <= rel * (1 + std::abs(hv));
      },
      [&](std::size_t i) {
        std::ostringstream os;
        os << "device " << static_cast<double>(d[i]) << ", host " << static_cast<double>(h[i]);
        return os.str();
      });
}

// As close, with each element's bound scaled by a magnitude (sum |x| for a sum, whose value
// may cancel to near 0 while its rounding grows with the terms): |device - host| <= rel (1 + mag).
template <class A, class B, class M>
void close(A const& device, B const& host, M const& magnitude, double rel) {
  auto d = sd::to_vector(device);
  auto h = sd::to_vector(host);
  auto m = sd::to_vector(magnitude);
  REQUIRE(d.size() == h.size());
  REQUIRE(m.size() == h.size());
  all_agree(
      d.size(),
      [&](std::size_t i) {
        double dv = static_cast<double>(d[i]), hv = static_cast<double>(h[i]);
        return std::abs(dv - hv) <= rel * (1 + std::abs(static_cast<double>(m[i])));
      },
      [&](std::size_t i) {
        std::ostringstream os;
        os << "device " << static_cast<double>(d[i]) << ", host " << static_cast<double>(h[i])
           << ", magnitude " << static_cast<double>(m[i]);
        return os.str();
      });
}

// Applies f to the host tensors and to their device copies and compares bit for bit.
template <class F, class... H>
void same_on_both(F const& f, H const&... host) {
  same_bits(sd::eval(f(host.template to<sd::Cuda>()...)), sd::eval(f(host...)));
}

// Evaluates e, checking that `kernels` kernels run (kernel_count's, where no run-time break).
template <class E>
auto counted(E const& e, int kernels) {
  auto const before = sd::detail::kernels_run();
  auto r = sd::eval(e);
  CHECK(sd::detail::kernels_run() - before == static_cast<std::uint64_t>(kernels));
  return r;
}

// Host values in [-1, 1] of the given sizes.
template <class T, class... S>
auto host_rand(S... sizes) {
  return sd::rand<T>(sd::shape(sizes...), T(-1), T(1));
}

}  // namespace gpu_test
