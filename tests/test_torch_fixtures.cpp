// solder against PyTorch's own outputs (tests/fixtures/torch_ops.txt, made by
// tools/make_fixtures.py from PyTorch itself): the same inputs, including zeros of both signs,
// denormals, infinities and NaN, through solder's fused kernels.
#include <catch2/catch.hpp>
#include <solder/solder.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace sd = solder;

namespace {

struct Array {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<double> values;
};
struct Case {
  std::map<std::string, Array> inputs;
  Array output;
};

Array parse_array(std::istringstream& is) {
  Array a;
  int rank = 0;
  is >> a.dtype >> rank;
  a.shape.resize(static_cast<std::size_t>(rank));
  for (auto& d : a.shape) is >> d;
  std::string colon;
  is >> colon;
  std::string v;
  while (is >> v) a.values.push_back(v == "nan" ? NAN : v == "inf" ? INFINITY : v == "-inf" ? -INFINITY : std::stod(v));
  return a;
}

std::map<std::string, Case> const& fixtures() {
  static std::map<std::string, Case> cases = [] {
    std::map<std::string, Case> out;
    std::ifstream f(SOLDER_TESTS_SOURCE_DIR "/fixtures/torch_ops.txt");
    REQUIRE(f.good());
    std::string line, name;
    while (std::getline(f, line)) {
      std::istringstream is(line);
      std::string tag;
      is >> tag;
      if (tag == "case") {
        is >> name;
      } else if (tag == "input") {
        std::string iname;
        is >> iname;
        out[name].inputs[iname] = parse_array(is);
      } else if (tag == "output") {
        out[name].output = parse_array(is);
      }
    }
    return out;
  }();
  return cases;
}

Case const& get(std::string const& name) {
  auto it = fixtures().find(name);
  INFO("fixture " << name);
  REQUIRE(it != fixtures().end());
  return it->second;
}

template <class T, int R>
sd::Tensor<T, R> input(Case const& c, std::string const& name) {
  Array const& a = c.inputs.at(name);
  REQUIRE(static_cast<int>(a.shape.size()) == R);
  sd::Index<R> s{};
  for (int i = 0; i < R; ++i) s[i] = a.shape[static_cast<std::size_t>(i)];
  sd::Tensor<T, R> t(s);
  std::vector<T> v;
  for (double x : a.values) v.push_back(static_cast<T>(x));
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

// Distance in units in the last place of float, treating -0 == +0 and NaN == NaN.
std::int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  auto key = [](float x) {
    auto i = std::bit_cast<std::int32_t>(x);
    return i < 0 ? std::int64_t{INT32_MIN} - i : std::int64_t{i};
  };
  return std::llabs(key(a) - key(b));
}

// Compares a solder result with PyTorch's: float results within `max_ulps`, or within
// `abs_tol` of each other (where either side loses digits to cancellation, e.g. gelu's
// 1 + erf(x) for negative x, where PyTorch's own error reaches ~2e-7), integers exactly.
// `differs` lists elements where solder deliberately differs (said at the call).
template <class TT>
void check(std::string const& name, TT const& got, std::int64_t max_ulps, double abs_tol = 0,
           std::vector<std::size_t> const& differs = {}) {
  Case const& c = get(name);
  INFO("fixture " << name);
  REQUIRE(std::string(sd::dtype_name<typename TT::value_type>()) == c.output.dtype);
  REQUIRE(static_cast<std::size_t>(TT::rank) == c.output.shape.size());
  for (int i = 0; i < TT::rank; ++i) REQUIRE(got.shape()[i] == c.output.shape[static_cast<std::size_t>(i)]);
  auto v = sd::to_vector(got);
  REQUIRE(v.size() == c.output.values.size());
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::find(differs.begin(), differs.end(), i) != differs.end()) continue;
    double want = c.output.values[i];
    if constexpr (std::is_floating_point_v<typename TT::value_type>) {
      float g = static_cast<float>(v[i]), w = static_cast<float>(want);
      std::int64_t u = ulps(g, w);
      bool ok = u <= max_ulps || std::fabs(static_cast<double>(g) - want) <= abs_tol;
      if (!ok) {
        INFO("element " << i << ": solder " << g << ", PyTorch " << w << " (" << u << " ulps)");
        CHECK(ok);
      }
      if (ok && u > worst && u != INT64_MAX) worst = u;
    } else {
      INFO("element " << i);
      CHECK(static_cast<double>(v[i]) == want);
    }
  }
}

}  // namespace

TEST_CASE("element-wise maths matches PyTorch, special values included", "[torch]") {
  auto const& c = get("exp");
  auto x = input<float, 2>(c, "x");
  check("exp", sd::eval(sd::exp(x)), 2);
  check("expm1", sd::eval(sd::expm1(x)), 2);
  check("log", sd::eval(sd::log(x)), 2);
  check("log1p", sd::eval(sd::log1p(x)), 2);
  check("sqrt", sd::eval(sd::sqrt(x)), 1);
  check("rsqrt", sd::eval(sd::rsqrt(x)), 2);
  check("tanh", sd::eval(sd::tanh(x)), 2);
  // sigmoid(-100) = 3.8e-44 is a float denormal; PyTorch's kernel flushes it to 0.
  check("sigmoid", sd::eval(sd::sigmoid(x)), 2, 1e-37);
  check("erf", sd::eval(sd::erf(x)), 2);
  check("sin", sd::eval(sd::sin(x)), 2);
  check("cos", sd::eval(sd::cos(x)), 2);
  check("relu", sd::eval(sd::relu(x)), 0);
  check("abs", sd::eval(sd::abs(x)), 0);
  check("neg", sd::eval(-x), 0);
  check("silu", sd::eval(sd::silu(x)), 4, 1e-37);
  // Element 16 is +inf: PyTorch's gelu gives NaN there, solder the limit, +inf.
  REQUIRE(std::isinf(x.data()[16]));
  REQUIRE(sd::eval(sd::gelu(x)).data()[16] == INFINITY);
  check("gelu", sd::eval(sd::gelu(x)), 4, 1e-6, {16});
  check("gelu_tanh", sd::eval(sd::gelu(x, sd::tanh_approximation)), 4, 1e-6, {16});
  check("leaky_relu", sd::eval(sd::leaky_relu(x, 0.1)), 0);
  check("softplus", sd::eval(sd::softplus(x)), 4);
  check("softplus_beta2", sd::eval(sd::softplus(x, 2.0, 10.0)), 4);
  check("clamp", sd::eval(sd::clamp(x, -1.5f, 2.5f)), 0);
}

TEST_CASE("binary ops, broadcasting and type promotion match PyTorch", "[torch]") {
  auto const& c = get("add_broadcast");
  auto a = input<float, 2>(c, "a");
  auto b = input<float, 1>(c, "b");
  check("add_broadcast", sd::eval(a + b), 0);
  check("div", sd::eval(a / b), 1);
  check("where_gt", sd::eval(sd::where(a > b, a, b * 2.f)), 0);
  auto const& p = get("pow");
  check("pow", sd::eval(sd::pow(input<float, 2>(p, "a"), input<float, 1>(p, "b"))), 4);
  auto const& m = get("maximum_nan");
  check("maximum_nan", sd::eval(sd::maximum(input<float, 2>(m, "x"), input<float, 2>(m, "y"))), 0);
  auto const& ic = get("int_times_half");
  auto i = input<std::int32_t, 2>(ic, "i");
  check("int_times_half", sd::eval(i * 0.5), 0);  // a double literal still gives float32
  auto const& d = get("int_div_int");
  check("int_div_int", sd::eval(input<std::int32_t, 2>(d, "i") / input<std::int32_t, 2>(d, "j")), 1);
  auto const& pf = get("int_plus_float");
  check("int_plus_float", sd::eval(input<std::int32_t, 2>(pf, "i") + input<float, 2>(pf, "a")), 0);
}

TEST_CASE("reductions match PyTorch", "[torch]") {
  auto const& c = get("sum_dim1");
  auto x = input<float, 2>(c, "x");
  check("sum_dim1", sd::eval(sd::sum(x, 1)), 8, 1e-5);
  check("sum_dim0_keep", sd::eval(sd::sum(x, 0, sd::keepdim)), 8, 1e-5);
  check("sum_all", sd::eval(sd::sum(x)), 16, 1e-4);
  check("mean_dim1", sd::eval(sd::mean(x, 1)), 8, 1e-6);
  check("prod_dim1", sd::eval(sd::prod(x * 0.5f, 1)), 64);
  check("amax_dim0", sd::eval(sd::amax(x, 0)), 0);
  check("amin_dim1", sd::eval(sd::amin(x, 1)), 0);
  check("argmax_dim1", sd::eval(sd::argmax(x, 1)), 0);
  check("argmin_dim0", sd::eval(sd::argmin(x, 0)), 0);
  check("argmax_all", sd::eval(sd::argmax(x)), 0);
  check("var_dim1", sd::eval(sd::var(x, 1)), 16, 1e-5);
  check("var_dim0_c0", sd::eval(sd::var(x, 0, 0.0)), 16, 1e-5);
  auto const& c3 = get("sum_dims02");
  check("sum_dims02", sd::eval(sd::sum(input<float, 3>(c3, "x"), {0, 2})), 8, 1e-5);
}

TEST_CASE("row operations match PyTorch", "[torch]") {
  auto const& c = get("softmax_last");
  auto x = input<float, 2>(c, "x");
  check("softmax_last", sd::eval(sd::softmax(x, -1)), 8, 1e-7);
  check("softmax_dim0", sd::eval(sd::softmax(x, 0)), 8, 1e-7);
  check("log_softmax_last", sd::eval(sd::log_softmax(x, -1)), 8, 1e-6);
  auto const& e = get("softmax_extreme");
  check("softmax_extreme", sd::eval(sd::softmax(input<float, 2>(e, "x"), -1)), 8, 1e-7);
  auto const& ln = get("layer_norm");
  check("layer_norm",
        sd::eval(sd::layer_norm(input<float, 2>(ln, "x"), input<float, 1>(ln, "g"), input<float, 1>(ln, "b"))),
        16, 1e-5);
  auto const& rn = get("rms_norm");
  check("rms_norm", sd::eval(sd::rms_norm(input<float, 2>(rn, "x"), input<float, 1>(rn, "g"))), 16, 1e-5);
  auto const& l2 = get("layer_norm_2d");
  check("layer_norm_2d",
        sd::eval(sd::layer_norm(input<float, 3>(l2, "x"), input<float, 2>(l2, "g"), input<float, 2>(l2, "b"))),
        16, 1e-5);
}

TEST_CASE("the DESIGN chain matches PyTorch, fused and eager", "[torch]") {
  auto const& c = get("design_chain");
  auto x = input<float, 1>(c, "x");
  auto e = sd::tanh(x * 0.5f + 0.25f) * sd::sigmoid(x) + x * x * 0.1f - 0.3f;
  check("design_chain", sd::eval(e), 8, 1e-7);
  check("design_chain", sd::eager(e), 8, 1e-7);
}

// Sums of products in another order than PyTorch's: within a few ulps of the sum, or, where the
// sum cancels, within an absolute bound of about k * eps * sum|a||b| (about 40 terms of
// magnitude 1 here).
TEST_CASE("contractions match PyTorch, with their epilogues and prologues", "[torch][contract]") {
  auto const& m = get("matmul_2d");
  auto a = input<float, 2>(m, "a");
  auto b = input<float, 2>(m, "b");
  check("matmul_2d", sd::eval(sd::matmul(a, b)), 64, 1e-4);
  auto at = input<float, 2>(get("mm_transposed"), "a");  // stored [37, 13]: read transposed
  check("mm_transposed", sd::eval(sd::mm(sd::transpose(at, 0, 1), b)), 64, 1e-4);
  auto const& bb = get("matmul_batch_broadcast");
  check("matmul_batch_broadcast", sd::eval(sd::matmul(input<float, 4>(bb, "a"), input<float, 3>(bb, "b"))), 64, 1e-4);
  auto const& mv = get("matmul_matrix_vector");
  check("matmul_matrix_vector", sd::eval(sd::matmul(input<float, 2>(mv, "a"), input<float, 1>(mv, "v"))), 64, 1e-4);
  auto const& l = get("linear_relu");
  auto w = input<float, 2>(l, "w");
  auto bias = input<float, 1>(l, "b");
  auto fused = sd::relu(sd::linear(input<float, 2>(l, "x"), w, bias));
  static_assert(sd::kernel_count<decltype(fused)> == 1);
  check("linear_relu", sd::eval(fused), 64, 1e-4);
  check("linear_relu", sd::eager(fused), 64, 1e-4);
  auto const& l3 = get("linear_3d");
  check("linear_3d", sd::eval(sd::linear(input<float, 3>(l3, "x"), w, bias)), 64, 1e-4);
  auto const& g = get("gelu_matmul");
  auto pro = sd::matmul(sd::gelu(input<float, 2>(g, "x")), sd::transpose(input<float, 2>(g, "w"), 0, 1));
  static_assert(sd::kernel_count<decltype(pro)> == 1);
  check("gelu_matmul", sd::eval(pro), 64, 1e-4);
}

// Attention: both sides round scores that are dot products of 16 to 32 terms of magnitude 1, so
// a weight differs by about 1e-6 relative (up to 184 ulps seen where |y| > 0.01), and a weighted
// sum that cancels by about 1e-6 absolute (values of magnitude 1): within 256 ulps, or 4e-6. A
// row masked out entirely is 0, as in PyTorch 2.5 and later; float64 agrees to the float ulp.
TEST_CASE("scaled_dot_product_attention matches PyTorch", "[torch][attention]") {
  auto const& b = get("sdpa_broadcast");
  auto q = input<float, 4>(b, "q");
  auto k = input<float, 4>(b, "k");
  auto v = input<float, 4>(b, "v");
  check("sdpa_broadcast", sd::eval(sd::scaled_dot_product_attention(q, k, v)), 256, 4e-6);
  auto const& cl = get("sdpa_causal_long_q");
  check("sdpa_causal_long_q",
        sd::eval(sd::scaled_dot_product_attention(input<float, 3>(cl, "q"), input<float, 3>(cl, "k"),
                                                  input<float, 3>(cl, "v"), {.is_causal = true})),
        256, 4e-6);
  auto const& cs = get("sdpa_causal_short_q");
  check("sdpa_causal_short_q",
        sd::eval(sd::scaled_dot_product_attention(input<float, 3>(cs, "q"), input<float, 3>(cs, "k"),
                                                  input<float, 3>(cs, "v"), {.is_causal = true})),
        256, 4e-6);
  check("sdpa_bool_mask",
        sd::eval(sd::scaled_dot_product_attention(q, k, v, input<bool, 2>(get("sdpa_bool_mask"), "mask"))), 256,
        4e-6);
  check("sdpa_float_mask_scale",
        sd::eval(sd::scaled_dot_product_attention(q, k, v, input<float, 4>(get("sdpa_float_mask_scale"), "mask"),
                                                  {.scale = 0.3})),
        256, 4e-6);
  auto const& d = get("sdpa_float64_causal");  // (with an epilogue: one kernel)
  auto fused = sd::scaled_dot_product_attention(input<double, 3>(d, "q"), input<double, 3>(d, "k"),
                                                input<double, 3>(d, "v"), {.is_causal = true}) * 1.0;
  static_assert(sd::kernel_count<decltype(fused)> == 1);
  check("sdpa_float64_causal", sd::eval(fused), 0);
}

// Convolution sums K = C_in * kH * kW products in another order than PyTorch's: within 1e-5 of
// it (values of magnitude 1 to 10); the pools take a max (exact, NaN included) or a mean of a
// few values (within 1e-6).
TEST_CASE("convolution and pooling match PyTorch", "[torch][conv]") {
  auto const& c = get("conv2d_bias_relu");
  auto x = input<float, 4>(c, "x");
  auto w = input<float, 4>(c, "w");
  check("conv2d_bias_relu", sd::eval(sd::relu(sd::conv2d(x, w, input<float, 1>(c, "b"), {.padding = 1}))), 64, 1e-5);
  check("conv2d_stride_dilation",
        sd::eval(sd::conv2d(x, w, {.stride = {2, 1}, .padding = {2, 1}, .dilation = {2, 1}})), 64, 1e-5);
  auto const& g = get("conv2d_groups2");
  auto gx = input<float, 4>(g, "x");
  check("conv2d_groups2", sd::eval(sd::conv2d(gx, input<float, 4>(g, "w"), {.padding = 1, .groups = 2})), 64, 1e-5);
  auto const& d = get("conv2d_depthwise_mult2");
  check("conv2d_depthwise_mult2",
        sd::eval(sd::conv2d(gx, input<float, 4>(d, "w"), {.stride = 2, .padding = 1, .groups = 4})), 64, 1e-5);
  auto const& s = get("conv2d_stem");
  check("conv2d_stem",
        sd::eval(sd::conv2d(input<float, 4>(s, "x"), input<float, 4>(s, "w"), {.stride = 2, .padding = 3})), 64, 1e-5);
  auto const& p = get("conv2d_1x1");
  check("conv2d_1x1", sd::eval(sd::conv2d(input<float, 4>(p, "x"), input<float, 4>(p, "w"))), 64, 1e-5);
  auto const& r = get("conv2d_bn_residual_relu");
  auto fused = sd::relu(sd::conv2d(x, w, {.padding = 1}) * input<float, 4>(r, "scale") + input<float, 4>(r, "shift") +
                        input<float, 4>(r, "res"));
  static_assert(sd::kernel_count<decltype(fused)> == 1);
  check("conv2d_bn_residual_relu", sd::eval(fused), 64, 1e-5);
  auto const& m = get("max_pool2d_stem");
  check("max_pool2d_stem", sd::eval(sd::max_pool2d(input<float, 4>(m, "x"), 3, {.stride = 2, .padding = 1})), 0);
  check("avg_pool2d_ceil_pad", sd::eval(sd::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true})), 8, 1e-6);
  check("avg_pool2d_exclude_pad",
        sd::eval(sd::avg_pool2d(x, {3, 2}, {.stride = {2, 1}, .padding = 1, .ceil_mode = true, .count_include_pad = false})),
        8, 1e-6);
  check("adaptive_avg_pool2d_3x4", sd::eval(sd::adaptive_avg_pool2d(x, {3, 4})), 8, 1e-6);
}
