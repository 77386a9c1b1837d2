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

}  // namespace solder
