#pragma once

// The processes a program runs in, and how their devices are numbered. One process has
// them all until a transport between processes is installed (runtime/mpi.hpp installs one
// over MPI). Then every process has the same number of local devices, cpu:0 to cpu:L-1,
// and process p's cpu:k is global device p * L + k: the devices a mesh is laid over, a
// replica group names, and the collectives meet by.
//
// The runtime sees the transport only through process_group, so that nothing but the
// header that implements it includes <mpi.h>.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/runtime/device.hpp"

namespace xlite::runtime {

// What one process brings to an exchange: a small header (descriptions, shapes) and the
// bodies it announces, sent as they lie in memory. `keep_alive` owns the bodies' memory:
// a failed exchange may still be sending them when it returns.
struct parcel {
  std::string header;
  std::vector<std::span<const std::byte>> bodies;
  std::shared_ptr<const void> keep_alive;
};

// Where a peer's bodies go, given its header: called once per peer, on the exchanging
// thread; the spans must stay valid until the exchange returns.
using body_places = std::function<std::vector<std::span<std::byte>>(std::int64_t peer, const std::string& header)>;

// The processes of a program and the exchanges between them.
class process_group {
public:
  virtual ~process_group() = default;

  virtual std::int64_t rank() const noexcept = 0;
  virtual std::int64_t size() const noexcept = 0;

  // Sends `mine` to every other process of `peers` (sorted ranks, this one among them) and
  // receives theirs, whose bodies go where `places` says. `key` names the exchange: every
  // peer passes the same key for the same exchange, and exchanges with different keys may
  // run at once on different threads. Throws collective_error when `deadline` passes (naming
  // the processes that did not send), when the peers' keys differ, or when a process has
  // failed (abort, here or elsewhere): after that every exchange fails.
  virtual void exchange(std::span<const std::int64_t> peers, std::string_view key, const parcel& mine,
                        const body_places& places, std::chrono::steady_clock::time_point deadline) = 0;

  // Tells every process that this one failed, `why`: their exchanges in progress and later
  // ones fail with it.
  virtual void abort(const std::string& why) noexcept = 0;

  // The first failure this process knows of, its own or another's.
  virtual std::optional<std::string> failure() = 0;
};

namespace detail {
inline std::atomic<std::shared_ptr<process_group>>& installed_process_group() {
  static std::atomic<std::shared_ptr<process_group>> group;
  return group;
}
} // namespace detail

// The transport between processes, or null when this process is the only one.
inline std::shared_ptr<process_group> processes() { return detail::installed_process_group().load(); }

// Makes `group` the processes' transport (null: this process alone again). The transport's
// installer (mpi::run) calls it on every process before the program uses devices, and with
// null once the program is done.
inline void install_process_group(std::shared_ptr<process_group> group) {
  detail::installed_process_group().store(std::move(group));
}

// This process's place among the processes, as torch_xla.runtime.process_index().
inline std::int64_t process_index() {
  const auto group = processes();
  return group ? group->rank() : 0;
}
inline std::int64_t process_count() {
  const auto group = processes();
  return group ? group->size() : 1;
}

// The devices of all processes, as torch_xla.runtime.global_runtime_device_count(): a mesh
// is laid over them.
inline std::int64_t global_runtime_device_count() { return device_count() * process_count(); }
// This process's devices, as torch_xla.runtime.addressable_runtime_device_count().
inline std::int64_t addressable_runtime_device_count() { return device_count(); }

// The global number of this process's device d.
inline std::int64_t global_device(const xlite::device& d) { return process_index() * device_count() + d.ordinal(); }
// The process that has global device `global`.
inline std::int64_t process_of(std::int64_t global) { return global / device_count(); }

} // namespace xlite::runtime
