#pragma once

// The "triad" case: STREAM's a[i] = b[i] + s * c[i] over n floats, the standard measure of
// memory bandwidth. At n = 2^16 the three arrays (768 KiB) stay in cache (a core's L2 on
// current server CPUs); at 2^26 (768 MiB) they stream from DRAM.

#include <cstdint>
#include <vector>

#include "bench_common.hpp"

namespace xlite::bench {

inline const std::vector<std::int64_t> triad_sizes = {std::int64_t{1} << 16, std::int64_t{1} << 26};

// STREAM's count: b and c read, a written, 4 bytes each (the write-allocate read of a is
// traffic too, but STREAM leaves it out and so do we, so our numbers read like STREAM's).
constexpr std::int64_t triad_bytes(std::int64_t n) { return 3 * static_cast<std::int64_t>(sizeof(float)) * n; }

struct triad_operands {
  static constexpr float s = 3.0f; // STREAM's scalar

  explicit triad_operands(std::int64_t n) : a(n), b(deterministic_floats(n, 1)), c(deterministic_floats(n, 2)) {}

  std::int64_t size() const noexcept { return a.size(); }

  // The triad in plain C++ over [begin, end); built with -O3 -march=native, it vectorises.
  void run(std::int64_t begin, std::int64_t end) noexcept {
    float* __restrict out = a.data();
    const float* __restrict x = b.data();
    const float* __restrict y = c.data();
    for (std::int64_t i = begin; i < end; ++i) out[i] = x[i] + s * y[i];
  }

  aligned_floats a;
  aligned_floats b;
  aligned_floats c;
};

} // namespace xlite::bench
