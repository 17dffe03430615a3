#pragma once

// Devices. xlite runs on virtual CPU devices, "cpu:0" to "cpu:N-1", where N is
// XLITE_NUM_DEVICES (default 1) or what runtime::set_num_devices() said before the device
// count was first read. Each device has its own buffers and its own worker thread (runtime/worker.hpp);
// SPMD runs a partitioned program on all of them.
//
// Once tpu::configure has given the process a modelled TPU core (tpu/device.hpp), "tpu:k"
// is device k with that core: its graphs run their matmuls on the systolic array's numerics
// and each step is priced on the model. It is the same host slot as "cpu:k" (one worker,
// one memory count, one random stream, one profile track), but a different device: tensors
// on tpu:k and cpu:k do not mix, and a barrier compiles and runs each device's graph apart.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"

namespace xlite {

namespace runtime::detail {
// The device of this thread when xlite::spawn runs it as a replica; -1 on other threads.
inline std::int64_t& replica_ordinal() noexcept {
  thread_local std::int64_t ordinal = -1;
  return ordinal;
}

// Whether tpu::configure has given this process a TPU core, so that "tpu:k" exists.
inline std::atomic<bool>& tpu_configured() noexcept {
  static std::atomic<bool> configured{false};
  return configured;
}
} // namespace runtime::detail

enum class device_kind : std::uint8_t { cpu, tpu };

class device {
public:
  // "cpu:0" or "tpu:0", or "cpu" / "tpu" for the first one.
  explicit device(std::string_view name);
  // The default device: the replica's own in a thread xlite::spawn runs, else cpu:0 (as
  // torch_xla's xla_device() in each process of xmp.spawn).
  device() : ordinal_(std::max<std::int64_t>(runtime::detail::replica_ordinal(), 0)) {}

  device_kind kind() const noexcept { return kind_; }
  std::string_view type() const noexcept { return kind_ == device_kind::cpu ? "cpu" : "tpu"; }
  // The host slot: its worker, memory count and random stream (a tpu:k shares cpu:k's).
  std::int64_t ordinal() const noexcept { return ordinal_; }
  std::string to_string() const { return std::string(type()) + ":" + std::to_string(ordinal_); }

  friend bool operator==(const device&, const device&) = default;
  friend std::ostream& operator<<(std::ostream& out, const device& d) { return out << d.to_string(); }

private:
  device_kind kind_ = device_kind::cpu;
  std::int64_t ordinal_;
};

namespace runtime {

namespace detail {
// The device count, and whether it has been read: buffers, workers and meshes are sized by
// it, so it can no longer change.
struct device_count_setting {
  std::mutex mutex; // orders set_num_devices against the first read
  std::atomic<std::int64_t> count{env_integer("XLITE_NUM_DEVICES", 1, 4096).value_or(1)};
  std::atomic<bool> fixed{false};
};
inline device_count_setting& configured_devices() {
  static device_count_setting setting;
  return setting;
}
} // namespace detail

// The kind of device this process computes on, as torch_xla.runtime.device_type().
inline std::string device_type() { return "CPU"; }

// XLITE_NUM_DEVICES's C++ twin: how many cpu devices this process has. Call it before
// anything asks for the device count; afterwards it is a config_error.
inline void set_num_devices(std::int64_t count) {
  detail::device_count_setting& setting = detail::configured_devices();
  if (count < 1 || count > 4096) {
    throw config_error(xlite::detail::message("set_num_devices: ", count, " is not a device count from 1 to 4096"));
  }
  if (setting.fixed.load()) {
    throw config_error(xlite::detail::message("set_num_devices: the device count is already fixed at ", setting.count,
                                              "; call it before the first use of a device"));
  }
  setting.count = count;
}

} // namespace runtime

inline std::int64_t device_count() {
  runtime::detail::device_count_setting& setting = runtime::detail::configured_devices();
  if (!setting.fixed.load(std::memory_order_acquire)) { // the first read fixes it
    std::scoped_lock lock(setting.mutex);
    setting.fixed.store(true, std::memory_order_release);
  }
  return setting.count.load(std::memory_order_relaxed);
}

namespace runtime {
namespace detail {
inline std::atomic<bool>& spmd_flag() {
  static std::atomic<bool> on{env_integer("XLITE_USE_SPMD", 0, 1).value_or(0) == 1};
  return on;
}
} // namespace detail

// SPMD mode, as torch_xla.runtime.use_spmd() (or XLITE_USE_SPMD=1): lazy tensors live on
// one virtual device, cpu:0, whose values are spread over all devices as their shardings
// say (spmd::mark_sharding), and each barrier partitions its graph into one program that
// every device runs. Call it before making tensors; it stays on.
inline void use_spmd() { detail::spmd_flag().store(true, std::memory_order_relaxed); }
inline bool is_spmd() { return detail::spmd_flag().load(std::memory_order_relaxed); }
} // namespace runtime

inline std::vector<device> devices() {
  std::vector<device> all;
  for (std::int64_t i = 0; i < device_count(); ++i) all.emplace_back("cpu:" + std::to_string(i));
  return all;
}

inline device::device(std::string_view name) : ordinal_(0) {
  std::string_view rest = name;
  if (rest.starts_with("tpu")) {
    if (!runtime::detail::tpu_configured().load(std::memory_order_acquire)) {
      throw config_error(xlite::detail::message("device: \"", name, "\" needs a TPU core; call ",
                                                "xlite::tpu::configure<Array>(memory, vector_unit) first"));
    }
    kind_ = device_kind::tpu;
  } else if (!rest.starts_with("cpu")) {
    throw value_error(xlite::detail::message("device: unknown device \"", name, "\"; there are cpu devices, ",
                                             "\"cpu:0\" to \"cpu:", device_count() - 1,
                                             "\", and tpu devices of the same numbers once tpu::configure ran"));
  }
  rest.remove_prefix(3);
  if (!rest.empty()) {
    const char* end = rest.data() + rest.size();
    const auto [ptr, ec] = std::from_chars(rest.data() + 1, end, ordinal_);
    if (rest[0] != ':' || rest.size() == 1 || ec != std::errc() || ptr != end) {
      throw value_error(xlite::detail::message("device: \"", name, "\" is not a device name like \"cpu:0\""));
    }
  }
  if (ordinal_ < 0 || ordinal_ >= device_count()) {
    throw value_error(xlite::detail::message("device: \"", name, "\" does not exist; there are ", device_count(), " ",
                                             type(), " devices (XLITE_NUM_DEVICES sets how many)"));
  }
}

} // namespace xlite
