// The size of the slow tests' problems: SOLDER_TEST_SCALE=small (set by the sanitizer builds,
// tests/CMakeLists.txt) picks a smaller size where a test names one, full (the default, and the
// release build's) the full one. A small size is chosen per call so that it still takes the same
// code paths as the full one (a partial block, a second tile, a split over threads): only
// repetitions and large extents shrink, never the cases.
#pragma once
#include <cstdlib>
#include <cstring>

namespace ref {

inline bool small_tests() {
  static bool const small = [] {
    char const* s = std::getenv("SOLDER_TEST_SCALE");
    return s != nullptr && std::strcmp(s, "small") == 0;
  }();
  return small;
}

// `full` in the release run, `small` under SOLDER_TEST_SCALE=small.
template <class T>
T sized(T full, T small) {
  return small_tests() ? small : full;
}

}  // namespace ref
