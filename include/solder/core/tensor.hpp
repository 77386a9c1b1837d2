// sd::Tensor<T, Rank or Extents, Device>: owning, 64-byte-aligned, reference-counted storage
// with a strided view on it. Copies share storage (as in PyTorch and MatX); clone() copies.
#pragma once
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "device.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "extents.hpp"

namespace solder {

// What a tensor is built from or assigned besides another tensor: a value S for which
// TensorSource<S>, declared here and defined by the layer that knows S, has value = true and
// write(dst, s), which writes s into dst (a tensor of s's rank and shape). Every expression is
// one (backend/assign.hpp: its planned kernels run); core knows no more of them.
template <class S>
struct TensorSource;
template <class S>
concept Source = requires { requires TensorSource<std::remove_cvref_t<S>>::value; };

// The result of sd::shape(...): run-time sizes plus the static extents they carry.
template <auto E>
struct Shape {
  static constexpr int rank = rank_of<E>;
  Index<rank> dims;
};

template <class... A>
auto shape(A... a) {
  constexpr Extents<sizeof...(A)> e{{([] {
    if constexpr (requires { A::value; }) return A::value;
    else return dyn;
  }())...}};
  return Shape<e>{{static_cast<std::int64_t>(a)...}};
}

template <class T, auto E, class Device>
class BasicTensor;

namespace detail {
template <class T, class Device>
std::shared_ptr<T> allocate(std::int64_t n);
// CUDA storage and copies (backend/cuda/runtime.hpp; only with nvcc).
template <class T>
std::shared_ptr<T> cuda_allocate(std::int64_t n);
// Stores src's values into dst (backend/assign.hpp: the expression path, aliasing handled).
template <class Dst, class Src>
void assign(Dst& dst, Src const& src);
inline void cuda_copy(void* dst, void const* src, std::size_t bytes);
}  // namespace detail

template <class T, auto E, class Device = Host>
class BasicTensor {
  static_assert(Element<T>,
                "solder: Tensor element type must be float, double, int32_t, int64_t or bool");
  static_assert(std::is_same_v<Device, Host> || (std::is_same_v<Device, Cuda> && cuda_enabled),
                "solder: sd::Cuda tensors need the CUDA backend: compile this file with nvcc");

 public:
  using value_type = T;
  using device_type = Device;
  static constexpr auto static_extents = E;
  static constexpr int rank = rank_of<E>;

  // An empty tensor: static extents keep their size (and are allocated), dynamic ones are 0.
  BasicTensor() {
    Index<rank> s{};
    for (int i = 0; i < rank; ++i) s[i] = E[i] == dyn ? 0 : E[i];
    init(s);
  }
  explicit BasicTensor(Index<rank> const& s) { init(s); }
  template <auto E2>
    requires(rank_of<E2> == rank)
  BasicTensor(Shape<E2> const& s) {
    static_assert(detail::assignable(E, E2), "solder: Tensor: static extents of the shape differ");
    init(s.dims);
  }
  template <std::integral... I>
    requires(sizeof...(I) == rank && rank > 0)
  explicit BasicTensor(I... sizes) {
    init(Index<rank>{static_cast<std::int64_t>(sizes)...});
  }

  // A copy is a second handle on the same storage (as Python's `b = a`); clone() copies.
  // Assigning a tensor to a named tensor rebinds the name, as Python's `a = b` does; assigning
  // it to a temporary (a view that slice, narrow, select, transpose, expand... returned) writes
  // its values into the storage viewed, as PyTorch's `x[:, 0:2] = y` and as assigning an
  // expression does: rebinding a temporary would do nothing.
  BasicTensor(BasicTensor const&) = default;
  BasicTensor(BasicTensor&&) noexcept = default;
  BasicTensor& operator=(BasicTensor const&) & = default;
  BasicTensor& operator=(BasicTensor&&) & noexcept = default;
  BasicTensor& operator=(BasicTensor const& src) && {
    detail::assign(*this, src);
    return *this;
  }
  template <auto E2>
    requires(rank_of<E2> == rank && !std::is_same_v<BasicTensor<T, E2, Device>, BasicTensor>)
  BasicTensor& operator=(BasicTensor<T, E2, Device> const& src) && {
    detail::assign(*this, src);
    return *this;
  }

  // Evaluates an expression into new storage: one fused kernel per planned kernel.
  template <Source X>
  BasicTensor(X const& e) {
    static_assert(std::remove_cvref_t<X>::rank == rank,
                  "solder: Tensor = expression: ranks differ");
    if constexpr (std::remove_cvref_t<X>::rank == rank) {  // else nothing more to report
      init(e.shape());
      TensorSource<std::remove_cvref_t<X>>::write(*this, e);
    }
  }
  // Evaluates an expression into this tensor's existing storage (shapes must match).
  template <Source X>
  BasicTensor& operator=(X const& e) {
    static_assert(std::remove_cvref_t<X>::rank == rank,
                  "solder: Tensor = expression: ranks differ");
    if constexpr (std::remove_cvref_t<X>::rank == rank) TensorSource<std::remove_cvref_t<X>>::write(*this, e);
    return *this;
  }

  // x += v (and -= *= /=) with a number, a tensor or an expression: x = x + v, evaluated in
  // place (assignment handles an operand that overlaps x). The result keeps x's type: a float
  // result into an integer tensor is a compile error, as PyTorch refuses it.
  template <class V>
  BasicTensor& operator+=(V const& v) {
    return *this = *this + v;
  }
  template <class V>
  BasicTensor& operator-=(V const& v) {
    return *this = *this - v;
  }
  template <class V>
  BasicTensor& operator*=(V const& v) {
    return *this = *this * v;
  }
  template <class V>
  BasicTensor& operator/=(V const& v) {
    return *this = *this / v;
  }

  // Tensors of another static extents (or none) convert after a run-time check.
  template <auto E2>
    requires(rank_of<E2> == rank)
  BasicTensor(BasicTensor<T, E2, Device> const& o)
      : data_(o.storage()), shape_(o.shape()), strides_(o.strides()) {
    static_assert(detail::assignable(E, E2), "solder: Tensor: static extents differ");
    check_static(shape_);
  }

  Index<rank> const& shape() const { return shape_; }
  Index<rank> const& strides() const { return strides_; }
  std::int64_t size(std::int64_t d) const { return shape_[wrap_dim(d, rank, "size")]; }
  std::int64_t stride(std::int64_t d) const { return strides_[wrap_dim(d, rank, "stride")]; }
  std::int64_t numel() const { return numel_of<rank>(shape_); }
  T* data() const { return data_.get(); }
  std::shared_ptr<T> const& storage() const { return data_; }
  bool is_contiguous() const {
    std::int64_t acc = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if (shape_[i] != 1 && strides_[i] != acc) return false;
      acc *= shape_[i];
    }
    return true;
  }

  // Element access for host code and tests (checked).
  template <std::integral... I>
    requires(sizeof...(I) == rank)
  T& operator()(I... idx) const {
    static_assert(std::is_same_v<Device, Host>,
                  "solder: Tensor(): a sd::Cuda tensor's elements are on the GPU: copy it with "
                  ".to<sd::Host>() first");
    Index<rank> ix{static_cast<std::int64_t>(idx)...};
    std::int64_t off = 0;
    for (int i = 0; i < rank; ++i) {
      detail::check(ix[i] >= 0 && ix[i] < shape_[i], "Tensor(): index ", ix[i],
                    " out of range on axis ", i, " of shape ", shape_string<rank>(shape_));
      off += ix[i] * strides_[i];
    }
    return data_.get()[off];
  }
  T item() const {
    detail::check(numel() == 1, "item: tensor of shape ", shape_string<rank>(shape_),
                  " has ", numel(), " elements, not 1");
    Index<rank> z{};
    if constexpr (std::is_same_v<Device, Host>) {
      return data_.get()[offset_of(z)];
    } else {
      T v;
      detail::cuda_copy(&v, data_.get() + offset_of(z), sizeof(T));
      return v;
    }
  }

  BasicTensor clone() const;  // defined with the executor (a copy kernel)

  // The same values on another device (contiguous there); the same device returns this
  // tensor itself, as torch's .to does.
  template <class D2>
  BasicTensor<T, static_extents, D2> to() const {
    if constexpr (std::is_same_v<D2, Device>) {
      return *this;
    } else {
      BasicTensor src = is_contiguous() ? *this : clone();
      BasicTensor<T, E, D2> dst(shape_);
      detail::cuda_copy(dst.data(), src.data(), static_cast<std::size_t>(numel()) * sizeof(T));
      return dst;
    }
  }

  // A view on the same storage: used by permute/slice/expand and friends (core/views.hpp).
  template <int R2>
  static BasicTensor<T, dynamic_extents<R2>(), Device> make_view(std::shared_ptr<T> base,
                                                                  T* first, Index<R2> s,
                                                                  Index<R2> st) {
    using V = BasicTensor<T, dynamic_extents<R2>(), Device>;
    V v(typename V::detail_view_tag{});
    v.data_ = std::shared_ptr<T>(std::move(base), first);
    v.shape_ = s;
    v.strides_ = st;
    return v;
  }

  std::int64_t offset_of(Index<rank> const& ix) const {
    std::int64_t off = 0;
    for (int i = 0; i < rank; ++i) off += ix[i] * strides_[i];
    return off;
  }

 private:
  template <class, auto, class>
  friend class BasicTensor;
  struct detail_view_tag {};
  explicit BasicTensor(detail_view_tag) {}

  void check_static(Index<rank> const& s) const {
    for (int i = 0; i < rank; ++i)
      detail::check(E[i] == dyn || E[i] == s[i], "Tensor: axis ", i, " has static extent ",
                    E[i], " but the shape is ", shape_string<rank>(s));
  }
  void init(Index<rank> const& s) {
    for (int i = 0; i < rank; ++i)
      detail::check(s[i] >= 0, "Tensor: negative extent in shape ", shape_string<rank>(s));
    check_static(s);
    shape_ = s;
    strides_ = contiguous_strides<rank>(s);
    data_ = detail::allocate<T, Device>(numel());
  }

  std::shared_ptr<T> data_;
  Index<rank> shape_{};
  Index<rank> strides_{};
};

template <class T, auto R, class Device = Host>
using Tensor = BasicTensor<T, detail::as_extents<R>(), Device>;

namespace detail {

template <class T>
struct is_tensor : std::false_type {};
template <class T, auto E, class D>
struct is_tensor<BasicTensor<T, E, D>> : std::true_type {};

// Where this thread's host tensors get their storage while a planned call runs
// (runtime/workspace.hpp: sd::compile's reduce_overhead mode); none: the heap.
struct HostStorage {
  virtual std::shared_ptr<void> allocate(std::size_t bytes) = 0;

 protected:
  ~HostStorage() = default;
};
inline HostStorage*& host_storage() {
  thread_local HostStorage* storage = nullptr;
  return storage;
}

// Host storage is 64-byte aligned so vector loads never split cache lines.
template <class T, class Device>
std::shared_ptr<T> allocate(std::int64_t n) {
  if constexpr (std::is_same_v<Device, Cuda>) {
    return cuda_allocate<T>(n);
  } else {
    std::size_t bytes = static_cast<std::size_t>(n > 0 ? n : 1) * sizeof(T);
    if (HostStorage* s = host_storage()) return std::static_pointer_cast<T>(s->allocate(bytes));
    void* p = ::operator new(bytes, std::align_val_t{64});
    return std::shared_ptr<T>(static_cast<T*>(p),
                              [](T* q) { ::operator delete(q, std::align_val_t{64}); });
  }
}

}  // namespace detail

template <class T>
concept TensorType = detail::is_tensor<std::remove_cvref_t<T>>::value;

}  // namespace solder
