// Run-time misuse throws sd::Error naming the op and the shapes (DESIGN.md §5), at the line
// that wrote it, and a failed assignment writes nothing.
#include "reference.hpp"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <solder/solder.hpp>

namespace sd = solder;
using Catch::Matchers::Contains;

TEST_CASE("sd::Error is a std::runtime_error with a solder: prefix", "[errors]") {
  sd::Tensor<float, 1> x(3);
  try {
    (void)x(5);
    FAIL("no exception");
  } catch (std::runtime_error const& e) {
    CHECK(dynamic_cast<sd::Error const*>(&e) != nullptr);
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith("solder: "));
  }
}

TEST_CASE("broadcasting mismatch throws when the expression is built", "[errors][broadcast]") {
  auto x = ref::iota2(3, 4);
  auto v = sd::arange<float>(5);
  REQUIRE_THROWS_AS(x + v, sd::Error);
  REQUIRE_THROWS_WITH(x + v, Contains("add") && Contains("[3, 4]") && Contains("[5]") &&
                                 Contains("broadcast"));
  REQUIRE_THROWS_WITH(x * v, Contains("mul") && Contains("[3, 4]") && Contains("[5]"));
  REQUIRE_THROWS_WITH(sd::maximum(v, x), Contains("maximum") && Contains("[3, 4]") && Contains("broadcast"));
  auto y = ref::iota2(4, 3);
  REQUIRE_THROWS_WITH(x - y, Contains("sub") && Contains("[3, 4]") && Contains("[4, 3]"));
  // Deep inside a larger expression: still at construction, naming the failing op.
  REQUIRE_THROWS_WITH(sd::exp(x * 2.f) / sd::sqrt(y + 1.f),
                      Contains("div") && Contains("[3, 4]") && Contains("[4, 3]"));
  auto c = x > 1.f;
  REQUIRE_THROWS_WITH(sd::where(c, x, y), Contains("where") && Contains("[3, 4]") && Contains("[4, 3]"));
  // Broadcasting that works does not throw.
  REQUIRE_NOTHROW(x + sd::arange<float>(4));
  REQUIRE_NOTHROW(x + sd::ones<float>(3, 1));
}

// The message shows the operands' own shapes ([5] and [3, 4]), not a partial broadcast.
TEST_CASE("broadcast errors name every operand's own shape", "[errors][broadcast]") {
  auto x = ref::iota2(3, 4);
  auto v = sd::arange<float>(5);
  CHECK_THROWS_WITH(sd::maximum(v, x), Contains("[5]") && Contains("[3, 4]"));
  auto col = sd::ones<float>(2, 1);
  CHECK_THROWS_WITH(col * x, Contains("[2, 1]") && Contains("[3, 4]"));
}

TEST_CASE("assigning an expression of another shape throws", "[errors][assign]") {
  auto x = ref::iota2(3, 4);
  sd::Tensor<float, 2> y = sd::full<float>(sd::shape(4, 3), 7.f);
  REQUIRE_THROWS_WITH(y = x * 2.f, Contains("assign") && Contains("[3, 4]") && Contains("[4, 3]"));
  // Nothing was written.
  CHECK(sd::to_vector(y) == std::vector<float>(12, 7.f));

  // Broadcastable to the destination's shape is still a mismatch: PyTorch's out= semantics.
  sd::Tensor<float, 2> z = sd::full<float>(sd::shape(3, 4), 7.f);
  REQUIRE_THROWS_WITH(z = sd::arange<float>(4) * sd::ones<float>(1, 4),
                      Contains("assign") && Contains("[1, 4]") && Contains("[3, 4]"));
  CHECK(sd::to_vector(z) == std::vector<float>(12, 7.f));

  // Into a view: nothing written into the base either.
  auto tv = sd::transpose(z, 0, 1);  // [4, 3]
  REQUIRE_THROWS_AS(tv = x + 1.f, sd::Error);
  CHECK(sd::to_vector(z) == std::vector<float>(12, 7.f));

  // A reduction of the wrong shape.
  sd::Tensor<float, 1> r = sd::full<float>(sd::shape(4), 7.f);
  REQUIRE_THROWS_WITH(r = sd::sum(x, 1), Contains("assign") && Contains("[3]") && Contains("[4]"));
  CHECK(sd::to_vector(r) == std::vector<float>(4, 7.f));
}

TEST_CASE("an assignment that fails while planning writes nothing", "[errors][assign]") {
  // Two reductions broadcast along different axes of one kernel: either the library evaluates
  // it correctly, or it throws before writing anything.
  auto x = ref::iota2(3, 4);
  sd::Tensor<float, 2> y = sd::full<float>(sd::shape(3, 4), 7.f);
  bool threw = false;
  try {
    y = sd::sum(x, 0, sd::keepdim) + sd::sum(x, 1, sd::keepdim);
  } catch (sd::Error const& e) {
    threw = true;
    CHECK_THAT(e.what(), Contains("sum") && Contains("[3, 4]"));
  }
  if (threw) {
    CHECK(sd::to_vector(y) == std::vector<float>(12, 7.f));
  } else {
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j)
        CHECK(y(i, j) == static_cast<float>((12 + j * 3) + (4 * i * 4 + 6)));
  }
}

TEST_CASE("a PyTorch-valid expression with two reductions along different axes evaluates",
          "[errors][assign]") {
  // softmax-like normalisation by both row and column sums: legal in PyTorch.
  auto x = ref::iota2(3, 4);
  sd::Tensor<float, 2> y = sd::sum(x, 0, sd::keepdim) + sd::sum(x, 1, sd::keepdim);
  CHECK(y(2, 3) == static_cast<float>((12 + 9) + (32 + 6)));
}

TEST_CASE("bad dims throw, naming the op and the dim", "[errors][dims]") {
  auto x = ref::iota2(3, 4);
  REQUIRE_THROWS_WITH(sd::sum(x, 5), Contains("sum") && Contains("dim 5") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(sd::mean(x, -3), Contains("mean") && Contains("dim -3"));
  REQUIRE_THROWS_WITH(sd::sum(x, 2, sd::keepdim), Contains("sum") && Contains("dim 2"));
  REQUIRE_THROWS_WITH(sd::amax(x, {0, 2}), Contains("max") && Contains("dim 2"));
  REQUIRE_THROWS_WITH(sd::argmax(x, 3), Contains("argmax") && Contains("dim 3"));
  REQUIRE_THROWS_AS(sd::softmax(x, -3), sd::Error);
  REQUIRE_THROWS_WITH(sd::softmax(x, -3), Contains("dim -3"));
  REQUIRE_THROWS_AS(sd::log_softmax(x, 2), sd::Error);
  REQUIRE_THROWS_AS(sd::var(x, 2), sd::Error);
  REQUIRE_THROWS_WITH(sd::transpose(x, 0, 2), Contains("transpose") && Contains("dim 2"));
  REQUIRE_THROWS_WITH(sd::unsqueeze(x, 3), Contains("unsqueeze") && Contains("dim 3"));
  REQUIRE_THROWS_WITH(x.size(-3), Contains("size") && Contains("dim -3"));
  // Valid negative dims do not throw.
  REQUIRE_NOTHROW(sd::sum(x, -2));
  REQUIRE_NOTHROW(sd::softmax(x, -1));
}

// DESIGN.md §5 asks for the shapes in every run-time error, and for the op the user wrote
// (softmax, not the max inside it).
TEST_CASE("bad-dim errors name the input's shape and the user's op", "[errors][dims]") {
  auto x = ref::iota2(3, 4);
  CHECK_THROWS_WITH(sd::sum(x, 5), Contains("sum") && Contains("[3, 4]"));
  CHECK_THROWS_WITH(sd::softmax(x, -3), Contains("softmax") && Contains("[3, 4]"));
  CHECK_THROWS_WITH(sd::log_softmax(x, 2), Contains("log_softmax"));
  CHECK_THROWS_WITH(sd::var(x, 2), Contains("var"));
}

TEST_CASE("duplicate dims in a reduction throw", "[errors][dims]") {
  auto x = sd::view(sd::arange<float>(24), sd::shape(2, 3, 4));
  REQUIRE_THROWS_WITH(sd::sum(x, {1, 1}), Contains("sum") && Contains("dim 1") && Contains("twice"));
  REQUIRE_THROWS_WITH(sd::sum(x, {2, -1}), Contains("sum") && Contains("dim 2") && Contains("twice"));
  REQUIRE_THROWS_WITH(sd::mean(x, {0, 2, -3}, sd::keepdim), Contains("mean") && Contains("twice"));
  REQUIRE_THROWS_WITH(sd::permute(x, {0, 0, 1}), Contains("permute") && Contains("twice"));
  REQUIRE_NOTHROW(sd::sum(x, {0, -1}));
}

TEST_CASE("view of a non-contiguous tensor throws; reshape copies", "[errors][views]") {
  auto x = ref::iota2(3, 4);
  auto t = sd::transpose(x, 0, 1);
  REQUIRE_THROWS_WITH(sd::view(t, sd::shape(12)),
                      Contains("view") && Contains("[4, 3]") && Contains("contiguous"));
  REQUIRE_NOTHROW(sd::reshape(t, sd::shape(12)));
  auto stepped = sd::slice(x, 1, 0, 4, 2);
  REQUIRE_THROWS_WITH(sd::view(stepped, sd::shape(6)), Contains("view") && Contains("[3, 2]"));
  // Wrong element counts.
  REQUIRE_THROWS_WITH(sd::view(x, sd::shape(5, 2)),
                      Contains("view") && Contains("[5, 2]") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(sd::view(x, sd::shape(-1, 5)), Contains("view") && Contains("12"));
  REQUIRE_THROWS_WITH(sd::view(x, sd::shape(-1, -1)), Contains("view") && Contains("-1"));
}

TEST_CASE("squeeze of a dim that is not 1 throws", "[errors][views]") {
  auto x = ref::iota2(3, 4);
  REQUIRE_THROWS_WITH(sd::squeeze(x, 0), Contains("squeeze") && Contains("[3, 4]") && Contains("size 3"));
  REQUIRE_THROWS_WITH(sd::squeeze(x, -1), Contains("squeeze") && Contains("size 4"));
  REQUIRE_NOTHROW(sd::squeeze(sd::unsqueeze(x, 1), 1));
}

TEST_CASE("expand to an incompatible shape throws", "[errors][views]") {
  auto x = ref::iota2(3, 1);
  REQUIRE_THROWS_WITH(sd::expand(x, std::array<std::int64_t, 2>{4, 5}),
                      Contains("expand") && Contains("[3, 1]") && Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(sd::broadcast_to(sd::arange<float>(3), sd::shape(2, 4)),
                      Contains("expand") && Contains("[3]") && Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(sd::expand(x, std::array<std::int64_t, 3>{-1, 3, 2}),
                      Contains("expand") && Contains("-1"));
  // On an expression.
  REQUIRE_THROWS_AS(sd::expand(x * 2.f, std::array<std::int64_t, 2>{4, 5}), sd::Error);
  REQUIRE_NOTHROW(sd::expand(x, std::array<std::int64_t, 3>{2, 3, 5}));
}

TEST_CASE("max, min and argmax over an empty dim throw", "[errors][reduce]") {
  sd::Tensor<float, 2> e(3, 0);
  REQUIRE_THROWS_WITH(sd::max(e, 1), Contains("max") && Contains("empty") && Contains("[3, 0]"));
  REQUIRE_THROWS_WITH(sd::amin(e, 1, sd::keepdim), Contains("min") && Contains("[3, 0]"));
  REQUIRE_THROWS_WITH(sd::max(e), Contains("max") && Contains("[3, 0]"));
  REQUIRE_THROWS_WITH(sd::argmax(e), Contains("argmax") && Contains("[3, 0]"));
  REQUIRE_THROWS_WITH(sd::argmin(e, 1), Contains("argmin") && Contains("[3, 0]"));
  // Inside an expression. (softmax's max is no error: over an empty dim it is an empty
  // tensor, as in PyTorch; test_edges.cpp.)
  REQUIRE_THROWS_AS(sd::max(e, 1, sd::keepdim) * 2.f, sd::Error);
  REQUIRE_NOTHROW(sd::softmax(e, 1) * 2.f);
  // Over the non-empty dim: an empty result, fine. Sums have an identity: fine.
  REQUIRE_NOTHROW(sd::max(e, 0));
  REQUIRE_NOTHROW(sd::sum(e, 1));
}

TEST_CASE("other run-time misuse", "[errors]") {
  auto x = ref::iota2(3, 4);
  REQUIRE_THROWS_WITH(x(3, 0), Contains("index 3") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(x.item(), Contains("item") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(sd::slice(x, 1, 0, 4, 0), Contains("slice") && Contains("step"));
  REQUIRE_THROWS_WITH(sd::slice(x, 1, 0, 4, -1), Contains("slice") && Contains("step"));
  REQUIRE_THROWS_WITH(sd::narrow(x, 1, 2, 3), Contains("narrow") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(sd::arange<float>(0, 1, 0), Contains("arange"));
  REQUIRE_THROWS_WITH(sd::from_vector(std::vector<float>(5), sd::shape(2, 3)),
                      Contains("from_vector") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH((sd::Tensor<float, 2>(2, -3)), Contains("negative") && Contains("[2, -3]"));
  REQUIRE_THROWS_WITH(sd::set_num_threads(0), Contains("set_num_threads") && Contains("0"));
  using S3 = sd::Tensor<float, sd::ext<3>>;
  REQUIRE_THROWS_WITH(S3(sd::arange<float>(4)), Contains("static extent 3") && Contains("[4]"));
  REQUIRE_THROWS_WITH(S3(sd::arange<float>(4) * 2.f), Contains("static extent 3") && Contains("[4]"));
}
