// Views: transpose, permute, slice, narrow, unsqueeze, squeeze, expand, broadcast_to, view,
// reshape, flatten. Views share storage; they work inside fused expressions, as assignment
// targets, and on expressions (pushed to the leaves); aliasing between input and output views
// still gives the right answer.
#include "reference.hpp"

#include <cstdint>
#include <vector>

#include <solder/solder.hpp>

namespace sd = solder;
using Catch::Matchers::Contains;

namespace {

// [a, b, c] filled with 0, 1, 2, ... in row-major order.
sd::Tensor<float, 3> iota3(std::int64_t a, std::int64_t b, std::int64_t c) {
  sd::Tensor<float, 3> t = sd::view(sd::arange<float>(static_cast<double>(a * b * c)),
                                    sd::shape(a, b, c));
  return t;
}

template <class TT>
std::vector<float> vec(TT const& t) {
  return sd::to_vector(t);
}

template <class A, class B>
bool shares(A const& a, B const& b) {
  return !a.storage().owner_before(b.storage()) && !b.storage().owner_before(a.storage());
}

}  // namespace

TEST_CASE("transpose swaps shape and strides over the same storage", "[views][transpose]") {
  auto a = ref::iota2(3, 4);
  auto t = sd::transpose(a, 0, 1);
  CHECK(t.shape() == sd::Index<2>{4, 3});
  CHECK(t.strides() == sd::Index<2>{1, 4});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.data() == a.data());
  CHECK(shares(t, a));
  CHECK(a.storage().use_count() == 2);
  CHECK(vec(t) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(t(i, j) == a(j, i));

  // Negative dims; transposing twice is the identity view.
  auto t2 = sd::transpose(a, -1, -2);
  CHECK(t2.shape() == t.shape());
  CHECK(t2.strides() == t.strides());
  auto tt = sd::transpose(t, 0, 1);
  CHECK(tt.strides() == a.strides());
  CHECK(tt.is_contiguous());

  // A transpose of a dim with itself changes nothing.
  auto same = sd::transpose(a, 1, 1);
  CHECK(same.shape() == a.shape());
  CHECK(same.strides() == a.strides());

  // Writes through the view land in the base.
  t(3, 1) = 100.f;
  CHECK(a(1, 3) == 100.f);

  CHECK_THROWS_AS(sd::transpose(a, 0, 2), sd::Error);
  CHECK_THROWS_AS(sd::transpose(a, -3, 0), sd::Error);
}

TEST_CASE("permute", "[views][permute]") {
  auto a = iota3(2, 3, 4);
  CHECK(a.strides() == sd::Index<3>{12, 4, 1});
  auto p = sd::permute(a, {2, 0, 1});
  CHECK(p.shape() == sd::Index<3>{4, 2, 3});
  CHECK(p.strides() == sd::Index<3>{1, 12, 4});
  CHECK(shares(p, a));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) CHECK(p(k, i, j) == a(i, j, k));

  auto q = sd::permute(a, {-1, 0, 1});
  CHECK(q.strides() == p.strides());

  auto id = sd::permute(a, {0, 1, 2});
  CHECK(id.is_contiguous());
  CHECK(vec(id) == vec(a));

  p(3, 1, 2) = -5.f;
  CHECK(a(1, 2, 3) == -5.f);
}

TEST_CASE("slice: negative indices, steps and clamping", "[views][slice]") {
  auto a = sd::arange<float>(10);

  auto s = sd::slice(a, 0, 2, 8);
  CHECK(vec(s) == std::vector<float>{2, 3, 4, 5, 6, 7});
  CHECK(s.data() == a.data() + 2);
  CHECK(s.strides() == sd::Index<1>{1});
  CHECK(shares(s, a));

  auto stepped = sd::slice(a, 0, 1, 9, 3);
  CHECK(vec(stepped) == std::vector<float>{1, 4, 7});
  CHECK(stepped.strides() == sd::Index<1>{3});
  CHECK(vec(sd::slice(a, 0, 0, 10, 4)) == std::vector<float>{0, 4, 8});
  CHECK(vec(sd::slice(a, 0, 0, 10, 20)) == std::vector<float>{0});

  CHECK(vec(sd::slice(a, 0, -3, 10)) == std::vector<float>{7, 8, 9});
  CHECK(vec(sd::slice(a, 0, 0, -8)) == std::vector<float>{0, 1});
  CHECK(vec(sd::slice(a, 0, -4, -1, 2)) == std::vector<float>{6, 8});
  CHECK(vec(sd::slice(a, -1, 8, 12)) == std::vector<float>{8, 9});
  CHECK(vec(sd::slice(a, 0, -100, 100)).size() == 10);
  CHECK(vec(sd::slice(a, 0, 12, 20)).empty());
  auto backwards = sd::slice(a, 0, 5, 2);
  CHECK(backwards.shape() == sd::Index<1>{0});
  CHECK(vec(backwards).empty());

  CHECK_THROWS_WITH(sd::slice(a, 0, 0, 5, 0), Contains("slice") && Contains("step"));
  CHECK_THROWS_AS(sd::slice(a, 1, 0, 5), sd::Error);

  // Slicing a 2-D tensor along either dim.
  auto m = ref::iota2(3, 4);
  auto cols = sd::slice(m, 1, 1, 3);
  CHECK(cols.shape() == sd::Index<2>{3, 2});
  CHECK(cols.strides() == sd::Index<2>{4, 1});
  CHECK(vec(cols) == std::vector<float>{1, 2, 5, 6, 9, 10});
  auto even = sd::slice(m, -1, 0, 4, 2);
  CHECK(even.strides() == sd::Index<2>{4, 2});
  CHECK(vec(even) == std::vector<float>{0, 2, 4, 6, 8, 10});
  auto rows = sd::slice(m, 0, 1, 3);
  CHECK(rows.is_contiguous());
  CHECK(rows.data() == m.data() + 4);

  cols(2, 1) = -1.f;
  CHECK(m(2, 2) == -1.f);
  even(1, 1) = -2.f;
  CHECK(m(1, 2) == -2.f);

  // A slice of a slice.
  auto ss = sd::slice(sd::slice(m, 1, 1, 4), 1, 1, 3);
  CHECK(ss.data() == m.data() + 2);
  CHECK(ss(0, 0) == m(0, 2));
}

TEST_CASE("narrow", "[views][narrow]") {
  auto m = ref::iota2(4, 3);
  auto n = sd::narrow(m, 0, 1, 2);
  CHECK(n.shape() == sd::Index<2>{2, 3});
  CHECK(vec(n) == std::vector<float>{3, 4, 5, 6, 7, 8});
  CHECK(shares(n, m));
  auto c = sd::narrow(m, -1, 2, 1);
  CHECK(vec(c) == std::vector<float>{2, 5, 8, 11});
  CHECK(sd::narrow(m, 0, 4, 0).numel() == 0);
  CHECK_THROWS_WITH(sd::narrow(m, 0, 3, 2), Contains("narrow") && Contains("[4, 3]"));
  CHECK_THROWS_AS(sd::narrow(m, 0, -1, 2), sd::Error);
}

TEST_CASE("unsqueeze and squeeze", "[views][squeeze]") {
  auto a = ref::iota2(3, 4);
  auto u0 = sd::unsqueeze(a, 0);
  static_assert(decltype(u0)::rank == 3);
  CHECK(u0.shape() == sd::Index<3>{1, 3, 4});
  CHECK(u0.is_contiguous());
  CHECK(shares(u0, a));
  CHECK(vec(u0) == vec(a));
  auto u1 = sd::unsqueeze(a, 1);
  CHECK(u1.shape() == sd::Index<3>{3, 1, 4});
  CHECK(u1.strides()[0] == 4);
  CHECK(u1.strides()[2] == 1);
  CHECK(u1.is_contiguous());
  auto ul = sd::unsqueeze(a, -1);
  CHECK(ul.shape() == sd::Index<3>{3, 4, 1});
  CHECK(ul.strides()[0] == 4);
  CHECK(ul.strides()[1] == 1);
  CHECK(vec(ul) == vec(a));
  CHECK_THROWS_AS(sd::unsqueeze(a, 3), sd::Error);
  CHECK_THROWS_AS(sd::unsqueeze(a, -4), sd::Error);

  // unsqueeze of a transposed view keeps its strides on the other axes.
  auto t = sd::unsqueeze(sd::transpose(a, 0, 1), 1);
  CHECK(t.shape() == sd::Index<3>{4, 1, 3});
  CHECK(t.strides()[0] == 1);
  CHECK(t.strides()[2] == 4);
  CHECK(vec(t) == vec(sd::transpose(a, 0, 1)));

  auto s = sd::squeeze(u1, 1);
  static_assert(decltype(s)::rank == 2);
  CHECK(s.shape() == sd::Index<2>{3, 4});
  CHECK(s.strides() == a.strides());
  CHECK(sd::squeeze(ul, -1).shape() == sd::Index<2>{3, 4});
  CHECK_THROWS_AS(sd::squeeze(a, 0), sd::Error);

  u0(0, 2, 3) = 50.f;
  CHECK(a(2, 3) == 50.f);

  // Rank 0 <-> rank 1.
  sd::Tensor<float, 0> z;
  z() = 3.f;
  auto z1 = sd::unsqueeze(z, 0);
  CHECK(z1.shape() == sd::Index<1>{1});
  CHECK(z1(0) == 3.f);
  auto back = sd::squeeze(z1, 0);
  static_assert(decltype(back)::rank == 0);
  CHECK(back.item() == 3.f);
}

TEST_CASE("expand and broadcast_to repeat size-1 axes with stride 0", "[views][expand]") {
  auto col = sd::view(sd::arange<float>(3), sd::shape(3, 1));
  auto e = sd::expand(col, std::array<std::int64_t, 2>{3, 4});
  CHECK(e.shape() == sd::Index<2>{3, 4});
  CHECK(e.strides() == sd::Index<2>{1, 0});
  CHECK(shares(e, col));
  CHECK(vec(e) == std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});

  auto keep = sd::expand(col, std::array<std::int64_t, 2>{-1, 2});
  CHECK(keep.shape() == sd::Index<2>{3, 2});

  // New leading axes.
  auto row = sd::arange<float>(4);
  auto r3 = sd::expand(row, std::array<std::int64_t, 3>{2, 3, 4});
  CHECK(r3.shape() == sd::Index<3>{2, 3, 4});
  CHECK(r3.strides() == sd::Index<3>{0, 0, 1});
  CHECK(r3(1, 2, 3) == 3.f);

  auto b = sd::broadcast_to(row, sd::shape(2, 4));
  CHECK(b.shape() == sd::Index<2>{2, 4});
  CHECK(vec(b) == std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3});

  // An expanded size-1 axis of size 0.
  auto z = sd::expand(col, std::array<std::int64_t, 2>{3, 0});
  CHECK(z.numel() == 0);

  CHECK_THROWS_AS(sd::expand(col, std::array<std::int64_t, 2>{2, 4}), sd::Error);
  CHECK_THROWS_AS(sd::broadcast_to(row, sd::shape(2, 5)), sd::Error);
}

TEST_CASE("view and reshape", "[views][reshape]") {
  auto a = sd::arange<float>(12);
  auto v = sd::view(a, sd::shape(3, 4));
  static_assert(decltype(v)::rank == 2);
  CHECK(v.shape() == sd::Index<2>{3, 4});
  CHECK(v.strides() == sd::Index<2>{4, 1});
  CHECK(v.data() == a.data());
  CHECK(shares(v, a));
  v(2, 0) = -8.f;
  CHECK(a(8) == -8.f);

  auto inferred = sd::view(a, std::array<std::int64_t, 2>{-1, 6});
  CHECK(inferred.shape() == sd::Index<2>{2, 6});
  auto three = sd::view(v, sd::shape(2, -1, 3));
  CHECK(three.shape() == sd::Index<3>{2, 2, 3});
  CHECK_THROWS_AS(sd::view(a, sd::shape(5, -1)), sd::Error);
  CHECK_THROWS_AS(sd::view(a, sd::shape(-1, -1)), sd::Error);
  CHECK_THROWS_AS(sd::view(a, sd::shape(5, 3)), sd::Error);

  // reshape of a contiguous tensor is a view: shares storage.
  auto r = sd::reshape(v, sd::shape(4, 3));
  CHECK(r.data() == a.data());
  CHECK(shares(r, a));
  auto rows = sd::slice(v, 0, 1, 3);  // contiguous, offset
  auto rr = sd::reshape(rows, sd::shape(8));
  CHECK(rr.data() == a.data() + 4);
  CHECK(shares(rr, a));

  // reshape of a non-contiguous tensor copies, in the view's row-major order.
  auto t = sd::transpose(v, 0, 1);
  auto rt = sd::reshape(t, sd::shape(12));
  CHECK_FALSE(shares(rt, a));
  CHECK(rt.is_contiguous());
  CHECK(vec(rt) == vec(t));
  rt(0) = 1000.f;
  CHECK(a(0) == 0.f);
  auto rt2 = sd::reshape(t, std::array<std::int64_t, 2>{2, -1});
  CHECK(rt2.shape() == sd::Index<2>{2, 6});
  CHECK(vec(rt2) == vec(t));
}

TEST_CASE("flatten", "[views][flatten]") {
  auto a = iota3(2, 3, 4);
  auto all = sd::flatten(a);
  static_assert(decltype(all)::rank == 1);
  CHECK(all.shape() == sd::Index<1>{24});
  CHECK(shares(all, a));

  auto f1 = sd::flatten<1>(a);
  static_assert(decltype(f1)::rank == 2);
  CHECK(f1.shape() == sd::Index<2>{2, 12});
  auto f01 = sd::flatten<0, 1>(a);
  CHECK(f01.shape() == sd::Index<2>{6, 4});
  auto fneg = sd::flatten<-2, -1>(a);
  CHECK(fneg.shape() == sd::Index<2>{2, 12});
  auto none = sd::flatten<1, 1>(a);
  static_assert(decltype(none)::rank == 3);
  CHECK(none.shape() == a.shape());
  CHECK(vec(f01) == vec(a));

  // Non-contiguous: a copy in row-major order.
  auto p = sd::permute(a, {2, 1, 0});
  auto fp = sd::flatten(p);
  CHECK_FALSE(shares(fp, a));
  CHECK(vec(fp) == vec(p));

  sd::Tensor<float, 0> s;
  s() = 7.f;
  auto fs = sd::flatten(s);
  CHECK(fs.shape() == sd::Index<1>{1});
  CHECK(fs(0) == 7.f);
}

TEST_CASE("views inside fused expressions", "[views][expr]") {
  auto a = ref::iota2(3, 4);
  auto b = ref::iota2(4, 3);
  auto e = sd::transpose(a, 0, 1) * 2.f + b;
  static_assert(sd::kernel_count<decltype(e)> == 1);
  sd::Tensor<float, 2> r = e;
  CHECK(r.shape() == sd::Index<2>{4, 3});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(r(i, j) == a(j, i) * 2.f + b(i, j));

  auto col = sd::view(sd::arange<float>(3), sd::shape(3, 1));
  sd::Tensor<float, 2> r2 = sd::slice(a, 1, 0, 4, 2) + sd::expand(col, std::array<std::int64_t, 2>{3, 2});
  CHECK(vec(r2) == std::vector<float>{0, 2, 5, 7, 10, 12});

  // A reduction over a strided view.
  sd::Tensor<float, 1> s = sd::sum(sd::transpose(a, 0, 1), 1);
  CHECK(vec(s) == std::vector<float>{12, 15, 18, 21});
  sd::Tensor<float, 1> s2 = sd::sum(sd::slice(a, 1, 1, 4, 2), 0);
  CHECK(vec(s2) == std::vector<float>{15, 21});
}

TEST_CASE("views as assignment targets write into the base", "[views][assign]") {
  SECTION("a transposed view") {
    auto x = ref::iota2(4, 3);
    sd::Tensor<float, 2> y = sd::zeros<float>(3, 4);
    auto tv = sd::transpose(y, 0, 1);
    tv = x * 2.f;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) CHECK(y(i, j) == 2.f * x(j, i));
  }
  SECTION("a row slice leaves the other rows alone") {
    sd::Tensor<float, 2> y = sd::zeros<float>(3, 4);
    auto row = sd::slice(y, 0, 1, 2);
    row = sd::ones<float>(1, 4) * 5.f;
    CHECK(vec(y) == std::vector<float>{0, 0, 0, 0, 5, 5, 5, 5, 0, 0, 0, 0});
  }
  SECTION("a stepped column slice") {
    sd::Tensor<float, 2> y = sd::zeros<float>(2, 4);
    auto cols = sd::slice(y, 1, 0, 4, 2);
    cols = ref::iota2(2, 2) + 1.f;
    CHECK(vec(y) == std::vector<float>{1, 0, 2, 0, 3, 0, 4, 0});
  }
  SECTION("a permuted 3-D view") {
    auto src = iota3(4, 2, 3);
    sd::Tensor<float, 3> y = sd::zeros<float>(2, 3, 4);
    auto pv = sd::permute(y, {2, 0, 1});  // [4, 2, 3]
    pv = src + 0.f;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) CHECK(y(i, j, k) == src(k, i, j));
  }
}

TEST_CASE("views of expressions equal the evaluated-then-viewed result", "[views][expr]") {
  auto x = ref::iota2(3, 4);
  auto row = sd::arange<float>(4);
  auto colt = sd::view(sd::arange<float>(3), sd::shape(3, 1));

  SECTION("transpose") {
    sd::Tensor<float, 2> lazy = sd::transpose(x + 1.f, 0, 1);
    sd::Tensor<float, 2> ev = x + 1.f;
    CHECK(lazy.shape() == sd::Index<2>{4, 3});
    CHECK(vec(lazy) == vec(sd::transpose(ev, 0, 1)));
    // With a broadcast operand inside.
    sd::Tensor<float, 2> lazy2 = sd::transpose(x * row - colt, 0, 1);
    sd::Tensor<float, 2> ev2 = x * row - colt;
    CHECK(vec(lazy2) == vec(sd::transpose(ev2, 0, 1)));
    static_assert(sd::kernel_count<decltype(sd::transpose(x * row - colt, 0, 1))> == 1);
  }
  SECTION("permute") {
    auto a = iota3(2, 3, 4);
    sd::Tensor<float, 3> lazy = sd::permute(sd::exp(a * 0.01f) + row, {1, 2, 0});
    sd::Tensor<float, 3> ev = sd::exp(a * 0.01f) + row;
    CHECK(vec(lazy) == vec(sd::permute(ev, {1, 2, 0})));
  }
  SECTION("unsqueeze") {
    auto lazy = sd::eval(sd::unsqueeze(x * 2.f + row, 0));
    static_assert(decltype(lazy)::rank == 3);
    CHECK(lazy.shape() == sd::Index<3>{1, 3, 4});
    sd::Tensor<float, 2> ev = x * 2.f + row;
    CHECK(vec(lazy) == vec(sd::unsqueeze(ev, 0)));
    sd::Tensor<float, 3> mid = sd::unsqueeze(x - 1.f, 1);
    CHECK(mid.shape() == sd::Index<3>{3, 1, 4});
  }
  SECTION("expand") {
    sd::Tensor<float, 2> lazy = sd::expand(colt * 3.f, std::array<std::int64_t, 2>{3, 5});
    sd::Tensor<float, 2> ev = colt * 3.f;
    CHECK(vec(lazy) == vec(sd::expand(ev, std::array<std::int64_t, 2>{3, 5})));
    sd::Tensor<float, 3> lead = sd::expand(x + row, std::array<std::int64_t, 3>{2, 3, 4});
    sd::Tensor<float, 2> ev2 = x + row;
    CHECK(vec(lead) == vec(sd::expand(ev2, std::array<std::int64_t, 3>{2, 3, 4})));
  }
  SECTION("slice") {
    sd::Tensor<float, 2> lazy = sd::slice(x * x, 1, 1, 4, 2);
    sd::Tensor<float, 2> ev = x * x;
    CHECK(vec(lazy) == vec(sd::slice(ev, 1, 1, 4, 2)));
    // A slice over an axis that only the broadcast gives the expression.
    sd::Tensor<float, 2> lazy2 = sd::slice(colt + row, 0, 1, 3);
    sd::Tensor<float, 2> ev2 = colt + row;
    CHECK(vec(lazy2) == vec(sd::slice(ev2, 0, 1, 3)));
  }
  SECTION("a view of an expression is a view of its inputs: no copy, no extra kernel") {
    auto e = sd::transpose(x + 1.f, 0, 1);
    static_assert(sd::kernel_count<decltype(e)> == 1);
    x(0, 1) = 100.f;  // read at evaluation time, not when the view was built
    sd::Tensor<float, 2> r = e;
    CHECK(r(1, 0) == 101.f);
  }
}

TEST_CASE("aliasing between inputs and the output gives the right answer", "[views][alias]") {
  SECTION("y = transpose(y) * 1 on a square tensor") {
    auto y = ref::iota2(4, 4);
    auto orig = y.clone();
    y = sd::transpose(y, 0, 1) * 1.f;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) CHECK(y(i, j) == orig(j, i));
  }
  SECTION("a large square transpose (the parallel path)") {
    auto y = ref::iota2(300, 300);
    auto orig = y.clone();
    y = sd::transpose(y, 0, 1) + 0.f;
    bool ok = true;
    for (int i = 0; i < 300; ++i)
      for (int j = 0; j < 300; ++j) ok = ok && y(i, j) == orig(j, i);
    CHECK(ok);
  }
  SECTION("writing into a transposed view of the input") {
    auto y = ref::iota2(3, 3);
    auto orig = y.clone();
    auto tv = sd::transpose(y, 0, 1);
    tv = y * 2.f;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) CHECK(y(i, j) == 2.f * orig(j, i));
  }
  SECTION("shifted slices of the same tensor") {
    auto z = sd::arange<float>(10);
    auto dst = sd::slice(z, 0, 1, 10);
    dst = sd::slice(z, 0, 0, 9) + 0.f;
    CHECK(vec(z) == std::vector<float>{0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
    auto z2 = sd::arange<float>(10);
    auto dst2 = sd::slice(z2, 0, 0, 9);
    dst2 = sd::slice(z2, 0, 1, 10) * 1.f;
    CHECK(vec(z2) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 9});
  }
  SECTION("an expanded view of the output as an input") {
    auto y = ref::iota2(3, 3);
    auto first_row = sd::slice(y, 0, 0, 1);  // [1, 3]
    y = y + first_row;  // y[0] is read by every row
    CHECK(vec(y) == std::vector<float>{0, 2, 4, 3, 5, 7, 6, 8, 10});
  }
  SECTION("exactly the output (in place)") {
    auto y = ref::iota2(2, 3);
    y = y * 2.f + y;
    CHECK(vec(y) == std::vector<float>{0, 3, 6, 9, 12, 15});
  }
  SECTION("a reduction of the output broadcast back into it") {
    auto y = ref::iota2(2, 3);
    y = y - sd::sum(y, 1, sd::keepdim);
    CHECK(vec(y) == std::vector<float>{-3, -2, -1, -9, -8, -7});
    auto s = ref::iota2(3, 3);
    s = sd::softmax(sd::transpose(s, 0, 1), 1);
    sd::Tensor<float, 2> expect = sd::softmax(sd::transpose(ref::iota2(3, 3), 0, 1), 1);
    CHECK(vec(s) == vec(expect));
  }
}
