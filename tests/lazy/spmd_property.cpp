// The SPMD property test (spmd_programs.hpp) on 8 devices of this process.

#include <catch2/catch.hpp>

#include "../runtime/eight_devices.hpp"
#include "spmd_programs.hpp"

TEST_CASE("random programs on random shardings of every mesh equal the program on whole values", "[spmd]") {
  use_eight_devices();
  xlite::runtime::use_spmd();
  xlite_test::check_random_programs(20261124, 14);
}
