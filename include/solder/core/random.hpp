// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a
// counter-based generator, so element i of a random tensor is a pure function of (seed, i)
// and the host and CUDA backends produce the same numbers for the same seed.
#pragma once
#include <array>
#include <cstdint>

#include "config.hpp"

namespace solder::detail {

struct Philox {
  using Block = std::array<std::uint32_t, 4>;
  // The rounds on four scalars, not on a Block: an unoptimized build (the sanitizer tests draw the
  // weights of full-size models) then calls no accessor per use, and runs 5 times faster.
  SOLDER_HD static constexpr Block generate(std::uint64_t seed, std::uint64_t counter) {
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
    std::uint32_t c2 = 0u, c3 = 0u;
    for (int round = 0; round < 10; ++round) {
      std::uint64_t const p0 = std::uint64_t{0xD2511F53u} * c0;
      std::uint64_t const p1 = std::uint64_t{0xCD9E8D57u} * c2;
      c0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
      c1 = static_cast<std::uint32_t>(p1);
      c2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c3 = static_cast<std::uint32_t>(p0);
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return Block{c0, c1, c2, c3};
  }
  // A uniform float in [0, 1) from the top 24 bits (every value exactly representable).
  SOLDER_HD static constexpr float to_unit(std::uint32_t x) {
    return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
  }
};

// The process-wide generator state, as torch.manual_seed: each draw takes fresh counters.
struct RngState {
  std::uint64_t seed = 0x5eed;
  std::uint64_t offset = 0;
};
inline RngState& rng_state() {
  static RngState s;
  return s;
}

}  // namespace solder::detail

namespace solder {
inline void manual_seed(std::uint64_t seed) { detail::rng_state() = {seed, 0}; }
}  // namespace solder
