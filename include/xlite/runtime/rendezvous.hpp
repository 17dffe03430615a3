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

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"

namespace xlite::runtime {

// A collective that cannot complete: bad replica groups, members that disagree, a timeout.
class collective_error : public error {
public:
  using error::error;
};

// Replica groups as torch_xla takes them: [[0, 1, 2, 3], [4, 5, 6, 7]] makes two groups;
// empty means one group of every device.
using replica_groups = std::vector<std::vector<std::int64_t>>;

// The members of `device`'s group, in order. `world` is the number of devices; `what` names
// the collective.
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

// One meeting: what each member brought, in group order, once all have come.
template <class Contribution>
class meeting {
public:
  explicit meeting(std::vector<std::int64_t> members)
      : members_(std::move(members)), contributions_(members_.size()), descriptions_(members_.size()),
        arrived_(members_.size(), false) {}

  const std::vector<std::int64_t>& members() const noexcept { return members_; }
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
      fail(timeout_message(what));
    }
    if (error_) std::rethrow_exception(error_);
  }

  // The second meeting point of a collective: returns once every member has called it, so
  // that no member's input is read, nor shared object written, after its owner has left.
  void wait_all_done(std::string_view what, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (++done_ == members_.size()) changed_.notify_all();
    if (!changed_.wait_until(lock, deadline, [&] { return done_ == members_.size() || error_; })) {
      fail(xlite::detail::message(what, ": timed out waiting for the members of group ", format(members_),
                                  " to finish their parts"));
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

  // Called with the lock held.
  void fail(const std::string& message) {
    if (!error_) error_ = std::make_exception_ptr(collective_error(message));
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
  explicit meeting_place(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  // `device` (at `position` in `members`) joins its group's next meeting under `tag` and
  // waits for the others. The meeting lives while a member holds it.
  std::shared_ptr<meeting<Contribution>> attend(std::int64_t device, const std::vector<std::int64_t>& members,
                                                std::size_t position, std::string_view tag, Contribution contribution,
                                                std::string description, std::string_view what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    std::string group_key(tag);
    for (const std::int64_t id : members) group_key += "," + std::to_string(id);
    std::shared_ptr<meeting<Contribution>> m;
    {
      std::scoped_lock lock(mutex_);
      const std::uint64_t sequence = sequences_[{device, group_key}]++;
      auto& entry = meetings_[{group_key, sequence}];
      if (!entry.m) entry.m = std::make_shared<meeting<Contribution>>(members);
      m = entry.m;
      if (++entry.joined == members.size()) meetings_.erase({group_key, sequence}); // everyone holds it now
    }
    m->attend(position, std::move(contribution), std::move(description), what, deadline);
    return m;
  }

private:
  struct slot {
    std::shared_ptr<meeting<Contribution>> m;
    std::size_t joined = 0;
  };

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::map<std::pair<std::int64_t, std::string>, std::uint64_t> sequences_;
  std::map<std::pair<std::string, std::uint64_t>, slot> meetings_;
};

// How long a device waits for the rest of its group: XLITE_COLLECTIVE_TIMEOUT seconds
// (default 300), so that a member that never comes turns a hang into an error.
inline std::chrono::milliseconds collective_timeout() {
  static const std::chrono::milliseconds timeout{
      1000 * env_integer("XLITE_COLLECTIVE_TIMEOUT", 1, 7 * 24 * 3600).value_or(300)};
  return timeout;
}

} // namespace xlite::runtime
