// Factories: zeros, ones, full, arange, from_vector / from_pointer / to_vector, rand, randn,
// manual_seed, and the Philox-4x32-10 generator behind them (Random123 known-answer tests).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include <solder/solder.hpp>

namespace sd = solder;
using Catch::Matchers::Contains;

namespace {

template <class TT>
auto vec(TT const& t) {
  return sd::to_vector(t);
}

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};
template <class T>
Moments moments(std::vector<T> const& v) {
  Moments m;
  m.min = m.max = static_cast<double>(v.at(0));
  double s = 0;
  for (T x : v) {
    s += static_cast<double>(x);
    m.min = std::min(m.min, static_cast<double>(x));
    m.max = std::max(m.max, static_cast<double>(x));
  }
  m.mean = s / static_cast<double>(v.size());
  double q = 0;
  for (T x : v) q += (static_cast<double>(x) - m.mean) * (static_cast<double>(x) - m.mean);
  m.var = q / static_cast<double>(v.size() - 1);
  return m;
}

// Philox-4x32-10 with a full 128-bit counter and 64-bit key, written from the paper and
// Random123's philox.h, as an independent reference for the library's generator.
std::array<std::uint32_t, 4> philox_ref(std::array<std::uint32_t, 4> c,
                                        std::array<std::uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0];
    std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c[2];
    auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

using Block = sd::detail::Philox::Block;

std::uint64_t key64(std::uint32_t k0, std::uint32_t k1) {
  return std::uint64_t{k0} | (std::uint64_t{k1} << 32);
}

}  // namespace

TEST_CASE("zeros, ones, full", "[factories]") {
  auto z = sd::zeros<float>(2, 3);
  CHECK(z.shape() == sd::Index<2>{2, 3});
  CHECK(vec(z) == std::vector<float>(6, 0.f));
  auto zs = sd::zeros<double>(sd::shape(4));
  CHECK(vec(zs) == std::vector<double>(4, 0.0));
  auto o = sd::ones<std::int32_t>(sd::shape(2, 2, 2));
  static_assert(decltype(o)::rank == 3);
  CHECK(vec(o) == std::vector<std::int32_t>(8, 1));
  auto ob = sd::ones<bool>(3);
  CHECK(vec(ob) == std::vector<bool>(3, true));
  auto f = sd::full<float>(sd::shape(3, 2), -2.5f);
  CHECK(vec(f) == std::vector<float>(6, -2.5f));
  auto fi = sd::full<std::int64_t>(sd::shape(2), std::int64_t{1} << 40);
  CHECK(fi(1) == (std::int64_t{1} << 40));
  // Static extents pass through.
  auto fs = sd::full<float>(sd::shape(sd::fix<2>, 3), 1.f);
  static_assert(decltype(fs)::static_extents[0] == 2);
  // Empty and large (the parallel fill).
  CHECK(sd::zeros<float>(0, 5).numel() == 0);
  auto big = sd::full<float>(sd::shape(200001), 3.f);
  auto bv = vec(big);
  CHECK(std::count(bv.begin(), bv.end(), 3.f) == 200001);
}

TEST_CASE("arange", "[factories][arange]") {
  CHECK(vec(sd::arange<float>(5)) == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(vec(sd::arange<std::int32_t>(4)) == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(vec(sd::arange<std::int64_t>(2, 6)) == std::vector<std::int64_t>{2, 3, 4, 5});
  CHECK(vec(sd::arange<double>(1, 2, 0.25)) == std::vector<double>{1, 1.25, 1.5, 1.75});

  // Float steps: the count is ceil((end - start) / step), as torch.arange.
  auto tenth = sd::arange<float>(0, 1, 0.1);
  REQUIRE(tenth.numel() == 10);
  CHECK(tenth(9) == Approx(0.9f));
  CHECK(sd::arange<float>(0, 0.3, 0.1).numel() == 3);
  CHECK(sd::arange<double>(0, 1.05, 0.1).numel() == 11);

  // Negative steps.
  CHECK(vec(sd::arange<float>(5, 0, -1.5)) == std::vector<float>{5, 3.5f, 2, 0.5f});
  CHECK(vec(sd::arange<std::int32_t>(3, -3, -2)) == std::vector<std::int32_t>{3, 1, -1});

  // Empty ranges; a range against the step's sign throws, as torch.arange does.
  CHECK(sd::arange<float>(0).numel() == 0);
  CHECK(sd::arange<float>(3, 3).numel() == 0);
  CHECK(sd::arange<float>(3, 3, -1).numel() == 0);
  CHECK_THROWS_WITH(sd::arange<float>(5, 0), Contains("arange") && Contains("step 1"));
  CHECK_THROWS_WITH(sd::arange<float>(5, 0, 1), Contains("arange") && Contains("[5, 0)"));
  CHECK_THROWS_WITH(sd::arange<float>(0, 5, -1), Contains("arange") && Contains("step -1"));
  CHECK_THROWS_WITH(sd::arange<float>(-1), Contains("arange"));

  CHECK_THROWS_WITH(sd::arange<float>(0, 5, 0), Contains("arange") && Contains("step"));
}

TEST_CASE("from_vector, from_pointer and to_vector round-trip", "[factories][vector]") {
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  auto t = sd::from_vector(v);
  static_assert(decltype(t)::rank == 1);
  CHECK(t.shape() == sd::Index<1>{6});
  CHECK(vec(t) == v);
  CHECK(t.data() != v.data());  // a copy

  auto m = sd::from_vector(v, sd::shape(2, 3));
  CHECK(m.shape() == sd::Index<2>{2, 3});
  CHECK(m(1, 0) == 4.f);
  CHECK(vec(m) == v);

  auto p = sd::from_pointer(v.data() + 2, sd::shape(2, 2));
  CHECK(vec(p) == std::vector<float>{3, 4, 5, 6});
  v[2] = 100.f;
  CHECK(p(0, 0) == 3.f);  // copied, not referenced

  // to_vector follows the view's logical (row-major) order whatever the strides.
  auto tr = sd::transpose(m, 0, 1);
  CHECK(vec(tr) == std::vector<float>{1, 4, 2, 5, 3, 6});
  auto ex = sd::expand(sd::unsqueeze(sd::slice(m, 1, 0, 3, 2), 0), std::array<std::int64_t, 3>{2, 2, 2});
  CHECK(vec(ex) == std::vector<float>{1, 3, 4, 6, 1, 3, 4, 6});
  CHECK(vec(sd::from_vector(vec(tr), sd::shape(3, 2))) == vec(tr));

  std::vector<std::int64_t> iv{7, -8, 9};
  CHECK(vec(sd::from_vector(iv)) == iv);
  std::vector<double> dv{0.5, -1e300};
  CHECK(vec(sd::from_vector(dv)) == dv);

  CHECK(sd::from_vector(std::vector<float>{}).numel() == 0);
  CHECK_THROWS_WITH(sd::from_vector(v, sd::shape(4, 2)),
                    Contains("from_vector") && Contains("6 values") && Contains("[4, 2]"));
}

TEST_CASE("Philox4x32-10 matches Random123's known-answer vectors", "[factories][philox]") {
  using sd::detail::Philox;
  // The reference implementation above reproduces all three published vectors...
  CHECK(philox_ref({0, 0, 0, 0}, {0, 0}) == Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox_ref({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
        Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox_ref({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
        Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});

  // ...and the library's generator matches the one vector its API can express
  // (generate(seed, counter) fixes counter words 2 and 3 to zero).
  CHECK(Philox::generate(0, 0) == Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  static_assert(Philox::generate(0, 0)[0] == 0x6627e8d5u, "Philox is constexpr");

  // Seed = key (low 32 bits k0, high k1); counter = words 0 (low) and 1 (high).
  std::uint64_t seed = key64(0xa4093822u, 0x299f31d0u);
  std::uint64_t ctr = std::uint64_t{0x243f6a88u} | (std::uint64_t{0x85a308d3u} << 32);
  CHECK(Philox::generate(seed, ctr) == philox_ref({0x243f6a88u, 0x85a308d3u, 0, 0}, {0xa4093822u, 0x299f31d0u}));
  CHECK(Philox::generate(~std::uint64_t{0}, ~std::uint64_t{0}) ==
        philox_ref({0xffffffffu, 0xffffffffu, 0, 0}, {0xffffffffu, 0xffffffffu}));

  // Agreement over many keys and counters (a simple LCG walks them).
  std::uint64_t x = 0x123456789abcdefULL;
  auto next = [&] { return x = x * 6364136223846793005ULL + 1442695040888963407ULL; };
  for (int i = 0; i < 2000; ++i) {
    std::uint64_t s = next(), c = next();
    auto got = Philox::generate(s, c);
    auto want = philox_ref({static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32), 0, 0},
                           {static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(s >> 32)});
    if (got != want) {
      FAIL("seed " << s << " counter " << c << " differs from the reference");
    }
  }
  SUCCEED("2000 keys/counters agree");
}

TEST_CASE("to_unit maps the top 24 bits into [0, 1)", "[factories][philox]") {
  using sd::detail::Philox;
  CHECK(Philox::to_unit(0u) == 0.f);
  CHECK(Philox::to_unit(0xffu) == 0.f);
  CHECK(Philox::to_unit(0x80000000u) == 0.5f);
  CHECK(Philox::to_unit(0xffffffffu) < 1.f);
  CHECK(Philox::to_unit(0xffffffffu) == 1.f - 1.f / 16777216.f);
}

TEST_CASE("rand: uniform in [lo, hi) with the right moments", "[factories][rand]") {
  sd::manual_seed(1234);
  constexpr std::int64_t n = 1000000;
  float lo = -2.f, hi = 3.f;
  auto r = sd::rand<float>(sd::shape(n), lo, hi);
  static_assert(std::is_same_v<decltype(r)::value_type, float>);
  auto v = vec(r);
  auto m = moments(v);
  CHECK(m.min >= lo);
  CHECK(m.max < hi);
  // mean (lo + hi) / 2, sd of the mean (hi - lo) / sqrt(12 n) = 1.4e-3: 6 sigma.
  CHECK(m.mean == Approx(0.5).margin(6 * 5.0 / std::sqrt(12.0 * n)));
  // variance (hi - lo)^2 / 12 = 2.0833, sd ~ 1.9e-3 (relative 0.09%): 1%.
  CHECK(m.var == Approx(25.0 / 12.0).epsilon(0.01));
  // Ten equal bins each hold 10% +- 6 sigma (sigma = 3e-4).
  std::array<std::int64_t, 10> bins{};
  for (float x : v) ++bins[static_cast<std::size_t>(std::min(9.0, std::floor(static_cast<double>(x - lo) / (hi - lo) * 10)))];
  for (auto b : bins) CHECK(static_cast<double>(b) / n == Approx(0.1).margin(0.0018));

  // Defaults are [0, 1); doubles too; multi-dim shapes.
  auto u = vec(sd::rand<double>(sd::shape(1000, 10)));
  auto mu = moments(u);
  CHECK(mu.min >= 0.0);
  CHECK(mu.max < 1.0);
  CHECK(mu.mean == Approx(0.5).margin(0.01));
}

TEST_CASE("rand never returns hi (float rounding of lo + (hi - lo) u)", "[factories][rand]") {
  // Seed 39075: Philox(seed, 0) word 3 is 0xffffff7f, the largest unit value 1 - 2^-24.
  // 2 + 3 * (1 - 2^-24) rounds to 5 in float.
  sd::manual_seed(39075);
  auto r = sd::rand<float>(sd::shape(4), 2.f, 5.f);
  for (int i = 0; i < 4; ++i) {
    INFO("element " << i << " = " << r(i));
    CHECK(r(i) >= 2.f);
    CHECK(r(i) < 5.f);
  }
}

TEST_CASE("randn: mean 0, variance 1", "[factories][randn]") {
  sd::manual_seed(99);
  constexpr std::int64_t n = 1000000;
  auto v = vec(sd::randn<float>(sd::shape(n)));
  auto m = moments(v);
  // sd of the mean 1e-3; sd of the variance sqrt(2 / n) = 1.4e-3.
  CHECK(m.mean == Approx(0).margin(6e-3));
  CHECK(m.var == Approx(1).margin(1e-2));
  CHECK(std::isfinite(m.min));
  CHECK(std::isfinite(m.max));
  CHECK(m.min < -4.0);  // a million normals reach past 4 sigma on each side
  CHECK(m.max > 4.0);
  // Fraction within one sigma: 0.6827 (sd 4.7e-4).
  auto within = std::count_if(v.begin(), v.end(), [](float x) { return std::fabs(x) < 1.f; });
  CHECK(static_cast<double>(within) / n == Approx(0.6827).margin(3e-3));
  // Symmetry.
  auto neg = std::count_if(v.begin(), v.end(), [](float x) { return x < 0.f; });
  CHECK(static_cast<double>(neg) / n == Approx(0.5).margin(3e-3));

  auto d = sd::randn<double>(sd::shape(3, 5));
  static_assert(std::is_same_v<decltype(d)::value_type, double>);
  CHECK(d.shape() == sd::Index<2>{3, 5});
}

TEST_CASE("manual_seed makes draws reproducible; successive draws differ", "[factories][seed]") {
  sd::manual_seed(7);
  auto a = vec(sd::rand<float>(sd::shape(1001)));
  auto b = vec(sd::rand<float>(sd::shape(1001)));
  auto c = vec(sd::randn<float>(sd::shape(33, 3)));
  CHECK(a != b);

  sd::manual_seed(7);
  CHECK(vec(sd::rand<float>(sd::shape(1001))) == a);
  CHECK(vec(sd::rand<float>(sd::shape(1001))) == b);
  CHECK(vec(sd::randn<float>(sd::shape(33, 3))) == c);

  // A different seed, a different stream.
  sd::manual_seed(8);
  CHECK(vec(sd::rand<float>(sd::shape(1001))) != a);

  // The stream does not overlap: no draw repeats the first one's values.
  sd::manual_seed(7);
  auto first = vec(sd::rand<float>(sd::shape(4)));
  auto second = vec(sd::rand<float>(sd::shape(4)));
  CHECK(first != second);

  // Large draws (the parallel fill) are reproducible too.
  sd::manual_seed(5);
  auto big1 = vec(sd::randn<float>(sd::shape(100003)));
  sd::manual_seed(5);
  auto big2 = vec(sd::randn<float>(sd::shape(100003)));
  CHECK(big1 == big2);
}
