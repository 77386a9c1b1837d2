// sd::compare(compiled, eager, args...): runs two callables on the same arguments and reports,
// per output, the largest absolute and relative difference between their results — to bisect a
// numerical difference between the fused kernels and the node-by-node ones
// (sd::compile(f, {.backend = sd::Backend::eager})). An output is a tensor, or a std::tuple,
// std::pair or aggregate struct (models::BertOutput) of outputs, compared member by member.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "compile.hpp"

namespace solder {

struct OutputDifference {
  std::string output;        // "output", "output[1]", "output[0][2]": tuple elements and struct members by place
  std::string shape, dtype;  // the first callable's
  std::string other_shape;   // the second's
  bool same_shape = true;
  // Over the elements: |a - b| and |a - b| / |b|, b the second callable's (infinite where b is 0
  // and a is not, or when the shapes differ; two NaNs count as equal).
  double max_abs = 0, max_rel = 0;
  std::string at;  // the index of the largest absolute difference ("[3, 1]"), when there is one
};

struct Comparison {
  std::vector<OutputDifference> outputs;

  std::string text() const {
    std::string s =
        "solder compare: " + std::to_string(outputs.size()) + (outputs.size() == 1 ? " output" : " outputs");
    for (auto const& d : outputs) {
      s += "\n  " + d.output + ": ";
      if (!d.same_shape) {
        s += "shapes differ: " + d.shape + " against " + d.other_shape;
        continue;
      }
      char numbers[96];
      std::snprintf(numbers, sizeof numbers, "max abs %.3g, max rel %.3g", d.max_abs, d.max_rel);
      s += d.shape + " " + d.dtype + ": " + numbers + (d.at.empty() ? "" : " at " + d.at);
    }
    return s + "\n";
  }
  friend std::ostream& operator<<(std::ostream& os, Comparison const& c) { return os << c.text(); }
};

namespace detail {

template <class T>
double as_double(T v) {
  if constexpr (is_half_v<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

// The index of the element at row-major position `i` of `shape`.
template <int R>
std::string index_text(Index<R> const& shape, std::int64_t i) {
  Index<R> at{};
  for (int d = R - 1; d >= 0; --d) {
    at[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return shape_string<R>(at);
}

template <TensorType TA, TensorType TB>
OutputDifference tensor_difference(std::string name, TA const& a, TB const& b) {
  OutputDifference d;
  d.output = std::move(name);
  d.shape = shape_string<TA::rank>(a.shape());
  d.dtype = dtype_name<typename TA::value_type>();
  d.other_shape = shape_string<TB::rank>(b.shape());
  d.same_shape = d.shape == d.other_shape;
  if (!d.same_shape) {
    d.max_abs = d.max_rel = std::numeric_limits<double>::infinity();
    return d;
  }
  auto const va = to_vector(a);
  auto const vb = to_vector(b);
  std::int64_t worst = -1;
  for (std::size_t i = 0; i < va.size(); ++i) {
    double const x = as_double(va[i]), y = as_double(vb[i]);
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    double const abs = std::isnan(x - y) ? std::numeric_limits<double>::infinity() : std::abs(x - y);
    double const rel = y == 0 ? std::numeric_limits<double>::infinity() : abs / std::abs(y);
    if (abs > d.max_abs || worst < 0) d.max_abs = abs, worst = static_cast<std::int64_t>(i);
    d.max_rel = std::max(d.max_rel, rel);
  }
  if (worst >= 0) d.at = index_text<TA::rank>(a.shape(), worst);
  return d;
}

template <class T>
inline constexpr bool is_tuple = false;
template <class... T>
inline constexpr bool is_tuple<std::tuple<T...>> = true;
template <class A, class B>
inline constexpr bool is_tuple<std::pair<A, B>> = true;

// An aggregate's members as a tuple of references, through structured bindings (C++20 has no
// reflection): its member count is the most initializers it takes, up to 6.
struct AnyMember {
  template <class T>
  operator T() const;
};
template <class T, class... Init>
constexpr int member_count() {
  if constexpr (sizeof...(Init) < 6 && requires { T{Init{}..., AnyMember{}}; })
    return member_count<T, Init..., AnyMember>();
  else
    return sizeof...(Init);
}
template <class T>
auto members(T const& s) {
  constexpr int n = member_count<T>();
  static_assert(n >= 1, "solder: compare: an output struct with no member, or more than 6");
  if constexpr (n == 1) {
    auto const& [m0] = s;
    return std::tie(m0);
  } else if constexpr (n == 2) {
    auto const& [m0, m1] = s;
    return std::tie(m0, m1);
  } else if constexpr (n == 3) {
    auto const& [m0, m1, m2] = s;
    return std::tie(m0, m1, m2);
  } else if constexpr (n == 4) {
    auto const& [m0, m1, m2, m3] = s;
    return std::tie(m0, m1, m2, m3);
  } else if constexpr (n == 5) {
    auto const& [m0, m1, m2, m3, m4] = s;
    return std::tie(m0, m1, m2, m3, m4);
  } else {
    auto const& [m0, m1, m2, m3, m4, m5] = s;
    return std::tie(m0, m1, m2, m3, m4, m5);
  }
}

template <class TA, class TB>
void compare_outputs(std::string const& name, TA const& a, TB const& b, std::vector<OutputDifference>& out) {
  if constexpr (TensorType<TA> && TensorType<TB>) {
    out.push_back(tensor_difference(name, a, b));
  } else if constexpr (is_tuple<TA> && is_tuple<TB>) {
    static_assert(std::tuple_size_v<TA> == std::tuple_size_v<TB>,
                  "solder: compare: the two callables return tuples of different sizes");
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (compare_outputs(name + "[" + std::to_string(I) + "]", std::get<I>(a), std::get<I>(b), out), ...);
    }
    (std::make_index_sequence<std::tuple_size_v<TA>>{});
  } else if constexpr (std::is_same_v<TA, TB> && std::is_aggregate_v<TA>) {
    compare_outputs(name, members(a), members(b), out);
  } else {
    static_assert(TensorType<TA> && TensorType<TB>,
                  "solder: compare: an output must be a tensor, or a std::tuple, std::pair or aggregate struct of "
                  "outputs, the same for both callables");
  }
}

}  // namespace detail

// Runs both callables (compiled callables, modules, functions) on `args` and compares their
// results output by output; a difference of shapes is reported, not thrown.
template <class F, class G, class... A>
Comparison compare(F const& compiled, G const& eager, A const&... args) {
  auto const a = nn::detail::finish(detail::call_forward(compiled, args...));
  auto const b = nn::detail::finish(detail::call_forward(eager, args...));
  Comparison c;
  detail::compare_outputs("output", a, b, c.outputs);
  return c;
}

}  // namespace solder
