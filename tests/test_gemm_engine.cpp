// The host GEMM engine (backend/host/gemm.hpp) on its own, against double-precision loops:
// shapes of 1, 2, primes, odd and large sizes through its paths (blocked with B packed just in
// time or in rounds, skinny rows, skinny columns), transposed, strided and broadcast (stride 0)
// operands, batches with one operand shared (batch stride 0), A from a producer, k = 0, m or
// n = 0, one large product. Every element of C must reach the epilogue exactly once, in
// bounds, and a product must be bitwise the same when run again with the same thread count
// (the contract), and on 1 and 2 threads (what the engine does beyond it).
//
// Tolerance: any order of summing k products, each rounded once (or fused), with or without
// a final sum of lanes, errs by at most gamma_k sum |a||b|, gamma_k = k u / (1 - k u) with
// u = eps / 2 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1); k eps sum |a||b|
// bounds it for every k tested here.
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <solder/backend/host/gemm.hpp>
#include <solder/core/threads.hpp>
#include <utility>
#include <vector>

namespace gemm = solder::detail::host::gemm;
namespace sd = solder;

namespace {

using i64 = std::int64_t;

struct ThreadGuard {
  int saved = sd::get_num_threads();
  ~ThreadGuard() { sd::set_num_threads(saved); }
};

// The blocked path in rounds of B for small products: no packing just in time, rounds of a
// few panels (restored on exit).
struct RoundsOnly {
  gemm::Limits saved = gemm::limits();
  RoundsOnly() { gemm::limits() = {std::int64_t(64) << 10, false}; }
  ~RoundsOnly() { gemm::limits() = saved; }
};

// An operand's memory and strides: element (b, r, c) at data[b * bs + r * rs + c * cs].
template <class T>
struct Operand {
  std::vector<T> data;
  i64 rs = 0, cs = 0, bs = 0;
  T at(i64 b, i64 r, i64 c) const {
    return data[static_cast<std::size_t>(b * bs + r * rs + c * cs)];
  }
  gemm::Strided<T> strided() const { return {data.data(), rs, cs, bs}; }
};

// How an operand of `batches` x rows x cols lies in memory.
enum class Layout {
  row_major,   // cs = 1
  col_major,   // rs = 1 (a transposed operand)
  strided,     // every other row and column of a larger array
  rows_equal,  // rs = 0: one row broadcast down the rows
  cols_equal,  // cs = 0: one column broadcast along the row
};

template <class T>
Operand<T> make(i64 batches, i64 rows, i64 cols, Layout layout, bool shared, std::uint64_t seed) {
  Operand<T> o;
  i64 size = 0;
  switch (layout) {
    case Layout::row_major:
      o.rs = cols, o.cs = 1, size = rows * cols;
      break;
    case Layout::col_major:
      o.rs = 1, o.cs = rows, size = rows * cols;
      break;
    case Layout::strided:
      o.rs = 4 * cols, o.cs = 2, size = 2 * rows * 2 * cols;
      break;
    case Layout::rows_equal:
      o.rs = 0, o.cs = 1, size = cols;
      break;
    case Layout::cols_equal:
      o.rs = 1, o.cs = 0, size = rows;
      break;
  }
  o.bs = shared ? 0 : size;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-1, 1);
  o.data.resize(static_cast<std::size_t>(std::max<i64>(1, (shared ? 1 : batches) * size)));
  for (auto& x : o.data) x = static_cast<T>(value(rng));
  return o;
}

// Collects what the engine hands the epilogue: values, how often each element came, and
// whether a block fell outside C.
template <class T>
struct Result {
  i64 batch, m, n;
  std::vector<T> c;
  std::unique_ptr<std::atomic<int>[]> count;
  std::atomic<int> calls{0};
  std::atomic<bool> out_of_bounds{false};

  Result(i64 b, i64 rows, i64 cols)
      : batch(b),
        m(rows),
        n(cols),
        c(static_cast<std::size_t>(b * rows * cols)),
        count(new std::atomic<int>[static_cast<std::size_t>(std::max<i64>(1, b * rows * cols))]) {
    for (i64 i = 0; i < b * rows * cols; ++i) count[i] = 0;
  }
  static void store(void* ctx, i64 b, i64 i0, i64 j0, i64 mt, i64 nt, T const* c, i64 ldc) {
    auto& r = *static_cast<Result*>(ctx);
    ++r.calls;
    if (b < 0 || b >= r.batch || i0 < 0 || j0 < 0 || mt < 1 || nt < 1 || i0 + mt > r.m ||
        j0 + nt > r.n || ldc < nt) {
      r.out_of_bounds = true;
      return;
    }
    for (i64 i = 0; i < mt; ++i)
      for (i64 j = 0; j < nt; ++j) {
        i64 const at = (b * r.m + i0 + i) * r.n + j0 + j;
        r.c[static_cast<std::size_t>(at)] = c[i * ldc + j];
        ++r.count[at];
      }
  }
  gemm::Epilogue<T> epilogue() { return {&Result::store, this}; }
};

// A producer of A: the value of a strided operand, scaled and shifted so that values read
// from the operand itself instead would be wrong. Records requests outside A.
template <class T>
struct Produced {
  Operand<T> const& src;
  i64 batch, m, k;
  mutable std::atomic<bool> out_of_bounds{false};
  T value(i64 b, i64 i, i64 q) const { return src.at(b, i, q) * T(0.5) + T(0.25); }
  static void fill(void const* ctx, i64 b, i64 i0, i64 k0, i64 mc, i64 kc, T* dst, i64 ld) {
    auto const& p = *static_cast<Produced const*>(ctx);
    if (b < 0 || b >= p.batch || i0 < 0 || k0 < 0 || mc < 1 || kc < 1 || i0 + mc > p.m ||
        k0 + kc > p.k || ld < kc) {
      p.out_of_bounds = true;
      return;
    }
    for (i64 i = 0; i < mc; ++i)
      for (i64 q = 0; q < kc; ++q) dst[i * ld + q] = p.value(b, i0 + i, k0 + q);
  }
  gemm::Left<T> left() const {
    gemm::Left<T> l;
    l.producer = {&Produced::fill, this};
    return l;
  }
};

template <class T>
gemm::Left<T> left_of(Operand<T> const& a) {
  gemm::Left<T> l;
  l.memory = a.strided();
  return l;
}

// Checks the result against double loops: every element (or `samples` of them, spread over C)
// within k eps sum |a||b| of the exact product, and each element stored exactly once.
template <class T, class AAt>
void check(gemm::Problem p, Result<T> const& r, AAt const& a_at, Operand<T> const& b,
           i64 samples = 0) {
  CAPTURE(p.batch, p.m, p.n, p.k);
  REQUIRE_FALSE(r.out_of_bounds);
  i64 const total = p.batch * p.m * p.n;
  i64 miscounted = 0;
  for (i64 e = 0; e < total; ++e) miscounted += r.count[e] != 1;
  REQUIRE(miscounted == 0);
  // The operands as dense doubles, batch by batch: A[i][q] and B^T[j][q], so that the loops
  // below walk memory (they dominate the test's time in unoptimized builds).
  std::vector<double> ad(static_cast<std::size_t>(p.batch * p.m * p.k)),
      bd(static_cast<std::size_t>(p.batch * p.n * p.k));
  for (i64 bi = 0; bi < p.batch; ++bi)
    for (i64 q = 0; q < p.k; ++q) {
      for (i64 i = 0; i < p.m; ++i)
        ad[static_cast<std::size_t>((bi * p.m + i) * p.k + q)] = double(a_at(bi, i, q));
      for (i64 j = 0; j < p.n; ++j)
        bd[static_cast<std::size_t>((bi * p.n + j) * p.k + q)] = double(b.at(bi, q, j));
    }
  double const eps = std::numeric_limits<T>::epsilon();
  i64 const checks = samples > 0 ? std::min(samples, total) : total;
  i64 bad = 0;
  for (i64 s = 0; s < checks; ++s) {
    i64 const e = samples > 0 ? s * total / checks : s;
    i64 const bi = e / (p.m * p.n), i = e / p.n % p.m, j = e % p.n;
    double const* x = ad.data() + (bi * p.m + i) * p.k;
    double const* y = bd.data() + (bi * p.n + j) * p.k;
    double exact = 0, magnitude = 0;
    for (i64 q = 0; q < p.k; ++q) exact += x[q] * y[q], magnitude += std::fabs(x[q] * y[q]);
    double const got = double(r.c[static_cast<std::size_t>(e)]);
    if (!(std::fabs(got - exact) <= double(p.k) * eps * magnitude)) {
      if (bad++ < 3)
        UNSCOPED_INFO("C[" << bi << "][" << i << "][" << j << "] = " << got << ", exact " << exact);
    }
  }
  CHECK(bad == 0);
}

// A plain product of [m, k] by [k, n] (batch 1) with the given layouts, checked.
template <class T>
void plain(i64 m, i64 n, i64 k, Layout la = Layout::row_major, Layout lb = Layout::row_major) {
  auto const a = make<T>(1, m, k, la, false, 1 + m * 7 + k),
             b = make<T>(1, k, n, lb, false, 2 + n * 5 + k);
  gemm::Problem const p{1, m, n, k};
  Result<T> r(1, m, n);
  gemm::run<T>(p, left_of(a), b.strided(), r.epilogue());
  check<T>(
      p, r, [&](i64 bi, i64 i, i64 q) { return a.at(bi, i, q); }, b);
}

i64 const sizes[] = {1, 2, 7, 13, 31, 64, 97, 128, 257, 300};

}  // namespace

TEMPLATE_TEST_CASE("gemm engine: shapes of 1, primes, odd and large sizes", "[gemm]", float,
                   double) {
  // m <= 16: the skinny path; n <= 16 with m > 16: the transposed skinny path; else blocked.
  for (i64 m : sizes)
    for (i64 n : sizes)
      for (i64 k : {i64(1), i64(13), i64(97), i64(300)}) {
        CAPTURE(m, n, k);
        plain<TestType>(m, n, k);
      }
}

TEMPLATE_TEST_CASE("gemm engine: transposed, strided and broadcast operands", "[gemm]", float,
                   double) {
  Layout const layouts[] = {Layout::row_major, Layout::col_major, Layout::strided,
                            Layout::rows_equal, Layout::cols_equal};
  struct Shape {
    i64 m, n, k;
  };
  // blocked (two k blocks and edges), skinny rows, skinny columns, one row and column
  for (auto [m, n, k] : {Shape{37, 45, 300}, Shape{5, 300, 97}, Shape{300, 5, 97}, Shape{1, 1, 64}})
    for (Layout la : layouts)
      for (Layout lb : layouts) {
        CAPTURE(m, n, k, int(la), int(lb));
        plain<TestType>(m, n, k, la, lb);
      }
}

TEMPLATE_TEST_CASE("gemm engine: batches, one operand shared", "[gemm]", float, double) {
  using T = TestType;
  struct Shape {
    i64 batch, m, n, k;
  };
  // skinny (rows of all batches together when B is shared), skinny columns, blocked with
  // batches split among threads (4) and shared among them (3), an empty-looking batch of 1 row
  for (auto [batch, m, n, k] : {Shape{3, 1, 200, 50}, Shape{3, 5, 64, 33}, Shape{3, 100, 3, 70},
                                Shape{4, 40, 70, 300}, Shape{3, 70, 40, 90}, Shape{9, 1, 1, 5}})
    for (int shared : {0, 1, 2}) {  // none, A, B
      CAPTURE(batch, m, n, k, shared);
      auto const a = make<T>(batch, m, k, Layout::row_major, shared == 1, 11);
      auto const b = make<T>(batch, k, n, Layout::col_major, shared == 2, 12);
      gemm::Problem const p{batch, m, n, k};
      Result<T> r(batch, m, n);
      gemm::run<T>(p, left_of(a), b.strided(), r.epilogue());
      check<T>(
          p, r, [&](i64 bi, i64 i, i64 q) { return a.at(bi, i, q); }, b);
    }
}

TEMPLATE_TEST_CASE("gemm engine: batches of A one after another against one B, rows not a multiple of the tile",
                   "[gemm]", float, double) {
  // (run as one product of batch * m rows, its blocks cut at the batches' bounds: Result sees a
  // block that crosses one as out of bounds)
  using T = TestType;
  ThreadGuard guard;
  struct Shape {
    i64 batch, m, n, k;
  };
  for (auto [batch, m, n, k] : {Shape{8, 197, 70, 90}, Shape{5, 13, 300, 40}, Shape{3, 31, 64, 300}})
    for (int threads : {1, 2})
      for (bool rounds : {false, true}) {
        CAPTURE(batch, m, n, k, threads, rounds);
        sd::set_num_threads(threads);
        std::optional<RoundsOnly> only;
        if (rounds) only.emplace();
        auto const a = make<T>(batch, m, k, Layout::row_major, false, 61);
        auto const b = make<T>(batch, k, n, Layout::col_major, true, 62);
        gemm::Problem const p{batch, m, n, k};
        Result<T> r(batch, m, n);
        gemm::run<T>(p, left_of(a), b.strided(), r.epilogue());
        check<T>(
            p, r, [&](i64 bi, i64 i, i64 q) { return a.at(bi, i, q); }, b);
      }
}

TEMPLATE_TEST_CASE("gemm engine: A from a producer", "[gemm]", float, double) {
  using T = TestType;
  struct Shape {
    i64 batch, m, n, k;
  };
  for (auto [batch, m, n, k] : {Shape{1, 3, 100, 40}, Shape{2, 300, 5, 97}, Shape{1, 131, 77, 600},
                                Shape{2, 50, 64, 31}, Shape{1, 1, 1, 1}})
    for (Layout lb : {Layout::row_major, Layout::col_major}) {
      CAPTURE(batch, m, n, k, int(lb));
      auto const src = make<T>(batch, m, k, Layout::strided, false, 21);
      auto const b = make<T>(batch, k, n, lb, false, 22);
      Produced<T> const produced{src, batch, m, k};
      gemm::Problem const p{batch, m, n, k};
      Result<T> r(batch, m, n);
      gemm::run<T>(p, produced.left(), b.strided(), r.epilogue());
      REQUIRE_FALSE(produced.out_of_bounds);
      check<T>(
          p, r, [&](i64 bi, i64 i, i64 q) { return produced.value(bi, i, q); }, b);
    }
}

TEMPLATE_TEST_CASE("gemm engine: B packed in rounds, on 1 and 2 threads", "[gemm]", float, double) {
  using T = TestType;
  ThreadGuard guard;
  RoundsOnly rounds;
  struct Shape {
    i64 batch, m, n, k;
  };
  // one round and several; 2 threads on one group (a grid), on 3 (shared), on 4 (independent)
  for (auto [batch, m, n, k] : {Shape{1, 97, 31, 300}, Shape{1, 130, 257, 300},
                                Shape{3, 64, 200, 97}, Shape{4, 31, 300, 128}})
    for (int threads : {1, 2})
      for (bool produced : {false, true}) {
        CAPTURE(batch, m, n, k, threads, produced);
        sd::set_num_threads(threads);
        auto const a = make<T>(batch, m, k, Layout::row_major, false, 51);
        auto const b = make<T>(batch, k, n, Layout::row_major, false, 52);
        Produced<T> const producer{a, batch, m, k};
        gemm::Problem const p{batch, m, n, k};
        Result<T> r(batch, m, n);
        gemm::run<T>(p, produced ? producer.left() : left_of(a), b.strided(), r.epilogue());
        REQUIRE_FALSE(producer.out_of_bounds);
        if (produced)
          check<T>(
              p, r, [&](i64 bi, i64 i, i64 q) { return producer.value(bi, i, q); }, b);
        else
          check<T>(
              p, r, [&](i64 bi, i64 i, i64 q) { return a.at(bi, i, q); }, b);
      }
}

TEMPLATE_TEST_CASE("gemm engine: k = 0 gives zeros, m or n = 0 calls nothing", "[gemm]", float,
                   double) {
  using T = TestType;
  for (auto [m, n] : {std::pair<i64, i64>{5, 7}, {300, 2}, {1, 5000}}) {
    CAPTURE(m, n);
    Result<T> r(2, m, n);
    std::fill(r.c.begin(), r.c.end(), T(1));
    T const none = 0;
    gemm::run<T>({2, m, n, 0}, left_of(Operand<T>{{none}, 0, 0, 0}), {&none, 0, 0, 0},
                 r.epilogue());
    REQUIRE_FALSE(r.out_of_bounds);
    for (i64 e = 0; e < 2 * m * n; ++e) {
      REQUIRE(r.count[e] == 1);
      REQUIRE(r.c[static_cast<std::size_t>(e)] == T(0));
    }
  }
  for (auto [batch, m, n] : {std::array<i64, 3>{1, 0, 5}, {1, 5, 0}, {0, 5, 5}, {3, 0, 0}}) {
    auto const a = make<T>(1, 5, 5, Layout::row_major, false, 1);
    Result<T> r(1, 5, 5);
    gemm::run<T>({batch, m, n, 5}, left_of(a), a.strided(), r.epilogue());
    REQUIRE(r.calls == 0);
  }
}

TEMPLATE_TEST_CASE("gemm engine: a large product on 2 threads", "[gemm]", float, double) {
  using T = TestType;
  ThreadGuard guard;
  sd::set_num_threads(2);
  i64 const m = 1000, n = 1030, k = 1024;
  auto const a = make<T>(1, m, k, Layout::row_major, false, 31),
             b = make<T>(1, k, n, Layout::col_major, false, 32);
  gemm::Problem const p{1, m, n, k};
  Result<T> r(1, m, n);
  gemm::run<T>(p, left_of(a), b.strided(), r.epilogue());
  check<T>(
      p, r, [&](i64 bi, i64 i, i64 q) { return a.at(bi, i, q); }, b, 20011);
}

TEMPLATE_TEST_CASE("gemm engine: runs are bitwise repeatable, and alike on 1 and 2 threads", "[gemm]",
                   float, double) {
  using T = TestType;
  ThreadGuard guard;
  struct Shape {
    i64 batch, m, n, k;
  };
  // just in time (A shared), skinny rows, skinny columns, dot products, rounds (a grid)
  for (auto [batch, m, n, k] : {Shape{1, 300, 257, 600}, Shape{3, 2, 700, 300},
                                Shape{1, 700, 3, 300}, Shape{2, 3, 513, 1000}, Shape{1, 1100, 90, 300}})
    for (int threads : {1, 2}) {
      CAPTURE(batch, m, n, k, threads);
      auto const a = make<T>(batch, m, k, Layout::row_major, false, 41);
      auto const b =
          make<T>(batch, k, n, batch == 2 ? Layout::col_major : Layout::row_major, false, 42);
      gemm::Problem const p{batch, m, n, k};
      Result<T> first(batch, m, n), second(batch, m, n), one(batch, m, n);
      sd::set_num_threads(threads);
      gemm::run<T>(p, left_of(a), b.strided(), first.epilogue());
      gemm::run<T>(p, left_of(a), b.strided(), second.epilogue());
      REQUIRE(std::memcmp(first.c.data(), second.c.data(), first.c.size() * sizeof(T)) == 0);
      // Each element sums its k in an order that the thread count does not change.
      sd::set_num_threads(1);
      gemm::run<T>(p, left_of(a), b.strided(), one.epilogue());
      REQUIRE(std::memcmp(first.c.data(), one.c.data(), first.c.size() * sizeof(T)) == 0);
      check<T>(
          p, first, [&](i64 bi, i64 i, i64 q) { return a.at(bi, i, q); }, b);
    }
}

TEMPLATE_TEST_CASE("gemm engine: B packed ahead of time gives the same bits as B packed per call", "[gemm]",
                   float, double) {
  using T = TestType;
  ThreadGuard guard;
  struct Shape {
    i64 batch, m, n, k;
    bool shared;
  };
  struct Ask {  // gemm::Prepacked's source: prepack_b's copy, and how often it was asked
    std::shared_ptr<T const> packed;
    int asked = 0;
    static T const* get(void* ctx, gemm::Problem const&, gemm::Strided<T> const&) {
      auto& s = *static_cast<Ask*>(ctx);
      ++s.asked;
      return s.packed.get();
    }
  };
  // just in time (one group; A shared), rounds (a grid), B per batch (independent), one B for
  // the batches, k over several blocks, n not a multiple of a panel, and a skinny product
  // (which never asks)
  for (auto [batch, m, n, k, shared] :
       {Shape{1, 300, 257, 600, true}, Shape{1, 1100, 90, 300, true}, Shape{4, 31, 300, 128, false},
        Shape{3, 64, 200, 97, true}, Shape{1, 17, 33, 1500, true}, Shape{1, 5, 64, 64, true}})
    for (int threads : {1, 2})
      for (Layout lb : {Layout::row_major, Layout::col_major}) {
        CAPTURE(batch, m, n, k, shared, threads, int(lb));
        sd::set_num_threads(threads);
        auto const a = make<T>(batch, m, k, Layout::row_major, false, 61);
        auto const b = make<T>(batch, k, n, lb, shared, 62);
        gemm::Problem const p{batch, m, n, k};
        Ask ask{gemm::prepack_b(p, b.strided())};
        Result<T> packed_each_call(batch, m, n), ahead(batch, m, n);
        gemm::run<T>(p, left_of(a), b.strided(), packed_each_call.epilogue());
        gemm::run<T>(p, left_of(a), b.strided(), ahead.epilogue(), {&Ask::get, &ask});
        CHECK(ask.asked == (m <= gemm::skinny_rows ? 0 : 1));
        REQUIRE(std::memcmp(packed_each_call.c.data(), ahead.c.data(), ahead.c.size() * sizeof(T)) == 0);
        check<T>(
            p, ahead, [&](i64 bi, i64 i, i64 q) { return a.at(bi, i, q); }, b);
      }
}
