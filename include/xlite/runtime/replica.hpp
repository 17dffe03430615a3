#pragma once

// Replica mode, as torch_xla's multiprocessing: xlite::spawn(fn, n) runs fn(k) on n threads,
// thread k as the replica of device cpu:k, whose default device it is. Each replica traces
// its own steps (mark_step in a replica cuts only its device's trace) and exchanges values
// with the others through the collectives (lazy/collectives.hpp), which its device runs.
// The ordinals below are the seed's runtime API, answered for the calling thread.
//
// Across processes (runtime/processes.hpp) every process spawns one replica per device,
// and replica k of process p is global replica p * L + k, on global device p * L + k.
// Outside a spawn, each process is one replica, on its cpu:0.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/runtime/collectives.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/processes.hpp"
#include "xlite/runtime/worker.hpp"

namespace xlite::runtime {

// A replica of xlite::spawn threw; the replica's own exception is nested in it.
class replica_error : public error {
public:
  using error::error;
};

namespace detail {
inline std::atomic<std::int64_t>& replica_count() {
  static std::atomic<std::int64_t> count{0}; // 0: no spawn running
  return count;
}
} // namespace detail

// How many replicas each process runs: the spawn's count, or 1 outside a spawn.
inline std::int64_t replicas_per_process() { return std::max<std::int64_t>(detail::replica_count().load(), 1); }
// This replica's ordinal among the replicas of this process (0 outside spawn).
inline std::int64_t local_ordinal() { return std::max<std::int64_t>(detail::replica_ordinal(), 0); }
// Its ordinal among all replicas of all processes, as xr.global_ordinal().
inline std::int64_t global_ordinal() { return process_index() * replicas_per_process() + local_ordinal(); }
// How many replicas take part, as xr.world_size().
inline std::int64_t world_size() { return replicas_per_process() * process_count(); }
inline bool is_master_ordinal() { return global_ordinal() == 0; }

} // namespace xlite::runtime

namespace xlite {

namespace detail {

// Joins the replicas however spawn leaves, and frees the replica count for the next spawn.
struct replica_threads {
  std::vector<std::thread> threads;
  ~replica_threads() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    runtime::detail::replica_count().store(0);
  }
};

// "replica 3", and in a run of several processes "replica 3 (process 1)": k is the local
// ordinal among `per_process` replicas.
inline std::string replica_name(std::int64_t k, std::int64_t per_process) {
  const std::int64_t global = runtime::process_index() * per_process + k;
  if (runtime::process_count() == 1) return xlite::detail::message("replica ", global);
  return xlite::detail::message("replica ", global, " (process ", runtime::process_index(), ")");
}

} // namespace detail

// Runs fn(k) for k in [0, n) on n threads, replica k on device cpu:k; n = 0 means one per
// device. The replicas share fn (call it with care for its state, as for any threads).
// Returns when every replica has returned and the devices are idle. When a replica throws,
// the collectives of the others fail at once instead of waiting for it, and spawn throws a
// runtime::replica_error naming the first replica that failed, with its exception nested.
// A collective that failed in a step no replica read is reported the same way.
template <class F>
void spawn(F&& fn, std::int64_t n = 0) {
  const std::int64_t devices = device_count();
  if (n == 0) n = devices;
  if (n < 1 || n > devices) {
    throw value_error(xlite::detail::message("spawn: ", n, " replicas need as many devices; there are ", devices,
                                             " (XLITE_NUM_DEVICES sets how many)"));
  }
  if (n != devices && runtime::process_count() > 1) {
    throw value_error(xlite::detail::message("spawn: across ", runtime::process_count(),
                                             " processes each runs one replica per device, ", devices, ", not ", n,
                                             " (pass 0, or set XLITE_NUM_DEVICES)"));
  }
  std::int64_t none = 0;
  if (runtime::detail::replica_ordinal() >= 0 || !runtime::detail::replica_count().compare_exchange_strong(none, n)) {
    throw value_error("spawn: replicas are running already; one spawn at a time, and spawn does not nest");
  }
  std::mutex mutex;
  std::optional<std::int64_t> first_failed;
  std::exception_ptr first_error;
  {
    detail::replica_threads replicas; // frees the count when spawn leaves
    wait_device_ops();                // steps launched before the spawn finish their collectives first
    runtime::collectives().reset();
    for (std::int64_t k = 0; k < n; ++k) {
      replicas.threads.emplace_back([&, k] {
        runtime::detail::replica_ordinal() = k;
        try {
          fn(k);
        } catch (...) {
          const std::string what = xlite::detail::current_exception_message();
          {
            std::scoped_lock lock(mutex);
            if (!first_failed) {
              first_failed = k;
              first_error = std::current_exception();
            }
          }
          runtime::collectives().abort(xlite::detail::message(detail::replica_name(k, n), " failed: ", what));
        }
      });
    }
    for (auto& r : replicas.threads) r.join();
    wait_device_ops(); // no step of these replicas runs after spawn returns
    if (!first_error) {
      if (const auto failure = runtime::collectives().failure()) {
        first_error = std::make_exception_ptr(runtime::collective_error(*failure));
      }
    }
    runtime::collectives().reset();
  }
  if (first_error) {
    const std::string who = first_failed ? xlite::detail::message(detail::replica_name(*first_failed, n), " of ",
                                                                  n * runtime::process_count(), " failed")
                                         : std::string("a collective failed in a step no replica read");
    try {
      std::rethrow_exception(first_error);
    } catch (...) {
      std::throw_with_nested(runtime::replica_error(
          xlite::detail::message("spawn: ", who, ": ", xlite::detail::current_exception_message())));
    }
  }
}

} // namespace xlite
