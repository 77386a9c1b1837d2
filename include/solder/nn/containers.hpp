// nn.Sequential and nn.ModuleList, with PyTorch's keys ("0.weight", "3.bias", ...).
#pragma once
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "block.hpp"
#include "layers.hpp"

namespace solder::nn {

// nn.Sequential: its elements in order. An element-wise element (an activation, BatchNorm in
// its folded form, Dropout, Flatten, Identity) extends the expression of the one before it, so
// conv + bn + relu is one kernel; any other element is a block and receives a materialized
// tensor. The result is an expression: what the caller does with it fuses with the last block.
//   sd::nn::Sequential<sd::nn::Conv2d, sd::nn::BatchNorm2d, sd::nn::ReLU> s{{3, 8, 3}, {8}, {}};
template <class... Ms>
struct Sequential : Callable<Sequential<Ms...>> {
  std::tuple<Ms...> modules;

  Sequential(Ms... ms) : modules(std::move(ms)...) {}

  template <std::size_t I>
  auto& get() {
    return std::get<I>(modules);
  }
  template <std::size_t I>
  auto const& get() const {
    return std::get<I>(modules);
  }
  static constexpr std::size_t size() { return sizeof...(Ms); }

  template <class X>
  auto forward(X const& x) const {
    return step<0>(x);
  }
  template <class V>
  void visit(V& v) {
    visit_children(v, std::index_sequence_for<Ms...>{});
  }

 private:
  template <std::size_t I, class X>
  auto step(X const& x) const {
    if constexpr (I == sizeof...(Ms)) {
      return as_node(x);
    } else {
      using M = std::tuple_element_t<I, std::tuple<Ms...>>;
      if constexpr (ElementWise<M>) return step<I + 1>(std::get<I>(modules).forward(x));
      else return step<I + 1>(std::get<I>(modules).forward(materialize(x)));
    }
  }
  template <class V, std::size_t... I>
  void visit_children(V& v, std::index_sequence<I...>) {
    (v.child(std::to_string(I), std::get<I>(modules)), ...);
  }
};

// nn.ModuleList of one module type: a block repeated, its type compiled once however many
// there are. No forward of its own (as PyTorch's): run it as a loop over materialized tensors,
//   for (auto const& block : layers) h = sd::nn::materialize(block(h));
template <class M>
struct ModuleList {
  std::vector<M> modules;

  ModuleList() = default;
  ModuleList(std::initializer_list<M> ms) : modules(ms) {}
  explicit ModuleList(std::vector<M> ms) : modules(std::move(ms)) {}

  void push_back(M m) { modules.push_back(std::move(m)); }
  std::size_t size() const { return modules.size(); }
  M& operator[](std::size_t i) { return modules[i]; }
  M const& operator[](std::size_t i) const { return modules[i]; }
  auto begin() { return modules.begin(); }
  auto end() { return modules.end(); }
  auto begin() const { return modules.begin(); }
  auto end() const { return modules.end(); }

  template <class V>
  void visit(V& v) {
    for (std::size_t i = 0; i < modules.size(); ++i) v.child(std::to_string(i), modules[i]);
  }
};

namespace detail {

// A level of keys with no module of its own in C++: blocks named prefix + index
// (torchvision's "encoder_layer_0"), or one child under a name (ViT's "heads.head").
template <class M>
struct Prefixed {
  char const* prefix;
  std::vector<M>& items;
  template <class V>
  void visit(V& v) {
    for (std::size_t i = 0; i < items.size(); ++i) v.child(prefix + std::to_string(i), items[i]);
  }
};
template <class M>
struct Named {
  char const* name;
  M& child;
  template <class V>
  void visit(V& v) {
    v.child(name, child);
  }
};

}  // namespace detail

}  // namespace solder::nn
