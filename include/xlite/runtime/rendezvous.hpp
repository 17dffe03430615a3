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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"
#include "xlite/ir/collective.hpp"

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

// One meeting: what each member brought, in the order of `members`, once all have come.
template <class Contribution>
class meeting {
public:
  explicit meeting(std::vector<std::int64_t> members)
      : members_(std::move(members)), contributions_(members_.size()), descriptions_(members_.size()),
        arrived_(members_.size(), false) {}

  const std::vector<Contribution>& contributions() const noexcept { return contributions_; }

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
    if (++count_ == members_.size() && !error_) {
      check_descriptions(what);
      changed_.notify_all();
    }
    if (!changed_.wait_until(lock, deadline, [&] { return count_ == members_.size() || error_; })) {
      fail(timeout_message(what), true);
    }
    if (error_) std::rethrow_exception(error_);
  }

  // Fails every member, waiting or still to come (a replica has died).
  void abort(const std::string& why) {
    std::scoped_lock lock(mutex_);
    fail(why, count_ < members_.size()); // members that all came may still be reading
  }

  // The second meeting point of a collective: returns once every member has called it, so
  // that no member's input is read, nor shared object written, after its owner has left.
  void wait_all_done(std::string_view what, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (++done_ == members_.size()) changed_.notify_all();
    if (!changed_.wait_until(lock, deadline, [&] { return done_ == members_.size() || error_; })) {
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
  std::vector<Contribution> contributions_;
  std::vector<std::string> descriptions_;
  std::vector<bool> arrived_;
  std::size_t count_ = 0;
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
  explicit meeting_place(std::chrono::milliseconds timeout) : timeout_(timeout.count()) {}

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
        entry.m = std::make_shared<meeting<Contribution>>(sorted);
        std::erase_if(open_, [](const auto& w) { return w.expired(); });
        open_.push_back(entry.m);
      }
      m = entry.m;
      if (++entry.joined == sorted.size()) meetings_.erase({group_key, sequence}); // everyone holds it now
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
