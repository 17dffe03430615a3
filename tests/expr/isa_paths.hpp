#pragma once

// Runs a test body once for every SIMD path this test program has compiled in, with
// set_max_isa selecting it, and says which path failed.

#include <xlite/core/cpu_features.hpp>
#include <xlite/kernels/simd.hpp>

#include <catch2/catch.hpp>

#include <vector>

namespace xlite_test {

// The distinct paths: one per ISA level that selects a different compiled arch and that
// this CPU can run.
inline std::vector<xlite::isa> isa_paths() {
  std::vector<xlite::isa> paths;
  for (const xlite::isa level : {xlite::isa::portable, xlite::isa::avx2, xlite::isa::avx512}) {
    if (level > xlite::detected_isa()) continue;
    if (xlite::kernels::arch_level_for(level) == level) paths.push_back(level);
  }
  return paths;
}

template <class F>
void for_each_isa_path(F&& body) {
  for (const xlite::isa level : isa_paths()) {
    xlite::scoped_max_isa cap(level);
    INFO("ISA path: " << level);
    body(level);
  }
}

} // namespace xlite_test
