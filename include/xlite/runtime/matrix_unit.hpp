#pragma once

// The matrix unit of the tpu devices: the products of their matmuls, with its numerics, and
// the price of each step they run. tpu::configure installs one (tpu/device.hpp); the
// runtime knows it only through this interface, so it does not depend on the tpu layer.

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/runtime/device.hpp"

namespace xlite::compile {
struct executable;
} // namespace xlite::compile

namespace xlite::runtime {

// What a matrix unit multiplies: float16, bfloat16 and float32 operands and results (it
// rounds operands to its input type). Other matmuls run on the host's kernels.
constexpr bool is_matrix_unit_dtype(dtype t) { return t == dtype::f16 || t == dtype::bf16 || t == dtype::f32; }

class matrix_unit {
public:
  virtual ~matrix_unit() = default;
  // c (m x n) = a (m x k) b (k x n), all row-major and contiguous, with the unit's
  // numerics: its input rounding, its accumulation type and order.
  virtual void product(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k,
                       std::int64_t n) const = 0;
  // Prices the step `exe` just ran on device `on` and reports it.
  virtual void account_step(const compile::executable& exe, const xlite::device& on) const = 0;
};

namespace detail {
struct installed_unit {
  std::mutex mutex;
  std::shared_ptr<const matrix_unit> unit;
};
inline installed_unit& matrix_unit_slot() {
  static installed_unit slot;
  return slot;
}
} // namespace detail

// Makes `unit` the matrix unit of every tpu device, for the steps launched from now on.
inline void install_matrix_unit(std::shared_ptr<const matrix_unit> unit) {
  if (!unit) throw value_error("install_matrix_unit: no unit");
  {
    auto& slot = detail::matrix_unit_slot();
    std::scoped_lock lock(slot.mutex);
    slot.unit = std::move(unit);
  }
  detail::tpu_configured().store(true, std::memory_order_release);
}

// The matrix unit of device `d`: none for a cpu device. A step holds it while it runs, so a
// new tpu::configure does not pull it from under the step.
inline std::shared_ptr<const matrix_unit> matrix_unit_of(const xlite::device& d) {
  if (d.kind() != device_kind::tpu) return nullptr;
  auto& slot = detail::matrix_unit_slot();
  std::scoped_lock lock(slot.mutex);
  return slot.unit;
}

} // namespace xlite::runtime
