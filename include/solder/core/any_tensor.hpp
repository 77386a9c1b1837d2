// sd::AnyTensor: a tensor whose element type and rank are known only at run time — what a
// state_dict holds and what a file stores. Its bytes are contiguous and shared: one made from a
// module's parameter aliases the parameter's storage, one read from a file may point into the
// mapped file. Typed code copies out of it with copy_into / to<T, R>(), which convert between
// dtypes by one rule (sd::DType's comment).
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dtype.hpp"
#include "error.hpp"
#include "tensor.hpp"

namespace solder {

// The element types of a stored tensor: solder's own (float, double, int32, int64, bool) and
// those only files and PyTorch have (float16, bfloat16, int16, int8, uint8).
// Loading converts by kind, never across kinds: floating <- any floating (float16/bfloat16
// widen exactly, float64 rounds to nearest), integer <- any integer (a value out of the
// destination's range is an error), bool <- bool. Floating to integer and back are errors.
enum class DType : std::uint8_t { float64, float32, float16, bfloat16, int64, int32, int16, int8, uint8, boolean };

constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::float64: case DType::int64: return 8;
    case DType::float32: case DType::int32: return 4;
    case DType::float16: case DType::bfloat16: case DType::int16: return 2;
    default: return 1;
  }
}
constexpr std::string_view name_of(DType t) {
  constexpr std::string_view names[] = {"float64", "float32", "float16", "bfloat16", "int64",
                                        "int32",   "int16",   "int8",    "uint8",    "bool"};
  return names[static_cast<int>(t)];
}
constexpr bool is_floating(DType t) { return t <= DType::bfloat16; }
constexpr bool is_integer(DType t) { return t >= DType::int64 && t <= DType::uint8; }

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, double>) return DType::float64;
  else if constexpr (std::is_same_v<T, float>) return DType::float32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::int64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::int32;
  else {
    static_assert(std::is_same_v<T, bool>, "solder: dtype_of: not an element type");
    return DType::boolean;
  }
}

namespace detail {

// IEEE half and bfloat16 bit patterns to float, exactly (both are subsets of float).
inline float half_to_float(std::uint16_t h) {
  std::uint32_t const sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);  // inf, nan
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13);
  else if (man == 0) bits = sign;
  else {  // subnormal: normalise
    exp = 113;
    while (!(man & 0x400u)) man <<= 1, --exp;
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float bfloat16_to_float(std::uint16_t b) {
  std::uint32_t const bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element i of a stored array, read without assuming alignment.
template <class S>
S load_unaligned(std::byte const* p, std::int64_t i) {
  S v;
  std::memcpy(&v, p + i * static_cast<std::int64_t>(sizeof(S)), sizeof(S));
  return v;
}
inline double stored_float(std::byte const* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::float64: return load_unaligned<double>(p, i);
    case DType::float32: return load_unaligned<float>(p, i);
    case DType::float16: return half_to_float(load_unaligned<std::uint16_t>(p, i));
    default: return bfloat16_to_float(load_unaligned<std::uint16_t>(p, i));
  }
}
inline std::int64_t stored_integer(std::byte const* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::int64: return load_unaligned<std::int64_t>(p, i);
    case DType::int32: return load_unaligned<std::int32_t>(p, i);
    case DType::int16: return load_unaligned<std::int16_t>(p, i);
    case DType::int8: return load_unaligned<std::int8_t>(p, i);
    default: return load_unaligned<std::uint8_t>(p, i);
  }
}

inline std::string dims_string(std::vector<std::int64_t> const& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace detail

class AnyTensor {
 public:
  AnyTensor() = default;
  // Bytes already laid out contiguously (row-major), kept alive by `owner`.
  AnyTensor(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<void const> owner,
            std::byte const* bytes)
      : dtype_(dtype), shape_(std::move(shape)), owner_(std::move(owner)), bytes_(bytes) {
    for (auto d : shape_) detail::check(d >= 0, "AnyTensor: negative extent in ", detail::dims_string(shape_));
  }
  // A host tensor's values: its own storage when contiguous, else a contiguous copy.
  template <class T, auto E>
  explicit AnyTensor(BasicTensor<T, E, Host> const& t) : dtype_(dtype_of<T>()), shape_(t.shape().begin(), t.shape().end()) {
    auto c = t.is_contiguous() ? t : t.clone();
    bytes_ = reinterpret_cast<std::byte const*>(c.data());
    owner_ = c.storage();
  }

  DType dtype() const { return dtype_; }
  std::vector<std::int64_t> const& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape_) n *= d;
    return n;
  }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * size_of(dtype_); }
  std::byte const* bytes() const { return bytes_; }
  std::shared_ptr<void const> const& owner() const { return owner_; }

  // Copies into dst (same shape; dtype converted by DType's rule). `what` names the tensor in
  // errors (a state_dict key). Checks every value before writing any: a failed load leaves dst
  // as it was.
  template <class T, auto E>
  void copy_into(BasicTensor<T, E, Host>& dst, std::string_view what) const {
    detail::check(std::vector<std::int64_t>(dst.shape().begin(), dst.shape().end()) == shape_, "'", what,
                  "': shape ", detail::dims_string(shape_), " in the source, ",
                  shape_string<BasicTensor<T, E, Host>::rank>(dst.shape()), " in the destination");
    detail::check(dst.is_contiguous(), "'", what, "': the destination is not contiguous");
    std::int64_t const n = numel();
    T* out = dst.data();
    if constexpr (std::is_same_v<T, bool>) {
      kind_check(dtype_ == DType::boolean, dtype_of<T>(), what);
      for (std::int64_t i = 0; i < n; ++i) out[i] = detail::load_unaligned<std::uint8_t>(bytes_, i) != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      kind_check(is_floating(dtype_), dtype_of<T>(), what);
      for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(detail::stored_float(bytes_, dtype_, i));
    } else {
      kind_check(is_integer(dtype_), dtype_of<T>(), what);
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t const v = detail::stored_integer(bytes_, dtype_, i);
        detail::check(v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max(), "'", what,
                      "': value ", v, " at index ", i, " does not fit in ", name_of(dtype_of<T>()));
      }
      for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(detail::stored_integer(bytes_, dtype_, i));
    }
  }
  // A new contiguous host tensor of element type T and rank R with these values.
  template <class T, int R>
  BasicTensor<T, dynamic_extents<R>(), Host> to(std::string_view what = "tensor") const {
    detail::check(rank() == R, "'", what, "': rank ", rank(), " (shape ", detail::dims_string(shape_),
                  "), expected rank ", R);
    Index<R> s{};
    for (int i = 0; i < R; ++i) s[i] = shape_[i];
    BasicTensor<T, dynamic_extents<R>(), Host> t(s);
    copy_into(t, what);
    return t;
  }

 private:
  void kind_check(bool ok, DType to, std::string_view what) const {
    // "an int64", "a float32": the article of the name as it is read.
    auto article = [](std::string_view name) { return name.front() == 'i' ? "an " : "a "; };
    detail::check(ok, "'", what, "': ", article(name_of(dtype_)), name_of(dtype_), " tensor cannot be loaded into ",
                  article(name_of(to)), name_of(to), " tensor (only floating <- floating, integer <- integer, bool <- bool)");
  }

  DType dtype_ = DType::float32;
  std::vector<std::int64_t> shape_;
  std::shared_ptr<void const> owner_;
  std::byte const* bytes_ = nullptr;
};

}  // namespace solder
