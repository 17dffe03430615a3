#pragma once

#include <xlite/runtime/device.hpp>

// Every test of spmd_tests and collectives_tests starts with this, so the program has 8 devices whichever of its
// tests runs first.
inline void use_eight_devices() {
  static const bool once = (xlite::runtime::set_num_devices(8), true);
  (void)once;
}
