#pragma once

// Tensors made on the device from nothing but a shape: zeros, ones, full, arange. Each is a
// node (a broadcast constant or an iota), so it costs no transfer and fuses into its users.

#include <cstdint>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"

namespace xlite::lazy {

template <scalar S>
tensor full(const shape& s, S value, dtype type = promote_with_scalar(dtype::boolean, scalar_category_v<S>),
            const xlite::device& d = xlite::device()) {
  return detail::make(d, ir::broadcast_to(detail::scalar_node(value, type, d), s));
}

inline tensor zeros(const shape& s, dtype type = dtype::f32, const xlite::device& d = xlite::device()) {
  return full(s, 0, type, d);
}
inline tensor ones(const shape& s, dtype type = dtype::f32, const xlite::device& d = xlite::device()) {
  return full(s, 1, type, d);
}

// start, start + step, ... below stop (torch.arange), as int64 or, with a floating-point
// argument, float32.
template <scalar S>
tensor arange(S start, S stop, S step = S(1), const xlite::device& d = xlite::device()) {
  if (step == S(0) || !std::isfinite(static_cast<double>(step))) {
    throw value_error(xlite::detail::message("arange: step must be finite and non-zero, got ", step));
  }
  const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
  const auto n = static_cast<std::int64_t>(std::max(count, 0.0));
  const dtype type = promote_with_scalar(dtype::boolean, scalar_category_v<S>) == dtype::boolean
                         ? default_integral_dtype
                         : promote_with_scalar(dtype::boolean, scalar_category_v<S>);
  const tensor index = detail::make(d, ir::iota(type, shape{n}, 0));
  return index * step + start;
}

} // namespace xlite::lazy
