// Dynamic shapes for sd::compile (runtime/compile.hpp): sd::mark_dynamic(t, dim), PyTorch's
// torch._dynamo.mark_dynamic, and the padding strategies for variable-length inputs (reference
// 001): sd::pad_to<8>(t, dim) and sd::buckets{32, 64, 128, 256}.pad(t, dim), each returning the
// padded tensor and its mask.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <vector>

#include "../backend/assign.hpp"
#include "../core/factories.hpp"
#include "../core/views.hpp"

namespace solder {

namespace detail {

// mark_dynamic's side table: a Tensor has no spare field. A mark belongs to a tensor as a Python
// tensor object owns its mark: its copies (the same storage, first element, shape and strides)
// keep it, other views of the storage do not. The storage is held weakly: a mark never keeps
// memory alive, and the control block it pins cannot be reused by another allocation while the
// mark exists. Marks of freed storage are dropped as lookups pass them.
struct DynamicMark {
  std::weak_ptr<void const> owner;
  void const* data;
  std::vector<std::int64_t> view;  // shape, then strides
  std::uint64_t dims;              // bit d: dim d is dynamic
};
struct DynamicMarks {
  std::mutex mutex;
  std::vector<DynamicMark> marks;
  std::atomic<std::size_t> count{0};  // marks.size(): with none (the usual case) no lock is taken
};
inline DynamicMarks& dynamic_marks() {
  static DynamicMarks marks;
  return marks;
}

// The mark of t in the table (the lock held), after dropping marks of freed storage.
template <class TT>
DynamicMark* find_mark(DynamicMarks& m, TT const& t) {
  std::erase_if(m.marks, [](DynamicMark const& e) { return e.owner.expired(); });
  m.count = m.marks.size();
  for (auto& e : m.marks) {
    bool same = !e.owner.owner_before(t.storage()) && !t.storage().owner_before(e.owner) &&
                e.data == t.data() && e.view.size() == 2 * TT::rank;
    for (int i = 0; same && i < TT::rank; ++i)
      same = e.view[i] == t.shape()[i] && e.view[TT::rank + i] == t.strides()[i];
    if (same) return &e;
  }
  return nullptr;
}

// The dims of t marked dynamic, as bits.
template <class TT>
std::uint64_t marked_dims(TT const& t) {
  auto& m = dynamic_marks();
  if (m.count == 0) return 0;
  std::lock_guard lock(m.mutex);
  DynamicMark const* e = find_mark(m, t);
  return e ? e->dims : 0;
}

}  // namespace detail

// Marks dim `dim` of t dynamic: sd::compile's signature of a call with t (or a copy of it) counts
// that dim as "any size", so a new size there is no recompile. A static extent cannot vary.
template <TensorType TT>
void mark_dynamic(TT const& t, std::int64_t dim) {
  static_assert(TT::rank <= 64, "solder: mark_dynamic: tensors of rank above 64");
  int const d = wrap_dim(dim, TT::rank, "mark_dynamic");
  detail::check(TT::static_extents[d] == dyn, "mark_dynamic: dim ", d, " has the static extent ",
                TT::static_extents[d], ": it cannot vary");
  auto& m = detail::dynamic_marks();
  std::lock_guard lock(m.mutex);
  if (detail::DynamicMark* e = detail::find_mark(m, t)) {
    e->dims |= std::uint64_t{1} << d;
    return;
  }
  std::vector<std::int64_t> view(t.shape().begin(), t.shape().end());
  view.insert(view.end(), t.strides().begin(), t.strides().end());
  m.marks.push_back({t.storage(), t.data(), std::move(view), std::uint64_t{1} << d});
  m.count = m.marks.size();
}

// A tensor padded along one dim, and its mask: true on the real elements. The mask has size 1 on
// every other dim, so it broadcasts against the tensor: sd::where(p.mask, f(p.tensor), 0.f).
template <class T, int R, class Device = Host>
struct Padded {
  Tensor<T, R, Device> tensor;
  Tensor<bool, R, Device> mask;
};

namespace detail {

struct Below {
  std::int64_t n;
  SOLDER_HD bool operator()(std::int64_t i) const { return i < n; }
};

// t grown along dim d to `size` elements, the new ones `fill` (t itself when it has that size).
template <class TT>
auto pad_dim(TT const& t, int d, std::int64_t size, typename TT::value_type fill) {
  using T = typename TT::value_type;
  using Device = typename TT::device_type;
  constexpr int R = TT::rank;
  using S = Shape<dynamic_extents<R>()>;
  Index<R> shape = t.shape(), mask_shape;
  std::int64_t const n = shape[d];
  mask_shape.fill(1);
  mask_shape[d] = size;
  Padded<T, R, Device> p{t, generate<bool, Device>(S{mask_shape}, Below{n})};
  if (size != n) {
    shape[d] = size;
    p.tensor = full<T, Device>(S{shape}, fill);
    auto real = narrow(p.tensor, d, 0, n);
    assign(real, t);
  }
  return p;
}

}  // namespace detail

// Pads dim `dim` up to the next multiple of Multiple (reference 001's "pad to a multiple of 8"):
// a few sizes, so a few signatures, and aligned rows.
template <std::int64_t Multiple, TensorType TT>
auto pad_to(TT const& t, std::int64_t dim, typename TT::value_type fill = {}) {
  static_assert(Multiple > 0, "solder: pad_to<Multiple>: Multiple must be positive");
  int const d = wrap_dim(dim, TT::rank, "pad_to");
  std::int64_t const n = t.shape()[d];
  return detail::pad_dim(t, d, (n + Multiple - 1) / Multiple * Multiple, fill);
}

// A fixed set of lengths to pad to (reference 001's "a limited number of static graphs"): as many
// signatures as buckets, which should not exceed the recompile limit.
class buckets {
 public:
  buckets(std::initializer_list<std::int64_t> sizes) : sizes_(sizes) {
    detail::check(!sizes_.empty(), "buckets: no sizes");
    for (std::size_t i = 0; i < sizes_.size(); ++i)
      detail::check(sizes_[i] > 0 && (i == 0 || sizes_[i] > sizes_[i - 1]),
                    "buckets: sizes must be positive and increasing, got ", sizes_[i], " at position ", i);
  }
  std::vector<std::int64_t> const& sizes() const { return sizes_; }

  // The smallest bucket that holds n elements.
  std::int64_t bucket(std::int64_t n) const {
    detail::check(n > 0, "buckets: a length must be positive, got ", n);
    auto it = std::lower_bound(sizes_.begin(), sizes_.end(), n);
    detail::check(it != sizes_.end(), "buckets: a length of ", n, " is past the largest bucket, ", sizes_.back());
    return *it;
  }
  // t padded along dim to its bucket, with the mask.
  template <TensorType TT>
  auto pad(TT const& t, std::int64_t dim, typename TT::value_type fill = {}) const {
    int const d = wrap_dim(dim, TT::rank, "buckets::pad");
    return detail::pad_dim(t, d, bucket(t.shape()[d]), fill);
  }

 private:
  std::vector<std::int64_t> sizes_;
};

}  // namespace solder
