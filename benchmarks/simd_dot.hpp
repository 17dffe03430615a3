#pragma once

// sum(x[i] * y[i]) over [begin, end), hand-written over xsimd::batch<float> of xsimd's
// default arch (the widest the including file is compiled for): aligned loads, four
// accumulators so that the loads rather than the additions' latency bound it, a scalar loop
// for the last few. The xsimd peer's sum_xy and the read-bandwidth limit, sum_xy/limit, both
// run this loop.

#include <xsimd/xsimd.hpp>

#include <cstdint>

namespace xlite::bench {

inline float simd_dot(const float* x, const float* y, std::int64_t begin, std::int64_t end) {
  using batch = xsimd::batch<float>;
  constexpr std::int64_t lanes = batch::size;
  batch acc0(0.0f), acc1(0.0f), acc2(0.0f), acc3(0.0f);
  std::int64_t i = begin;
  for (; i + 4 * lanes <= end; i += 4 * lanes) {
    acc0 += batch::load_aligned(x + i) * batch::load_aligned(y + i);
    acc1 += batch::load_aligned(x + i + lanes) * batch::load_aligned(y + i + lanes);
    acc2 += batch::load_aligned(x + i + 2 * lanes) * batch::load_aligned(y + i + 2 * lanes);
    acc3 += batch::load_aligned(x + i + 3 * lanes) * batch::load_aligned(y + i + 3 * lanes);
  }
  for (; i + lanes <= end; i += lanes) acc0 += batch::load_aligned(x + i) * batch::load_aligned(y + i);
  float sum = xsimd::hadd((acc0 + acc1) + (acc2 + acc3));
  for (; i < end; ++i) sum += x[i] * y[i];
  return sum;
}

} // namespace xlite::bench
