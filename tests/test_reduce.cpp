// Reductions against a double-precision reference: sum mean prod max min amax amin argmax
// argmin var, over each single dim (negative too), dim lists and all dims, with and without
// keepdim, ranks 1..4, contiguous and strided (the reduced axis transposed), empty and prime
// shapes, a 10M-element sum, ties and NaN, integer inputs, and reductions fused with their
// producers and consumers.
//
// Tolerances, in the tested dtype (eps = its machine epsilon):
//   sum:  any summation order of n terms errs by at most (n-1) eps sum|x| (the bound of
//         recursive summation holds for every tree, so it covers the lane-blocked and
//         thread-split orders): bound n eps sum|x| per output.
//   mean: the sum's bound / n, plus the final division (1 ulp).
//   prod: n roundings of relative eps each: 2n+1 ulp (eps |p| <= 2 ulp of p).
//   var:  every term (x - mean)^2 is >= 0, so the relative error is about (n + 4) eps:
//         2(n + 4) + 1 ulp.
//   max/min/argmax/argmin and integer reductions: exact.
#include "reference.hpp"
#include "test_scale.hpp"

#include <algorithm>
#include <array>
#include <random>
#include <vector>
#include <string>

namespace sd = solder;
using ref::Array;

namespace {

#define SD_RED(fn) [](auto const& x, auto const&... a) { return sd::fn(x, a...); }

std::int64_t line_length(Array const& x, std::vector<int> const& dims) {
  std::int64_t n = 1;
  for (int d : dims) n *= x.shape[static_cast<std::size_t>(ref::wrap(d, static_cast<int>(x.shape.size())))];
  return n;
}

// Every floating reduction of x over `dims`, given to solder as `dimarg...` (one int64 dim, or
// an int[N] list), with keepdim or not.
template <bool Keep, class TT, class... D>
void float_reductions(TT const& x, std::vector<int> const& dims, std::string const& label,
                      D const&... dimarg) {
  using T = typename TT::value_type;
  constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
  Array X = ref::of(x);
  std::int64_t n = line_length(X, dims);
  std::string what = label + (Keep ? " keepdim" : "");
  auto run = [&](auto const& op) {
    if constexpr (Keep) return sd::eval(op(x, dimarg..., sd::keepdim));
    else return sd::eval(op(x, dimarg...));
  };
  auto R = [&](auto const& fold) { return ref::reduce(X, dims, Keep, fold); };

  Array abs_sum = R(ref::fsum_abs);
  auto s = run(SD_RED(sum));
  static_assert(std::is_same_v<typename decltype(s)::value_type, T>);
  ref::check_close(s, R(ref::fsum), ref::Tol{1, tiny, static_cast<double>(n)}, "sum " + what, &abs_sum);
  if (n > 0) {
    Array abs_mean = ref::map([&](double v) { return v / static_cast<double>(n); }, abs_sum);
    ref::check_close(run(SD_RED(mean)), R(ref::fmean), ref::Tol{1, tiny, static_cast<double>(n)},
                     "mean " + what, &abs_mean);
  }
  ref::check_close(run(SD_RED(prod)), R(ref::fprod), ref::Tol{2.0 * static_cast<double>(n) + 1, tiny},
                   "prod " + what);
  if (n > 0) {
    ref::check_equal(run(SD_RED(max)), R(ref::fmax), "max " + what);
    ref::check_equal(run(SD_RED(min)), R(ref::fmin), "min " + what);
    ref::check_equal(run(SD_RED(amax)), R(ref::fmax), "amax " + what);
    ref::check_equal(run(SD_RED(amin)), R(ref::fmin), "amin " + what);
  }
  if constexpr (sizeof...(D) == 1 && (std::is_integral_v<D> && ...)) {  // single-dim only ops
    if (n > 0) {
      auto am = run(SD_RED(argmax));
      static_assert(std::is_same_v<typename decltype(am)::value_type, std::int64_t>);
      ref::check_equal(am, R(ref::fargmax), "argmax " + what);
      ref::check_equal(run(SD_RED(argmin)), R(ref::fargmin), "argmin " + what);
    }
    if (n > 1) {
      double tol = 2.0 * static_cast<double>(n + 4) + 1;
      auto v1 = [&] {
        if constexpr (Keep) return sd::eval(sd::var(x, dimarg..., sd::keepdim));
        else return sd::eval(sd::var(x, dimarg...));
      }();
      ref::check_close(v1, R(ref::fvar(1)), ref::Tol{tol, tiny}, "var " + what);
      auto v0 = [&] {
        if constexpr (Keep) return sd::eval(sd::var(x, dimarg..., sd::keepdim, 0.0));
        else return sd::eval(sd::var(x, dimarg..., 0.0));
      }();
      ref::check_close(v0, R(ref::fvar(0)), ref::Tol{tol, tiny}, "var(correction=0) " + what);
    }
  }
}

// Every single dim (as d and as d - rank), with and without keepdim.
template <class TT>
void all_single_dims(TT const& x, std::string const& label) {
  constexpr int R = TT::rank;
  for (int d = 0; d < R; ++d) {
    std::string l = label + " dim " + std::to_string(d);
    float_reductions<false>(x, {d}, l, std::int64_t{d});
    float_reductions<true>(x, {d}, l, std::int64_t{d});
    float_reductions<false>(x, {d - R}, l + " (as " + std::to_string(d - R) + ")", std::int64_t{d - R});
  }
}

// Values in [0.5, 1.5] keep products of up to a few hundred terms in range.
template <class T, class... I>
auto positive(I... sizes) {
  return ref::uniform<T>(0.5, 1.5, sizes...);
}

// A float sum in the order the host folds the terms of a reduction that is not one run
// (columns, strided inputs), a cascade (backend/cascade.hpp): the terms into level 0, each level
// passed up into the next after 16 of what it takes, the top one (7 levels) taking the rest; the
// levels then folded from the first up.
struct CascadeSum {
  static constexpr int levels = 7;
  float level[levels] = {};
  std::int64_t n = 0;
  void add(float v) {
    level[0] += v;
    ++n;
    std::int64_t span = 16;
    for (int k = 0; k + 1 < levels && n % span == 0; ++k, span *= 16) {
      level[k + 1] += level[k];
      level[k] = 0;
    }
  }
  float result() const {
    float r = level[0];
    for (int k = 1; k < levels; ++k) r = level[k] + r;
    return r;
  }
};

}  // namespace

// float runs every rank; double (the same code paths at another width) ranks 2 and 3, which
// keeps the compile time of this file reasonable in sanitizer builds.
TEMPLATE_TEST_CASE("single-dim reductions, ranks 1 to 4, contiguous and strided",
                   "[reduce][dims]", float, double) {
  using T = TestType;
  constexpr bool all_ranks = std::is_same_v<T, float>;
  if constexpr (all_ranks) SECTION("rank 1") {
    for (std::int64_t n : {1, 7, 1000}) {
      auto x = ref::uniform<T>(-2, 2, n);
      all_single_dims(x, "[" + std::to_string(n) + "]");
    }
    auto big = ref::uniform<T>(-2, 2, 3 * 211);
    all_single_dims(sd::slice(big, 0, 1, 3 * 211, 3), "step-3 slice of [633]");
  }
  SECTION("rank 2") {
    auto x = ref::uniform<T>(-2, 2, 13, 17);
    all_single_dims(x, "[13,17]");
    all_single_dims(sd::transpose(x, 0, 1), "transposed [17,13]");
    all_single_dims(ref::uniform<T>(-2, 2, 1, 5), "[1,5]");
    all_single_dims(ref::uniform<T>(-2, 2, 5, 1), "[5,1]");
    auto p = positive<T>(3, 100);
    all_single_dims(p, "[3,100] positive");
  }
  SECTION("rank 3") {
    auto x = ref::uniform<T>(-2, 2, 3, 5, 7);
    all_single_dims(x, "[3,5,7]");
    all_single_dims(sd::permute(x, {2, 0, 1}), "permuted [7,3,5]");
    all_single_dims(sd::transpose(x, 1, 2), "transposed [3,7,5]");
  }
  if constexpr (all_ranks) SECTION("rank 4") {
    auto x = ref::uniform<T>(-2, 2, 2, 3, 4, 5);
    all_single_dims(x, "[2,3,4,5]");
    all_single_dims(sd::permute(x, {3, 2, 1, 0}), "reversed [5,4,3,2]");
  }
}

TEMPLATE_TEST_CASE("reductions over dim lists and all dims", "[reduce][dims]", float, double) {
  using T = TestType;
  auto x3 = ref::uniform<T>(-2, 2, 3, 5, 7);
  auto x4 = ref::uniform<T>(-2, 2, 2, 3, 4, 5);
  auto x3t = sd::permute(x3, {2, 1, 0});  // [7,5,3], every axis strided
  int d02[] = {0, 2}, dm10[] = {-1, 0}, d12[] = {1, 2}, d123[] = {1, 2, 3}, d013[] = {0, 1, 3},
      d0123[] = {3, 1, 0, 2}, d012[] = {0, 1, 2};
  float_reductions<false>(x3, {0, 2}, "[3,5,7] {0,2}", d02);
  float_reductions<true>(x3, {0, 2}, "[3,5,7] {0,2}", d02);
  float_reductions<false>(x3, {-1, 0}, "[3,5,7] {-1,0}", dm10);
  float_reductions<true>(x3t, {0, 2}, "permuted [7,5,3] {0,2}", d02);
  float_reductions<false>(x3t, {1, 2}, "permuted [7,5,3] {1,2}", d12);
  float_reductions<false>(x3, {0, 1, 2}, "[3,5,7] {0,1,2}", d012);
  float_reductions<true>(x3t, {0, 1, 2}, "permuted [7,5,3] {0,1,2}", d012);
  // The reduced dims end in a contiguous run of >= 16 that is not all of them (BatchNorm1d's
  // statistics over {0, 2} of [N, C, L]): each run is folded as a block, the runs in order.
  auto xr = ref::uniform<T>(-2, 2, 6, 3, 40);
  float_reductions<true>(xr, {0, 2}, "[6,3,40] {0,2}", d02);
  float_reductions<false>(sd::slice(xr, 1, 1, 3), {0, 2}, "sliced [6,2,40] {0,2}", d02);
  if constexpr (std::is_same_v<T, float>) {  // rank 4: float only (compile time)
    float_reductions<false>(x4, {1, 2, 3}, "[2,3,4,5] {1,2,3}", d123);
    float_reductions<true>(x4, {0, 1, 3}, "[2,3,4,5] {0,1,3}", d013);
    float_reductions<false>(x4, {3, 1, 0, 2}, "[2,3,4,5] {3,1,0,2}", d0123);
    float_reductions<true>(sd::permute(x4, {1, 3, 0, 2}), {0, 2}, "permuted [3,5,2,4] {0,2}", d02);
  } else {
    (void)d123, (void)d013, (void)d0123;
  }

  SECTION("all dims: rank-0 results and flat argmax") {
    auto check_all = [&](auto const& x, std::string const& label) {
      Array X = ref::of(x);
      std::int64_t n = X.numel();
      constexpr double tiny = static_cast<double>(std::numeric_limits<T>::min());
      Array abs_sum = ref::reduce(X, ref::all_dims(X), false, ref::fsum_abs);
      auto s = sd::eval(sd::sum(x));
      static_assert(decltype(s)::rank == 0);
      ref::check_close(s, ref::reduce(X, ref::all_dims(X), false, ref::fsum),
                       ref::Tol{1, tiny, static_cast<double>(n)}, "sum(x) " + label, &abs_sum);
      CHECK(s.item() == ref::of(s)[0]);
      Array abs_mean = ref::map([&](double v) { return v / static_cast<double>(n); }, abs_sum);
      ref::check_close(sd::eval(sd::mean(x)), ref::reduce(X, ref::all_dims(X), false, ref::fmean),
                       ref::Tol{1, tiny, static_cast<double>(n)}, "mean(x) " + label, &abs_mean);
      ref::check_equal(sd::eval(sd::max(x)), ref::reduce(X, ref::all_dims(X), false, ref::fmax), "max(x) " + label);
      ref::check_equal(sd::eval(sd::amin(x)), ref::reduce(X, ref::all_dims(X), false, ref::fmin), "amin(x) " + label);
      auto am = sd::eval(sd::argmax(x));
      static_assert(std::is_same_v<typename decltype(am)::value_type, std::int64_t>);
      ref::check_equal(am, ref::reduce(X, ref::all_dims(X), false, ref::fargmax), "argmax(x) " + label);
      ref::check_equal(sd::eval(sd::argmin(x)), ref::reduce(X, ref::all_dims(X), false, ref::fargmin),
                       "argmin(x) " + label);
    };
    check_all(x3, "[3,5,7]");
    check_all(x3t, "permuted [7,5,3]");
    if constexpr (std::is_same_v<T, float>) {
      check_all(x4, "[2,3,4,5]");
      check_all(sd::slice(x4, 3, 0, 5, 2), "sliced [2,3,4,3]");
      check_all(sd::slice(ref::uniform<T>(-2, 2, 40, 100), 1, 10, 60), "sliced [40,50]: runs of 50");
      check_all(ref::uniform<T>(-2, 2, 1), "[1]");
      check_all(ref::uniform<T>(-2, 2, 4099), "[4099]");
    }
  }
}

TEST_CASE("empty and size-1 reductions", "[reduce][empty]") {
  auto e = sd::zeros<float>(0, 5);
  // Sum/prod over an empty dim are their identities; over a non-empty dim the result is empty.
  ref::check_equal(sd::eval(sd::sum(e, 0)), Array({5}, 0.0), "sum over the empty dim");
  ref::check_equal(sd::eval(sd::sum(e, 0, sd::keepdim)), Array({1, 5}, 0.0), "sum keepdim");
  ref::check_equal(sd::eval(sd::prod(e, 0)), Array({5}, 1.0), "prod over the empty dim");
  ref::check_equal(sd::eval(sd::sum(e)), Array({}, 0.0), "sum of an empty tensor");
  CHECK(sd::eval(sd::sum(e)).item() == 0.f);
  auto s1 = sd::eval(sd::sum(e, 1));
  CHECK(s1.shape() == sd::Index<1>{0});
  auto m1 = sd::eval(sd::max(e, 1));
  CHECK(m1.shape() == sd::Index<1>{0});
  // mean of nothing is NaN (0/0), as torch.mean.
  CHECK(std::isnan(sd::eval(sd::mean(e)).item()));
  // max/min/argmax over an empty dim have no identity: sd::Error (PyTorch raises too).
  CHECK_THROWS_AS(sd::max(e, 0), sd::Error);
  CHECK_THROWS_AS(sd::amin(e, 0), sd::Error);
  CHECK_THROWS_AS(sd::argmax(e, 0), sd::Error);
  CHECK_THROWS_AS(sd::max(e), sd::Error);
  CHECK_THROWS_AS(sd::argmin(e), sd::Error);
  // Bad dims.
  auto x = ref::uniform<float>(-1, 1, 3, 4);
  CHECK_THROWS_AS(sd::sum(x, 2), sd::Error);
  CHECK_THROWS_AS(sd::sum(x, -3), sd::Error);
  int dup[] = {1, -1};
  CHECK_THROWS_AS(sd::sum(x, dup), sd::Error);
  // Reducing a size-1 dim is the identity map (plus the fold's own rounding: none).
  auto one = ref::uniform<float>(-1, 1, 4, 1, 3);
  Array O = ref::of(one);
  O.shape = {4, 3};
  ref::check_equal(sd::eval(sd::sum(one, 1)), O, "sum over a size-1 dim");
  ref::check_equal(sd::eval(sd::max(one, 1)), O, "max over a size-1 dim");
  ref::check_equal(sd::eval(sd::argmax(one, 1)), Array({4, 3}, 0.0), "argmax over a size-1 dim");
}

TEST_CASE("argmax/argmin: ties give the first index, NaN the first NaN", "[reduce][arg]") {
  // Many ties: values in {0,..,3}; lines long enough for the lane-blocked path (> 16 lanes, 2
  // blocks) and short ones for the scalar tail.
  for (std::int64_t len : {5, 33, 2100}) {
    auto base = ref::uniform<std::int32_t>(0, 3, 6, len);
    auto x = sd::eval(sd::cast<float>(base));
    Array X = ref::of(x);
    INFO("row length " << len);
    ref::check_equal(sd::eval(sd::argmax(x, 1)), ref::reduce(X, {1}, false, ref::fargmax), "argmax ties");
    ref::check_equal(sd::eval(sd::argmin(x, 1)), ref::reduce(X, {1}, false, ref::fargmin), "argmin ties");
    ref::check_equal(sd::eval(sd::argmax(x, 0, sd::keepdim)), ref::reduce(X, {0}, true, ref::fargmax),
                     "argmax ties dim 0");
    ref::check_equal(sd::eval(sd::argmax(x)), ref::reduce(X, {0, 1}, false, ref::fargmax), "flat argmax ties");
    auto xt = sd::transpose(x, 0, 1);
    ref::check_equal(sd::eval(sd::argmax(xt, 0)), ref::reduce(ref::transpose(X, 0, 1), {0}, false, ref::fargmax),
                     "argmax ties, strided");
    ref::check_equal(sd::eval(sd::argmin(xt)), ref::reduce(ref::transpose(X, 0, 1), {0, 1}, false, ref::fargmin),
                     "flat argmin ties, strided");
    if (len >= 33) {  // a column slice: flat argmax folds each row's run of len - 16 as a block
      auto xs = sd::slice(x, 1, 16, len);
      ref::check_equal(sd::eval(sd::argmax(xs)), ref::reduce(ref::of(xs), {0, 1}, false, ref::fargmax),
                       "flat argmax ties, runs of a slice");
      ref::check_equal(sd::eval(sd::argmin(xs)), ref::reduce(ref::of(xs), {0, 1}, false, ref::fargmin),
                       "flat argmin ties, runs of a slice");
    }
  }
  // All equal: index 0 everywhere.
  auto flat = sd::full<float>(sd::shape(3, 4000), 2.f);
  ref::check_equal(sd::eval(sd::argmax(flat, 1)), Array({3}, 0.0), "all equal -> 0");
  ref::check_equal(sd::eval(sd::argmin(flat)), Array({}, 0.0), "all equal -> 0 (flat)");
  // NaN: the first NaN wins, wherever it is and whatever follows.
  std::vector<float> v(3000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97);
  float const qnan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t pos : {std::size_t{0}, std::size_t{17}, std::size_t{1500}, std::size_t{2999}}) {
    auto w = v;
    w[pos] = qnan;
    if (pos + 5 < w.size()) w[pos + 5] = qnan;  // a later NaN must not win
    w[2000 % w.size()] = 1000.f;                 // a larger finite value must not win
    auto t = ref::values<float>(w, 3000);
    INFO("NaN at " << pos);
    CHECK(sd::eval(sd::argmax(t)).item() == static_cast<std::int64_t>(pos));
    CHECK(sd::eval(sd::argmin(t)).item() == static_cast<std::int64_t>(pos));
    CHECK(std::isnan(sd::eval(sd::max(t)).item()));
    CHECK(std::isnan(sd::eval(sd::amin(t, 0)).item()));
    auto t2 = sd::view(t, std::array<std::int64_t, 2>{3, 1000});
    ref::check_equal(sd::eval(sd::argmax(t2, 1)), ref::reduce(ref::of(t2), {1}, false, ref::fargmax),
                     "argmax rows with NaN");
    ref::check_equal(sd::eval(sd::max(t2, 1)), ref::reduce(ref::of(t2), {1}, false, ref::fmax), "max rows with NaN");
    ref::check_equal(sd::eval(sd::min(sd::transpose(t2, 0, 1), 0)),
                     ref::reduce(ref::transpose(ref::of(t2), 0, 1), {0}, false, ref::fmin), "min strided with NaN");
    auto runs = sd::slice(t2, 1, 0, 999);  // runs of 999, one per row
    ref::check_equal(sd::eval(sd::argmax(runs)), ref::reduce(ref::of(runs), {0, 1}, false, ref::fargmax),
                     "flat argmax of runs with NaN");
  }
}

TEST_CASE("integer and bool reductions widen like PyTorch", "[reduce][int]") {
  // int32 values near 2^31 / 2: an int32 accumulator would overflow after three terms.
  auto x = ref::uniform<std::int32_t>(1000000000, 2000000000, 7, 13);
  Array X = ref::of(x);
  auto s = sd::eval(sd::sum(x, 1));
  static_assert(std::is_same_v<typename decltype(s)::value_type, std::int64_t>);
  ref::check_equal(s, ref::reduce(X, {1}, false, ref::fsum), "sum int32 -> int64");
  ref::check_equal(sd::eval(sd::sum(x)), ref::reduce(X, {0, 1}, false, ref::fsum), "sum(x) int32 -> int64");
  ref::check_equal(sd::eval(sd::sum(sd::transpose(x, 0, 1), 0, sd::keepdim)),
                   ref::reduce(ref::transpose(X, 0, 1), {0}, true, ref::fsum), "sum strided int32");
  ref::check_equal(sd::eval(sd::max(x, 0)), ref::reduce(X, {0}, false, ref::fmax), "max int32");
  ref::check_equal(sd::eval(sd::amin(x, 1, sd::keepdim)), ref::reduce(X, {1}, true, ref::fmin), "amin int32");
  ref::check_equal(sd::eval(sd::argmax(x, 1)), ref::reduce(X, {1}, false, ref::fargmax), "argmax int32");
  static_assert(std::is_same_v<typename decltype(sd::max(x, 0))::value_type, std::int32_t>);

  auto sm = ref::uniform<std::int64_t>(-3, 3, 5, 9);
  Array SM = ref::of(sm);
  auto p = sd::eval(sd::prod(sm, 1));
  static_assert(std::is_same_v<typename decltype(p)::value_type, std::int64_t>);
  ref::check_equal(p, ref::reduce(SM, {1}, false, ref::fprod), "prod int64");
  ref::check_equal(sd::eval(sd::sum(sm, 0)), ref::reduce(SM, {0}, false, ref::fsum), "sum int64");
  ref::check_equal(sd::eval(sd::argmin(sm, 0)), ref::reduce(SM, {0}, false, ref::fargmin), "argmin int64 ties");

  auto b = ref::uniform<bool>(0, 1, 11, 37);
  Array B = ref::of(b);
  auto bs = sd::eval(sd::sum(b, 1));
  static_assert(std::is_same_v<typename decltype(bs)::value_type, std::int64_t>);
  ref::check_equal(bs, ref::reduce(B, {1}, false, ref::fsum), "sum bool counts");
  ref::check_equal(sd::eval(sd::sum(b)), ref::reduce(B, {0, 1}, false, ref::fsum), "sum(bool)");
}

TEST_CASE("a large full sum stays accurate", "[reduce][large]") {
  // 10M floats in [0, 1): the float result must be within 1e-5 relative of the exact sum.
  // Justification: the lane-blocked sum adds 128 values per lane (16 lanes), folds the lanes
  // in a tree, then adds the ~4900 block sums (~1024 each) to a running total. Modelling each
  // rounding of that total (<= ulp(total)/2, total ~ 1024 k after k blocks) as uniform noise,
  // the RMS error is sqrt(sum_k ulp_k^2 / 12) ~ 7, i.e. 1.4e-6 relative (fewer additions per
  // thread with two threads); the lane sums add ~1e-8. 1e-5 is ~7 sigma. A naive float
  // running sum has an RMS error of ~6e-5 here, and no summation order is worse than the
  // (n-1) eps bound (~0.6).
  // (SOLDER_TEST_SCALE=small: 1M, still ~490 blocks of 2048 on each thread count.)
  std::int64_t const n = ref::sized<std::int64_t>(10'000'000, 1'000'000);
  auto x = ref::uniform<float>(0, 1, n);
  long double exact = 0;
  for (std::int64_t i = 0; i < n; ++i) exact += x.data()[i];
  for (int threads : {1, 2}) {
    sd::set_num_threads(threads);
    INFO("threads = " << threads);
    float s = sd::eval(sd::sum(x)).item();
    double rel = std::fabs(static_cast<double>(s) - static_cast<double>(exact)) / static_cast<double>(exact);
    INFO("float sum " << s << " vs " << static_cast<double>(exact) << ", relative error " << rel);
    CHECK(rel < 1e-5);
    float m = sd::eval(sd::mean(x)).item();
    CHECK(std::fabs(static_cast<double>(m) - static_cast<double>(exact) / n) < 1e-5 * static_cast<double>(exact) / n);
    // The same sum over a [10, n / 10] view by rows, then over the partial sums.
    auto rows = sd::view(x, std::array<std::int64_t, 2>{10, n / 10});
    auto rs = sd::eval(sd::sum(rows, 1));
    Array RS = ref::reduce(ref::of(rows), {1}, false, ref::fsum);
    for (std::int64_t i = 0; i < 10; ++i) {
      double r = std::fabs(static_cast<double>(rs.data()[i]) - RS[i]) / RS[i];
      CHECK(r < 1e-5);
    }
  }
  sd::set_num_threads(2);
}

TEST_CASE("reductions fuse with producers and consumers", "[reduce][fused]") {
  auto x = ref::uniform<float>(-2, 2, 13, 17);
  Array X = ref::of(x);
  constexpr double tiny = 1e-38;
  {
    auto e = sd::sum(x * x + 1.f, 1);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    Array E = ref::reduce(ref::map([](double v) { return v * v + 1; }, X), {1}, false, ref::fsum);
    // Each term has 2 roundings (relative), the sum of 17 positive terms 17 more.
    ref::check_close(sd::eval(e), E, ref::Tol{2 * (17 + 2) + 1, tiny}, "sum(x*x+1, 1)");
  }
  {
    auto e = sd::sqrt(sd::sum(x * x, 1)) * 2.f;
    static_assert(sd::kernel_count<decltype(e)> == 1);
    Array E = ref::map([](double v) { return std::sqrt(v) * 2; }, ref::reduce(ref::map([](double v) { return v * v; }, X),
                                                                             {1}, false, ref::fsum));
    // sqrt halves the sum's relative error (18 eps), then rounds: ~11 ulp.
    ref::check_close(sd::eval(e), E, ref::Tol{2 * 11 + 1, tiny}, "sqrt(sum(x*x,1))*2");
  }
  {
    auto xt = sd::transpose(x, 0, 1);  // reduce a strided axis, fused with exp and a bias
    auto bias = ref::uniform<float>(-1, 1, 13);
    auto e = sd::max(sd::exp(xt) + bias, 0) - 1.f;
    static_assert(sd::kernel_count<decltype(e)> == 1);
    Array E = ref::map([](double v) { return v - 1; },
                       ref::reduce(ref::map([](double v, double b) { return double(float(std::exp(v))) + b; },
                                            ref::transpose(X, 0, 1), ref::of(bias)),
                                   {0}, false, ref::fmax));
    ref::check_close(sd::eval(e), E, ref::Tol{8, 1e-6}, "max(exp(xt)+bias, 0)-1");
  }
  {
    // A full reduction with a consumer: a rank-0 kernel.
    auto e = sd::sqrt(sd::sum(x * x)) * 2.f;
    static_assert(sd::kernel_count<decltype(e)> == 1 && decltype(e)::rank == 0);
    double ss = ref::fsum(ref::map([](double v) { return v * v; }, X).v);
    // 221 positive terms: relative 222 eps, halved by sqrt, plus 2 roundings.
    ref::check_close(sd::eval(e), Array({}, std::sqrt(ss) * 2), ref::Tol{2 * 113 + 1, tiny}, "sqrt(sum(x*x))*2");
  }
  {
    // A mean over the kept axis of a keepdim mean: sum over rows of (x - row mean)^2 — var.
    auto c = x - sd::mean(x, 1, sd::keepdim);
    auto e = sd::sum(c * c, 1);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    ref::check_close(sd::eval(e), ref::map([](double v) { return v * 16; }, ref::reduce(X, {1}, false, ref::fvar(1))),
                     ref::Tol{2 * (17 + 4) + 1, tiny}, "sum((x-mean)^2, 1)");
  }
}

TEST_CASE("reductions of broadcast and mixed-dtype producers", "[reduce][fused]") {
  auto row = ref::uniform<float>(-1, 1, 1, 13);
  auto col = ref::uniform<float>(-1, 1, 9, 1);
  Array R = ref::of(row), C = ref::of(col);
  // A stride-0 reduced axis: sum over 5 copies of a row.
  auto ex = sd::expand(row, std::array<std::int64_t, 2>{5, 13});
  ref::check_close(sd::eval(sd::sum(ex, 0)), ref::map([](double v) { return 5 * v; }, ref::reduce(R, {0}, false, ref::fsum)),
                   ref::Tol{8, 0}, "sum(expand(row), 0)");  // 4 additions of equal terms: 4 eps relative
  ref::check_equal(sd::eval(sd::argmax(ex, 0)), Array({13}, 0.0), "argmax over a stride-0 axis: first index");
  // A broadcast binary producer [9,1] + [13] reduced over each axis.
  Array B = ref::map([](double a, double b) { return a + b; }, C, R);
  Array BA = ref::map([](double a, double b) { return std::fabs(a) + std::fabs(b); }, C, R);
  Array s1 = ref::reduce(BA, {1}, false, ref::fsum), s0 = ref::reduce(BA, {0}, false, ref::fsum);
  ref::check_close(sd::eval(sd::sum(col + row, 1)), ref::reduce(B, {1}, false, ref::fsum), ref::Tol{0, 0, 15},
                   "sum([9,1]+[13], 1)", &s1);
  ref::check_close(sd::eval(sd::sum(col + row, 0)), ref::reduce(B, {0}, false, ref::fsum), ref::Tol{0, 0, 11},
                   "sum([9,1]+[13], 0)", &s0);
  ref::check_close(sd::eval(sd::max(col + row, 0)), ref::reduce(B, {0}, false, ref::fmax), ref::Tol{0.5, 0},
                   "max([9,1]+[13], 0)");
  // Mixed dtypes: int * float literal sums in float; a fused comparison counts as int64.
  auto i = ref::uniform<std::int32_t>(-100, 100, 7, 31);
  Array I = ref::of(i);
  auto fs = sd::sum(i * 0.5f, 1);
  static_assert(std::is_same_v<typename decltype(fs)::value_type, float>);
  ref::check_equal(sd::eval(fs), ref::reduce(ref::map([](double v) { return v * 0.5; }, I), {1}, false, ref::fsum),
                   "sum(int * 0.5f, 1) (exact: halves of small integers)");
  auto cnt = sd::sum(i > 0, 1);
  static_assert(std::is_same_v<typename decltype(cnt)::value_type, std::int64_t>);
  ref::check_equal(sd::eval(cnt), ref::reduce(ref::map([](double v) { return double(v > 0); }, I), {1}, false, ref::fsum),
                   "sum(int > 0, 1) counts");
  ref::check_equal(sd::eval(sd::sum(sd::cast<std::int64_t>(i) * 3, {0, 1})),
                   ref::reduce(ref::map([](double v) { return 3 * v; }, I), {0, 1}, false, ref::fsum), "sum(cast<int64>(i)*3)");
}

TEST_CASE("large reductions split across threads keep first-index and NaN semantics", "[reduce][threads]") {
  constexpr std::int64_t n = std::int64_t{1} << 20;
  sd::set_num_threads(2);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k % 1000) * 0.001f;
  // The maximum 5 appears in the second half first, then in the first half, then later again:
  // the flat argmax is the first of them in index order.
  for (std::size_t k : {std::size_t{700000}, std::size_t{300001}, std::size_t{900000}}) v[k] = 5.f;
  v[123457] = -5.f;
  v[1000000] = -5.f;
  auto x = ref::values<float>(v, n);
  CHECK(sd::eval(sd::argmax(x)).item() == 300001);
  CHECK(sd::eval(sd::argmin(x)).item() == 123457);
  CHECK(sd::eval(sd::max(x)).item() == 5.f);
  CHECK(sd::eval(sd::amin(x, 0)).item() == -5.f);
  // A NaN in the second thread's half wins over the maxima in the first.
  auto w = v;
  w[800000] = std::numeric_limits<float>::quiet_NaN();
  w[900001] = std::numeric_limits<float>::quiet_NaN();
  auto y = ref::values<float>(w, n);
  CHECK(sd::eval(sd::argmax(y)).item() == 800000);
  CHECK(sd::eval(sd::argmin(y)).item() == 800000);
  CHECK(std::isnan(sd::eval(sd::max(y)).item()));
  CHECK(std::isnan(sd::eval(sd::min(y)).item()));
  // A large int32 sum accumulates in int64 across threads.
  auto big = ref::uniform<std::int32_t>(1500000000, 2000000000, n);
  long long exact = 0;
  for (std::int64_t k = 0; k < n; ++k) exact += big.data()[k];
  CHECK(sd::eval(sd::sum(big)).item() == exact);
  // prod over many values ~1: 1<<20 roundings of relative eps each; the values are 1 +- 2^-12
  // so the product stays in range; bound 2 n eps relative (n eps each side).
  auto p = ref::uniform<double>(1 - 1.0 / 4096, 1 + 1.0 / 4096, n);
  long double lp = 1;
  for (std::int64_t k = 0; k < n; ++k) lp *= p.data()[k];
  double got = sd::eval(sd::prod(p)).item();
  CHECK(std::fabs(got - static_cast<double>(lp)) <= 2.0 * n * ref::eps<double>() * std::fabs(static_cast<double>(lp)));
}

TEST_CASE("reductions over leading dims fold whole rows of outputs at a time", "[reduce][columns]") {
  sd::set_num_threads(2);
  SECTION("float: the same sums as a cascade down each column, bit for bit") {
    // [300, 2500] over dim 0: 2500 outputs (two full tiles of 1024 and a partial one), shared
    // by two threads. Each output must take its terms in row order, in chunks, as prepare()
    // does.
    auto x = ref::uniform<float>(-2, 2, 300, 2500);
    x(17, 2049) = 7.f;  // a column maximum in the last, partial tile
    x(250, 3) = 7.f;
    x(251, 3) = 7.f;    // a tie: the first row wins
    sd::Tensor<float, 1> s = sd::sum(x, 0), mx = sd::max(x, 0), mn = sd::mean(x, 0);
    sd::Tensor<std::int64_t, 1> am = sd::argmax(x, 0);
    for (std::int64_t j = 0; j < 2500; ++j) {
      CascadeSum acc;
      float best = -std::numeric_limits<float>::infinity();
      std::int64_t at = 0;
      for (std::int64_t i = 0; i < 300; ++i) {
        acc.add(x(i, j));
        if (x(i, j) > best) best = x(i, j), at = i;
      }
      INFO("column " << j);
      CHECK(s(j) == acc.result());
      CHECK(mn(j) == acc.result() / 300.f);
      CHECK(mx(j) == best);
      CHECK(am(j) == at);
    }
    CHECK(am(2049) == 17);
    CHECK(am(3) == 250);
  }
  SECTION("two leading dims, keepdim, NaN, integers") {
    auto x = ref::uniform<float>(-1, 1, 7, 9, 1100);
    x(3, 4, 1099) = std::numeric_limits<float>::quiet_NaN();
    int d01[] = {0, 1};
    sd::Tensor<float, 3> m = sd::max(x, d01, sd::keepdim);
    CHECK(m.shape() == sd::Index<3>{1, 1, 1100});
    CHECK(std::isnan(m(0, 0, 1099)));
    for (std::int64_t k = 0; k < 1099; k += 13) {
      float best = -std::numeric_limits<float>::infinity();
      for (std::int64_t a = 0; a < 7; ++a)
        for (std::int64_t b = 0; b < 9; ++b) best = std::max(best, x(a, b, k));
      CHECK(m(0, 0, k) == best);
    }
    auto i = ref::uniform<std::int32_t>(1500000000, 2000000000, 40, 1500);
    sd::Tensor<std::int64_t, 1> si = sd::sum(i, 0);
    for (std::int64_t k = 0; k < 1500; k += 7) {
      std::int64_t exact = 0;
      for (std::int64_t r = 0; r < 40; ++r) exact += i(r, k);
      CHECK(si(k) == exact);
    }
  }
  SECTION("reduced dims in the middle: each run of columns folded on its own, bit for bit") {
    // [5, 37, 1100] over dim 1: 5 runs of 1100 columns (a full tile and a partial one each);
    // the threads' shares of the 5500 outputs cross runs.
    auto x = ref::uniform<float>(-2, 2, 5, 37, 1100);
    x(4, 20, 1090) = 9.f;
    sd::Tensor<float, 2> s = sd::sum(x, 1);
    sd::Tensor<std::int64_t, 2> am = sd::argmax(x, 1);
    for (std::int64_t b = 0; b < 5; ++b)
      for (std::int64_t c = 0; c < 1100; ++c) {
        CascadeSum acc;
        float best = -std::numeric_limits<float>::infinity();
        std::int64_t at = 0;
        for (std::int64_t t = 0; t < 37; ++t) {
          acc.add(x(b, t, c));
          if (x(b, t, c) > best) best = x(b, t, c), at = t;
        }
        INFO("output " << b << ", " << c);
        CHECK(s(b, c) == acc.result());
        CHECK(am(b, c) == at);
      }
    CHECK(am(4, 1090) == 20);
    // [3, 6, 4, 300] over {0, 2}: reduced and kept dims interleave before the run of columns.
    auto y = ref::uniform<float>(-2, 2, 3, 6, 4, 300);
    int d02[] = {0, 2};
    sd::Tensor<float, 4> sk = sd::sum(y, d02, sd::keepdim);
    CHECK(sk.shape() == sd::Index<4>{1, 6, 1, 300});
    for (std::int64_t b = 0; b < 6; ++b)
      for (std::int64_t d = 0; d < 300; ++d) {
        float acc = 0;
        for (std::int64_t a = 0; a < 3; ++a)
          for (std::int64_t c = 0; c < 4; ++c) acc += y(a, b, c, d);
        INFO("output " << b << ", " << d);
        CHECK(sk(0, b, 0, d) == acc);
      }
  }
  SECTION("random shapes, dims and views: the same sums as a cascade, bit for bit") {
    // Rank 4, the last dim kept; the first three permuted and one of them sliced with a step,
    // so the rows walked are strided every which way. Each output must take its terms in the
    // order of its reduced indices, the last one fastest.
    auto& g = ref::rng();
    auto pick = [&](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(g);
    };
    for (int trial = 0; trial < 40; ++trial) {
      auto base = ref::uniform<float>(-2, 2, pick(1, 8), pick(1, 9), pick(1, 10), pick(1, 900));
      std::array<std::int64_t, 4> perm{0, 1, 2, 3};
      std::shuffle(perm.begin(), perm.begin() + 3, g);
      auto p = sd::permute(base, perm);
      std::int64_t cut = pick(0, 2), len = p.shape()[static_cast<std::size_t>(cut)];
      auto v = sd::slice(p, cut, len > 1 ? 1 : 0, len, len > 2 ? 2 : 1);
      int mask = static_cast<int>(pick(1, 7));  // which of the first three dims are reduced
      std::vector<int> dims;
      for (int d = 0; d < 3; ++d)
        if (mask >> d & 1) dims.push_back(d);
      sd::Tensor<float, 4> got = [&]() -> sd::Tensor<float, 4> {
        if (dims.size() == 1) return sd::sum(v, dims[0], sd::keepdim);
        if (dims.size() == 2) return sd::sum(v, {dims[0], dims[1]}, sd::keepdim);
        return sd::sum(v, {0, 1, 2}, sd::keepdim);
      }();
      auto const& sh = v.shape();
      INFO("trial " << trial << ": shape [" << sh[0] << ", " << sh[1] << ", " << sh[2] << ", "
                    << sh[3] << "], dims mask " << mask);
      bool same = true;
      std::array<std::int64_t, 4> o{};
      for (o[0] = 0; o[0] < got.shape()[0]; ++o[0])
        for (o[1] = 0; o[1] < got.shape()[1]; ++o[1])
          for (o[2] = 0; o[2] < got.shape()[2]; ++o[2])
            for (o[3] = 0; o[3] < sh[3]; ++o[3]) {
              CascadeSum acc;
              std::array<std::int64_t, 4> i = o;
              std::int64_t n0 = mask & 1 ? sh[0] : 1, n1 = mask & 2 ? sh[1] : 1, n2 = mask & 4 ? sh[2] : 1;
              for (std::int64_t a = 0; a < n0; ++a)
                for (std::int64_t b = 0; b < n1; ++b)
                  for (std::int64_t c = 0; c < n2; ++c) {
                    if (mask & 1) i[0] = a;
                    if (mask & 2) i[1] = b;
                    if (mask & 4) i[2] = c;
                    acc.add(v(i[0], i[1], i[2], i[3]));
                  }
              same = same && got(o[0], o[1], o[2], o[3]) == acc.result();
            }
      CHECK(same);
    }
  }
  SECTION("a reduction nested in one over leading dims runs as a column kernel of its own") {
    // var(x, 0) = sum((x - mean(x, 0))^2, 0) / (n - 1): the mean is a reduction over dim 0 in
    // the sum's input. Both run apart (a run-time break) as column loops, the mean once.
    auto x = ref::uniform<float>(-2, 2, 300, 2500);
    Array X = ref::of(x);
    auto v = sd::var(x, 0);
    CHECK_THAT(sd::explain(v), Catch::StartsWith("solder plan: 3 kernels"));  // mean, sum, division
    // Every term (x - mean)^2 is >= 0: the relative error is about (n + 4) eps.
    ref::check_close(sd::eval(v), ref::reduce(X, {0}, false, ref::fvar(1)), ref::Tol{304, 0}, "var(x, 0)");
    sd::Tensor<float, 2> vk = sd::var(x, 0, sd::keepdim, 0.0);
    CHECK(vk.shape() == sd::Index<2>{1, 2500});
    ref::check_close(vk, ref::reduce(X, {0}, true, ref::fvar(0)), ref::Tol{304, 0}, "var(x, 0, keepdim, 0)");
  }
  SECTION("a strided input or output takes the general loop and agrees") {
    auto x = ref::uniform<float>(-2, 2, 2500, 300);
    auto xt = sd::transpose(x, 0, 1);  // [300, 2500], columns not contiguous
    sd::Tensor<float, 1> strided = sd::sum(xt, 0);
    sd::Tensor<float, 1> contiguous = sd::sum(sd::eval(xt * 1.f), 0);
    for (std::int64_t j = 0; j < 2500; j += 11) CHECK(strided(j) == contiguous(j));
    auto dst = sd::zeros<float>(2500, 2);
    auto row = sd::slice(sd::transpose(dst, 0, 1), 0, 0, 1);  // [1, 2500], stride 2
    row = sd::sum(xt * 1.f, 0, sd::keepdim);
    for (std::int64_t j = 0; j < 2500; j += 11) CHECK(dst(j, 0) == contiguous(j));
  }
}
