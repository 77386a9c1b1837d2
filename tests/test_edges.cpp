// Edges a PyTorch user meets (issue 27): float sums as accurate along every host path, empty
// dims, integer overflow (two's complement, no UB), refused misuse with readable errors, and
// what a user writes (braced lists, compound assignment, printing expressions, any integer
// scalar). References are double-precision loops, or PyTorch's documented results.
#include "reference.hpp"
#include "test_scale.hpp"

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace sd = solder;
using ref::Array;

namespace {

// The host's bound for a float sum of n terms (backend/cascade.hpp, and the lanes of
// backend/host/evaluators.hpp: reduce_range): at most 16 terms or partials folded by one
// accumulator on each of the cascade's levels (log16 n of them, and the lanes' 64 folded in 7
// steps), each step erring by at most eps relative to the running sum. A plain float loop errs
// by about n eps: 1e6 terms of 0.1f sum to 100958, not 100000.
double sum_bound(double n, double exact) {
  return (16 * (std::log(n) / std::log(16.0) + 1) + 7 + 2) * ref::eps<float>() * std::fabs(exact);
}

}  // namespace

TEST_CASE("float sums of 1e6 and 1e7 equal terms are accurate along every host path", "[edges][reduce]") {
  for (std::int64_t n : ref::sized<std::vector<std::int64_t>>({1000000, 10000000}, {1000000})) {
    sd::set_num_threads(2);
    double const term = static_cast<double>(0.1f), exact = term * static_cast<double>(n);
    INFO("n = " << n << ", exact sum " << exact);
    auto close = [&](double got, double want, char const* path) {
      INFO(path << ": got " << std::setprecision(10) << got << ", off by " << std::fabs(got - want));
      CHECK(std::fabs(got - want) <= sum_bound(static_cast<double>(n), want));
    };
    auto tall = sd::full<float>(sd::shape(n, 2), 0.1f);
    auto wide = sd::full<float>(sd::shape(2, n), 0.1f);

    sd::Tensor<float, 1> rows = sd::sum(wide, 1), rows_mean = sd::mean(wide, 1);
    close(rows(1), exact, "rows");
    close(rows_mean(1), term, "rows, mean");

    // Columns: sum(x, 0) of [n, 2] folds the rows side by side (write_columns).
    sd::Tensor<float, 1> cols = sd::sum(tall, 0), cols_mean = sd::mean(tall, 0);
    close(cols(0), exact, "columns");
    close(cols(1), exact, "columns");
    close(cols_mean(0), term, "columns, mean");

    // The same reduction into a strided output, and over a transposed input: each output folds
    // its terms one by one in prepare(), in the columns' order, so the results are the same.
    auto dst = sd::zeros<float>(2, 2);
    auto strided_out = sd::squeeze(sd::slice(dst, 1, 0, 1), 1);  // [2], stride 2
    strided_out = sd::sum(tall, 0);
    CHECK(dst(0, 0) == cols(0));
    CHECK(dst(1, 0) == cols(1));
    sd::Tensor<float, 1> transposed = sd::sum(sd::transpose(tall, 0, 1), 1);
    CHECK(transposed(0) == cols(0));
    close(transposed(1), exact, "transposed input");

    // A middle dim of a 3-D tensor (columns in runs), and reduced dims around a kept one
    // ({0, 2} of [n / 16, 2, 16]: runs of 16 folded as blocks, the runs' partials in blocks).
    auto cube = sd::full<float>(sd::shape(2, n, 2), 0.1f);
    sd::Tensor<float, 2> middle = sd::sum(cube, 1);
    close(middle(1, 0), exact, "middle dim");
    auto runs = sd::full<float>(sd::shape(n / 16, 2, 16), 0.1f);
    sd::Tensor<float, 1> around = sd::sum(runs, {0, 2});
    close(around(1), exact, "runs");

    // Everything: one output, the work split across threads, the same result on one thread.
    double const all = 2 * exact;
    float split = sd::eval(sd::sum(tall)).item();
    close(split, all, "full reduction");
    close(sd::eval(sd::mean(tall)).item(), term, "full reduction, mean");
    sd::set_num_threads(1);
    CHECK(sd::eval(sd::sum(tall)).item() == split);
    sd::Tensor<float, 1> cols_one_thread = sd::sum(tall, 0);
    CHECK(cols_one_thread(0) == cols(0));
  }
  sd::set_num_threads(2);
}

TEST_CASE("var over an empty dim is NaN; softmax over one is empty", "[edges][reduce][rows]") {
  using Catch::Matchers::Contains;
  auto empty_rows = sd::zeros<float>(3, 0);
  sd::Tensor<float, 1> v = sd::var(empty_rows, 1);
  REQUIRE(v.numel() == 3);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(std::isnan(v(i)));
  CHECK(std::isnan(sd::eval(sd::var(sd::zeros<float>(0))).item()));
  // n <= correction: torch.var divides by max(0, n - correction): 0 / 0 and 0.5 / 0.
  CHECK(std::isnan(sd::eval(sd::var(sd::ones<float>(1), 0)).item()));
  auto two = ref::values<float>({1, 2}, 2);
  CHECK(sd::eval(sd::var(two, 0, 3.0)).item() == std::numeric_limits<float>::infinity());
  CHECK(sd::eval(sd::var(two, 0, 0.0)).item() == 0.25f);

  sd::Tensor<float, 2> s = sd::softmax(empty_rows, 1), ls = sd::log_softmax(empty_rows, -1);
  CHECK(s.shape() == sd::Index<2>{3, 0});
  CHECK(ls.shape() == sd::Index<2>{3, 0});
  auto no_rows = sd::zeros<float>(0, 4);
  sd::Tensor<float, 2> s0 = sd::softmax(no_rows, 0), s1 = sd::log_softmax(no_rows, 1);
  CHECK(s0.shape() == sd::Index<2>{0, 4});
  CHECK(s1.shape() == sd::Index<2>{0, 4});
  // max over an empty dim has no value to give: an error, as in PyTorch.
  CHECK_THROWS_WITH(sd::max(empty_rows, 1), Contains("max") && Contains("empty"));
}

namespace {
template <class T>
T wrapped(std::uint64_t bits) {  // the two's-complement value of the low bits
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(bits));
}
}  // namespace

TEST_CASE("integer overflow wraps around as in PyTorch, without undefined behaviour", "[edges][elementwise]") {
  constexpr std::int32_t max32 = std::numeric_limits<std::int32_t>::max(), min32 = std::numeric_limits<std::int32_t>::min();
  constexpr std::int64_t max64 = std::numeric_limits<std::int64_t>::max(), min64 = std::numeric_limits<std::int64_t>::min();
  auto i = ref::values<std::int32_t>({max32, min32, 65536, 46341}, 4);
  auto l = ref::values<std::int64_t>({max64, min64, std::int64_t{1} << 32, 3037000500}, 4);
  auto check32 = [&](sd::Tensor<std::int32_t, 1> const& got, auto const& f, char const* what) {
    INFO(what);
    for (std::int64_t k = 0; k < 4; ++k)
      CHECK(got(k) == wrapped<std::int32_t>(f(static_cast<std::uint32_t>(i(k)))));
  };
  auto check64 = [&](sd::Tensor<std::int64_t, 1> const& got, auto const& f, char const* what) {
    INFO(what);
    for (std::int64_t k = 0; k < 4; ++k)
      CHECK(got(k) == wrapped<std::int64_t>(f(static_cast<std::uint64_t>(l(k)))));
  };
  // The references compute in unsigned, where wrapping is C++'s own.
  check32(i + 1, [](std::uint32_t a) { return a + 1u; }, "int32 + 1");
  check32(i - 2, [](std::uint32_t a) { return a - 2u; }, "int32 - 2");
  check32(i * i, [](std::uint32_t a) { return a * a; }, "int32 * int32");
  check32(-i, [](std::uint32_t a) { return 0u - a; }, "-int32");
  check32(sd::abs(i), [](std::uint32_t a) { return static_cast<std::int32_t>(a) < 0 ? 0u - a : a; }, "abs(int32)");
  check64(l + 1, [](std::uint64_t a) { return a + 1u; }, "int64 + 1");
  check64(l - l * 3, [](std::uint64_t a) { return a - a * 3u; }, "int64 - int64 * 3");
  check64(l * l, [](std::uint64_t a) { return a * a; }, "int64 * int64");
  check64(-l, [](std::uint64_t a) { return 0u - a; }, "-int64");
  check64(sd::abs(l), [](std::uint64_t a) { return static_cast<std::int64_t>(a) < 0 ? 0u - a : a; }, "abs(int64)");

  // Sums and products accumulate in int64 and wrap there.
  CHECK(sd::eval(sd::sum(i)).item() == std::int64_t{max32} + min32 + 65536 + 46341);
  auto big = ref::values<std::int64_t>({max64, 1, 1}, 3);
  CHECK(sd::eval(sd::sum(big)).item() == min64 + 1);
  auto p = sd::full<std::int64_t>(sd::shape(3), max64);  // (2^63 - 1)^3 = 2^63 - 1 mod 2^64
  CHECK(sd::eval(sd::prod(p)).item() == max64);
  CHECK(sd::eval(sd::prod(sd::full<std::int64_t>(sd::shape(2), std::int64_t{1} << 32))).item() == 0);
  auto rows = sd::full<std::int64_t>(sd::shape(3000, 2), max64);  // the column path
  sd::Tensor<std::int64_t, 1> col = sd::sum(rows, 0);
  CHECK(col(1) == wrapped<std::int64_t>(static_cast<std::uint64_t>(max64) * 3000u));
}

TEST_CASE("integer pow is exact, wraps, and refuses a negative scalar exponent", "[edges][elementwise]") {
  using Catch::Matchers::Contains;
  auto two64 = sd::full<std::int64_t>(sd::shape(2), 2);
  sd::Tensor<std::int64_t, 1> p40 = sd::pow(two64, 40);
  CHECK(p40(0) == 1099511627776);
  auto three = sd::full<std::int64_t>(sd::shape(1), 3);
  std::uint64_t r = 1;
  for (int k = 0; k < 41; ++k) r *= 3u;
  CHECK(sd::eval(sd::pow(three, 41))(0) == wrapped<std::int64_t>(r));  // 3^41 wraps
  auto two32 = sd::full<std::int32_t>(sd::shape(1), 2);
  CHECK(sd::eval(sd::pow(two32, 31))(0) == std::numeric_limits<std::int32_t>::min());
  CHECK(sd::eval(sd::pow(two32, 32))(0) == 0);
  CHECK(sd::eval(sd::pow(two32 * 0, 0))(0) == 1);
  static_assert(std::is_same_v<decltype(sd::eval(sd::pow(two32, 2)))::value_type, std::int32_t>);
  // A tensor of exponents: negative powers of an integer are 0, but of 1 and -1 (torch's powi).
  auto base = ref::values<std::int64_t>({1, -1, -1, 2, -3, 0}, 6);
  auto expo = ref::values<std::int64_t>({-5, -3, -4, -1, -2, 3}, 6);
  ref::check_equal(sd::eval(sd::pow(base, expo)), ref::of(ref::values<std::int64_t>({1, -1, 1, 0, 0, 0}, 6)), "pow(int, int tensor)");
  ref::check_equal(sd::eval(sd::pow(2, expo)), ref::of(ref::values<std::int64_t>({0, 0, 0, 0, 0, 8}, 6)), "pow(2, int tensor)");
  // An integer tensor to a negative integer number: PyTorch's error.
  CHECK_THROWS_WITH(sd::pow(two64, -1), Contains("pow") && Contains("negative") && Contains("-1"));
  CHECK_THROWS_AS(sd::pow(two32, std::int64_t{-2}), sd::Error);
  // Floating exponents or bases compute in float, as before.
  CHECK(sd::eval(sd::pow(two64, -1.f))(0) == 0.5f);
  CHECK(sd::eval(sd::pow(two64 * 1.f, -1))(0) == 0.5f);
}

TEST_CASE("layer_norm and rms_norm check gamma and beta against the trailing dims", "[edges][rows]") {
  using Catch::Matchers::Contains;
  auto x = ref::uniform<float>(-1, 1, 2, 4);
  auto g4 = sd::ones<float>(4), b4 = sd::zeros<float>(4);
  // gamma [1] would broadcast over rows of 4; PyTorch refuses it.
  CHECK_THROWS_WITH(sd::layer_norm(x, sd::ones<float>(1), b4),
                    Contains("layer_norm") && Contains("gamma") && Contains("[1]") && Contains("[2, 4]"));
  CHECK_THROWS_WITH(sd::layer_norm(x, sd::ones<float>(3), sd::zeros<float>(3)),
                    Contains("layer_norm") && Contains("[3]") && Contains("[2, 4]"));
  CHECK_THROWS_WITH(sd::layer_norm(x, g4, sd::zeros<float>(1)), Contains("layer_norm") && Contains("beta"));
  CHECK_THROWS_WITH(sd::rms_norm(x, sd::ones<float>(1)),
                    Contains("rms_norm") && Contains("[1]") && Contains("[2, 4]"));
  CHECK_THROWS_WITH(sd::rms_norm(x, sd::ones<float>(3)), Contains("rms_norm") && Contains("[3]"));
  CHECK_NOTHROW(sd::layer_norm(x, g4, b4));
  CHECK_NOTHROW(sd::rms_norm(x, g4));
  auto x3 = ref::uniform<float>(-1, 1, 2, 3, 4);
  CHECK_NOTHROW(sd::layer_norm(x3, sd::ones<float>(3, 4), sd::zeros<float>(3, 4)));
  CHECK_THROWS_WITH(sd::layer_norm(x3, sd::ones<float>(4, 3), sd::zeros<float>(4, 3)),
                    Contains("[4, 3]") && Contains("[2, 3, 4]"));
}

TEST_CASE("reshape names itself in its errors", "[edges][views]") {
  using Catch::Matchers::Contains;
  auto x = sd::arange<float>(8);
  CHECK_THROWS_WITH(sd::reshape(x, {3, 3}),
                    Contains("reshape") && !Contains("view") && Contains("[3, 3]") && Contains("[8]"));
  CHECK_THROWS_WITH(sd::reshape(sd::transpose(sd::view(x, {2, 4}), 0, 1), {3, -1}),
                    Contains("reshape") && !Contains("view"));
  CHECK_THROWS_WITH(sd::view(x, {3, 3}), Contains("view") && Contains("[3, 3]"));
  CHECK_THROWS_WITH(sd::arange<float>(5, 0, 1), Contains("arange"));
}

TEST_CASE("what a PyTorch user writes compiles and does what PyTorch does", "[edges][user]") {
  using Catch::Matchers::Contains;
  SECTION("sizes and dims as braced lists") {
    auto t = ref::values<float>({1, 2, 3}, 3, 1);
    sd::Tensor<float, 2> e = sd::expand(t, {3, 4});
    CHECK(e.shape() == sd::Index<2>{3, 4});
    CHECK(e(2, 3) == 3.f);
    sd::Tensor<float, 3> ee = sd::expand(t * 2.f, {2, 3, -1});  // an expression; -1 keeps a size
    CHECK(ee.shape() == sd::Index<3>{2, 3, 1});
    CHECK(ee(1, 1, 0) == 4.f);
    auto x = sd::arange<float>(6);
    auto v = sd::view(x, {2, -1});
    CHECK(v.shape() == sd::Index<2>{2, 3});
    auto p = sd::permute(v, {1, 0});
    CHECK(p(2, 1) == 5.f);
    auto r = sd::reshape(p, {6});  // not contiguous: a copy
    CHECK(ref::of(r).v == std::vector<double>{0, 3, 1, 4, 2, 5});
    sd::Tensor<float, 2> vv = sd::var(v, {0, 1}, sd::keepdim, 0.0);
    CHECK(vv.shape() == sd::Index<2>{1, 1});
    CHECK(sd::broadcast_to(t, {2, 3, 4}).shape() == sd::Index<3>{2, 3, 4});
    CHECK(sd::zeros<float>({2, 3}).shape() == sd::Index<2>{2, 3});
    CHECK(sd::ones<std::int64_t>({4}).shape() == sd::Index<1>{4});
    CHECK(ref::of(sd::full<float>({1, 2}, 0.5f)).v == std::vector<double>{0.5, 0.5});
    CHECK(sd::rand<float>({3, 1}, -1.f, 1.f).shape() == sd::Index<2>{3, 1});
    CHECK(sd::randn<double>({2, 2, 2}).numel() == 8);
  }
  SECTION("+= -= *= /= with numbers, tensors and expressions, in place") {
    auto x = ref::uniform<float>(-2, 2, 5, 5);
    Array X = ref::of(x);
    float* storage = x.data();
    x += 1.f;
    x *= 3;  // an int number: the tensor stays float32
    x -= x * 0.5f;
    x /= sd::full<float>(sd::shape(5), 2.f);
    x += sd::transpose(x, 0, 1);  // reads what it overwrites: assignment makes it safe
    CHECK(x.data() == storage);
    Array Y = ref::map([](double a) { return (a + 1) * 3 / 2 / 2; }, X);
    Array want = ref::map([](double a, double b) { return a + b; }, Y, ref::transpose(Y, 0, 1));
    ref::check_close(x, want, ref::Tol{8, 0}, "compound assignments");
    auto n = ref::values<std::int64_t>({1, 2, 3}, 3);
    n *= n;
    n -= 1;
    CHECK(ref::of(n).v == std::vector<double>{0, 3, 8});
  }
  SECTION("integer numbers of any width are wrapped numbers") {
    auto x = ref::values<float>({2, 4}, 2);
    std::vector<int> v(4);
    auto q = x / v.size();  // std::size_t
    static_assert(std::is_same_v<decltype(q)::value_type, float>);
    CHECK(ref::of(sd::eval(q)).v == std::vector<double>{0.5, 1});
    auto i = ref::values<std::int32_t>({1, 2}, 2);
    auto k = i * std::size_t{3} + 2u + static_cast<long long>(1) + static_cast<short>(1);
    static_assert(std::is_same_v<decltype(k)::value_type, std::int32_t>);  // as int32 * Python int
    CHECK(ref::of(sd::eval(k)).v == std::vector<double>{7, 10});
    auto b = ref::values<bool>({true, false}, 2);
    static_assert(std::is_same_v<decltype(b + 1u)::value_type, std::int64_t>);
    CHECK(ref::of(sd::eval(sd::where(b, x, v.size()))).v == std::vector<double>{2, 4});
    CHECK(ref::of(sd::eval(sd::clamp(i, 0u, std::size_t{1}))).v == std::vector<double>{1, 1});
  }
  SECTION("printing an expression prints what it evaluates to") {
    auto x = ref::values<float>({1, 2.5f}, 2);
    std::ostringstream a, b, z;
    a << (x + 1.f);
    b << sd::eval(x + 1.f);
    CHECK(a.str() == "tensor([2., 3.5], shape=[2], dtype=float32)");
    CHECK(a.str() == b.str());
    z << sd::sum(x) << ' ' << sd::eval(sd::sum(x)) << ' ' << sd::var(x, 0, 2.0) << ' '
      << sd::var(sd::slice(x, 0, 0, 1), 0);  // 1.125 / 0 and 0 / 0 (NaN whatever its sign)
    CHECK(z.str() == "tensor(3.5, shape=[], dtype=float32) tensor(3.5, shape=[], dtype=float32) "
                     "tensor(inf, shape=[], dtype=float32) tensor(nan, shape=[], dtype=float32)");
  }
  SECTION("max and min of bool tensors, as torch.max") {
    auto b = ref::values<bool>({false, false, true, false, false, false}, 2, 3);
    CHECK(sd::eval(sd::max(b)).item() == true);
    CHECK(sd::eval(sd::min(b)).item() == false);
    CHECK(ref::of(sd::eval(sd::max(b, 1))).v == std::vector<double>{1, 0});
    CHECK(sd::eval(sd::argmax(b)).item() == 2);
    sd::set_num_threads(2);
    auto big = sd::zeros<bool>(200000);  // one output, split across threads
    big(123457) = true;
    CHECK(sd::eval(sd::max(big)).item() == true);
    CHECK(sd::eval(sd::argmax(big)).item() == 123457);
    auto runs = sd::full<bool>(sd::shape(3, 5000, 20), true);  // runs of 20 folded as blocks
    runs(2, 4999, 7) = false;
    sd::Tensor<bool, 1> mn = sd::amin(runs, {0, 2});
    CHECK(mn(4999) == false);
    CHECK(mn(4998) == true);
  }
  SECTION("var over every dim and over a list of dims") {
    auto x = ref::uniform<float>(-1, 1, 6, 7, 8);
    Array X = ref::of(x);
    ref::check_close(sd::eval(sd::var(x)), ref::reduce(X, {0, 1, 2}, false, ref::fvar(1)), ref::Tol{64, 0}, "var(x)");
    ref::check_close(sd::eval(sd::var(x, {0, 2})), ref::reduce(X, {0, 2}, false, ref::fvar(1)), ref::Tol{64, 0}, "var(x, {0, 2})");
    sd::Tensor<float, 3> k = sd::var(x, {1, -1}, sd::keepdim, 0.0);
    ref::check_close(k, ref::reduce(X, {1, 2}, true, ref::fvar(0)), ref::Tol{64, 0}, "var(x, {1, -1}, keepdim, 0)");
  }
}
