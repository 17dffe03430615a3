#pragma once

// Several processes over MPI: xlite::mpi::run(argc, argv, fn) makes the program's processes
// (as mpirun launched them) one run, whose devices are numbered across processes
// (runtime/processes.hpp), and runs fn in each. Collectives and replica groups then reach
// the devices of every process; xlite::spawn runs one replica per local device.
//
//   int main(int argc, char** argv) {
//     return xlite::mpi::run(argc, argv, [] {
//       auto g = ...;                              // this process's gradient
//       g = xlite::all_reduce(xlite::reduce_type::sum, g, 1.0 / xlite::runtime::world_size());
//       xlite::mark_step();
//     });
//   }
//
//   mpirun -np 2 ./program                      (one host)
//   mpirun -np 8 --host a:4,b:4 ./program       (two hosts, four processes each)
//
// A process whose fn throws tells every other: their collectives in progress and later
// fail with its error, naming it, and run returns 1 in every process, each having printed
// why to stderr. A process that never comes to a collective is a timeout
// (XLITE_COLLECTIVE_TIMEOUT), not a hang.
//
// The exchanges are MPI point-to-point messages on a communicator of xlite's own, polled
// with a deadline (blocking MPI calls cannot time out), from whichever device thread brings
// a meeting's last local member: MPI must provide MPI_THREAD_MULTIPLE, as Open MPI does.

#if !defined(XLITE_HAS_MPI)
#error "xlite/runtime/mpi.hpp needs MPI: link xlite::mpi (find_package(xlite COMPONENTS mpi))"
#endif

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/runtime/collectives.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/processes.hpp"
#include "xlite/runtime/rendezvous.hpp"
#include "xlite/runtime/worker.hpp"

namespace xlite::mpi {

// The processes of MPI_COMM_WORLD. Made after MPI_Init_thread, destroyed before MPI_Finalize.
class processes final : public runtime::process_group {
public:
  processes() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN); // a message that does not fit is an error, not the end
    int value = 0;
    MPI_Comm_rank(comm_, &value);
    rank_ = value;
    MPI_Comm_size(comm_, &value);
    size_ = value;
    int found = 0;
    void* attribute = nullptr;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &attribute, &found);
    tag_bound_ = found ? *static_cast<int*>(attribute) : 32767; // the least the standard allows
  }
  processes(const processes&) = delete;
  processes& operator=(const processes&) = delete;
  // After finish() every failure message has been received, so the sends of this process's
  // complete. (Without finish(), on an early error, they were never made.)
  ~processes() override {
    MPI_Waitall(static_cast<int>(telling_.size()), telling_.data(), MPI_STATUSES_IGNORE);
    MPI_Comm_free(&comm_);
  }

  std::int64_t rank() const noexcept override { return rank_; }
  std::int64_t size() const noexcept override { return size_; }

  void exchange(std::span<const std::int64_t> peers, std::string_view key, const runtime::parcel& mine,
                const runtime::body_places& places, std::chrono::steady_clock::time_point deadline) override {
    throw_if_failed();
    const int tag = tag_of(key);
    const auto head = std::make_shared<std::string>(); // kept with the bodies if the exchange fails
    runtime::detail::append_field(*head, key);
    *head += mine.header;
    std::vector<MPI_Request> sends;
    std::vector<incoming> receives;
    for (const std::int64_t peer : peers) {
      if (peer == rank_) continue;
      post(sends, std::as_bytes(std::span(*head)), peer, tag, false);
      for (const auto body : mine.bodies) post(sends, body, peer, tag, false);
      receives.push_back({static_cast<int>(peer), false, false, {}, {}});
    }
    try {
      for (poller wait; !complete(sends, receives, key, tag, places); wait()) {
        throw_if_failed();
        if (std::chrono::steady_clock::now() > deadline)
          throw runtime::collective_error(timeout_message(receives, key));
      }
    } catch (...) {
      abandon(sends, receives, {head, mine.keep_alive});
      throw;
    }
  }

  void abort(const std::string& why) noexcept override {
    std::scoped_lock lock(mutex_);
    if (failure_) return;
    failure_ = why;
    // Told once to every other process; MPI sends it while this process goes on.
    told_ = why;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      MPI_Isend(told_.data(), static_cast<int>(told_.size()), MPI_CHAR, peer, failure_tag, comm_,
                &telling_.emplace_back(MPI_REQUEST_NULL));
    }
  }

  std::optional<std::string> failure() override {
    std::scoped_lock lock(mutex_);
    if (!failure_) receive_failure();
    return failure_;
  }

  // Waits for every process to come here, and returns the first failure of the run, if any.
  // No deadline while all is well: the others may compute for long yet, and a process that
  // hangs in a collective times out there. After a failure the others come soon (their
  // collectives fail); if one has not within `grace`, the ending is `stuck`.
  struct ending {
    std::optional<std::string> failure;
    bool stuck = false;
  };
  ending finish(std::chrono::milliseconds grace) {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm_, &request);
    std::optional<std::chrono::steady_clock::time_point> give_up;
    for (poller wait;; wait()) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      const auto failed = receive_failures();
      if (done) return {receive_remaining_failures(), false};
      if (failed && !give_up) give_up = std::chrono::steady_clock::now() + grace;
      if (give_up && std::chrono::steady_clock::now() > *give_up) return {failed, true};
    }
  }

private:
  static constexpr int failure_tag = 0;                      // exchanges use 1 to the tag bound
  static constexpr std::size_t chunk = std::size_t{1} << 30; // MPI counts are ints

  struct incoming {
    int peer;
    bool header_in = false;
    bool done = false;
    std::vector<MPI_Request> bodies;
    std::vector<int> sizes; // of the bodies' messages, as the header announced them
  };

  // Spins for a while (a partner is usually about to send), then sleeps in short steps.
  struct poller {
    std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
    void operator()() const {
      if (std::chrono::steady_clock::now() - began < std::chrono::milliseconds(2)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  };

  int tag_of(std::string_view key) const {
    return 1 + static_cast<int>(std::hash<std::string_view>{}(key) % static_cast<std::size_t>(tag_bound_ - 1));
  }

  // Posts the sends (or receives) of `bytes` to (from) `peer`, a message per chunk.
  void post(std::vector<MPI_Request>& requests, std::span<const std::byte> bytes, std::int64_t peer, int tag,
            bool receive, std::byte* into = nullptr, std::vector<int>* sizes = nullptr) {
    std::size_t offset = 0;
    do {
      const std::size_t length = std::min(chunk, bytes.size() - offset);
      if (sizes) sizes->push_back(static_cast<int>(length));
      MPI_Request& request = requests.emplace_back(MPI_REQUEST_NULL);
      if (receive) {
        MPI_Irecv(into + offset, static_cast<int>(length), MPI_BYTE, static_cast<int>(peer), tag, comm_, &request);
      } else {
        MPI_Isend(bytes.data() + offset, static_cast<int>(length), MPI_BYTE, static_cast<int>(peer), tag, comm_,
                  &request);
      }
      offset += length;
    } while (offset < bytes.size());
  }

  // Receives a failure message, if one has come; the first becomes this process's failure.
  // Called with the lock held.
  bool receive_failure() {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(MPI_ANY_SOURCE, failure_tag, comm_, &flag, &message, &status);
    if (!flag) return false;
    std::string why = receive_string(message, status);
    if (!failure_) failure_ = std::move(why);
    ++failures_received_;
    return true;
  }

  std::optional<std::string> receive_failures() {
    std::scoped_lock lock(mutex_);
    while (receive_failure()) {
    }
    return failure_;
  }

  // After the final barrier: MPI does not order messages against collectives, so the
  // failure messages still on their way are counted (each process that told, told every
  // other) and waited for. Returns the first failure.
  std::optional<std::string> receive_remaining_failures() {
    std::scoped_lock lock(mutex_);
    int told = told_.empty() ? 0 : 1;
    int tellers = 0;
    MPI_Allreduce(&told, &tellers, 1, MPI_INT, MPI_SUM, comm_);
    while (failures_received_ < tellers - told) {
      MPI_Message message;
      MPI_Status status;
      MPI_Mprobe(MPI_ANY_SOURCE, failure_tag, comm_, &message, &status);
      std::string why = receive_string(message, status);
      if (!failure_) failure_ = std::move(why);
      ++failures_received_;
    }
    return failure_;
  }

  std::string receive_string(MPI_Message& message, MPI_Status& status) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::string text(static_cast<std::size_t>(count), '\0');
    MPI_Mrecv(text.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    return text;
  }

  // Moves the exchange on; true once everything has gone and come.
  bool complete(std::vector<MPI_Request>& sends, std::vector<incoming>& receives, std::string_view key, int tag,
                const runtime::body_places& places) {
    bool all = true;
    for (incoming& in : receives) {
      if (!in.header_in) {
        int flag = 0;
        MPI_Message message;
        MPI_Status status;
        MPI_Improbe(in.peer, tag, comm_, &flag, &message, &status);
        if (!flag) {
          all = false;
          continue;
        }
        const std::string head = receive_string(message, status);
        in.header_in = true;
        const std::vector<std::string_view> fields = runtime::detail::split_fields(head);
        if (fields.empty() || fields[0] != key) {
          throw runtime::collective_error(xlite::detail::message(
              "process ", in.peer, " sent exchange '", fields.empty() ? std::string_view{} : fields[0],
              "' where process ", rank_, " expected '", key, "': the processes make different collectives"));
        }
        const auto after_key = static_cast<std::size_t>(fields[0].data() + fields[0].size() - head.data());
        for (const std::span<std::byte> place : places(in.peer, head.substr(after_key))) {
          post(in.bodies, place, in.peer, tag, true, place.data(), &in.sizes);
        }
      }
      if (!in.done) in.done = received_all(in, key);
      all = in.done && all;
    }
    return test_all(sends) && all;
  }

  static bool test_all(std::vector<MPI_Request>& requests) {
    if (requests.empty()) return true;
    int done = 0;
    if (MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      throw runtime::collective_error("a message between processes failed");
    }
    return done != 0;
  }

  // Whether every body from `in` has come, each of the size its header announced (another
  // exchange's message, under a colliding tag, would not be).
  bool received_all(incoming& in, std::string_view key) const {
    if (in.bodies.empty()) return true;
    std::vector<MPI_Status> statuses(in.bodies.size());
    int done = 0;
    const int code = MPI_Testall(static_cast<int>(in.bodies.size()), in.bodies.data(), &done, statuses.data());
    bool fits = code == MPI_SUCCESS;
    for (std::size_t k = 0; fits && done && k < statuses.size(); ++k) {
      int count = 0;
      MPI_Get_count(&statuses[k], MPI_BYTE, &count);
      fits = count == in.sizes[k];
    }
    if (!fits) {
      throw runtime::collective_error(xlite::detail::message(
          "process ", in.peer, " sent ", rank_, " a message of another size than announced at '", key, "'"));
    }
    return done != 0;
  }

  std::string timeout_message(const std::vector<incoming>& receives, std::string_view key) const {
    std::string missing;
    for (const incoming& in : receives) {
      if (!in.done) missing += (missing.empty() ? "" : ", ") + std::to_string(in.peer);
    }
    return xlite::detail::message("process ", rank_, " timed out waiting for process(es) [", missing, "] at '", key,
                                  "'; every process must make the same collectives in the same order");
  }

  // After a failed exchange: its receives are cancelled, its sends left to MPI with their
  // memory kept (a failure is final, so this happens once or a few times in a run).
  void abandon(std::vector<MPI_Request>& sends, std::vector<incoming>& receives,
               std::initializer_list<std::shared_ptr<const void>> keep_alive) {
    for (incoming& in : receives) {
      for (MPI_Request& r : in.bodies) {
        if (r == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
    }
    std::scoped_lock lock(mutex_);
    for (MPI_Request& r : sends) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
    // Until the process ends: MPI may read them until MPI_Finalize, after this object is gone.
    static auto* const kept = new std::vector<std::shared_ptr<const void>>;
    kept->insert(kept->end(), keep_alive);
  }

  void throw_if_failed() {
    if (const auto failed = failure()) throw runtime::collective_error(*failed);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::int64_t rank_ = 0;
  std::int64_t size_ = 1;
  int tag_bound_ = 32767;
  std::mutex mutex_;
  std::optional<std::string> failure_;
  std::string told_;                 // this process's failure, sent to the others
  std::vector<MPI_Request> telling_; // those sends
  int failures_received_ = 0;
};

// Runs fn in every process of the MPI job as one run (see the top of this file) and returns
// the process's exit status: 0, or 1 when this process or another failed, after printing
// why to stderr. Initialises and finalises MPI.
template <class F>
int run(int& argc, char**& argv, F&& fn) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int status = 0;
  std::shared_ptr<processes> group;
  auto report = [&](const std::string& why) {
    // One write, so that the processes' lines do not interleave where mpirun gathers them.
    const std::string line = xlite::detail::message("xlite: process ", group ? group->rank() : -1, ": ", why, "\n");
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    status = 1;
  };
  try {
    if (provided < MPI_THREAD_MULTIPLE) {
      throw config_error("mpi::run: this MPI does not provide MPI_THREAD_MULTIPLE, which xlite's device threads need");
    }
    group = std::make_shared<processes>();
    // Devices are numbered p * L + k, so every process must have the same L.
    const long long mine = device_count();
    std::vector<long long> counts(static_cast<std::size_t>(group->size()));
    MPI_Allgather(&mine, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
    if (std::ranges::any_of(counts, [&](long long c) { return c != mine; })) {
      std::string each;
      for (std::size_t p = 0; p < counts.size(); ++p) each += xlite::detail::message(p ? ", " : "", counts[p]);
      throw config_error(xlite::detail::message("mpi::run: the processes have different device counts (", each,
                                                "); set the same XLITE_NUM_DEVICES in every process"));
    }
    runtime::install_process_group(group);
    try {
      fn();
      wait_device_ops();
    } catch (...) {
      const std::string why =
          xlite::detail::message("process ", group->rank(), " failed: ", xlite::detail::current_exception_message());
      report(why);
      runtime::collectives().abort(why); // here, so that a step waiting in a collective stops, and everywhere
      wait_device_ops();
    }
    const auto end = group->finish(runtime::collective_timeout());
    if (end.failure && status == 0) report("stopped because " + *end.failure);
    if (end.stuck) {
      report("the other processes did not finish after the failure; aborting the job");
      MPI_Abort(MPI_COMM_WORLD, 1); // ends every process: a hang would be worse
    }
  } catch (...) {
    report(xlite::detail::current_exception_message());
  }
  runtime::install_process_group(nullptr);
  group.reset(); // before MPI_Finalize, on every path
  MPI_Finalize();
  return status;
}

} // namespace xlite::mpi
