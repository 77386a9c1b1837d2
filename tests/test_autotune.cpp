// max_autotune on the host (runtime/autotune.hpp): each product shape is timed in every
// configuration of the GEMM engine once and the fastest kept; the choices round-trip through
// the cache file, across processes, and a corrupt, truncated or foreign file is refused.
#include <solder/solder.hpp>
#include <solder/runtime/autotune.hpp>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sd = solder;

namespace {

// A matrix product with an epilogue, evaluated with the tuner installed.
sd::Tensor<float, 2> product(sd::runtime::Autotuner& t, sd::Tensor<float, 2> const& a, sd::Tensor<float, 2> const& b) {
  sd::runtime::Autotuner::Call call(t);
  return sd::relu(sd::matmul(a, b)) + 1.f;
}

std::filesystem::path scratch(char const* name) {
  auto const dir = std::filesystem::path(SOLDER_TESTS_BINARY_DIR) / name;
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("autotune: a shape is timed once, and any choice computes the same product", "[runtime][autotune]") {
  auto const a = sd::rand<float>({192, 160}, -1.f, 1.f), b = sd::rand<float>({160, 176}, -1.f, 1.f);
  sd::Tensor<float, 2> const want = sd::relu(sd::matmul(a, b)) + 1.f;
  std::vector<std::string> lines;
  sd::set_logs("autotune");
  auto const previous = sd::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  sd::runtime::Autotuner tuner;
  auto const first = product(tuner, a, b);
  CHECK(tuner.tuned() == 1);
  auto const again = product(tuner, a, b);
  sd::set_log_sink(previous);
  sd::set_logs("");
  REQUIRE(lines.size() == 1);  // timed on first use only
  CHECK(lines[0].rfind("[solder:autotune] gemm float32 batch=1 m=192 n=176 k=160", 0) == 0);
  CHECK(lines[0].find("heuristic=") != std::string::npos);
  auto const w = sd::to_vector(want), f = sd::to_vector(first), g = sd::to_vector(again);
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(f[i] == Approx(w[i]).epsilon(1e-5));
    CHECK(g[i] == f[i]);
  }
}

TEST_CASE("autotune: the cache file round-trips, and a bad one is refused", "[runtime][autotune]") {
  auto const dir = scratch("autotune-cache");
  auto const a = sd::rand<float>({64, 96}), b = sd::rand<float>({96, 80});
  {
    sd::runtime::Autotuner writer(dir);
    product(writer, a, b);
    REQUIRE(std::filesystem::exists(writer.file()));
  }
  sd::runtime::Autotuner reader(dir);
  CHECK(reader.tuned() == 1);
  std::string const text = reader.save();
  CHECK(text.rfind("solder-autotune 2\nmachine ", 0) == 0);

  sd::runtime::Autotuner fresh;
  CHECK(fresh.load(text));
  CHECK(fresh.tuned() == 1);
  CHECK_FALSE(fresh.load(text.substr(0, text.size() - 4)));           // truncated
  CHECK_FALSE(fresh.load(text.substr(0, text.find("end "))));         // its last lines lost
  std::string foreign = text;
  foreign.replace(foreign.find("machine ") + 8, 3, "XYZ");
  CHECK_FALSE(fresh.load(foreign));                                   // another machine
  std::string corrupt = text;
  corrupt.replace(corrupt.find('\t') + 1, 1, "7");
  CHECK_FALSE(fresh.load(corrupt));                                   // a value out of range
  CHECK_FALSE(fresh.load("solder-autotune 1\n"));                     // another format

  // A refused file is ignored (with a warning), never trusted.
  std::ofstream(reader.file(), std::ios::trunc) << corrupt;
  sd::runtime::Autotuner ignoring(dir);
  CHECK(ignoring.tuned() == 0);
}

TEST_CASE("autotune: a second process starts with the first one's choices", "[runtime][autotune]") {
  auto const dir = scratch("autotune-process");
  {
    sd::runtime::Autotuner first(dir);
    product(first, sd::rand<float>({64, 96}), sd::rand<float>({96, 80}));
  }
  std::string const command = "SOLDER_CACHE_DIR='" + dir.string() + "' '" SOLDER_TESTS_BINARY_DIR
                              "/test_autotune' '[.second-process]' > /dev/null";
  CHECK(std::system(command.c_str()) == 0);
}

TEST_CASE("autotune: (run by the test above in a process of its own)", "[.second-process]") {
  CHECK(sd::runtime::Autotuner::global().tuned() == 1);
}
