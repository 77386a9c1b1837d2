// Views as a PyTorch user writes them. Assigning a tensor to a view (core/tensor.hpp): a
// temporary view, what slice, narrow, select, transpose, permute, expand... return, is written
// to, as PyTorch's `x[:, 0:2] = y` and as assigning an expression; a named tensor is rebound, as
// Python's `v = y`. Static extents follow views whose dims are template arguments.
#include "reference.hpp"

namespace sd = solder;
using ref::Array;
using ref::contains;

namespace {

// x's values with `block` written over rows [r0, r0 + block rows) and columns [c0, ...).
Array written(Array x, Array const& block, std::int64_t r0, std::int64_t c0) {
  std::int64_t const cols = x.shape[1];
  for (std::int64_t i = 0; i < block.shape[0]; ++i)
    for (std::int64_t j = 0; j < block.shape[1]; ++j) x[(r0 + i) * cols + c0 + j] = block[i * block.shape[1] + j];
  return x;
}

}  // namespace

TEST_CASE("a tensor assigned to a temporary view writes its values", "[views][assign]") {
  auto x = ref::uniform<float>(-1, 1, 4, 5);
  Array const before = ref::of(x);
  auto y = ref::uniform<float>(-1, 1, 4, 2);
  Array const Y = ref::of(y);

  SECTION("slice") {
    sd::slice(x, 1, 1, 3) = y;
    ref::check_equal(x, written(before, Y, 0, 1), "slice(x, 1, 1, 3) = y");
  }
  SECTION("narrow, a tensor of static extents") {
    sd::Tensor<float, sd::ext<2, 5>> z = ref::uniform<float>(-1, 1, 2, 5);
    sd::narrow(x, 0, 2, 2) = z;
    ref::check_equal(x, written(before, ref::of(z), 2, 0), "narrow(x, 0, 2, 2) = z");
  }
  SECTION("select") {
    auto row = ref::uniform<float>(-1, 1, 5);
    sd::select(x, 0, -1) = row;
    Array r = ref::of(row);
    r.shape = {1, 5};
    ref::check_equal(x, written(before, r, 3, 0), "select(x, 0, -1) = row");
  }
  SECTION("transpose and permute") {
    auto t = ref::uniform<float>(-1, 1, 5, 4);
    sd::transpose(x, 0, 1) = t;
    ref::check_equal(x, ref::transpose(ref::of(t), 0, 1), "transpose(x, 0, 1) = t");
    auto p = ref::uniform<float>(-1, 1, 5, 4);
    sd::permute(x, {1, 0}) = p;
    ref::check_equal(x, ref::transpose(ref::of(p), 0, 1), "permute(x, {1, 0}) = p");
  }
  SECTION("a view of a view") {
    auto col = ref::uniform<float>(-1, 1, 2);
    sd::select(sd::slice(x, 0, 0, 4, 2), 1, 4) = col;  // x[0:4:2, 4]
    Array e = before;
    e[0 * 5 + 4] = ref::of(col)[0];
    e[2 * 5 + 4] = ref::of(col)[1];
    ref::check_equal(x, e, "x[0:4:2, 4] = col");
  }
  SECTION("a source that overlaps the view is read before it is written") {
    sd::slice(x, 1, 0, 4) = sd::slice(x, 1, 1, 5);  // x[:, 0:4] = x[:, 1:5]
    Array e = before;
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t j = 0; j < 4; ++j) e[i * 5 + j] = before[i * 5 + j + 1];
    ref::check_equal(x, e, "x[:, 0:4] = x[:, 1:5]");
  }
  SECTION("as an expression is") {
    sd::slice(x, 1, 1, 3) = y * 2.f;
    ref::check_equal(x, written(before, ref::map([](double v) { return 2 * v; }, Y), 0, 1), "slice = y * 2");
  }
}

TEST_CASE("a view assignment refuses what an expression's refuses", "[views][assign][errors]") {
  auto x = ref::uniform<float>(-1, 1, 4, 5);
  Array const before = ref::of(x);
  std::string const msg = ref::error_message([&] { sd::slice(x, 1, 0, 3) = ref::uniform<float>(-1, 1, 4, 2); });
  CHECK(contains(msg, "assign: expression of shape [4, 2] into a tensor of shape [4, 3]"));
  auto b = ref::uniform<float>(-1, 1, 1, 5);
  std::string const expanded = ref::error_message([&] { sd::expand(b, {4, 5}) = x; });
  INFO(expanded);
  CHECK(contains(expanded, "more than one element refers to the same memory location"));
  CHECK(contains(ref::error_message([&] { sd::select(x, 1, 5) = ref::uniform<float>(-1, 1, 4); }),
                 "select: index 5 out of range for dim 1 of shape [4, 5]"));
  ref::check_equal(x, before, "x unchanged");
}

TEST_CASE("a tensor assigned to a named tensor rebinds the name", "[views][assign]") {
  auto x = ref::uniform<float>(-1, 1, 4, 5);
  Array const before = ref::of(x);
  auto y = ref::uniform<float>(-1, 1, 4, 2);
  auto v = sd::slice(x, 1, 1, 3);
  v = y;  // as Python's `v = y`: v now names y's storage
  CHECK(v.data() == y.data());
  ref::check_equal(x, before, "x unchanged by rebinding a view's name");
  sd::Tensor<float, 2> w = x;  // a copy shares storage
  w(0, 0) = 42;
  CHECK(x(0, 0) == 42);
}

// Static extents follow a view whose dims are template arguments, so a contraction of it checks
// them at compile time (tests/compile_fail: linear_static_in_features_mismatch,
// mm_static_transposed_mismatch); a view whose dims are run-time values has dynamic extents.
TEST_CASE("static extents follow transpose<D0, D1> and flatten<S, E>", "[views][extents]") {
  sd::Tensor<float, sd::ext<3, 4>> a = ref::uniform<float>(-1, 1, 3, 4);
  auto at = sd::transpose<0, 1>(a);
  static_assert(decltype(at)::static_extents[0] == 4 && decltype(at)::static_extents[1] == 3);
  ref::check_equal(at, ref::transpose(ref::of(a), 0, 1), "transpose<0, 1>");
  CHECK(at.data() == a.data());
  auto dyn = sd::transpose(a, 0, 1);
  static_assert(decltype(dyn)::static_extents[0] == sd::dyn);

  sd::Tensor<float, sd::ext<2, 3, 4>> c = ref::uniform<float>(-1, 1, 2, 3, 4);
  auto f = sd::flatten<1>(c);
  static_assert(decltype(f)::rank == 2 && decltype(f)::static_extents[0] == 2 &&
                decltype(f)::static_extents[1] == 12);
  Array cf = ref::of(c);
  cf.shape = {2, 12};
  ref::check_equal(f, cf, "flatten<1>");
  sd::Tensor<float, sd::ext<sd::dyn, 3, 4>> d = c;
  static_assert(decltype(sd::flatten<0, 1>(d))::static_extents[0] == sd::dyn);
  static_assert(decltype(sd::flatten<0, 1>(d))::static_extents[1] == 4);

  // linear of static operands: the product's extents are static.
  sd::Tensor<float, sd::ext<5, 4>> w = ref::uniform<float>(-1, 1, 5, 4);
  auto y = sd::mm(a, sd::transpose<-2, -1>(w));
  static_assert(decltype(y)::static_extents[0] == 3 && decltype(y)::static_extents[1] == 5);
  auto p = ref::matmul(ref::of(a), ref::transpose(ref::of(w), 0, 1));
  ref::check_close(sd::eval(y), p.value, ref::Tol{4, 0, 1}, "mm(a, transpose<-2, -1>(w))", &p.scale);
  ref::check_close(sd::eval(sd::linear(a, w)), p.value, ref::Tol{4, 0, 1}, "linear(a, w)", &p.scale);
}

// The same through views of expressions: transpose<D0, D1> and t (torch.t) of an element-wise
// expression over static tensors, and of a contraction (a View node), keep what is static
// (tests/compile_fail: mm_static_transposed_expression_mismatch).
TEST_CASE("static extents follow views of expressions and t()", "[views][extents]") {
  sd::Tensor<float, sd::ext<3, 4>> a = ref::uniform<float>(-1, 1, 3, 4);
  sd::Tensor<float, sd::ext<5, 4>> w = ref::uniform<float>(-1, 1, 5, 4);
  sd::Tensor<float, sd::ext<4>> b = ref::uniform<float>(-1, 1, 4);
  static_assert(decltype(sd::t(w))::static_extents[0] == 4 && decltype(sd::t(w))::static_extents[1] == 5);
  static_assert(decltype(sd::t(b))::rank == 1);
  auto wt = sd::t(w * 2.f);
  static_assert(decltype(wt)::static_extents[0] == 4 && decltype(wt)::static_extents[1] == 5);
  // A broadcast input is not of the expression's shape: its view goes through expand.
  auto bt = sd::transpose<0, 1>(w + b);
  static_assert(decltype(bt)::static_extents[0] == 4 && decltype(bt)::static_extents[1] == 5);
  static_assert(decltype(sd::transpose(w * 2.f, 0, 1))::static_extents[0] == sd::dyn);

  auto y = sd::mm(a, sd::t(w * 2.f));
  static_assert(decltype(y)::static_extents[0] == 3 && decltype(y)::static_extents[1] == 5);
  Array w2 = ref::of(w), wb = ref::of(w);
  for (std::int64_t i = 0; i < 20; ++i) {
    w2[i] *= 2;
    wb[i] = static_cast<float>(wb[i]) + b(i % 4);  // the sum as float adds it
  }
  auto p = ref::matmul(ref::of(a), ref::transpose(w2, 0, 1));
  ref::check_close(sd::eval(y), p.value, ref::Tol{4, 0, 1}, "mm(a, t(w * 2))", &p.scale);
  ref::check_equal(sd::eval(bt), ref::transpose(wb, 0, 1), "transpose<0, 1>(w + b)");

  auto yt = sd::t(sd::mm(a, sd::t(w)));  // a View of a contraction: [5, 3]
  static_assert(decltype(yt)::static_extents[0] == 5 && decltype(yt)::static_extents[1] == 3);
  auto q = ref::matmul(ref::of(a), ref::transpose(ref::of(w), 0, 1));
  auto qt = ref::transpose(q.value, 0, 1);
  ref::check_close(sd::eval(yt), qt, ref::Tol{4, 0, 1}, "t(mm(a, t(w)))", &q.scale);
}
