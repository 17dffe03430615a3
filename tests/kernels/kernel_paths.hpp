#pragma once

// The kernel paths of kernels/ that this machine runs: every ISA level up to the detected
// one. Kernels written with intrinsics under `target` attributes have every path in every
// build, so one test program checks them all by capping the ISA (xlite::scoped_max_isa).

#include <xlite/core/cpu_features.hpp>

#include <vector>

namespace xlite_test {

inline std::vector<xlite::isa> kernel_paths() {
  std::vector<xlite::isa> paths;
  for (const xlite::isa level : xlite::all_isas) {
    if (level <= xlite::detected_isa()) paths.push_back(level);
  }
  return paths;
}

} // namespace xlite_test
