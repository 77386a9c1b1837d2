// Copies and calls of modules (nn/module.hpp, nn/layers.hpp): sd::nn::clone is a deep copy
// (PyTorch's copy.deepcopy), a plain copy shares the tensors (Python's `b = a`), and a user's
// module that derives from sd::nn::Callable is called as a built-in one: `block(x)`.
#include "reference.hpp"

namespace sd = solder;

namespace {

struct Block : sd::nn::Callable<Block> {
  sd::nn::Linear fc{4, 3};
  sd::nn::BatchNorm2d bn{3};
  auto forward(auto const& x) const { return sd::relu(fc(x)); }
};

}  // namespace

SOLDER_MODULE(Block, fc, bn);

TEST_CASE("a user's module is called as a built-in one", "[nn][modules]") {
  Block block;
  auto x = ref::uniform<float>(-1, 1, 2, 4);
  sd::Tensor<float, 2> called = block(x);
  sd::Tensor<float, 2> forward = block.forward(x);
  ref::check_equal(called, ref::of(forward), "block(x) against block.forward(x)");
  auto keys = sd::nn::state_dict(block).keys();
  CHECK(keys.front() == "fc.weight");
  CHECK(keys.size() == 7);  // fc's weight and bias, bn's weight, bias and three buffers
}

TEST_CASE("nn::clone copies every tensor; a plain copy shares them", "[nn][modules]") {
  Block a;
  sd::nn::eval(a);
  auto x = ref::uniform<float>(-1, 1, 2, 4);
  auto img = ref::uniform<float>(-1, 1, 1, 3, 2, 2);
  sd::Tensor<float, 2> y0 = a(x);
  sd::Tensor<float, 4> z0 = a.bn(img);

  Block b = sd::nn::clone(a);
  auto pa = sd::nn::named_parameters(a), pb = sd::nn::named_parameters(b);
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    CHECK(pa[i].second.bytes() != pb[i].second.bytes());
  }
  ref::check_equal(sd::eval(b(x)), ref::of(y0), "the clone computes what the module does");
  ref::check_equal(sd::eval(b.bn(img)), ref::of(z0), "the clone's batch norm");

  // Changing the clone leaves the module as it was, its derived state (the packed weight, the
  // batch norm's folded scale and shift) included.
  b.fc.weight(0, 0) += 1;
  b.bn.running_mean(1) = 5;
  sd::nn::eval(b);
  ref::check_equal(sd::eval(a(x)), ref::of(y0), "the module after its clone changed");
  ref::check_equal(sd::eval(a.bn(img)), ref::of(z0), "the module's batch norm after its clone's changed");
  CHECK(sd::eval(b.bn(img))(0, 1, 0, 0) != z0(0, 1, 0, 0));

  // A plain copy shares the tensors: writing into its weights writes into the module's.
  Block c = a;
  CHECK(c.fc.weight.data() == a.fc.weight.data());
  c.fc.weight(0, 0) += 1;
  CHECK(a.fc.weight(0, 0) == c.fc.weight(0, 0));
}
