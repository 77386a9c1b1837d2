// Device tags: where a tensor's storage lives and which executor runs its kernels.
#pragma once
#include <string_view>

namespace solder {

struct Host {
  static constexpr std::string_view name = "host";
};
struct Cuda {
  static constexpr std::string_view name = "cuda";
};

// sd::Cuda tensors and kernels exist when the file is compiled by nvcc (backend/cuda/).
#if defined(__CUDACC__)
inline constexpr bool cuda_enabled = true;
#else
inline constexpr bool cuda_enabled = false;
#endif

}  // namespace solder
