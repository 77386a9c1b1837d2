// The fixtures of tools/make_model_fixtures.py, for the nn and models tests: PyTorch's
// state_dict layouts (keys.txt) and, per case, <case>.state.safetensors (PyTorch's state_dict)
// and <case>.io.safetensors (inputs, outputs, the configuration as metadata).
#pragma once
#include <solder/solder.hpp>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace fx {

inline std::string path(std::string const& name) { return SOLDER_TESTS_SOURCE_DIR "/fixtures/nn/" + name; }

inline solder::nn::StateDict io(std::string const& name) { return solder::io::read_safetensors(path(name + ".io.safetensors")); }

// Loads <name>.state.safetensors into m, strictly.
template <class M>
void load(M& m, std::string const& name) {
  solder::nn::load_state_dict(m, solder::io::read_safetensors(path(name + ".state.safetensors")));
}

// ||y - ref|| / ||ref|| over all elements, in double; the shapes must agree.
template <class T>
double relative_l2(T const& y, solder::AnyTensor const& ref) {
  REQUIRE(std::vector<std::int64_t>(y.shape().begin(), y.shape().end()) == ref.shape());
  auto const got = solder::to_vector(y);
  auto const want = solder::to_vector(ref.to<double, T::rank>("reference"));
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// keys.txt: blocks "model <name>", lines "<key> <dtype> <d0>,<d1>,..." (0-d: "-"), "end".
inline std::map<std::string, std::vector<std::string>> reference_layouts() {
  std::ifstream f(path("keys.txt"));
  REQUIRE(f.is_open());
  std::map<std::string, std::vector<std::string>> layouts;
  std::vector<std::string>* current = nullptr;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model ", 0) == 0) current = &layouts[line.substr(6)];
    else if (line == "end") current = nullptr;
    else if (current) current->push_back(line);
  }
  return layouts;
}

// A module's state_dict in keys.txt's form.
template <class M>
std::vector<std::string> layout(M const& m) {
  std::vector<std::string> lines;
  for (auto const& [key, t] : solder::nn::state_dict(m)) {
    std::ostringstream os;
    os << key << ' ' << solder::name_of(t.dtype()) << ' ';
    for (std::size_t i = 0; i < t.shape().size(); ++i) os << (i ? "," : "") << t.shape()[i];
    if (t.shape().empty()) os << '-';
    lines.push_back(os.str());
  }
  return lines;
}

// The first line where two layouts differ, or "" when they are equal.
inline std::string first_difference(std::vector<std::string> const& got, std::vector<std::string> const& want) {
  for (std::size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
    std::string const g = i < got.size() ? got[i] : "(none)", w = i < want.size() ? want[i] : "(none)";
    if (g != w) return "line " + std::to_string(i) + ": solder has '" + g + "', PyTorch '" + w + "'";
  }
  return "";
}

// The kernel count on sd::explain's first line ("solder forward: N kernels ...").
inline std::uint64_t planned_kernels(std::string const& plan) {
  INFO(plan);
  REQUIRE(plan.rfind("solder forward: ", 0) == 0);
  return std::stoull(plan.substr(16));
}

}  // namespace fx
