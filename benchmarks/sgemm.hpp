#pragma once

// The "sgemm" case: C = A B for square, row-major n x n fp32 matrices, the standard
// compute-bound kernel. It has no limit row of its own: its limit is the FMA peak,
// "peak_fma/limit" at the same thread count.

#include <cstdint>
#include <vector>

#include "bench_common.hpp"

namespace xlite::bench {

inline const std::vector<std::int64_t> sgemm_sizes = {1024};

// One multiply and one add per term of every dot product.
constexpr std::int64_t sgemm_flops(std::int64_t n) { return 2 * n * n * n; }

struct sgemm_operands {
  explicit sgemm_operands(std::int64_t n_)
      : n(n_), a(deterministic_floats(n * n, 3)), b(deterministic_floats(n * n, 4)), c(n * n) {}

  std::int64_t n;
  aligned_floats a;
  aligned_floats b;
  aligned_floats c;
};

} // namespace xlite::bench
