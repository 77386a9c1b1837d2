// expect: error: static assertion failed: solder: a walk over an expression met a node kind it does not handle
// A node kind the planner's walks do not know stops the build (DESIGN.md §2: one node protocol;
// never a silent leaf that would miss an alias check or a kernel).
#include <string>

#include <solder/solder.hpp>

namespace sd = solder;

struct Mystery : sd::detail::ExprTag {
#ifdef SOLDER_COMPILE_FAIL_CONTROL
  static constexpr sd::NodeKind kind = sd::NodeKind::leaf;
#else
  static constexpr auto kind = static_cast<sd::NodeKind>(99);  // a kind no walk handles
#endif
  using child_types = sd::types<>;
  using value_type = float;
  using device_type = sd::Host;
  static constexpr int rank = 1;
  static constexpr auto static_extents = sd::dynamic_extents<1>();
  sd::Index<1> shape() const { return {4}; }
  static std::string name() { return "mystery"; }
};

int main() { return sd::kernel_count<Mystery> - 1; }
