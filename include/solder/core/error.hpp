// sd::Error: every run-time misuse (a dynamic shape mismatch, a bad dim, a failed file read)
// throws this with the op and the shapes in its message (DESIGN.md §5).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace solder {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// Builds the message from any streamable parts: fail("sum: dim ", d, " out of range for ", s).
template <class... Parts>
[[noreturn]] void fail(Parts const&... parts) {
  std::ostringstream os;
  os << "solder: ";
  (os << ... << parts);
  throw Error(os.str());
}

template <class... Parts>
void check(bool ok, Parts const&... parts) {
  if (!ok) fail(parts...);
}

}  // namespace detail
}  // namespace solder
