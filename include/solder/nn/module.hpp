// Modules: plain structs whose forward returns an expression, and the free functions that work
// on any of them — parameters, named_parameters, named_buffers, state_dict, load_state_dict,
// eval, train — with PyTorch's state_dict keys.
//
// A module tells what it holds in one of two ways:
//   * SOLDER_MODULE(Type, members...) after a user's struct (Boost.Hana adapts it): tensor
//     members are parameters, module members are children, anything else (sizes, flags) is
//     configuration and not state;
//   * a member `template <class V> void visit(V& v)` (the built-in modules) that calls
//     v.parameter("weight", weight), v.buffer("running_mean", running_mean) and
//     v.child("0", first) in PyTorch's registration order.
// A std::optional child is state only when it holds a module (torchvision's downsample).
// Two optional members take part when present: `bool training` (set by eval/train) and
// `void prepare()`, called after eval(), train() and load_state_dict() on every module,
// children first, for what is derived once from the state (BatchNorm's folded scale and shift,
// fused projection weights) — never per call.
#pragma once
#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/concept/struct.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../core/any_tensor.hpp"
#include "../core/tensor.hpp"

// Names a user module's members for state_dicts: SOLDER_MODULE(Mlp, fc1, fc2). At namespace
// scope, after the struct (Boost.Hana's BOOST_HANA_ADAPT_STRUCT).
#define SOLDER_MODULE(...) BOOST_HANA_ADAPT_STRUCT(__VA_ARGS__)

namespace solder::nn {

// An ordered map from PyTorch's keys to tensors, in registration order as PyTorch's
// state_dict. Keys are unique.
class StateDict {
 public:
  void insert(std::string key, AnyTensor t) {
    solder::detail::check(!contains(key), "state_dict: duplicate key '", key, "'");
    index_.emplace(key, entries_.size());
    entries_.emplace_back(std::move(key), std::move(t));
  }
  bool contains(std::string const& key) const { return index_.count(key) != 0; }
  AnyTensor const* find(std::string const& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  AnyTensor const& at(std::string const& key) const {
    auto const* t = find(key);
    solder::detail::check(t != nullptr, "state_dict: no key '", key, "'");
    return *t;
  }
  std::size_t size() const { return entries_.size(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (auto const& e : entries_) k.push_back(e.first);
    return k;
  }

 private:
  std::vector<std::pair<std::string, AnyTensor>> entries_;
  std::map<std::string, std::size_t> index_;
};

namespace detail {

using solder::detail::check;
using solder::detail::fail;

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// A visitor that accepts anything: to ask whether a type has a visit(v) member.
struct AnyVisitor {
  template <class T>
  void parameter(std::string_view, T&) {}
  template <class T>
  void buffer(std::string_view, T&) {}
  template <class M>
  void child(std::string_view, M&) {}
};

template <class M>
constexpr bool is_module() {
  if constexpr (is_optional<M>::value) return is_module<typename M::value_type>();
  else return requires(M& m, AnyVisitor& v) { m.visit(v); } || boost::hana::Struct<M>::value;
}

// Passes on a module's own tensors (Own) or its children (!Own) and nothing else.
template <bool Own, class V>
struct MemberFilter {
  V& v;
  template <class T>
  void parameter(std::string_view n, T& t) {
    if constexpr (Own) v.parameter(n, t);
  }
  template <class T>
  void buffer(std::string_view n, T& t) {
    if constexpr (Own) v.buffer(n, t);
  }
  template <class C>
  void child(std::string_view n, C& c) {
    if constexpr (!Own) v.child(n, c);
  }
};

// Visits a module's own tensors (Own) or its children (!Own), in declaration order.
template <bool Own, class M, class V>
void visit_members(M& m, V& v) {
  if constexpr (requires(AnyVisitor& any) { m.visit(any); }) {
    MemberFilter<Own, V> filter{v};
    m.visit(filter);
  } else if constexpr (boost::hana::Struct<M>::value) {
    boost::hana::for_each(boost::hana::accessors<M>(), [&](auto accessor) {
      auto& member = boost::hana::second(accessor)(m);
      using Member = std::remove_cvref_t<decltype(member)>;
      char const* name = boost::hana::to<char const*>(boost::hana::first(accessor));
      if constexpr (Own && TensorType<Member>) v.parameter(name, member);
      else if constexpr (!Own && is_module<Member>()) v.child(name, member);
    });
  } else {
    static_assert(is_module<M>(), "solder: nn: not a module: name its members with SOLDER_MODULE(Type, members...)");
  }
}

// Walks a module tree in PyTorch's state_dict order: a module's own parameters and buffers,
// then each child's, keys joined with '.'. on_tensor(key, tensor, is_buffer) for every
// tensor; after_module(module) after a module's children (and the module's own tensors).
template <class OnTensor, class AfterModule>
struct Walk {
  OnTensor& on_tensor;
  AfterModule& after_module;
  std::string prefix;

  template <class T>
  void parameter(std::string_view n, T& t) {
    on_tensor(prefix + std::string(n), t, false);
  }
  template <class T>
  void buffer(std::string_view n, T& t) {
    on_tensor(prefix + std::string(n), t, true);
  }
  template <class M>
  void child(std::string_view n, M& m) {
    if constexpr (is_optional<M>::value) {
      if (m) child(n, *m);
    } else {
      std::string const saved = prefix;
      prefix += std::string(n) + '.';
      visit_module(m);
      prefix = saved;
    }
  }
  template <class M>
  void visit_module(M& m) {
    visit_members<true>(m, *this);
    visit_members<false>(m, *this);
    after_module(m);
  }
};

template <class M, class OnTensor, class AfterModule>
void walk(M& m, OnTensor on_tensor, AfterModule after_module) {
  Walk<OnTensor, AfterModule> w{on_tensor, after_module, ""};
  w.visit_module(m);
}
template <class M, class OnTensor>
void walk_tensors(M& m, OnTensor on_tensor) {
  walk(m, on_tensor, [](auto&) {});
}

template <class M>
void prepare(M& m) {
  if constexpr (requires { m.prepare(); }) m.prepare();
}

template <class M>
void set_mode(M& m, bool training) {
  walk(m, [](auto const&, auto&, bool) {}, [&](auto& module) {
    if constexpr (requires { module.training = true; }) module.training = training;
    prepare(module);
  });
}

// The read-only functions take a const module: the walk itself changes nothing.
template <class M>
M& unconst(M const& m) {
  return const_cast<M&>(m);
}

template <class T>
std::vector<std::int64_t> dims_of(T const& t) {
  return {t.shape().begin(), t.shape().end()};
}

}  // namespace detail

template <class M>
concept Module = detail::is_module<M>();

// (key, tensor) for every parameter; the tensors share the module's storage.
template <Module M>
std::vector<std::pair<std::string, AnyTensor>> named_parameters(M const& m) {
  std::vector<std::pair<std::string, AnyTensor>> out;
  detail::walk_tensors(detail::unconst(m), [&](std::string const& key, auto& t, bool buffer) {
    if (!buffer) out.emplace_back(key, AnyTensor(t));
  });
  return out;
}
template <Module M>
std::vector<std::pair<std::string, AnyTensor>> named_buffers(M const& m) {
  std::vector<std::pair<std::string, AnyTensor>> out;
  detail::walk_tensors(detail::unconst(m), [&](std::string const& key, auto& t, bool buffer) {
    if (buffer) out.emplace_back(key, AnyTensor(t));
  });
  return out;
}
template <Module M>
std::vector<AnyTensor> parameters(M const& m) {
  std::vector<AnyTensor> out;
  for (auto& p : named_parameters(m)) out.push_back(std::move(p.second));
  return out;
}
// Parameters and buffers, in PyTorch's order and with its keys; the tensors share the
// module's storage (save them before changing the module to keep a copy).
template <Module M>
StateDict state_dict(M const& m) {
  StateDict d;
  detail::walk_tensors(detail::unconst(m), [&](std::string const& key, auto& t, bool) { d.insert(key, AnyTensor(t)); });
  return d;
}

struct LoadOptions {
  bool strict = true;  // missing or unexpected keys are an error (else reported)
};
struct LoadResult {
  std::vector<std::string> missing_keys, unexpected_keys;
};

// Copies a state_dict's tensors into the module's (dtypes converted as sd::DType says). Every
// key, shape and dtype is checked before anything is written: a failed load changes nothing.
// Then prepare() runs on every module. A key the module lacks is unexpected; a module key the
// dict lacks is missing; under strict either is an sd::Error listing them all, as PyTorch's.
template <Module M>
LoadResult load_state_dict(M& m, StateDict const& dict, LoadOptions const& o = {}) {
  LoadResult r;
  std::map<std::string, bool> seen;
  std::ostringstream mismatch;
  detail::walk_tensors(m, [&](std::string const& key, auto& t, bool) {
    seen[key] = true;
    AnyTensor const* src = dict.find(key);
    if (!src) return r.missing_keys.push_back(key);
    if (src->shape() != detail::dims_of(t))
      mismatch << "\n  size mismatch for " << key << ": the file has shape " << solder::detail::dims_string(src->shape())
               << ", the module has " << solder::detail::dims_string(detail::dims_of(t));
  });
  for (auto const& [key, t] : dict)
    if (!seen.count(key)) r.unexpected_keys.push_back(key);
  auto list = [](std::vector<std::string> const& keys) {
    std::string s;
    for (auto const& k : keys) s += (s.empty() ? "" : ", ") + ("\"" + k + "\"");
    return s;
  };
  std::string problems = mismatch.str();
  if (o.strict && !r.missing_keys.empty()) problems += "\n  missing key(s): " + list(r.missing_keys);
  if (o.strict && !r.unexpected_keys.empty()) problems += "\n  unexpected key(s): " + list(r.unexpected_keys);
  detail::check(problems.empty(), "load_state_dict: error(s) in loading the state_dict:", problems);
  // Dtypes and values (integer ranges) into scratch copies first, then into the module.
  std::vector<std::pair<std::string, AnyTensor>> converted;
  detail::walk_tensors(m, [&](std::string const& key, auto& t, bool) {
    if (AnyTensor const* src = dict.find(key)) {
      auto copy = src->to<typename std::remove_cvref_t<decltype(t)>::value_type, std::remove_cvref_t<decltype(t)>::rank>(key);
      converted.emplace_back(key, AnyTensor(copy));
    }
  });
  std::size_t next = 0;
  detail::walk_tensors(m, [&](std::string const& key, auto& t, bool) {
    if (next < converted.size() && converted[next].first == key) converted[next++].second.copy_into(t, key);
  });
  detail::walk(m, [](auto const&, auto&, bool) {}, [](auto& module) { detail::prepare(module); });
  return r;
}

// A deep copy, PyTorch's copy.deepcopy(m) (libtorch's clone()): every parameter and buffer in
// storage of its own, then prepare() on every module, so that what a module derives from its
// state is derived from the copy's. A plain copy (`auto b = a;`) shares the tensors, as
// Python's `b = a` does: writing into b's weights writes into a's.
template <Module M>
M clone(M const& m) {
  M copy = m;
  detail::walk_tensors(copy, [](std::string const&, auto& t, bool) { t = t.clone(); });
  detail::walk(copy, [](auto const&, auto&, bool) {}, [](auto& module) { detail::prepare(module); });
  return copy;
}

// PyTorch's module.eval() / module.train(): sets `training` on every module that has one and
// re-derives what depends on the mode (prepare()).
template <Module M>
M& eval(M& m) {
  detail::set_mode(m, false);
  return m;
}
template <Module M>
M& train(M& m, bool mode = true) {
  detail::set_mode(m, mode);
  return m;
}

}  // namespace solder::nn
