#pragma once

// Runs a matmul instruction: op(a) (..., m, k) x op(b) (..., k, n) with broadcast batch
// dimensions, op a transpose of the operand's last two axes where the instruction says.
// float and bfloat16 go to the GEMM kernels (kernels/gemm.hpp: AVX-512 / AMX / AVX512_BF16
// / portable, fp32 accumulation; bf16 results rounded once, or float32 results from bf16
// operands under mixed precision); the other dtypes to a plain
// loop that accumulates each product in k order in the compute dtype. An epilogue runs on
// each part of the result as it is finished. On a tpu device the float16, bfloat16 and
// float32 products go to its matrix unit instead (runtime/matrix_unit.hpp).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <vector>

#include "xlite/core/dtype_dispatch.hpp"
#include "xlite/kernels/gemm.hpp"
#include "xlite/runtime/buffer.hpp"
#include "xlite/runtime/elementwise.hpp"
#include "xlite/runtime/matrix_unit.hpp"

namespace xlite::runtime {

namespace detail {

// The offsets, in matrices, of the a and b operands of each of out's batch of products.
struct batch_offsets {
  std::vector<std::int64_t> a, b;
};

inline batch_offsets matmul_batches(const shape& a, const shape& b, const shape& out) {
  const std::size_t batch_rank = out.rank() - 2;
  std::int64_t count = 1;
  for (std::size_t i = 0; i < batch_rank; ++i) count *= out[i];
  batch_offsets offsets;
  for (std::int64_t flat = 0; flat < count; ++flat) {
    std::int64_t rest = flat, oa = 0, ob = 0, sa = 1, sb = 1;
    for (std::size_t i = 0; i < batch_rank; ++i) { // from the innermost batch axis out
      const std::int64_t position = rest % out[batch_rank - 1 - i];
      rest /= out[batch_rank - 1 - i];
      if (i < a.rank() - 2) {
        const std::int64_t dim = a[a.rank() - 3 - i];
        oa += (dim == 1 ? 0 : position) * sa;
        sa *= dim;
      }
      if (i < b.rank() - 2) {
        const std::int64_t dim = b[b.rank() - 3 - i];
        ob += (dim == 1 ? 0 : position) * sb;
        sb *= dim;
      }
    }
    offsets.a.push_back(oa);
    offsets.b.push_back(ob);
  }
  return offsets;
}

// The step, in matrices, between the operands of consecutive products when it is the same
// for the whole batch (0: one matrix broadcast to every product); nullopt otherwise.
inline std::optional<std::int64_t> uniform_stride(const std::vector<std::int64_t>& offsets) {
  const std::int64_t step = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (std::size_t p = 0; p < offsets.size(); ++p) {
    if (offsets[p] != offsets[0] + static_cast<std::int64_t>(p) * step) return std::nullopt;
  }
  return step;
}

// visit_dtype for the matrix unit's dtypes: f is instantiated for those three only.
template <class F>
void visit_matrix_unit_dtype(dtype t, F&& f) {
  visit_dtype(t, [&](auto tag) {
    if constexpr (is_matrix_unit_dtype(dtype_of_v<typename decltype(tag)::type>)) {
      f(tag);
    } else {
      throw value_error(xlite::detail::message("matmul: the matrix unit does not multiply ", name(t)));
    }
  });
}

// op(x) of one product as a row-major float matrix of `rows` x `cols`, the matrix unit's
// operand: x itself when it is one, else a copy in `scratch`. Widening float16 and
// bfloat16 is exact.
template <class T>
const float* row_major_operand(const T* x, std::int64_t rows, std::int64_t cols, bool transposed,
                               std::vector<float>& scratch) {
  if constexpr (std::is_same_v<T, float>) {
    if (!transposed) return x;
  }
  scratch.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      scratch[static_cast<std::size_t>(i * cols + j)] =
          static_cast<float>(transposed ? x[j * rows + i] : x[i * cols + j]);
    }
  }
  return scratch.data();
}

} // namespace detail

// Called with each finished run of out's elements, [begin, begin + count) in row-major
// order, once per element: a matmul's epilogue (passes/fusion.hpp).
using finished_elements = std::function<void(std::int64_t begin, std::int64_t count)>;

// The operands' transposes, as the matmul instruction's flags give them.
struct matmul_transposes {
  bool a = false, b = false;
};

namespace detail {

// Each product of the batch on the matrix unit, its float result converted to out's dtype;
// the epilogue sees each product when it is done.
inline void run_matmul_on_unit(const matrix_unit& unit, const buffer& a, const buffer& b, buffer& out,
                               matmul_transposes transposed, const finished_elements& finished) {
  const shape &sa = a.shape(), &so = out.shape();
  const std::int64_t m = so[so.rank() - 2], n = so[so.rank() - 1], k = sa[sa.rank() - (transposed.a ? 2 : 1)];
  const batch_offsets batches = matmul_batches(sa, b.shape(), so);
  std::vector<float> scratch_a, scratch_b, product;
  const auto run = [&]<class In, class Out>(const In* a_data, const In* b_data, Out* out_data) {
    for (std::size_t p = 0; p < batches.a.size(); ++p) {
      const float* pa = row_major_operand(a_data + batches.a[p] * m * k, m, k, transposed.a, scratch_a);
      const float* pb = row_major_operand(b_data + batches.b[p] * k * n, k, n, transposed.b, scratch_b);
      const std::int64_t offset = static_cast<std::int64_t>(p) * m * n;
      if constexpr (std::is_same_v<Out, float>) {
        unit.product(pa, pb, out_data + offset, m, k, n);
      } else {
        product.resize(static_cast<std::size_t>(m * n));
        unit.product(pa, pb, product.data(), m, k, n);
        std::transform(product.begin(), product.end(), out_data + offset, [](float x) { return static_cast<Out>(x); });
      }
      if (finished) finished(offset, m * n);
    }
  };
  visit_matrix_unit_dtype(a.type(), [&]<class In>(std::type_identity<In>) {
    visit_matrix_unit_dtype(out.type(),
                            [&]<class Out>(std::type_identity<Out>) { run(a.as<In>(), b.as<In>(), out.as<Out>()); });
  });
}

} // namespace detail

// `unit`: the matrix unit of the device the matmul runs on, or none for the CPU's kernels.
inline void run_matmul(const buffer& a, const buffer& b, buffer& out, matmul_transposes transposed = {},
                       const finished_elements& finished = {}, const matrix_unit* unit = nullptr) {
  if (unit && is_matrix_unit_dtype(a.type()) && is_matrix_unit_dtype(out.type())) {
    detail::run_matmul_on_unit(*unit, a, b, out, transposed, finished);
    return;
  }
  const shape &sa = a.shape(), &so = out.shape();
  const std::int64_t m = so[so.rank() - 2], n = so[so.rank() - 1], k = sa[sa.rank() - (transposed.a ? 2 : 1)];
  // Distances between rows as stored: a is k x m when transposed, b n x k.
  const std::int64_t lda = transposed.a ? m : k, ldb = transposed.b ? k : n;
  const detail::batch_offsets batches = detail::matmul_batches(sa, b.shape(), so);
  // The GEMM reports finished rectangles of product `first + batch`; the epilogue wants runs of out.
  struct region_context {
    const finished_elements* finished;
    std::int64_t first, m, n;
  };
  const auto report_rows = [](void* context, std::int64_t batch, std::int64_t row, std::int64_t col,
                              std::int64_t rows, std::int64_t cols) {
    const auto& c = *static_cast<const region_context*>(context);
    const std::int64_t product_offset = (c.first + batch) * c.m * c.n;
    for (std::int64_t r = row; r < row + rows; ++r) (*c.finished)(product_offset + r * c.n + col, cols);
  };
  // Mixed precision (amp/): bf16 operands, float32 result, on the bf16 GEMM.
  const bool mixed = a.type() == dtype::bf16 && out.type() == dtype::f32;
  const auto products = [&]<class In, class Out>(const In* a_data, const In* b_data, Out* out_data) {
    if constexpr (std::is_same_v<In, float> || std::is_same_v<In, bfloat16>) {
      // One GEMM call for the whole batch where each operand steps by a fixed number of
      // matrices (0 when it broadcasts): the GEMM then runs small products side by side on
      // the threads, instead of splitting each tiny product over them.
      const auto stride_a = detail::uniform_stride(batches.a), stride_b = detail::uniform_stride(batches.b);
      const bool one_call = stride_a && stride_b;
      const std::int64_t calls = one_call ? 1 : static_cast<std::int64_t>(batches.a.size());
      for (std::int64_t p = 0; p < calls; ++p) {
        kernels::gemm_args<In, Out> args;
        args.m = m;
        args.n = n;
        args.k = k;
        args.a = a_data + batches.a[static_cast<std::size_t>(p)] * m * k;
        args.lda = lda;
        args.trans_a = transposed.a ? kernels::transpose::yes : kernels::transpose::no;
        args.b = b_data + batches.b[static_cast<std::size_t>(p)] * k * n;
        args.ldb = ldb;
        args.trans_b = transposed.b ? kernels::transpose::yes : kernels::transpose::no;
        args.c = out_data + p * m * n;
        args.ldc = n;
        if (one_call) {
          args.batch = static_cast<std::int64_t>(batches.a.size());
          args.stride_a = *stride_a * m * k;
          args.stride_b = *stride_b * k * n;
          args.stride_c = m * n;
        }
        region_context context{&finished, p, m, n};
        kernels::gemm_epilogue epilogue;
        if (finished) epilogue = {report_rows, &context};
        kernels::gemm(args, epilogue);
      }
    } else if constexpr (!std::is_same_v<In, bool>) {
      using C = detail::compute_t<In>;
      for (std::size_t p = 0; p < batches.a.size(); ++p) {
        const In* pa = a_data + batches.a[p] * m * k;
        const In* pb = b_data + batches.b[p] * k * n;
        Out* pc = out_data + static_cast<std::int64_t>(p) * m * n;
        region_context context{&finished, static_cast<std::int64_t>(p), m, n};
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < n; ++j) {
            C acc = 0;
            for (std::int64_t q = 0; q < k; ++q) {
              const In x = transposed.a ? pa[q * lda + i] : pa[i * lda + q];
              const In y = transposed.b ? pb[j * ldb + q] : pb[q * ldb + j];
              if constexpr (std::is_integral_v<C>) {
                // Signed integers wrap modulo 2^N, as PyTorch's do, where C++ leaves overflow undefined.
                using kernels::detail::wrapping;
                acc = wrapping(acc, wrapping(static_cast<C>(x), static_cast<C>(y), kernels::detail::times),
                               kernels::detail::plus);
              } else {
                acc += static_cast<C>(x) * static_cast<C>(y);
              }
            }
            pc[i * n + j] = static_cast<Out>(acc);
          }
          if (finished) report_rows(&context, 0, i, 0, 1, n);
        }
      }
    }
  };
  if (mixed) {
    products(a.as<bfloat16>(), b.as<bfloat16>(), out.as<float>());
    return;
  }
  visit_dtype(out.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    products(a.as<T>(), b.as<T>(), out.as<T>());
  });
}

} // namespace xlite::runtime
