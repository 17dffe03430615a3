#pragma once

// The product a systolic array computes, in its order, at the speed of the CPU's kernels.
//
// Each cell multiplies two In operands (rounded from the caller's type) and adds the
// product to an Acc with one rounding (a fused multiply-add; a bf16 x bf16 product is exact
// in fp32, so this is "exact product, one rounding of the sum"). What differs between
// dataflows is which sums a cell chain forms:
//
//   output_stationary   a cell keeps C(i, j) and adds k = 0, 1, ..., K-1 in order;
//   weight_stationary,  a column adds the Rows products of one row fold, k0 .. k0+Rows-1 in
//   input_stationary    order, into a partial sum that enters the array as +0; the first
//                       row fold's partial sums are written to C, later ones added to it.
//
// Both are what kernels::gemm's AVX2 and AVX-512 fp32 paths compute for a block of k with
// beta = 0 (one FMA chain per element, k in order), so the work goes there when the ISA
// has FMA; its portable path rounds products separately, so without FMA the loop below
// runs the chain with std::fma. tpu/cycle_simulation.hpp steps the cells and must match
// this bit for bit (NaN payloads aside: which of two NaNs comes out is not specified).
// Subnormal products and sums are kept; the rounding to bf16 flushes subnormal inputs, as
// xlite::bfloat16 does.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "xlite/core/cpu_features.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/kernels/convert.hpp"
#include "xlite/kernels/gemm.hpp"
#include "xlite/tpu/dataflow.hpp"
#include "xlite/tpu/matrix.hpp"

namespace xlite::tpu::detail {

// The operand as the array holds it: each element rounded to In, widened to Acc. From
// float or bfloat16 into bf16 cells this runs on the vectorised conversions, which give
// xlite::bfloat16's bits (kernels/convert.hpp), in cache-sized chunks over the threads.
template <class In, class Acc, class T>
std::vector<Acc> to_cells(matrix_view<T> v) {
  const std::int64_t count = v.rows * v.cols;
  std::vector<Acc> out(static_cast<std::size_t>(count));
  if constexpr (std::is_same_v<In, bfloat16> && std::is_same_v<Acc, float> &&
                (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>)) {
    constexpr std::int64_t chunk = 8192;
    current_thread_pool().parallel_for(count, chunk, [&](std::int64_t begin, std::int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        std::array<bfloat16, chunk> rounded;
        kernels::convert(v.data + begin, rounded.data(), end - begin);
        kernels::convert(rounded.data(), out.data() + begin, end - begin);
      } else {
        kernels::convert(v.data + begin, out.data() + begin, end - begin);
      }
    });
  } else {
    for (std::int64_t i = 0; i < count; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<Acc>(static_cast<In>(v.data[i]));
  }
  return out;
}

// P = A[:, k0:k1] B[k0:k1, :] from +0, one fused chain per element with k in order. With
// `add_into`, P is then added to it, each region of P while it is still in cache.
template <class Acc>
void fused_chain_product(const Acc* a, const Acc* b, Acc* p, std::int64_t m, std::int64_t k, std::int64_t n,
                         std::int64_t k0, std::int64_t k1, Acc* add_into = nullptr) {
  struct region_sum {
    const Acc* from;
    Acc* into;
    std::int64_t n;
    static void add(void* self, std::int64_t, std::int64_t row, std::int64_t col, std::int64_t rows,
                    std::int64_t cols) {
      const auto& r = *static_cast<const region_sum*>(self);
      for (std::int64_t i = row; i < row + rows; ++i) {
        for (std::int64_t j = col; j < col + cols; ++j) r.into[i * r.n + j] += r.from[i * r.n + j];
      }
    }
  } sum{p, add_into, n};
  if constexpr (std::is_same_v<Acc, float>) {
    if (active_isa() >= isa::avx2) { // the fp32 kernels' paths with FMA
      const kernels::gemm_epilogue epilogue{add_into ? &region_sum::add : nullptr, &sum};
      kernels::gemm<float, float>({.m = m,
                                   .n = n,
                                   .k = k1 - k0,
                                   .a = a + k0,
                                   .lda = k,
                                   .b = b + k0 * n,
                                   .ldb = n,
                                   .c = p,
                                   .ldc = n,
                                   .alpha = 1.0f,
                                   .beta = 0.0f},
                                  epilogue);
      return;
    }
  }
  std::fill(p, p + m * n, Acc(0));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t kk = k0; kk < k1; ++kk) {
      const Acc x = a[i * k + kk];
      for (std::int64_t j = 0; j < n; ++j) p[i * n + j] = std::fma(x, b[kk * n + j], p[i * n + j]);
    }
  }
  if (add_into) region_sum::add(&sum, 0, 0, 0, m, n);
}

template <std::int64_t Rows, dataflow_kind D, class In, class Acc, class TA, class TB>
matrix<Acc> dataflow_product(matrix_view<TA> a, matrix_view<TB> b) {
  const std::int64_t m = a.rows, k = a.cols, n = b.cols;
  const std::vector<Acc> ac = to_cells<In, Acc>(a);
  const std::vector<Acc> bc = to_cells<In, Acc>(b);
  matrix<Acc> c(m, n);
  if (m == 0 || n == 0) return c;
  if constexpr (std::same_as<D, dataflow::output_stationary>) {
    fused_chain_product(ac.data(), bc.data(), c.data(), m, k, n, 0, k);
  } else {
    std::vector<Acc> partial(k > Rows ? static_cast<std::size_t>(m * n) : 0);
    for (std::int64_t k0 = 0; k0 < k; k0 += Rows) {
      const std::int64_t k1 = std::min(k, k0 + Rows);
      if (k0 == 0) {
        fused_chain_product(ac.data(), bc.data(), c.data(), m, k, n, k0, k1);
      } else {
        fused_chain_product(ac.data(), bc.data(), partial.data(), m, k, n, k0, k1, c.data());
      }
    }
  }
  return c;
}

} // namespace xlite::tpu::detail
