// Tensors: construction, static extents, storage (alignment, sharing, clone), element access,
// rank-0 and empty tensors, every element type, printing, static <-> dynamic conversion.
#include "reference.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <solder/solder.hpp>

namespace sd = solder;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

template <class T>
bool aligned64(T const* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 64 == 0;
}

template <class TT>
std::string str(TT const& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace

TEST_CASE("tensors are built from sizes, sd::shape and Index", "[tensor]") {
  sd::Tensor<float, 2> a(3, 4);
  CHECK(a.shape() == sd::Index<2>{3, 4});
  CHECK(a.strides() == sd::Index<2>{4, 1});
  CHECK(a.numel() == 12);
  CHECK(a.is_contiguous());
  CHECK(a.size(0) == 3);
  CHECK(a.size(-1) == 4);
  CHECK(a.stride(0) == 4);
  CHECK(a.stride(-1) == 1);
  CHECK_THROWS_AS(a.size(2), sd::Error);

  sd::Tensor<float, 2> b(sd::shape(3, 4));
  CHECK(b.shape() == a.shape());
  CHECK(b.strides() == a.strides());

  sd::Tensor<float, 2> c(sd::Index<2>{3, 4});
  CHECK(c.shape() == a.shape());

  sd::Tensor<double, 3> d(2, 3, 5);
  CHECK(d.shape() == sd::Index<3>{2, 3, 5});
  CHECK(d.strides() == sd::Index<3>{15, 5, 1});
  CHECK(d.numel() == 30);

  // Sizes of any integral type.
  sd::Tensor<std::int32_t, 1> e(std::size_t{7});
  CHECK(e.shape() == sd::Index<1>{7});

  // A negative extent is refused.
  CHECK_THROWS_WITH((sd::Tensor<float, 2>(3, -1)), Contains("negative extent") && Contains("[3, -1]"));

  static_assert(sd::Tensor<float, 2>::rank == 2);
  static_assert(std::is_same_v<sd::Tensor<float, 2>::value_type, float>);
  static_assert(std::is_same_v<sd::Tensor<float, 2>::device_type, sd::Host>);
}

TEST_CASE("a default tensor is empty (dynamic extents are 0)", "[tensor]") {
  sd::Tensor<float, 2> t;
  CHECK(t.shape() == sd::Index<2>{0, 0});
  CHECK(t.numel() == 0);
  CHECK(t.is_contiguous());

  sd::Tensor<std::int64_t, 1> v;
  CHECK(v.numel() == 0);
  CHECK(sd::to_vector(v).empty());
}

TEST_CASE("static extents", "[tensor][extents]") {
  using T3d = sd::Tensor<float, sd::ext<3, sd::dyn>>;
  using T34 = sd::Tensor<float, sd::ext<3, 4>>;
  static_assert(T3d::rank == 2);
  static_assert(T3d::static_extents[0] == 3 && T3d::static_extents[1] == sd::dyn);
  static_assert(T34::static_extents[0] == 3 && T34::static_extents[1] == 4);

  SECTION("sizes that agree with the static extents") {
    T3d t(3, 5);
    CHECK(t.shape() == sd::Index<2>{3, 5});
    T3d u(sd::shape(sd::fix<3>, 7));
    CHECK(u.shape() == sd::Index<2>{3, 7});
    T3d w(sd::shape(3, 2));  // a dynamic shape is checked at run time
    CHECK(w.shape() == sd::Index<2>{3, 2});
  }
  SECTION("sizes that disagree throw") {
    CHECK_THROWS_WITH(T3d(4, 5), Contains("static extent 3") && Contains("[4, 5]"));
    CHECK_THROWS_AS(T3d(sd::shape(2, 2)), sd::Error);
    CHECK_THROWS_AS(T34(sd::Index<2>{3, 5}), sd::Error);
  }
  SECTION("default construction keeps static extents and zeroes dynamic ones") {
    T3d t;
    CHECK(t.shape() == sd::Index<2>{3, 0});
    CHECK(t.numel() == 0);
    T34 s;
    CHECK(s.shape() == sd::Index<2>{3, 4});
    CHECK(s.numel() == 12);
    CHECK(aligned64(s.data()));
    s(2, 3) = 1.5f;  // storage is there
    CHECK(s(2, 3) == 1.5f);
  }
  SECTION("sd::shape carries static extents") {
    auto sh = sd::shape(sd::fix<3>, 4);
    static_assert(decltype(sh)::rank == 2);
    CHECK(sh.dims == sd::Index<2>{3, 4});
    auto z = sd::zeros<float>(sd::shape(sd::fix<3>, 4));
    static_assert(decltype(z)::static_extents[0] == 3);
    static_assert(decltype(z)::static_extents[1] == sd::dyn);
    CHECK(z.shape() == sd::Index<2>{3, 4});
  }
  SECTION("expressions over static extents keep them") {
    T34 a = sd::full<float>(sd::shape(sd::fix<3>, sd::fix<4>), 2.f);
    T34 b = a * a + 1.f;
    CHECK(b(1, 2) == 5.f);
    auto e = a + a;
    static_assert(decltype(e)::static_extents[0] == 3 && decltype(e)::static_extents[1] == 4);
    // A dynamic expression evaluated into static extents is checked at run time.
    sd::Tensor<float, 2> d(4, 4);
    CHECK_THROWS_AS(T34(d * 2.f), sd::Error);
    // A static extent other than 1 survives broadcasting against a dynamic one, which must
    // then be 1 or the same at run time: a row op over static rows keeps their length.
    sd::Tensor<float, 2> column(3, 1), wider(3, 5);
    auto mixed = a + column;
    static_assert(decltype(mixed)::static_extents[0] == 3 && decltype(mixed)::static_extents[1] == 4);
    CHECK(mixed.shape() == sd::Index<2>{3, 4});
    CHECK_THROWS_AS(a + wider, sd::Error);
    auto ones = sd::Tensor<float, sd::ext<1, 4>>() + d;
    static_assert(decltype(ones)::static_extents[0] == sd::dyn && decltype(ones)::static_extents[1] == 4);
    sd::Tensor<float, sd::ext<sd::dyn, 4>> rows(5, 4);
    auto soft = sd::softmax(rows, 1);
    static_assert(decltype(soft)::static_extents[0] == sd::dyn && decltype(soft)::static_extents[1] == 4);
  }
}

TEST_CASE("storage is 64-byte aligned", "[tensor][storage]") {
  for (std::int64_t n : {1, 3, 17, 64, 1000, 4099}) {
    INFO("n = " << n);
    CHECK(aligned64(sd::Tensor<float, 1>(n).data()));
    CHECK(aligned64(sd::Tensor<double, 2>(n, 3).data()));
    CHECK(aligned64(sd::Tensor<std::int32_t, 1>(n).data()));
    CHECK(aligned64(sd::Tensor<std::int64_t, 1>(n).data()));
    CHECK(aligned64(sd::Tensor<bool, 1>(n).data()));
    auto z = sd::zeros<float>(n);
    CHECK(aligned64(z.data()));
    CHECK(aligned64(z.clone().data()));
    sd::Tensor<float, 1> e = z + 1.f;
    CHECK(aligned64(e.data()));
    CHECK(aligned64(sd::eval(z * 2.f).data()));
  }
  CHECK(aligned64(sd::Tensor<float, 0>().data()));
  CHECK(aligned64(sd::Tensor<float, 2>().data()));
}

TEST_CASE("copies share storage", "[tensor][storage]") {
  sd::Tensor<float, 2> a = sd::zeros<float>(2, 3);
  CHECK(a.storage().use_count() == 1);
  sd::Tensor<float, 2> b = a;
  CHECK(a.storage().use_count() == 2);
  CHECK(b.data() == a.data());
  CHECK(b.shape() == a.shape());

  b(1, 2) = 5.f;
  CHECK(a(1, 2) == 5.f);
  a(0, 0) = -1.f;
  CHECK(b(0, 0) == -1.f);

  {
    auto c = b;
    CHECK(a.storage().use_count() == 3);
  }
  CHECK(a.storage().use_count() == 2);

  // Tensor = Tensor rebinds, like shared_ptr: the old storage is released, not written.
  sd::Tensor<float, 2> d = sd::ones<float>(4, 4);
  sd::Tensor<float, 2> keep = d;
  d = a;
  CHECK(d.data() == a.data());
  CHECK(d.shape() == sd::Index<2>{2, 3});
  CHECK(a.storage().use_count() == 3);
  CHECK(keep.storage().use_count() == 1);
  CHECK(keep(3, 3) == 1.f);

  // Storage outlives the tensor it came from.
  float* p = nullptr;
  sd::Tensor<float, 1> survivor;
  {
    sd::Tensor<float, 1> tmp = sd::full<float>(sd::shape(5), 3.f);
    p = tmp.data();
    survivor = tmp;
  }
  CHECK(survivor.data() == p);
  CHECK(survivor(4) == 3.f);
}

TEST_CASE("clone copies into new, independent storage", "[tensor][storage]") {
  auto a = ref::iota2(3, 4);
  auto c = a.clone();
  CHECK(c.data() != a.data());
  CHECK(c.storage().use_count() == 1);
  CHECK(a.storage().use_count() == 1);
  CHECK(c.shape() == a.shape());
  CHECK(sd::to_vector(c) == sd::to_vector(a));
  c(0, 0) = 100.f;
  CHECK(a(0, 0) == 0.f);
  a(2, 3) = -7.f;
  CHECK(c(2, 3) == 11.f);

  // Cloning a strided view gives a contiguous tensor with the view's elements.
  auto t = sd::transpose(a, 0, 1);
  auto tc = t.clone();
  CHECK(tc.is_contiguous());
  CHECK(tc.shape() == sd::Index<2>{4, 3});
  CHECK(tc.strides() == sd::Index<2>{3, 1});
  CHECK(sd::to_vector(tc) == sd::to_vector(t));
  CHECK(tc.storage().use_count() == 1);

  // Clone of a static-extent tensor keeps its type.
  sd::Tensor<float, sd::ext<2, 2>> s = sd::full<float>(sd::shape(sd::fix<2>, sd::fix<2>), 4.f);
  auto sc = s.clone();
  static_assert(std::is_same_v<decltype(sc), decltype(s)>);
  CHECK(sc(1, 1) == 4.f);
}

TEST_CASE("element access is checked", "[tensor][access]") {
  auto a = ref::iota2(3, 4);
  CHECK(a(0, 0) == 0.f);
  CHECK(a(2, 3) == 11.f);
  CHECK(a(1, 2) == 6.f);
  a(1, 2) = 42.f;
  CHECK(a.data()[6] == 42.f);

  CHECK_THROWS_WITH(a(3, 0), Contains("index 3") && Contains("[3, 4]"));
  CHECK_THROWS_WITH(a(0, 4), Contains("index 4") && Contains("axis 1") && Contains("[3, 4]"));
  CHECK_THROWS_AS(a(-1, 0), sd::Error);
  CHECK_THROWS_AS(a(0, -1), sd::Error);

  sd::Tensor<float, 2> empty(0, 3);
  CHECK_THROWS_AS(empty(0, 0), sd::Error);
}

TEST_CASE("item() reads the single element", "[tensor][access]") {
  sd::Tensor<float, 2> one(1, 1);
  one(0, 0) = 4.5f;
  CHECK(one.item() == 4.5f);

  sd::Tensor<std::int64_t, 3> one3 = sd::full<std::int64_t>(sd::shape(1, 1, 1), std::int64_t{9});
  CHECK(one3.item() == 9);

  // item() of a view starts at the view's first element.
  auto a = ref::iota2(3, 4);
  CHECK(sd::slice(sd::slice(a, 0, 2, 3), 1, 1, 2).item() == 9.f);

  CHECK_THROWS_WITH(a.item(), Contains("item") && Contains("[3, 4]") && Contains("12 elements"));
  CHECK_THROWS_AS((sd::Tensor<float, 1>(0).item()), sd::Error);
}

TEST_CASE("rank-0 tensors", "[tensor][rank0]") {
  sd::Tensor<float, 0> s;
  CHECK(s.numel() == 1);
  CHECK(s.shape() == sd::Index<0>{});
  CHECK(s.is_contiguous());
  s() = 2.5f;
  CHECK(s.item() == 2.5f);
  CHECK(s() == 2.5f);
  CHECK(str(s) == "tensor(2.5, shape=[], dtype=float32)");

  sd::Tensor<float, 0> r = s * 2.f + 1.f;
  CHECK(r.item() == 6.f);

  // A rank-0 tensor broadcasts against anything.
  auto x = sd::arange<float>(5);
  sd::Tensor<float, 1> y = x * s;
  CHECK(sd::to_vector(y) == std::vector<float>{0.f, 2.5f, 5.f, 7.5f, 10.f});

  // Full reductions have rank 0.
  sd::Tensor<float, 0> total = sd::sum(x);
  CHECK(total.item() == 10.f);
  auto m = sd::eval(sd::max(x));
  static_assert(decltype(m)::rank == 0);
  CHECK(m.item() == 4.f);

  auto c = s.clone();
  c() = 1.f;
  CHECK(s.item() == 2.5f);
  CHECK(sd::to_vector(s) == std::vector<float>{2.5f});
}

TEST_CASE("empty tensors go through expressions and reductions", "[tensor][empty]") {
  sd::Tensor<float, 2> e(0, 4);
  CHECK(e.numel() == 0);
  CHECK(sd::to_vector(e).empty());
  CHECK(str(e) == "tensor([], shape=[0, 4], dtype=float32)");

  sd::Tensor<float, 2> r = sd::exp(e * 2.f + 1.f);
  CHECK(r.shape() == sd::Index<2>{0, 4});

  // Broadcasting with an empty axis keeps it empty.
  sd::Tensor<float, 2> b = e + sd::ones<float>(4);
  CHECK(b.shape() == sd::Index<2>{0, 4});
  sd::Tensor<float, 2> col(0, 1);
  sd::Tensor<float, 2> b2 = col * sd::ones<float>(1, 4);
  CHECK(b2.shape() == sd::Index<2>{0, 4});

  // Assigning into an existing empty tensor.
  sd::Tensor<float, 2> dst(0, 4);
  dst = e * 3.f;
  CHECK(dst.numel() == 0);

  // Reductions over the empty axis give the identity; over the other axis, an empty result.
  sd::Tensor<float, 1> s0 = sd::sum(e, 0);
  CHECK(sd::to_vector(s0) == std::vector<float>(4, 0.f));
  sd::Tensor<float, 1> s1 = sd::sum(e, 1);
  CHECK(s1.shape() == sd::Index<1>{0});
  CHECK(sd::eval(sd::sum(e)).item() == 0.f);
  CHECK(sd::eval(sd::prod(e)).item() == 1.f);
  CHECK(std::isnan(sd::eval(sd::mean(e)).item()));
  sd::Tensor<float, 1> p0 = sd::prod(e, 0);
  CHECK(sd::to_vector(p0) == std::vector<float>(4, 1.f));
  sd::Tensor<float, 2> sk = sd::sum(e, 0, sd::keepdim);
  CHECK(sk.shape() == sd::Index<2>{1, 4});

  // max over a non-empty dim of an empty tensor is an empty result, not an error.
  sd::Tensor<float, 1> m1 = sd::max(e, 1);
  CHECK(m1.shape() == sd::Index<1>{0});

  // Integer sums of empty tensors are int64 zeros.
  sd::Tensor<std::int32_t, 1> ei(0);
  auto si = sd::eval(sd::sum(ei));
  static_assert(std::is_same_v<decltype(si)::value_type, std::int64_t>);
  CHECK(si.item() == 0);

  // Row ops over empty rows.
  sd::Tensor<float, 2> sm = sd::softmax(e, 1);
  CHECK(sm.shape() == sd::Index<2>{0, 4});

  // Clone of an empty tensor.
  auto c = e.clone();
  CHECK(c.shape() == sd::Index<2>{0, 4});
}

TEMPLATE_TEST_CASE("every element type", "[tensor][dtype]", float, double, std::int32_t,
                   std::int64_t, bool) {
  using T = TestType;
  auto z = sd::zeros<T>(2, 3);
  auto o = sd::ones<T>(2, 3);
  static_assert(std::is_same_v<typename decltype(z)::value_type, T>);
  CHECK(sd::to_vector(z) == std::vector<T>(6, T(0)));
  CHECK(sd::to_vector(o) == std::vector<T>(6, T(1)));
  CHECK(aligned64(z.data()));

  sd::Tensor<T, 2> t(2, 3);
  t(1, 2) = T(1);
  CHECK(t(1, 2) == T(1));

  // Element-wise expressions keep the type.
  sd::Tensor<T, 2> mx = sd::maximum(o, z);
  CHECK(sd::to_vector(mx) == sd::to_vector(o));
  sd::Tensor<T, 2> w = sd::where(o != z, z, o);
  CHECK(sd::to_vector(w) == sd::to_vector(z));
  sd::Tensor<bool, 2> eq = (o == o);
  CHECK(sd::to_vector(eq) == std::vector<bool>(6, true));

  // Copy, clone, conversion to and from vectors.
  auto c = o.clone();
  c(0, 0) = T(0);
  CHECK(o(0, 0) == T(1));
  std::vector<T> v{T(1), T(0), T(1), T(1)};
  auto fv = sd::from_vector(v, sd::shape(2, 2));
  CHECK(sd::to_vector(fv) == v);

  // Printing names the dtype.
  std::string s = str(o);
  CHECK_THAT(s, Contains(std::string("dtype=") + std::string(sd::dtype_name<T>())));
  CHECK_THAT(s, Contains("shape=[2, 3]"));
}

TEST_CASE("dtype names", "[tensor][dtype]") {
  CHECK(sd::dtype_name<float>() == "float32");
  CHECK(sd::dtype_name<double>() == "float64");
  CHECK(sd::dtype_name<std::int32_t>() == "int32");
  CHECK(sd::dtype_name<std::int64_t>() == "int64");
  CHECK(sd::dtype_name<bool>() == "bool");
}

TEST_CASE("printing", "[tensor][print]") {
  CHECK(str(sd::from_vector(std::vector<float>{1.5f, -2.25f, 3.125f})) ==
        "tensor([1.5, -2.25, 3.125], shape=[3], dtype=float32)");
  CHECK(str(sd::from_vector(std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}, sd::shape(2, 2))) ==
        "tensor([[0.5, 1.5], [2.5, 3.5]], shape=[2, 2], dtype=float32)");
  CHECK(str(sd::from_vector(std::vector<double>{0.25, -0.5})) ==
        "tensor([0.25, -0.5], shape=[2], dtype=float64)");
  CHECK(str(sd::from_vector(std::vector<std::int32_t>{1, -2, 3})) ==
        "tensor([1, -2, 3], shape=[3], dtype=int32)");
  CHECK(str(sd::from_vector(std::vector<std::int64_t>{4000000000LL, 0})) ==
        "tensor([4000000000, 0], shape=[2], dtype=int64)");
  CHECK(str(sd::from_vector(std::vector<bool>{true, false})) ==
        "tensor([True, False], shape=[2], dtype=bool)");
  CHECK(str(sd::Tensor<float, 1>(0)) == "tensor([], shape=[0], dtype=float32)");

  // 3-D nesting, and a view prints in its logical order.
  auto a = sd::arange<std::int32_t>(8);
  CHECK(str(sd::view(a, sd::shape(2, 2, 2))) ==
        "tensor([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], shape=[2, 2, 2], dtype=int32)");
  CHECK(str(sd::transpose(sd::view(a, sd::shape(2, 4)), 0, 1)) ==
        "tensor([[0, 4], [1, 5], [2, 6], [3, 7]], shape=[4, 2], dtype=int32)");
}

TEST_CASE("large tensors print summarised, as PyTorch does", "[tensor][print]") {
  auto a = sd::arange<std::int64_t>(2000);
  CHECK(str(a) == "tensor([0, 1, 2, ..., 1997, 1998, 1999], shape=[2000], dtype=int64)");
  // Up to 1000 elements print in full.
  auto b = sd::arange<std::int32_t>(1000);
  std::string s = str(b);
  CHECK_THAT(s, !Contains("..."));
  CHECK_THAT(s, Contains("[0, 1, 2, 3, ") && Contains(", 998, 999]"));
  // 2-D: both axes summarised.
  auto m = sd::view(sd::arange<std::int32_t>(40 * 40), sd::shape(40, 40));
  std::string ms = str(m);
  CHECK_THAT(ms, StartsWith("tensor([[0, 1, 2, ..., 37, 38, 39], [40, 41, 42, ..., 77, 78, 79], "
                            "[80, 81, 82, ..., 117, 118, 119], ..., [1480, 1481, 1482, ..., "));
  CHECK_THAT(ms, EndsWith(", 1597, 1598, 1599]], shape=[40, 40], dtype=int32)"));
}

// print.hpp documents PyTorch's style, tensor([[1., 2.], [3., 4.]], ...): whole floats with a
// trailing dot. The implementation prints them as integers ("1").
TEST_CASE("whole floats print with a trailing dot (documented format)", "[tensor][print]") {
  CHECK(str(sd::from_vector(std::vector<float>{1.f, 2.f, 3.f, 4.f}, sd::shape(2, 2))) ==
        "tensor([[1., 2.], [3., 4.]], shape=[2, 2], dtype=float32)");
}

TEST_CASE("printing leaves the stream's precision as it was", "[tensor][print]") {
  std::ostringstream os;
  os.precision(12);
  os << sd::from_vector(std::vector<float>{0.1f});
  CHECK(os.precision() == 12);
}

TEST_CASE("static-extent and dynamic tensors convert with a run-time check", "[tensor][extents]") {
  using S34 = sd::Tensor<float, sd::ext<3, 4>>;
  using S3d = sd::Tensor<float, sd::ext<3, sd::dyn>>;
  using S43 = sd::Tensor<float, sd::ext<4, 3>>;
  S34 s = sd::full<float>(sd::shape(sd::fix<3>, sd::fix<4>), 1.f);
  s(2, 1) = 8.f;

  // Static -> dynamic: always fine, shares storage.
  sd::Tensor<float, 2> d = s;
  CHECK(d.shape() == sd::Index<2>{3, 4});
  CHECK(d.data() == s.data());
  CHECK(d(2, 1) == 8.f);

  // Dynamic -> static: checked, shares storage.
  S34 back = d;
  CHECK(back.data() == s.data());
  S3d partial = d;
  CHECK(partial.shape() == sd::Index<2>{3, 4});

  // A strided view keeps its strides through the conversion.
  S43 t = sd::transpose(s, 0, 1);
  CHECK(t.strides() == sd::Index<2>{1, 4});
  CHECK(t(1, 2) == 8.f);

  sd::Tensor<float, 2> wrong(4, 4);
  CHECK_THROWS_WITH(S34(wrong), Contains("static extent 3") && Contains("[4, 4]"));
  CHECK_THROWS_WITH(S3d(wrong), Contains("static extent 3") && Contains("[4, 4]"));
  sd::Tensor<float, 2> wrong_col(3, 5);
  CHECK_THROWS_WITH(S34(wrong_col), Contains("axis 1") && Contains("static extent 4") &&
                                        Contains("[3, 5]"));
  CHECK_NOTHROW(S3d(wrong_col));
}
