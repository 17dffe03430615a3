#pragma once

// Where devices meet for a collective. Every collective is a meeting of one replica group:
// each member brings its contribution and a description of the call (op, dtype, shape,
// arguments), waits until the whole group has come, and then reads everyone's
// contributions. Calls match as XLA matches them: the k-th collective a device makes within
// a group meets the k-th of every other member.
//
// Nothing hangs: a member waits at most the timeout, and then every member of the meeting,
// those already waiting and those still to come, fails with an error that names the devices
// that did not come. Members whose descriptions differ (an all_reduce of (4, 2) on device 0
// meeting one of (4, 3) on device 1) all fail with an error that lists each description.
// A failed meeting leaves its group out of step, so, as with NCCL, a failure is final: every
// meeting in progress and every later one fails with the first error until reset().
//
// Across processes (runtime/processes.hpp) a group's members are global device numbers;
// each process's members meet here, and the last of them to come exchanges their
// contributions with the other processes. Descriptions cross too, so members that disagree
// fail alike in every process; a process that does not come is a timeout naming it, and
// one that fails makes every exchange fail with its error, for the rest of the run.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/collective.hpp"
#include "xlite/runtime/processes.hpp"

namespace xlite::runtime {

// A collective that cannot complete: bad replica groups, members that disagree, a timeout.
class collective_error : public error {
public:
  using error::error;
};

using ir::replica_groups;

// The members of `device`'s group, in order; empty `groups` make one group of every device. `world` is the number of
// devices; `what` names the collective.
inline std::vector<std::int64_t> group_of(std::int64_t device, const replica_groups& groups, std::int64_t world,
                                          std::string_view what) {
  if (groups.empty()) {
    std::vector<std::int64_t> everyone(static_cast<std::size_t>(world));
    for (std::int64_t id = 0; id < world; ++id) everyone[static_cast<std::size_t>(id)] = id;
    return everyone;
  }
  std::vector<bool> seen(static_cast<std::size_t>(world));
  const std::vector<std::int64_t>* mine = nullptr;
  for (const auto& group : groups) {
    if (group.empty()) throw collective_error(xlite::detail::message(what, ": a replica group is empty"));
    for (const std::int64_t id : group) {
      if (id < 0 || id >= world) {
        throw collective_error(xlite::detail::message(what, ": replica group member ", id,
                                                      " is not a device; there are ", world, " devices"));
      }
      if (seen[static_cast<std::size_t>(id)]) {
        throw collective_error(xlite::detail::message(what, ": device ", id, " is in more than one replica group"));
      }
      seen[static_cast<std::size_t>(id)] = true;
      if (id == device) mine = &group;
    }
  }
  if (!mine) {
    throw collective_error(xlite::detail::message(what, ": device ", device, " is in none of the replica groups"));
  }
  return *mine;
}

namespace detail {

// An exchange's header is a list of fields, each its length in decimal, a colon, and its bytes.
inline void append_field(std::string& header, std::string_view field) {
  header += std::to_string(field.size());
  header += ':';
  header += field;
}

inline std::size_t parse_count(std::string_view text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw collective_error(
        xlite::detail::message("an exchange between processes carried \"", text, "\" where a count belongs"));
  }
  return value;
}

inline std::vector<std::string_view> split_fields(std::string_view header) {
  std::vector<std::string_view> fields;
  while (!header.empty()) {
    const std::size_t colon = header.find(':');
    const std::size_t length =
        colon == std::string_view::npos ? header.size() + 1 : parse_count(header.substr(0, colon));
    if (colon == std::string_view::npos || length > header.size() - colon - 1) {
      throw collective_error("an exchange between processes carried a malformed header");
    }
    fields.push_back(header.substr(colon + 1, length));
    header.remove_prefix(colon + 1 + length);
  }
  return fields;
}

} // namespace detail

// How a contribution crosses between processes: wire<C>::meta(c) describes it in the
// exchange's header, body(c) is its bytes, and make(slot, meta) makes a contribution in
// `slot` from a meta and returns where its bytes go.
template <class Contribution>
struct wire;

template <>
struct wire<std::string> {
  static std::string meta(const std::string& s) { return std::to_string(s.size()); }
  static std::span<const std::byte> body(const std::string& s) { return std::as_bytes(std::span(s)); }
  static std::span<std::byte> make(std::string& slot, std::string_view meta) {
    slot.assign(detail::parse_count(meta), '\0');
    return std::as_writable_bytes(std::span(slot));
  }
};

// One meeting: what each member brought, in the order of `members`, once all have come.
// Members are global device numbers. Those of other processes come through the process
// group: when this process's members have all come, the last of them exchanges their
// contributions (and descriptions) with the other processes of the group, so that every
// process has every member's.
template <class Contribution>
class meeting {
public:
  // `members` sorted; `key` names the meeting alike in every process.
  meeting(std::vector<std::int64_t> members, std::string key)
      : members_(std::move(members)), key_(std::move(key)), group_(processes()), contributions_(members_.size()),
        descriptions_(members_.size()), arrived_(members_.size(), false) {
    for (const std::int64_t id : members_) local_.push_back(!group_ || process_of(id) == group_->rank());
    local_count_ = static_cast<std::size_t>(std::ranges::count(local_, true));
  }

  const std::vector<Contribution>& contributions() const noexcept { return contributions_; }
  // `device`'s place among the members, in their sorted order.
  std::size_t position_of(std::int64_t device) const {
    return static_cast<std::size_t>(std::ranges::lower_bound(members_, device) - members_.begin());
  }
  // How many members are this process's, and how many of them come before `position`.
  std::size_t local_count() const noexcept { return local_count_; }
  std::size_t local_index(std::size_t position) const {
    return static_cast<std::size_t>(
        std::count(local_.begin(), local_.begin() + static_cast<std::ptrdiff_t>(position), true));
  }

  // An object the members share, made by the first to ask (with make()).
  template <class T, class Make>
  std::shared_ptr<T> shared(Make&& make) {
    std::scoped_lock lock(mutex_);
    if (!shared_) shared_ = make();
    return std::static_pointer_cast<T>(shared_);
  }

  // Brings `position`'s contribution and waits for the others, or fails. `what` names the
  // collective in the errors.
  void attend(std::size_t position, Contribution contribution, std::string description, std::string_view what,
              std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    contributions_[position] = std::move(contribution);
    descriptions_[position] = std::move(description);
    arrived_[position] = true;
    if (++count_ == local_count_ && !error_) {
      if (local_count_ < members_.size()) exchange_with_processes(lock, what, deadline);
      if (!error_) {
        check_descriptions(what);
        complete_ = true;
      }
      changed_.notify_all();
    }
    if (!changed_.wait_until(lock, deadline, [&] { return complete_ || error_; })) {
      fail(timeout_message(what), true);
    }
    if (error_) std::rethrow_exception(error_);
  }

  // Fails every member, waiting or still to come (a replica has died).
  void abort(const std::string& why) {
    std::scoped_lock lock(mutex_);
    fail(why, !complete_); // members that all came may still be reading
  }

  // The second meeting point of a collective: returns once every member of this process
  // has called it, so that no member's input is read, nor shared object written, after its
  // owner has left. (Other processes read copies.)
  void wait_all_done(std::string_view what, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (++done_ == local_count_) changed_.notify_all();
    if (!changed_.wait_until(lock, deadline, [&] { return done_ == local_count_ || error_; })) {
      fail(xlite::detail::message(what, ": timed out waiting for the members of group ", format(members_),
                                  " to finish their parts"),
           false);
    }
    if (error_) std::rethrow_exception(error_);
  }

private:
  static std::string format(const std::vector<std::int64_t>& ids) {
    std::string text = "[";
    for (std::size_t k = 0; k < ids.size(); ++k) text += (k ? ", " : "") + std::to_string(ids[k]);
    return text + "]";
  }

  // Sends this process's contributions to the group's other processes and takes theirs,
  // with the lock released meanwhile: the local members wait, and abort() may come.
  void exchange_with_processes(std::unique_lock<std::mutex>& lock, std::string_view what,
                               std::chrono::steady_clock::time_point deadline) {
    auto mine = std::make_shared<std::vector<Contribution>>(); // what the bodies point into
    mine->reserve(local_count_);
    parcel outgoing;
    for (std::size_t k = 0; k < members_.size(); ++k) {
      if (!local_[k]) continue;
      mine->push_back(contributions_[k]);
      detail::append_field(outgoing.header, std::to_string(k));
      detail::append_field(outgoing.header, descriptions_[k]);
      detail::append_field(outgoing.header, wire<Contribution>::meta(mine->back()));
      outgoing.bodies.push_back(wire<Contribution>::body(mine->back()));
    }
    outgoing.keep_alive = mine;
    std::vector<std::int64_t> peers;
    for (const std::int64_t id : members_) peers.push_back(process_of(id));
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end()); // members are sorted, and so their processes
    std::vector<Contribution> received(members_.size());
    std::vector<std::string> described(members_.size());
    std::vector<bool> arrived_from(members_.size(), false);
    lock.unlock();
    std::exception_ptr failed;
    try {
      group_->exchange(
          peers, key_, outgoing,
          [&](std::int64_t peer, const std::string& header) {
            const std::vector<std::string_view> fields = detail::split_fields(header);
            if (fields.size() % 3 != 0)
              throw collective_error(xlite::detail::message("process ", peer, " sent a malformed header"));
            std::vector<std::span<std::byte>> places;
            for (std::size_t f = 0; f < fields.size(); f += 3) {
              const std::size_t k = detail::parse_count(fields[f]);
              if (k >= members_.size() || process_of(members_[k]) != peer || arrived_from[k]) {
                throw collective_error(xlite::detail::message("process ", peer, " sent a contribution for position ", k,
                                                              " of group ", format(members_),
                                                              ", which is not its own"));
              }
              arrived_from[k] = true;
              described[k] = std::string(fields[f + 1]);
              places.push_back(wire<Contribution>::make(received[k], fields[f + 2]));
            }
            return places;
          },
          deadline);
    } catch (...) { // a malformed header, a shape too large to allocate, a failed exchange
      failed = std::current_exception();
    }
    lock.lock();
    if (failed) {
      try {
        std::rethrow_exception(failed);
      } catch (...) {
        fail(xlite::detail::message(what, ": ", xlite::detail::current_exception_message()), true);
      }
      return;
    }
    if (error_) return;
    for (std::size_t k = 0; k < members_.size(); ++k) {
      if (local_[k]) continue;
      contributions_[k] = std::move(received[k]);
      descriptions_[k] = std::move(described[k]);
      arrived_[k] = true;
    }
  }

  void check_descriptions(std::string_view what) {
    if (std::ranges::all_of(descriptions_, [&](const std::string& d) { return d == descriptions_[0]; })) return;
    std::string each;
    for (std::size_t k = 0; k < members_.size(); ++k) {
      each += xlite::detail::message("\n  device ", members_[k], ": ", descriptions_[k]);
    }
    error_ = std::make_exception_ptr(collective_error(
        xlite::detail::message(what, ": the members of group ", format(members_), " disagree:", each)));
  }

  std::string timeout_message(std::string_view what) const {
    std::vector<std::int64_t> came;
    std::vector<std::int64_t> missing;
    for (std::size_t k = 0; k < members_.size(); ++k) (arrived_[k] ? came : missing).push_back(members_[k]);
    return xlite::detail::message(what, ": timed out waiting for device(s) ", format(missing), " of group ",
                                  format(members_), " (", format(came),
                                  " came); every member of a group must make the same collectives in the same order");
  }

  // Called with the lock held. `release`: no member reads the contributions any more, so
  // their buffers need not live on with the failed meeting.
  void fail(const std::string& message, bool release) {
    if (!error_) error_ = std::make_exception_ptr(collective_error(message));
    if (release) std::ranges::fill(contributions_, Contribution{});
    changed_.notify_all();
  }

  std::vector<std::int64_t> members_;
  std::string key_;
  std::shared_ptr<process_group> group_;
  std::vector<bool> local_;
  std::size_t local_count_ = 0;
  std::vector<Contribution> contributions_;
  std::vector<std::string> descriptions_;
  std::vector<bool> arrived_;
  std::size_t count_ = 0; // local members that came
  bool complete_ = false; // every member's contribution is here, and they agree
  std::size_t done_ = 0;
  std::exception_ptr error_;
  std::shared_ptr<void> shared_;
  std::mutex mutex_;
  std::condition_variable changed_;
};

// The meetings in progress, found by group and sequence number.
template <class Contribution>
class meeting_place {
public:
  // `name` tells this place's meetings from another place's in the exchanges between processes.
  meeting_place(std::string name, std::chrono::milliseconds timeout)
      : name_(std::move(name)), timeout_(timeout.count()) {}

  std::chrono::milliseconds timeout() const noexcept { return std::chrono::milliseconds(timeout_.load()); }
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_.store(timeout.count()); }

  // `device`, a member of `members`, joins its group's next meeting and waits for the others.
  // The meeting lives while a member holds it. The meeting's members are the group's, sorted: members that list the
  // group in different orders meet, and their descriptions (which hold the groups) tell them they disagree.
  // contributions() are in that sorted order.
  std::shared_ptr<meeting<Contribution>> attend(std::int64_t device, const std::vector<std::int64_t>& members,
                                                Contribution contribution, std::string description,
                                                std::string_view what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    std::vector<std::int64_t> sorted = members;
    std::ranges::sort(sorted);
    const auto position = static_cast<std::size_t>(std::ranges::lower_bound(sorted, device) - sorted.begin());
    std::string group_key;
    for (const std::int64_t id : sorted) group_key += std::to_string(id) + ",";
    std::shared_ptr<meeting<Contribution>> m;
    {
      std::scoped_lock lock(mutex_);
      if (aborted_) throw collective_error(xlite::detail::message(what, ": ", *aborted_));
      const std::uint64_t sequence = sequences_[{device, group_key}]++;
      auto& entry = meetings_[{group_key, sequence}];
      if (!entry.m) {
        entry.m = std::make_shared<meeting<Contribution>>(
            sorted, xlite::detail::concat(name_, " [", group_key, "] #", sequence));
        std::erase_if(open_, [](const auto& w) { return w.expired(); });
        open_.push_back(entry.m);
      }
      m = entry.m;
      if (++entry.joined == m->local_count()) meetings_.erase({group_key, sequence}); // every local member holds it now
    }
    try {
      m->attend(position, std::move(contribution), std::move(description), what, deadline);
    } catch (const collective_error& e) {
      abort(e.what());
      throw;
    }
    return m;
  }

  // The second meeting point of `m`; a failure there is final too.
  void wait_all_done(meeting<Contribution>& m, std::string_view what) {
    try {
      m.wait_all_done(what, std::chrono::steady_clock::now() + timeout());
    } catch (const collective_error& e) {
      abort(e.what());
      throw;
    }
  }

  // The first failure since reset(), if any.
  std::optional<std::string> failure() const {
    std::scoped_lock lock(mutex_);
    return aborted_;
  }

  // Fails every meeting in progress and every later one with `why`, until reset(): one
  // member has failed, and the others must not wait for it.
  void abort(const std::string& why) {
    std::scoped_lock lock(mutex_);
    if (!aborted_) aborted_ = why;
    for (const auto& w : open_) {
      if (const auto m = w.lock()) m->abort(why);
    }
  }

  // Forgets the meetings, their numbering and an abort: the members start afresh.
  void reset() {
    std::scoped_lock lock(mutex_);
    aborted_.reset();
    sequences_.clear();
    meetings_.clear();
    open_.clear();
  }

private:
  struct slot {
    std::shared_ptr<meeting<Contribution>> m;
    std::size_t joined = 0;
  };

  std::string name_;
  std::atomic<std::chrono::milliseconds::rep> timeout_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::int64_t, std::string>, std::uint64_t> sequences_;
  std::map<std::pair<std::string, std::uint64_t>, slot> meetings_;
  std::vector<std::weak_ptr<meeting<Contribution>>> open_; // for abort()
  std::optional<std::string> aborted_;
};

// How long a device waits for the rest of its group: XLITE_COLLECTIVE_TIMEOUT seconds
// (default 300), so that a member that never comes turns a hang into an error.
inline std::chrono::milliseconds collective_timeout() {
  static const std::chrono::milliseconds timeout{
      1000 * env_integer("XLITE_COLLECTIVE_TIMEOUT", 1, 7 * 24 * 3600).value_or(300)};
  return timeout;
}

} // namespace xlite::runtime
