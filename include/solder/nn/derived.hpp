// What a module derives from its parameters and keeps between forwards: its weight packed for
// the host's GEMM engine (expr/pack_cache.hpp), and copies of its parameters on the GPU.
//
// Parameters live on the host, where state dicts load them. A forward runs on its input's
// device: on sd::Cuda tensors it reads device copies of the parameters, each made on its first
// use and kept (PyTorch's model.to("cuda"), without a second set of module types). Both are
// dropped by the module's prepare() (after load_state_dict, eval and train), made again when a
// parameter is rebound to other storage, and not kept in training mode, where parameters
// change between calls. Writing new values into a parameter in place needs an eval() after it.
// A copy of a module derives its own.
#pragma once
#include <algorithm>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "../expr/node.hpp"
#include "../expr/pack_cache.hpp"

namespace solder::nn {

// The device a forward on x runs on (a node over no tensor: the host).
template <class X>
using device_of = std::conditional_t<std::is_same_v<typename node_t<X>::device_type, Cuda>, Cuda, Host>;

namespace detail {

class Derived {
 public:
  Derived() = default;
  Derived(Derived const&) : Derived() {}
  Derived& operator=(Derived const&) {
    state_ = std::make_shared<State>();
    return *this;
  }

  // The packed weight's cache for a forward in this mode (none in training).
  std::shared_ptr<solder::detail::PackCache> pack(bool training) const {
    if (training) return nullptr;
    return std::shared_ptr<solder::detail::PackCache>(state_, &state_->pack);
  }
  bool holds_pack() const { return !state_->pack.empty(); }

  // Parameter p for a forward on Device: p itself on the host; on sd::Cuda its kept device copy.
  template <class Device, class T, auto E>
  decltype(auto) on(BasicTensor<T, E, Host> const& p, bool training) const {
    if constexpr (std::is_same_v<Device, Host>) return (p);
    else return device_copy<Device>(p, training);
  }
  std::size_t device_copies() const {
    std::lock_guard lock(state_->m);
    return state_->copies.size();
  }

  void clear() {
    state_->pack.clear();
    std::lock_guard lock(state_->m);
    state_->copies.clear();
  }

 private:
  // A device copy of the parameter at `param`, made from `source` (kept alive, so that its
  // address is not reused by another tensor while the copy is kept) laid out as `strides`.
  struct DeviceCopy {
    void const* param;
    std::shared_ptr<void const> source;
    std::vector<std::int64_t> strides;
    std::shared_ptr<void const> copy;  // a BasicTensor<T, E, Device>
  };
  struct State {
    solder::detail::PackCache pack;
    mutable std::mutex m;
    std::vector<DeviceCopy> copies;
  };
  template <class Device, class T, auto E>
  BasicTensor<T, E, Device> device_copy(BasicTensor<T, E, Host> const& p, bool training) const {
    using Copy = BasicTensor<T, E, Device>;
    if (training) return p.template to<Device>();
    std::lock_guard lock(state_->m);
    auto& copies = state_->copies;
    auto kept = std::find_if(copies.begin(), copies.end(), [&](DeviceCopy const& c) { return c.param == &p; });
    if (kept != copies.end()) {
      auto const& copy = *static_cast<Copy const*>(kept->copy.get());
      if (kept->source.get() == p.data() && copy.shape() == p.shape() && kept->strides == strides_of(p)) return copy;
      copies.erase(kept);  // rebound: copied again
    }
    copies.push_back({&p, p.storage(), strides_of(p), std::make_shared<Copy>(p.template to<Device>())});
    return *static_cast<Copy const*>(copies.back().copy.get());
  }
  template <class TT>
  static std::vector<std::int64_t> strides_of(TT const& t) {
    return {t.strides().begin(), t.strides().end()};
  }
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace detail
}  // namespace solder::nn
