// Vector registers as GCC's vector types, for the host kernels that keep a tile of accumulators
// in registers (attention.hpp, conv.hpp): a Pack is one register of the widest ISA the file is
// compiled for (64 bytes with AVX-512, 32 with AVX, else 16), so one source serves every ISA.
#pragma once
#include <cstring>

#include "../../core/config.hpp"

namespace solder::detail::host::simd {

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
inline constexpr int pack_bytes = 64;
#elif defined(__AVX__) && !defined(__CUDA_ARCH__)
inline constexpr int pack_bytes = 32;
#else
inline constexpr int pack_bytes = 16;
#endif
template <class T>
struct PackOf {
  typedef T type __attribute__((vector_size(pack_bytes)));
};
template <class T>
using Pack = typename PackOf<T>::type;
template <class T>
inline constexpr int lanes = pack_bytes / static_cast<int>(sizeof(T));

template <class T>
SOLDER_INLINE Pack<T> load(T const* p) {
  Pack<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
SOLDER_INLINE void store(T* p, Pack<T> v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace solder::detail::host::simd
