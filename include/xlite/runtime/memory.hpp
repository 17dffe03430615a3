#pragma once

// What each device's buffers take: the bytes in use now and the most in use since the last
// reset_peak_memory, as torch_xla's xm.get_memory_info(device) reports bytes_used and
// peak_bytes_used. This is how FSDP shows that each device holds its share of the model.
//
// A buffer counts against the device that owns the memory of the thread making it: a
// device's worker owns its device's memory, and a transfer to a device names it
// (allocating_on). Buffers made elsewhere (the host's copies of results) count nowhere.

#include <atomic>
#include <cstdint>
#include <utility>

#include "xlite/runtime/device.hpp"

namespace xlite::runtime {

struct memory_usage {
  std::int64_t bytes_used = 0;
  std::int64_t peak_bytes_used = 0;
};

namespace detail {

inline constexpr std::int64_t max_devices = 4096; // as set_num_devices allows

struct device_memory {
  std::atomic<std::int64_t> used{0};
  std::atomic<std::int64_t> peak{0};
};

// Never destroyed: buffers held by statics are freed after every other static is gone.
inline device_memory& memory_of(std::int64_t ordinal) {
  static auto* const all = new device_memory[max_devices];
  return all[ordinal];
}

// The device whose memory this thread's buffers take, or -1 for none.
inline std::int64_t& memory_owner() noexcept {
  thread_local std::int64_t ordinal = -1;
  return ordinal;
}

inline void raise_peak(device_memory& m, std::int64_t used) noexcept {
  for (std::int64_t peak = m.peak.load(std::memory_order_relaxed);
       used > peak && !m.peak.compare_exchange_weak(peak, used, std::memory_order_relaxed);) {
  }
}

inline void count_allocation(std::int64_t ordinal, std::int64_t bytes) noexcept {
  device_memory& m = memory_of(ordinal);
  raise_peak(m, m.used.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

inline void count_release(std::int64_t ordinal, std::int64_t bytes) noexcept {
  memory_of(ordinal).used.fetch_sub(bytes, std::memory_order_relaxed);
}

} // namespace detail

// While it lives, the buffers this thread makes take `d`'s memory, or, made by nowhere(),
// no device's (scratch that belongs to no one device).
class allocating_on {
public:
  explicit allocating_on(const xlite::device& d) noexcept : allocating_on(d.ordinal()) {}
  static allocating_on nowhere() noexcept { return allocating_on(-1); }
  ~allocating_on() { detail::memory_owner() = saved_; }
  allocating_on(const allocating_on&) = delete;
  allocating_on& operator=(const allocating_on&) = delete;

private:
  explicit allocating_on(std::int64_t ordinal) noexcept : saved_(std::exchange(detail::memory_owner(), ordinal)) {}
  std::int64_t saved_;
};

inline memory_usage memory_info(const xlite::device& d) {
  const detail::device_memory& m = detail::memory_of(d.ordinal());
  return {m.used.load(std::memory_order_relaxed), m.peak.load(std::memory_order_relaxed)};
}

// Starts a new peak from what `d` uses now.
inline void reset_peak_memory(const xlite::device& d) {
  detail::device_memory& m = detail::memory_of(d.ordinal());
  m.peak.store(m.used.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // An allocation between the two loads raised `used` past the stored peak.
  detail::raise_peak(m, m.used.load(std::memory_order_relaxed));
}

} // namespace xlite::runtime
