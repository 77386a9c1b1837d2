// Cascade summation, as PyTorch's (its CPU sum kernel's multi-level accumulators): an
// accumulator folds at most cascade_fan values before it passes its partial up one level, so a
// float sum of n terms errs by about cascade_fan * log16(n) eps, not n eps. 10^7 terms of 0.1f
// (exact 1000000.015) sum to 1000000.125; one accumulator gives 1087937, PyTorch 999999.56.
// Every host path and every GPU thread folds its terms this way, in an order fixed by the
// shapes alone: the same bits for any thread count.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../core/config.hpp"
#include "../expr/reduce.hpp"

namespace solder::detail {

inline constexpr int cascade_fan = 16;

template <class Op, class A>
struct Cascade {
  // Only a fold that rounds (a floating sum, mean or product) needs levels: max, min and their
  // indices pick a term, and integers wrap exactly, in any order, so they keep one accumulator.
  static constexpr bool rounds = std::is_floating_point_v<A> && std::is_base_of_v<ops::WideningFold, Op>;
  // Level k holds partials of cascade_fan^k terms; the top one, past 16^6 terms (2^24, a GPU
  // thread's share or a host block's count many times over), takes the rest in order.
  static constexpr int levels = rounds ? 7 : 1;
  A level[levels];
  // 32 bits each (a GPU thread keeps them in registers beside the levels): chunks wrap past 2^32
  // chunks of 16 terms, 2^36 terms, far beyond any fold's count, and terms never passes 16.
  std::uint32_t terms = 0;   // folded into level[0] since it was last passed up
  std::uint32_t chunks = 0;  // partials passed up from level[0]

  // Every loop over the levels is unrolled: an index known only at run time would put the
  // levels in a GPU thread's local memory instead of its registers.
  SOLDER_HD Cascade() {
    SOLDER_UNROLL
    for (int k = 0; k < levels; ++k) level[k] = Op::template identity<A>();
  }
  // level[0] takes the terms: after each one, next().
  SOLDER_HD SOLDER_INLINE A& chunk() { return level[0]; }
  SOLDER_HD SOLDER_INLINE void next() {
    if constexpr (rounds)
      if (++terms == cascade_fan) end_chunk();
  }
  // level[0] holds a whole chunk of terms (or the last, shorter one): passes it up, and the
  // levels that are full, as a carry.
  SOLDER_HD SOLDER_INLINE void end_chunk() {
    if constexpr (rounds) {
      terms = 0;
      A up = level[0];
      level[0] = Op::template identity<A>();
      ++chunks;
      std::uint32_t c = chunks;
      bool carry = true;  // `up` still travels: level k - 1 was full
      SOLDER_UNROLL
      for (int k = 1; k < levels; ++k) {
        if (!carry) continue;
        if (k + 1 < levels && c % cascade_fan == 0) {  // level k is full too: up it goes
          up = Op::merge(level[k], up);
          level[k] = Op::template identity<A>();
          c /= cascade_fan;
        } else {
          level[k] = Op::merge(level[k], up);
          carry = false;
        }
      }
    }
  }
  // The earlier partials, the higher levels, on the left of each merge (argmax keeps the first).
  SOLDER_HD SOLDER_INLINE A result() const {
    A r = level[0];
    SOLDER_UNROLL
    for (int k = 1; k < levels; ++k) r = Op::merge(level[k], r);
    return r;
  }
};

}  // namespace solder::detail
