// PackCache: a copy of an operand laid out for a backend's engine, made on first use and kept
// between calls (weight prepacking: a module's weight is packed once, not on every forward).
//
// A contraction node may carry one for an operand (Contract::b_pack, Conv2d::w_pack); the
// engine asks it for the packed copy under a key that says what was packed and how (the
// source's address, shape and strides, the engine's block sizes). A key that differs from the
// kept one (the weight was rebound to other storage, or another engine asks) packs again. The
// source's storage is kept alive with the copy, so its address is never reused by another
// tensor while the copy is kept. Writing new values into the same storage is not seen: the
// owner calls clear() when its weights may have changed (nn modules do in prepare(): after
// load_state_dict, eval and train), and does not hand the cache out in training mode.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

namespace solder::detail {

class PackCache {
 public:
  using Key = std::array<std::int64_t, 10>;

  // The copy kept under `key`, made by make() (returning std::shared_ptr<void const>) when there
  // is none or the key differs. `source`: the packed operand's storage, kept alive with it.
  template <class Make>
  void const* get(Key const& key, std::shared_ptr<void const> source, Make&& make) {
    std::lock_guard lock(m_);
    if (!packed_ || key != key_) {
      packed_.reset();  // (the old copy freed before the new one is made)
      packed_ = make();
      key_ = key;
      source_ = std::move(source);
    }
    return packed_.get();
  }
  void clear() {
    std::lock_guard lock(m_);
    packed_.reset();
    source_.reset();
  }
  bool empty() const {
    std::lock_guard lock(m_);
    return !packed_;
  }

 private:
  mutable std::mutex m_;
  Key key_{};
  std::shared_ptr<void const> packed_, source_;
};

}  // namespace solder::detail
