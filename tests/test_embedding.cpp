// embedding (expr/embedding.hpp, backend/host/embedding.hpp): rows of a weight picked by
// integer indices of any shape, an anchor whose element-wise consumers run on each gathered row.
// A gather is exact: every value is compared for equality with the weight's row.
#include "reference.hpp"

#include <string>

namespace sd = solder;
using ref::Array;
using ref::run_counted;

TEST_CASE("embedding picks the weight's rows, for indices of any shape", "[embedding]") {
  auto w = ref::uniform<float>(-1, 1, 7, 5);
  Array W = ref::of(w);
  auto ids = ref::values<std::int64_t>({3, 0, 6, 6, 1, 2}, 2, 3);
  auto e = run_counted(sd::embedding(ids, w));
  REQUIRE(e.shape() == sd::Index<3>{2, 3, 5});
  std::int64_t const picked[] = {3, 0, 6, 6, 1, 2};
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 3; ++t)
      for (int d = 0; d < 5; ++d) CHECK(e(b, t, d) == static_cast<float>(W.at({picked[b * 3 + t], d})));

  // int32 indices, one dim; a weight whose rows are not contiguous (a transposed view).
  auto ids32 = ref::values<std::int32_t>({4, 4, 0}, 3);
  auto wt = ref::uniform<double>(-1, 1, 5, 6);
  auto e2 = run_counted(sd::embedding(ids32, sd::transpose(wt, 0, 1)));  // [6, 5]: rows strided
  REQUIRE(e2.shape() == sd::Index<2>{3, 5});
  for (int r = 0; r < 3; ++r)
    for (int d = 0; d < 5; ++d) CHECK(e2(r, d) == wt(d, r == 2 ? 0 : 4));

  // A 0-d index gives one row, as PyTorch.
  sd::Tensor<std::int64_t, 0> one;
  one.data()[0] = 5;
  auto e0 = run_counted(sd::embedding(one, w));
  REQUIRE(e0.shape() == sd::Index<1>{5});
  for (int d = 0; d < 5; ++d) CHECK(e0(d) == static_cast<float>(W.at({5, d})));
}

TEST_CASE("element-wise maths over an embedding runs on each gathered row: one kernel", "[embedding][fusion]") {
  auto w = ref::uniform<float>(-1, 1, 11, 8);
  auto pos = ref::uniform<float>(-1, 1, 4, 8);
  auto ids = ref::values<std::int64_t>({10, 2, 2, 7}, 4);
  auto x = sd::embedding(ids, w) * 2.5f + pos;  // token embedding scaled, plus positions
  static_assert(sd::kernel_count<decltype(x)> == 1);
  auto r = run_counted(x);
  std::int64_t const picked[] = {10, 2, 2, 7};
  for (int t = 0; t < 4; ++t)
    for (int d = 0; d < 8; ++d)  // (one rounding apart where the compiler fuses the multiply-add)
      CHECK(r(t, d) == Approx(double(w(picked[t], d)) * 2.5 + pos(t, d)).epsilon(1e-6).margin(1e-7));
  CHECK(sd::explain(x).find("embedding(") != std::string::npos);
  // Many rows, over threads, into a layer norm's input: the norm reads the stored rows.
  auto many = ref::uniform<std::int64_t>(0, 10, 64, 300);
  auto ln = sd::layer_norm(sd::embedding(many, w), sd::ones<float>(sd::shape(8)), sd::zeros<float>(sd::shape(8)));
  static_assert(sd::kernel_count<decltype(ln)> == 2);
  auto l = run_counted(ln);
  for (int b = 0; b < 64; b += 21)
    for (int t = 0; t < 300; t += 37) {
      double mean = 0, var = 0;
      for (int d = 0; d < 8; ++d) mean += w(many(b, t), d);
      mean /= 8;
      for (int d = 0; d < 8; ++d) var += (w(many(b, t), d) - mean) * (w(many(b, t), d) - mean);
      var /= 8;
      for (int d = 0; d < 8; ++d)
        CHECK(l(b, t, d) == Approx((w(many(b, t), d) - mean) / std::sqrt(var + 1e-5)).epsilon(1e-4).margin(1e-5));
    }
}

TEST_CASE("embedding refuses indices outside the weight, naming them", "[embedding][errors]") {
  auto w = ref::uniform<float>(-1, 1, 5, 3);
  auto high = ref::values<std::int64_t>({0, 5}, 2);
  std::string m = ref::error_message([&] { sd::Tensor<float, 2> y = sd::embedding(high, w); });
  CHECK(m.find("embedding: index 5 is out of range") != std::string::npos);
  CHECK(m.find("[5, 3]") != std::string::npos);
  auto negative = ref::values<std::int32_t>({-1}, 1);
  CHECK(ref::error_message([&] { sd::Tensor<float, 2> y = sd::embedding(negative, w); }).find("index -1") != std::string::npos);
}
