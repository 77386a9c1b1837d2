// safetensors files (io/safetensors.hpp): reading (mapped and in memory), writing, modules,
// sharded checkpoints, PyTorch's files, and the checks that make an untrusted file safe to
// read: every malformed file is an sd::Error naming the file and what is wrong.
// The PyTorch interop: tests/fixtures/safetensors/torch_written.safetensors comes from
// tools/make_safetensors_fixture.py (its docstring lists the values checked here); this test
// writes <build>/tests/safetensors_test/solder_written.safetensors, which the script's --check
// mode reads back with PyTorch.
#include "reference.hpp"

#include <unistd.h>

#include <solder/io/json.hpp>
#include <solder/io/safetensors.hpp>
#include <solder/nn/module.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace sd = solder;
namespace fs = std::filesystem;
using ref::contains;
using ref::error_message;
using Bytes = std::vector<std::byte>;

static_assert(std::endian::native == std::endian::little, "the files written here are little-endian");

namespace st_test {

struct Head {
  sd::Tensor<float, 1> bias = sd::Tensor<float, 1>(3);
};
struct Net {
  sd::Tensor<float, 2> weight = sd::Tensor<float, 2>(3, 2);
  sd::Tensor<std::int64_t, 1> steps = sd::Tensor<std::int64_t, 1>(2);
  Head head;
  int width = 3;  // configuration, not state
};

}  // namespace st_test

SOLDER_MODULE(st_test::Head, bias);
SOLDER_MODULE(st_test::Net, weight, steps, head, width);

namespace {

Bytes bytes_of(std::string_view s) {
  Bytes b;
  for (char c : s) b.push_back(std::byte(c));
  return b;
}
Bytes operator+(Bytes a, Bytes const& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
template <class S>
Bytes pack(std::initializer_list<S> values) {
  Bytes b(values.size() * sizeof(S));
  std::memcpy(b.data(), std::data(values), b.size());
  return b;
}
Bytes le64(std::uint64_t n) { return pack<std::uint64_t>({n}); }

// A safetensors file: the header's length, the header (unpadded), the data section.
Bytes file_bytes(std::string const& header, Bytes const& data = {}) {
  return le64(header.size()) + bytes_of(header) + data;
}
sd::nn::StateDict parse(Bytes b) {
  return sd::io::read_safetensors_bytes(std::make_shared<Bytes const>(std::move(b)), "case.safetensors");
}
std::string parse_error(Bytes b) {
  return error_message([&] { parse(std::move(b)); });
}

void write_file(fs::path const& p, Bytes const& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<char const*>(b.data()), static_cast<std::streamsize>(b.size()));
}
Bytes read_file(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes_of(s);
}
// An empty scratch directory under the build's tests/ folder.
fs::path fresh_dir(std::string const& name) {
  fs::path d = fs::path(SOLDER_TESTS_BINARY_DIR) / "safetensors_test" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A tensor's values, flattened, as doubles / int64 (R: its rank).
template <int R>
std::vector<double> floats(sd::AnyTensor const& t) {
  auto c = t.to<double, R>();
  return {c.data(), c.data() + c.numel()};
}
template <int R>
std::vector<std::int64_t> integers(sd::AnyTensor const& t) {
  auto c = t.to<std::int64_t, R>();
  return {c.data(), c.data() + c.numel()};
}

sd::AnyTensor any(sd::DType dtype, std::vector<std::int64_t> shape, Bytes b) {
  auto owner = std::make_shared<Bytes const>(std::move(b));
  return sd::AnyTensor(dtype, std::move(shape), owner, owner->data());
}
bool same_bytes(sd::AnyTensor const& a, sd::AnyTensor const& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
}

std::string const f32_entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
Bytes const four = pack<float>({2.5f});

}  // namespace

TEST_CASE("every solder dtype round-trips through a file, any rank", "[safetensors]") {
  auto dir = fresh_dir("dtypes");
  sd::nn::StateDict d;
  auto add = [&]<class T>(std::string const& key, T first) {
    sd::Tensor<T, 3> t(2, 3, 4);
    for (int i = 0; i < 24; ++i) t.data()[i] = static_cast<T>(std::is_same_v<T, bool> ? i % 3 == 0 : first + T(i));
    sd::Tensor<T, 0> s;
    s.data()[0] = first;
    d.insert(key, sd::AnyTensor(t));
    d.insert(key + ".scalar", sd::AnyTensor(s));
    d.insert(key + ".empty", sd::AnyTensor(sd::Tensor<T, 2>(0, 5)));
  };
  add("f32", -1.25f);
  add("f64", 1.0 / 3);
  add("i32", std::int32_t(-2147483647));
  add("i64", std::int64_t(1) << 50);
  add("bool", true);
  sd::io::save_safetensors(d, (dir / "t.safetensors").string());
  auto back = sd::io::read_safetensors((dir / "t.safetensors").string());
  REQUIRE(back.keys() == d.keys());
  for (auto const& [key, t] : d) {
    INFO(key);
    CHECK(same_bytes(back.at(key), t));
  }
  CHECK(back.at("f64").to<double, 3>()(1, 2, 3) == 1.0 / 3 + 23);
  CHECK(back.at("i64.scalar").to<std::int64_t, 0>().item() == std::int64_t(1) << 50);
  CHECK(back.at("bool").to<bool, 3>()(0, 0, 3) == true);
  CHECK(back.at("bool").to<bool, 3>()(0, 0, 2) == false);
  CHECK(back.at("i32.empty").shape() == std::vector<std::int64_t>{0, 5});
  CHECK(sd::io::read_safetensors_metadata((dir / "t.safetensors").string()).empty());
}

TEST_CASE("file-only dtypes (F16, BF16, I16, I8, U8) load by the conversion rules", "[safetensors]") {
  // i16 starts at an odd offset: nothing assumes alignment.
  std::string const header =
      R"({"h":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[10,14]},)"
      R"("i8":{"dtype":"I8","shape":[3],"data_offsets":[14,17]},)"
      R"("i16":{"dtype":"I16","shape":[2],"data_offsets":[17,21]},)"
      R"("u8":{"dtype":"U8","shape":[2],"data_offsets":[21,23]},)"
      R"("big":{"dtype":"I64","shape":[1],"data_offsets":[23,31]}})";
  auto d = parse(file_bytes(header, pack<std::uint16_t>({0x3C00, 0xC000, 0x0001, 0x7BFF, 0x7C00}) +
                                        pack<std::uint16_t>({0x3F80, 0xC020}) + pack<std::int8_t>({-128, 127, 5}) +
                                        pack<std::int16_t>({-32768, 32767}) + pack<std::uint8_t>({0, 255}) +
                                        pack<std::int64_t>({std::int64_t(1) << 40})));
  CHECK(d.keys() == std::vector<std::string>{"h", "b", "i8", "i16", "u8", "big"});
  CHECK(d.at("h").dtype() == sd::DType::float16);
  CHECK(floats<1>(d.at("h")) ==
        std::vector<double>{1, -2, std::ldexp(1.0, -24), 65504, std::numeric_limits<double>::infinity()});
  CHECK(d.at("h").to<float, 1>()(2) == std::ldexp(1.0f, -24));
  CHECK(floats<1>(d.at("b")) == std::vector<double>{1, -2.5});
  CHECK(integers<1>(d.at("i8")) == std::vector<std::int64_t>{-128, 127, 5});
  CHECK(d.at("i16").to<std::int32_t, 1>()(0) == -32768);
  CHECK(integers<1>(d.at("i16")) == std::vector<std::int64_t>{-32768, 32767});
  CHECK(d.at("u8").to<std::int32_t, 1>()(1) == 255);
  // Never across kinds, and an integer must fit.
  auto fails = [](auto f) { return error_message(f); };
  CHECK(contains(fails([&] { d.at("h").to<std::int32_t, 1>("h"); }), "a float16 tensor cannot be loaded into an int32"));
  CHECK(contains(fails([&] { d.at("i8").to<float, 1>("i8"); }), "cannot be loaded into a float32"));
  CHECK(contains(fails([&] { d.at("u8").to<bool, 1>("u8"); }), "cannot be loaded into a bool"));
  CHECK(contains(fails([&] { d.at("big").to<std::int32_t, 1>("big"); }), "value 1099511627776 at index 0 does not fit"));
  // Rank comes from the file: any rank is kept.
  auto r9 = parse(file_bytes(R"({"r9":{"dtype":"U8","shape":[1,1,1,1,2,1,1,1,1],"data_offsets":[0,2]}})",
                             pack<std::uint8_t>({7, 9})));
  CHECK(r9.at("r9").rank() == 9);
  CHECK(r9.at("r9").to<std::int32_t, 9>()(0, 0, 0, 0, 1, 0, 0, 0, 0) == 9);
}

TEST_CASE("a module saves its state_dict and loads it back; strict keys", "[safetensors][nn]") {
  auto dir = fresh_dir("module");
  st_test::Net net;
  for (int i = 0; i < 6; ++i) net.weight.data()[i] = 0.5f * i - 1;
  net.steps.data()[0] = 7, net.steps.data()[1] = -(std::int64_t(1) << 40);
  for (int i = 0; i < 3; ++i) net.head.bias.data()[i] = 10.0f + i;
  auto const path = (dir / "net.safetensors").string();
  sd::io::save_safetensors(net, path, {{"format", "pt"}});
  CHECK(sd::io::read_safetensors(path).keys() == std::vector<std::string>{"weight", "steps", "head.bias"});
  CHECK(sd::io::read_safetensors_metadata(path) == std::map<std::string, std::string>{{"format", "pt"}});

  st_test::Net fresh;
  auto r = sd::io::load_safetensors(fresh, path);
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  for (int i = 0; i < 6; ++i) CHECK(fresh.weight.data()[i] == net.weight.data()[i]);
  CHECK(fresh.steps(1) == net.steps(1));
  CHECK(fresh.head.bias(2) == 12.0f);

  // Dtypes convert on load: an F16 weight into float, I32 steps into int64.
  auto state = sd::nn::state_dict(net);
  sd::nn::StateDict converted;
  converted.insert("weight", any(sd::DType::float16, {3, 2}, pack<std::uint16_t>({0x3C00, 0x3800, 0, 0, 0, 0xC000})));
  converted.insert("steps", any(sd::DType::int32, {2}, pack<std::int32_t>({3, -4})));
  converted.insert("head.bias", state.at("head.bias"));
  sd::io::save_safetensors(converted, path);
  sd::io::load_safetensors(fresh, path);
  CHECK(fresh.weight(0, 1) == 0.5f);
  CHECK(fresh.weight(2, 1) == -2.0f);
  CHECK(fresh.steps(1) == -4);

  // An unexpected key and a missing one: errors under strict, reported otherwise.
  sd::nn::StateDict extra = sd::nn::state_dict(net), missing;
  extra.insert("extra", state.at("steps"));
  missing.insert("weight", state.at("weight"));
  missing.insert("steps", state.at("steps"));
  sd::io::save_safetensors(extra, (dir / "extra.safetensors").string());
  sd::io::save_safetensors(missing, (dir / "missing.safetensors").string());
  CHECK(contains(error_message([&] { sd::io::load_safetensors(fresh, (dir / "extra.safetensors").string()); }),
                 "unexpected key(s): \"extra\""));
  CHECK(contains(error_message([&] { sd::io::load_safetensors(fresh, (dir / "missing.safetensors").string()); }),
                 "missing key(s): \"head.bias\""));
  auto loose = sd::io::load_safetensors(fresh, (dir / "missing.safetensors").string(), {.strict = false});
  CHECK(loose.missing_keys == std::vector<std::string>{"head.bias"});
  CHECK(sd::io::load_safetensors(fresh, (dir / "extra.safetensors").string(), {.strict = false}).unexpected_keys ==
        std::vector<std::string>{"extra"});
}

TEST_CASE("load_tensor reads one tensor; an absent key names the key and the file", "[safetensors]") {
  auto dir = fresh_dir("load_tensor");
  auto const path = (dir / "t.safetensors").string();
  write_file(path, file_bytes(R"({"x":{"dtype":"F16","shape":[1,2],"data_offsets":[0,4]}})",
                              pack<std::uint16_t>({0x3C00, 0x4000})));
  auto x = sd::io::load_tensor<double, 2>(path, "x");
  static_assert(std::is_same_v<decltype(x), sd::Tensor<double, 2>>);
  CHECK(x.shape() == sd::Index<2>{1, 2});
  CHECK(x(0, 1) == 2.0);
  auto absent = error_message([&] { sd::io::load_tensor<float, 2>(path, "y"); });
  CHECK(contains(absent, "no tensor 'y'"));
  CHECK(contains(absent, path));
  CHECK(contains(error_message([&] { sd::io::load_tensor<float, 3>(path, "x"); }), "expected rank 3"));
}

TEST_CASE("malformed files are sd::Errors naming the file and the problem", "[safetensors][untrusted]") {
  std::string const a = R"("a":)" + f32_entry;
  struct Case {
    std::string header;
    Bytes data;
    std::string expected;
  };
  Case const cases[] = {
      {R"({"a":{"dtype":"F32")", four, "not valid JSON"},
      {"{\"\xff\":1}", {}, "not valid JSON"},                         // not UTF-8
      {"{\"a\":\"\xc0\xaf\"}", {}, "not valid JSON"},                 // overlong UTF-8
      {"{} x", {}, "not valid JSON"},                                 // trailing text
      {"[1, 2]", {}, "does not start with '{'"},                      // not an object
      {" {}", {}, "does not start with '{'"},
      {"\xef\xbb\xbf{}", {}, "does not start with '{'"},              // a byte-order mark
      {"", {}, "does not start with '{'"},
      {R"({"__metadata__":[1]})", {}, "'__metadata__' is a JSON array, not an object"},
      {R"({"__metadata__":{"k":1}})", {}, "'__metadata__' value 'k' is a JSON number, not a string"},
      {R"({"__metadata__":{"k":"1","k":"2"}})", {}, "duplicate key 'k'"},
      {"{" + a + "," + a + "}", four + four, "duplicate key 'a'"},
      {R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four, "duplicate key 'dtype'"},
      {R"({"a":5})", {}, "tensor 'a': the entry is a JSON number, not an object"},
      {R"({"a":{"shape":[1],"data_offsets":[0,4]}})", four, "tensor 'a': no 'dtype' field"},
      {R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", four, "tensor 'a': no 'shape' field"},
      {R"({"a":{"dtype":"F32","shape":[1]}})", four, "tensor 'a': no 'data_offsets' field"},
      {R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", four, "'dtype' is a JSON number, not a string"},
      {R"({"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", four, "tensor 'a': dtype 'F8_E4M3' is not supported"},
      {R"({"a":{"dtype":"U16","shape":[2],"data_offsets":[0,4]}})", four, "tensor 'a': dtype 'U16' is not supported"},
      {R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", four, "'shape' is a JSON number, not an array"},
      {R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four, "tensor 'a': 'shape' holds -1, not a non-negative"},
      {R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", four, "'shape' holds 1.0, not"},
      {R"({"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}})", four, "'shape' holds string, not"},
      {R"({"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}})", four, "'shape' holds 9223372036854775808"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", four,
       "the element count of shape [4294967296,4294967296] overflows"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", {}, "element count"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", four, "the byte count of shape"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", four, "'data_offsets' is not an array of two non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", four, "'data_offsets' is not an array of two"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", four, "'data_offsets' is not an array of two"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":{"0":4}}})", four, "'data_offsets' is not an array of two"},
      {R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", four, "'data_offsets' [4, 0] begin after they end"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", four, "'data_offsets' [0, 8] run past the data section's 4 bytes"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", four, "run past"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four, "shape [2] of F32 needs 8 bytes, 'data_offsets' [0, 4] hold 4"},
      {"{" + a + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", four + four + four,
       "tensor 'b' starts at data offset 8, leaving a hole: the tensors before it end at 4"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", four + four, "tensor 'a' starts at data offset 4, leaving a hole: the tensors before it end at 0"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
       four + four, "tensor 'b' starts at data offset 4, overlapping the tensor before it, which ends at 8"},
      {"{" + a + "}", four + four, "the tensors cover 4 bytes of data, the file holds 8 after the header"},
      {"{}", four, "the tensors cover 0 bytes of data, the file holds 4"},
      {R"({"x":)" + std::string(20, '[') + std::string(20, ']') + "}", {}, "JSON nested deeper than 16 levels"},
  };
  for (auto const& c : cases) {
    INFO("header: " << c.header);
    auto msg = parse_error(file_bytes(c.header, c.data));
    CHECK(contains(msg, c.expected));
    CHECK(contains(msg, "case.safetensors"));
  }
  // The 8-byte length itself.
  for (std::size_t n : {0, 1, 7}) CHECK(contains(parse_error(Bytes(n)), "too short to hold the header's length"));
  CHECK(contains(parse_error(le64(100'000'001) + bytes_of("{}")), "header length 100000001 exceeds the limit of 100000000"));
  CHECK(contains(parse_error(le64(~std::uint64_t(0)) + bytes_of("{}")), "exceeds the limit"));
  CHECK(contains(parse_error(le64(100) + bytes_of("{}")), "header length 100 runs past the end of the file (10 bytes)"));
  CHECK(contains(parse_error(le64(9)), "runs past the end of the file (8 bytes)"));
  CHECK(contains(error_message([] { sd::io::read_safetensors_bytes(nullptr); }), "no bytes"));

  // What the format allows: an empty file (header padded with spaces), an entry's extra field
  // (the reference ignores it), empty tensors sharing an offset, metadata alone.
  CHECK(parse(file_bytes("{}      ")).size() == 0);
  CHECK(parse(file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"note":[1]}})", four)).size() == 1);
  auto empties = parse(file_bytes(R"({"e":{"dtype":"I64","shape":[0,3],"data_offsets":[4,4]},)"
                                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("z":{"dtype":"BOOL","shape":[5,0],"data_offsets":[4,4]}})", four));
  CHECK(empties.keys() == std::vector<std::string>{"e", "a", "z"});
  CHECK(empties.at("a").to<float, 1>()(0) == 2.5f);
  CHECK(parse(file_bytes(R"({"__metadata__":{"format":"pt"}})")).size() == 0);
}

TEST_CASE("the JSON reader is strict RFC 8259 with exact integers; the writer escapes", "[safetensors][json]") {
  namespace json = sd::io::json;
  auto read = [](std::string const& text) { return json::parse(text, "doc", 16); };
  auto text_of = [&](std::string const& text) { return json::dump(read(text)); };
  auto string_of = [&](std::string const& text) { return *read(text).string(); };

  // Every kind of value, whitespace between any tokens, members in document order.
  CHECK(text_of(" \t\r\n{ \"z\" : [ 1 , -2.5e+3 , 0.0 , true , false , null , \"\" , { } , [ ] ] ,\n"
                "  \"a\" : { \"z\" : 1 } } \n") == R"({"z":[1,-2.5e+3,0.0,true,false,null,"",{},[]],"a":{"z":1}})");
  CHECK(read(R"({"k":[1,"x"]})").find("k")->array()->size() == 2);
  CHECK(read(R"({"k":1})").find("j") == nullptr);
  CHECK(read("[]").find("k") == nullptr);
  CHECK(read("null").type_name() == "null");
  CHECK(read("false").type_name() == "boolean");

  // Escapes, \u ones as UTF-8 (a surrogate pair as one code point), UTF-8 kept as it is.
  CHECK(string_of(R"("\" \\ \/ \b \f \n \r \t")") == "\" \\ / \b \f \n \r \t");
  CHECK(string_of(R"("\u0041\u00e9\u20AC\uD83D\uDE00\u0000")") ==
        std::string("A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0", 11));
  CHECK(string_of("\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \x7f\"") ==
        "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \x7f");

  // Integers exact at the 64-bit edges; a fraction, an exponent or too many digits is a number
  // (kept as written) but not an integer.
  CHECK(read("9223372036854775807").as_int64() == std::numeric_limits<std::int64_t>::max());
  CHECK(read("-9223372036854775808").as_int64() == std::numeric_limits<std::int64_t>::min());
  CHECK(!read("9223372036854775808").as_int64());
  CHECK(!read("-9223372036854775809").as_int64());
  CHECK(read("9223372036854775808").as_uint64() == std::uint64_t(1) << 63);
  CHECK(read("18446744073709551615").as_uint64() == std::numeric_limits<std::uint64_t>::max());
  CHECK(!read("18446744073709551616").as_uint64());
  CHECK(text_of("[18446744073709551616,-0,1E+400]") == "[18446744073709551616,-0,1E+400]");
  CHECK(read("0").as_uint64() == 0u);
  CHECK(read("-0").as_int64() == 0);
  CHECK(!read("-0").as_uint64());
  CHECK(!read("-1").as_uint64());
  CHECK(read("-1").as_int64() == -1);
  for (std::string t : {"1.0", "1e3", "1E+0", "0.5", "-2e-2"}) {
    INFO(t);
    CHECK(read(t).is_number());
    CHECK(!read(t).as_int64());
    CHECK(!read(t).as_uint64());
  }
  CHECK(!read("\"1\"").as_uint64());
  CHECK(!read("true").as_int64());

  // Nesting up to the limit; a key may repeat in different objects.
  CHECK_NOTHROW(read(std::string(16, '[') + std::string(16, ']')));
  CHECK_NOTHROW(read(R"({"a":{"a":1},"b":{"a":2}})"));

  // Errors: what, where (the byte offset), why.
  struct Case {
    std::string text, expected;
  };
  Case const cases[] = {
      {"", "not valid JSON at byte 0: expected a value, found the end of the text"},
      {" \n", "at byte 2: expected a value"},
      {"{} x", "at byte 3: expected the end of the text after the value, found 'x'"},
      {"[1]]", "at byte 3: expected the end of the text"},
      {std::string("{}\0", 3), "at byte 2: expected the end of the text after the value, found byte 0x00"},
      {"1 2", "at byte 2: expected the end"},
      {"\xef\xbb\xbf{}", "at byte 0: expected a value, found byte 0xef"},  // a byte-order mark
      {"\f1", "at byte 0: expected a value, found byte 0x0c"},          // not JSON whitespace
      {R"({"a":1,})", "at byte 7: expected a string (an object's key), found '}'"},
      {"[1,]", "at byte 3: expected a value, found ']'"},
      {"[,1]", "at byte 1: expected a value, found ','"},
      {R"({"a" 1})", "at byte 5: expected ':'"},
      {R"({"a":1 "b":2})", "at byte 7: expected ',' or '}'"},
      {"[1 2]", "at byte 3: expected ',' or ']'"},
      {"[1", "at byte 2: expected ',' or ']', found the end of the text"},
      {"{1:2}", "expected a string (an object's key), found '1'"},
      {"{'a':2}", "expected a string (an object's key), found '''"},
      {"01", "at byte 1: expected the end"},
      {"-", "at byte 1: expected a digit"},
      {"-a", "at byte 1: expected a digit"},
      {"1.", "at byte 2: expected a digit after '.'"},
      {"1.e3", "expected a digit after '.'"},
      {".5", "at byte 0: expected a value"},
      {"1e", "at byte 2: expected a digit in the exponent"},
      {"1e+", "expected a digit in the exponent"},
      {"+1", "expected a value"},
      {"tru", "expected a value"},
      {"True", "expected a value"},
      {"nul", "expected a value"},
      {"NaN", "expected a value"},
      {"-Infinity", "expected a digit"},
      {"\"abc", "at byte 4: expected '\"' (the string's end), found the end of the text"},
      {"\"a\nb\"", "at byte 2: a control character in a string (0x0a), which must be escaped"},
      {"\"\t\"", "a control character in a string (0x09)"},
      {std::string("\"\0\"", 3), "a control character in a string (0x00)"},
      {R"("\x")", "at byte 2: expected an escape"},
      {R"("\U0041")", "expected an escape"},
      {R"("\u12")", "at byte 5: expected a hexadecimal digit"},
      {R"("\u12G4")", R"(at byte 5: expected a hexadecimal digit (four after \u), found 'G')"},
      {R"("\uD83D")", R"(expected a \u escape of a low surrogate after the high one)"},
      {R"("\uD83Dx")", R"(expected a \u escape of a low surrogate after the high one, found 'x')"},
      {R"("\uD83D\u0041")", R"(a \u escape of a high surrogate not followed by a low one)"},
      {R"("\uD83D\uD83D")", R"(a \u escape of a high surrogate not followed by a low one)"},
      {R"("\uDE00")", R"(a \u escape of a low surrogate without a high one before it)"},
      {"\"\xff\"", "at byte 1: a string holds bytes that are not UTF-8 (0xff)"},
      {"\"ab\x80\"", "at byte 3: a string holds bytes that are not UTF-8 (0x80)"},  // a lone continuation
      {"\"\xc0\xaf\"", "not UTF-8 (0xc0)"},                                          // overlong '/'
      {"\"\xe0\x80\xaf\"", "not UTF-8 (0xe0)"},                                      // overlong, 3 bytes
      {"\"\xf0\x80\x80\xaf\"", "not UTF-8 (0xf0)"},                                  // overlong, 4 bytes
      {"\"\xed\xa0\x80\"", "not UTF-8 (0xed)"},                                      // a surrogate
      {"\"\xf4\x90\x80\x80\"", "not UTF-8 (0xf4)"},                                  // above U+10FFFF
      {"\"\xf5\x80\x80\x80\"", "not UTF-8 (0xf5)"},
      {"\"\xc3\"", "not UTF-8 (0xc3)"},  // cut short
      {"\"\xe2\x82\"", "not UTF-8 (0xe2)"},
      {"{\"\xff\":1}", "at byte 2: a string holds bytes that are not UTF-8"},  // in a key
      {R"({"a":1,"b":2,"a":3})", "duplicate key 'a' (at byte 13)"},
      {R"({"a":1,"\u0061":2})", "duplicate key 'a'"},  // the same key once unescaped
      {std::string(17, '[') + std::string(17, ']'), "JSON nested deeper than 16 levels (at byte 16)"},
      {R"({"a":)" + std::string(16, '[') + "}", "JSON nested deeper than 16 levels (at byte 20)"},
  };
  for (auto const& c : cases) {
    INFO("text: " << c.text);
    auto msg = error_message([&] { read(c.text); });
    CHECK(contains(msg, "solder: doc: "));
    CHECK(contains(msg, c.expected));
  }

  // The writer: '"', '\' and control characters escaped (by name where JSON has one), the
  // rest as it is; what it writes reads back the same; a string not UTF-8 is refused.
  CHECK(json::quote("a\"b\\c/\b\f\n\r\t\x01\x1f\x7f \xc3\xa9", "s") ==
        R"("a\"b\\c/\b\f\n\r\t\u0001\u001f)"
        "\x7f \xc3\xa9\"");
  std::string every_character;
  for (int c = 0; c < 0x80; ++c) every_character += static_cast<char>(c);
  every_character += "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  CHECK(string_of(json::quote(every_character, "s")) == every_character);
  CHECK(contains(error_message([] { json::quote("ok\xff", "the key"); }),
                 "the key is not valid UTF-8 (byte 2 is 0xff)"));
  CHECK(contains(error_message([] { json::quote("\xed\xa0\x80", "s"); }), "not valid UTF-8 (byte 0 is 0xed)"));
  json::Value built;
  json::Value::Array const elements{{true}, {json::Value::Number{"-1.5"}}, {}, {std::string("s")}};
  built.data = json::Value::Object{{"k", {elements}}};
  CHECK(json::dump(built) == R"({"k":[true,-1.5,null,"s"]})");
}

TEST_CASE("files that cannot be read: errors naming the path", "[safetensors][untrusted]") {
  auto dir = fresh_dir("unreadable");
  CHECK(contains(error_message([&] { sd::io::read_safetensors((dir / "none.safetensors").string()); }), "cannot open"));
  CHECK(contains(error_message([&] { sd::io::read_safetensors(dir.string()); }), "is not a regular file"));
  write_file(dir / "empty.safetensors", {});
  CHECK(contains(error_message([&] { sd::io::read_safetensors((dir / "empty.safetensors").string()); }),
                 "0 bytes, too short"));
  write_file(dir / "cut.safetensors", file_bytes(R"({"a":)" + f32_entry + "}", pack<std::uint8_t>({1, 2})));
  auto msg = error_message([&] { sd::io::read_safetensors_metadata((dir / "cut.safetensors").string()); });
  CHECK(contains(msg, (dir / "cut.safetensors").string()));
  CHECK(contains(msg, "run past the data section's 2 bytes"));
}

TEST_CASE("save writes the reference's exact layout: key order, offsets, padding", "[safetensors]") {
  auto dir = fresh_dir("layout");
  auto const path = (dir / "t.safetensors").string();
  // Byte for byte the reference implementation's own serialization tests (tensor.rs).
  Bytes const six = pack<float>({0, 1, 2, 3, 4, 5});
  sd::nn::StateDict one;
  one.insert("attn.0", any(sd::DType::float32, {1, 2, 3}, six));
  sd::io::save_safetensors(one, path);
  CHECK(read_file(path) == file_bytes(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})", six));
  sd::nn::StateDict padded;
  padded.insert("attn0", any(sd::DType::float32, {1, 1, 2, 3}, six));
  sd::io::save_safetensors(padded, path);
  CHECK(read_file(path) ==
        file_bytes(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})" + std::string(7, ' '), six));
  sd::io::save_safetensors(sd::nn::StateDict{}, path);
  CHECK(read_file(path) == file_bytes("{}      "));
  sd::io::save_safetensors(sd::nn::StateDict{}, path, {{"framework", "pt"}});
  CHECK(read_file(path) == file_bytes(R"({"__metadata__":{"framework":"pt"}})" + std::string(5, ' ')));

  // Insertion order kept, offsets increasing in it, bytes unchanged, every file dtype.
  sd::nn::StateDict d;
  d.insert("z", any(sd::DType::int64, {2}, pack<std::int64_t>({-1, 1})));
  d.insert("a", any(sd::DType::boolean, {3}, pack<std::uint8_t>({1, 0, 1})));
  d.insert("m.b", any(sd::DType::float16, {1}, pack<std::uint16_t>({0x3C00})));
  d.insert("m.a", any(sd::DType::bfloat16, {2, 1}, pack<std::uint16_t>({0x3F80, 0xC020})));
  d.insert("k", any(sd::DType::int8, {1}, pack<std::int8_t>({-3})));
  d.insert("u", any(sd::DType::uint8, {1}, pack<std::uint8_t>({200})));
  d.insert("s", any(sd::DType::int16, {1}, pack<std::int16_t>({-300})));
  d.insert("f", any(sd::DType::float64, {}, pack<double>({0.1})));
  d.insert("i", any(sd::DType::int32, {1}, pack<std::int32_t>({5})));
  sd::io::save_safetensors(d, path, {{"format", "pt"}, {"b", "\"quoted\" ü"}});
  auto back = sd::io::read_safetensors(path);
  REQUIRE(back.keys() == d.keys());
  std::byte const* next = back.begin()->second.bytes();
  for (auto const& [key, t] : back) {
    INFO(key);
    CHECK(same_bytes(t, d.at(key)));
    CHECK(t.bytes() == next);
    next = t.bytes() + t.nbytes();
  }
  auto file = read_file(path);
  std::uint64_t n;
  std::memcpy(&n, file.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(next == back.begin()->second.bytes() + (file.size() - 8 - n));
  CHECK(sd::io::read_safetensors_metadata(path) ==
        std::map<std::string, std::string>{{"format", "pt"}, {"b", "\"quoted\" ü"}});
}

TEST_CASE("a failed save leaves the destination as it was; saving over a mapped file is safe", "[safetensors]") {
  auto dir = fresh_dir("failed_save");
  auto const path = (dir / "t.safetensors").string();
  sd::nn::StateDict d;
  d.insert("x", any(sd::DType::float32, {1}, four));
  sd::io::save_safetensors(d, path);
  auto const before = read_file(path);

  sd::nn::StateDict bad;
  bad.insert("__metadata__", d.at("x"));
  CHECK(contains(error_message([&] { sd::io::save_safetensors(bad, path); }), "cannot be named '__metadata__'"));
  sd::nn::StateDict empty;
  empty.insert("e", sd::AnyTensor());
  CHECK(contains(error_message([&] { sd::io::save_safetensors(empty, path); }), "tensor 'e' has no data"));
  sd::nn::StateDict not_utf8;
  not_utf8.insert("\xff", d.at("x"));
  CHECK(contains(error_message([&] { sd::io::save_safetensors(not_utf8, path); }), path));
  auto const nowhere = (dir / "no" / "t.safetensors").string();
  CHECK(contains(error_message([&] { sd::io::save_safetensors(d, nowhere); }), "cannot create"));
  CHECK(read_file(path) == before);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // no temporary left

  // The old tensors stay readable while the file is replaced under them.
  auto mapped = sd::io::read_safetensors(path);
  sd::nn::StateDict other;
  other.insert("y", any(sd::DType::int32, {2}, pack<std::int32_t>({1, 2})));
  sd::io::save_safetensors(other, path);
  CHECK(mapped.at("x").to<float, 1>()(0) == 2.5f);
  CHECK(sd::io::read_safetensors(path).keys() == std::vector<std::string>{"y"});
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
}

TEST_CASE("a sharded checkpoint: index.json with a weight_map over two shards", "[safetensors][nn]") {
  auto dir = fresh_dir("sharded");
  st_test::Net net;
  for (int i = 0; i < 6; ++i) net.weight.data()[i] = 1.5f * i;
  net.steps.data()[0] = 3, net.steps.data()[1] = 4;
  for (int i = 0; i < 3; ++i) net.head.bias.data()[i] = -1.0f * i;
  auto state = sd::nn::state_dict(net);
  sd::nn::StateDict one, two;
  one.insert("weight", state.at("weight"));
  one.insert("steps", state.at("steps"));
  two.insert("head.bias", state.at("head.bias"));
  sd::io::save_safetensors(one, (dir / "model-00001-of-00002.safetensors").string());
  sd::io::save_safetensors(two, (dir / "model-00002-of-00002.safetensors").string());
  auto index = [&](std::string const& name, std::string const& weight_map) {
    write_file(dir / name, bytes_of(R"({"metadata":{"total_size":40},"weight_map":{)" + weight_map + "}}"));
    return (dir / name).string();
  };
  std::string const good = R"("weight":"model-00001-of-00002.safetensors","steps":"model-00001-of-00002.safetensors",)"
                           R"("head.bias":"model-00002-of-00002.safetensors")";
  auto const path = index("model.safetensors.index.json", good);
  st_test::Net fresh;
  auto r = sd::io::load_safetensors(fresh, path);
  CHECK(r.missing_keys.empty());
  CHECK(fresh.weight(2, 1) == 7.5f);
  CHECK(fresh.steps(1) == 4);
  CHECK(fresh.head.bias(2) == -2.0f);
  CHECK(sd::io::read_safetensors_index(path).keys() == std::vector<std::string>{"weight", "steps", "head.bias"});

  std::string const shard2 = R"("head.bias":"model-00002-of-00002.safetensors")";
  std::string const w1 = R"("weight":"model-00001-of-00002.safetensors",)";
  struct Case {
    std::string weight_map, expected;
  };
  Case const cases[] = {
      {w1 + R"("steps":"../model-00001-of-00002.safetensors",)" + shard2,
       "the shard of 'steps' is '../model-00001-of-00002.safetensors', not a file name"},
      {w1 + R"("steps":"sub/x.safetensors",)" + shard2, "not a file name in the index's directory"},
      {w1 + R"("steps":"..",)" + shard2, "the shard of 'steps' is '..'"},
      {w1 + R"("steps":"",)" + shard2, "the shard of 'steps' is ''"},
      {w1 + R"("steps":3,)" + shard2, "the shard of 'steps' is a JSON number"},
      {w1 + R"("steps":"model-00002-of-00002.safetensors",)" + shard2,
       "shard 'model-00001-of-00002.safetensors' holds 'steps', which the index places in "
       "'model-00002-of-00002.safetensors'"},
      {w1 + shard2, "holds 'steps', which the index does not list"},
      {good + R"(,"extra":"model-00002-of-00002.safetensors")",
       "'extra' is not in its shard 'model-00002-of-00002.safetensors'"},
      {good + R"(,"weight":"model-00001-of-00002.safetensors")", "duplicate key 'weight'"},
      {w1 + R"("steps":"model-00001-of-00002.safetensors","head.bias":"gone.safetensors")", "cannot open"},
  };
  for (auto const& c : cases) {
    INFO(c.weight_map);
    auto msg = error_message([&] { sd::io::load_safetensors(fresh, index("bad.index.json", c.weight_map)); });
    CHECK(contains(msg, c.expected));
  }
  for (std::string text : {R"({"metadata":{}})", "[1]", R"({"weight_map":[]})"}) {
    write_file(dir / "bad.index.json", bytes_of(text));
    auto msg = error_message([&] { sd::io::read_safetensors_index((dir / "bad.index.json").string()); });
    CHECK(contains(msg, "no \"weight_map\" object"));
  }
  CHECK(fresh.steps(1) == 4);  // failed loads changed nothing
}

TEST_CASE("PyTorch interop: its file read exactly; solder's file for it to read", "[safetensors][torch]") {
  auto const torch_file = std::string(SOLDER_TESTS_SOURCE_DIR) + "/fixtures/safetensors/torch_written.safetensors";
  auto d = sd::io::read_safetensors(torch_file);
  CHECK(sd::io::read_safetensors_metadata(torch_file) == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(d.size() == 13);
  using V = std::vector<double>;
  using I = std::vector<std::int64_t>;
  using S = std::vector<std::int64_t>;
  auto expect = [&](std::string const& key, sd::DType dtype, S const& shape) {
    INFO(key);
    CHECK(d.at(key).dtype() == dtype);
    CHECK(d.at(key).shape() == shape);
    return d.at(key);
  };
  CHECK(floats<2>(expect("float32", sd::DType::float32, {2, 3})) == V{-1, -0.5, 0, 0.5, 1, 1.5});
  CHECK(floats<2>(expect("float64", sd::DType::float64, {3, 2})) == V{0, 1.0 / 3, 2.0 / 3, 1, 4.0 / 3, 5.0 / 3});
  auto f16 = floats<2>(expect("float16", sd::DType::float16, {2, 3}));
  CHECK(f16 == V{1, -2, 0.5, 65504, std::ldexp(1.0, -24), 0});
  CHECK(std::signbit(f16[5]));
  CHECK(floats<2>(expect("bfloat16", sd::DType::bfloat16, {2, 3})) ==
        V{1, -2.5, 3.140625, std::ldexp(1.0, 100), -std::ldexp(1.0, -100), 0});
  CHECK(integers<1>(expect("int64", sd::DType::int64, {6})) ==
        I{-(std::int64_t(1) << 40), -1, 0, 1, std::int64_t(1) << 40, std::int64_t(1) << 62});
  CHECK(integers<2>(expect("int32", sd::DType::int32, {3, 2})) == I{-2147483648LL, -7, 0, 7, 2147483647, 123456});
  CHECK(integers<2>(expect("int16", sd::DType::int16, {2, 3})) == I{-32768, -1, 0, 1, 32767, 1000});
  CHECK(integers<2>(expect("int8", sd::DType::int8, {2, 3})) == I{-128, -1, 0, 1, 127, 42});
  CHECK(integers<2>(expect("uint8", sd::DType::uint8, {2, 3})) == I{0, 1, 127, 128, 254, 255});
  auto b = expect("bool", sd::DType::boolean, {2, 3}).to<bool, 2>();
  CHECK(std::vector<bool>(b.data(), b.data() + 6) == std::vector<bool>{true, false, false, true, true, false});
  CHECK(expect("scalar", sd::DType::float32, {}).to<float, 0>().item() == 3.5f);
  CHECK(expect("empty", sd::DType::float32, {0, 4}).numel() == 0);
  auto r4 = floats<4>(expect("rank4", sd::DType::float32, {1, 2, 3, 4}));
  for (int i = 0; i < 24; ++i) CHECK(r4[i] == i);

  // The other way: the same tensors in reverse order, for the script's --check.
  auto const entries = std::vector(d.begin(), d.end());
  sd::nn::StateDict out;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) out.insert(it->first, it->second);
  auto const solder_file = (fs::path(SOLDER_TESTS_BINARY_DIR) / "safetensors_test" / "solder_written.safetensors").string();
  sd::io::save_safetensors(out, solder_file, {{"format", "pt"}, {"writer", "solder"}});
  auto back = sd::io::read_safetensors(solder_file);
  REQUIRE(back.keys() == out.keys());
  for (auto const& [key, t] : back) CHECK(same_bytes(t, d.at(key)));

  // Every file PyTorch wrote for the nn fixtures passes the checks.
  auto const nn_dir = fs::path(SOLDER_TESTS_SOURCE_DIR) / "fixtures" / "nn";
  if (fs::is_directory(nn_dir))
    for (auto const& f : fs::directory_iterator(nn_dir))
      if (f.path().extension() == ".safetensors") {
        INFO(f.path());
        CHECK_NOTHROW(sd::io::read_safetensors(f.path().string()));
      }
}

TEST_CASE("paths: the helpers behind sharded checkpoints, traces and the autotune cache", "[safetensors][files]") {
  using sd::detail::join_path;
  using sd::detail::parent_dir;
  CHECK(parent_dir("model.safetensors.index.json").empty());
  CHECK(parent_dir("/model.json") == "/");
  CHECK(parent_dir("a/b/model.json") == "a/b");
  CHECK(join_path("", "x") == "x");
  CHECK(join_path("a/", "x") == "a/x");
  CHECK(join_path("a", "x") == "a/x");
  auto const root = std::filesystem::temp_directory_path() / ("solder-paths-" + std::to_string(::getpid()));
  std::string const deep = (root / "one" / "two").string();
  REQUIRE(sd::detail::make_dirs(deep));
  CHECK(std::filesystem::is_directory(deep));
  CHECK(sd::detail::make_dirs(deep));  // already there
  std::string const file = join_path(deep, "f.txt");
  REQUIRE(sd::detail::write_whole(file, "whole"));
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "whole");
  CHECK_FALSE(std::filesystem::exists(file + ".tmp"));
  CHECK_FALSE(sd::detail::make_dirs(join_path(file, "below")));  // a file is in the way
  CHECK_FALSE(sd::detail::write_whole(join_path(join_path(deep, "missing"), "f.txt"), "x"));
  std::filesystem::remove_all(root);
}
