// The one Catch2 main shared by every tests/test_*.cpp executable (compiled once, linked into each).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
