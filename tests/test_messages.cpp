// What solder says to a user: errors that name the right number and read right, logs that name
// the callable, explain's reasons. (Each a defect a user met: issue 39.)
#include "log_capture.hpp"
#include "reference.hpp"

#include <string>

namespace sd = solder;
using ref::contains;
using ref::error_message;

TEST_CASE("buckets refuse a length that is not positive", "[runtime][errors]") {
  sd::buckets b{32, 64, 128};
  CHECK(b.bucket(1) == 32);
  CHECK(b.bucket(33) == 64);
  CHECK(contains(error_message([&] { b.bucket(0); }), "buckets: a length must be positive, got 0"));
  CHECK(contains(error_message([&] { b.bucket(-5); }), "buckets: a length must be positive, got -5"));
  CHECK(contains(error_message([&] { b.bucket(129); }), "past the largest bucket, 128"));
}

TEST_CASE("output_code names the callable on every line", "[runtime][logs]") {
  LogCapture logs("output_code");
  auto f = sd::compile([](sd::Tensor<float, 2> const& x) { return sd::softmax(x * 2.f, -1); }, {.name = "probs"});
  f(sd::Tensor<float, 2>(sd::rand<float>(sd::shape(4, 8))));
  auto const lines = logs.starting("[solder:output_code] ");
  REQUIRE(lines.size() >= 2);
  CHECK(lines[0].starts_with("[solder:output_code] probs: block 0, kernel 0: "));
  CHECK(logs.starting("[solder:output_code] probs: ").size() == lines.size());
}

TEST_CASE("explain says why a product under softmax is stored", "[plan][explain]") {
  auto a = ref::uniform<float>(-1, 1, 4, 5);
  auto b = ref::uniform<float>(-1, 1, 5, 6);
  std::string const text = sd::explain(sd::softmax(sd::matmul(a, b), 0));
  INFO(text);
  CHECK_FALSE(contains(text, "sd::share"));
  CHECK(contains(text, "reads it twice"));
  CHECK(contains(text, "softmax"));
  // Shared by the user, it says so.
  CHECK(contains(sd::explain(sd::share(sd::matmul(a, b)) + 1.f), "sd::share"));
}

TEST_CASE("conv2d's groups errors name the number that is wrong", "[conv][errors]") {
  auto x = ref::uniform<float>(-1, 1, 1, 4, 5, 5);
  auto w = ref::uniform<float>(-1, 1, 3, 2, 3, 3);  // out_channels 3, not divisible by groups 2
  std::string const msg = error_message([&] { sd::conv2d(x, w, {.groups = 2}); });
  INFO(msg);
  CHECK(contains(msg, "expected out_channels (weight dim 0) to be divisible by 2, got 3"));
  auto w4 = ref::uniform<float>(-1, 1, 4, 3, 3, 3);  // 3 * 2 input channels expected, 4 given
  CHECK(contains(error_message([&] { sd::conv2d(x, w4, {.groups = 2}); }),
                 "expected the input to have 6 channels (weight dim 1 times groups), got 4"));
}

TEST_CASE("dtype names take the article they are read with", "[io][errors]") {
  sd::AnyTensor i64(sd::Tensor<std::int64_t, 1>(sd::zeros<std::int64_t>(2)));
  sd::AnyTensor f32(sd::Tensor<float, 1>(sd::zeros<float>(2)));
  CHECK(contains(error_message([&] { i64.to<float, 1>("w"); }), "'w': an int64 tensor cannot be loaded into a float32"));
  CHECK(contains(error_message([&] { f32.to<std::int32_t, 1>("w"); }), "'w': a float32 tensor cannot be loaded into an int32"));
}
