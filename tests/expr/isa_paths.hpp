#pragma once

// Runs a test body once for each kernel path this test program has: the SIMD arch it was
// compiled for (kernels/simd.hpp), and the scalar path that XLITE_ISA=portable selects
// when that arch needs more than the baseline. The INFO line says which path failed.

#include <xlite/core/cpu_features.hpp>
#include <xlite/kernels/simd.hpp>

#include <catch2/catch.hpp>

#include <vector>

namespace xlite_test {

inline std::vector<xlite::isa> isa_paths() {
  std::vector<xlite::isa> paths{xlite::isa::portable};
  if (xlite::kernels::simd_arch_level > xlite::isa::portable) paths.push_back(xlite::kernels::simd_arch_level);
  return paths;
}

template <class F>
void for_each_isa_path(F &&body) {
  for (const xlite::isa level : isa_paths()) {
    xlite::scoped_max_isa cap(level);
    INFO("kernel path: cap " << level << ", " << (xlite::kernels::simd_path_active() ? "SIMD" : "scalar"));
    body(level);
  }
}

} // namespace xlite_test
