// The thread count of host kernels. OMP_NUM_THREADS is respected because OpenMP reads it;
// sd::set_num_threads overrides it for this process.
#pragma once
#if defined(_OPENMP)
#include <omp.h>
#endif
#include "error.hpp"

namespace solder {

inline void set_num_threads(int n) {
  detail::check(n >= 1, "set_num_threads: need at least 1 thread, got ", n);
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
}

inline int get_num_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace solder
