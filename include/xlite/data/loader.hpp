#pragma once

// A loader for training loops over an in-memory dataset, after PyTorch/XLA's ParallelLoader
// and MpDeviceLoader. A background thread gathers each batch's rows into contiguous host
// tensors and uploads them to the device ahead of use; the consumer takes batches one by
// one, and the loader calls mark_step() when the consumer comes back for more, so each
// step's trace is cut as soon as it is complete.
//
// The order of an epoch depends on (seed, epoch) alone, through a generator defined here
// (not std::shuffle, whose results differ between standard libraries), so a run resumed
// from a saved loader_state sees exactly the batches an uninterrupted run would have.

#include <algorithm>
#include <array>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/expr/tensor.hpp"
#include "xlite/lazy/step.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/device.hpp"

namespace xlite::data {

// A batch on the host, as the loader's thread gathered it, before it is uploaded.
struct host_batch {
  xlite::tensor<float> features;      // (B, ...): rows of the dataset's features
  xlite::tensor<std::int64_t> labels; // (B,)
  std::int64_t epoch;
  std::int64_t index; // the batch's position in its epoch, from 0
};

// A batch on the device, as the consumer gets it.
struct batch {
  lazy::tensor features;
  lazy::tensor labels;
  std::int64_t index; // the batch's position in its epoch, from 0
};

struct loader_options {
  std::int64_t batch_size = 1;
  bool shuffle = false;
  std::uint64_t seed = 0;
  bool drop_last = false;                 // drop a last batch smaller than batch_size
  std::int64_t prefetch = 2;              // batches prepared and uploaded ahead of the consumer
  std::int64_t batches_per_execution = 1; // batches handed out per mark_step()
  xlite::device device = xlite::device();
  // Called on the loader's thread with each batch before upload (augmentation,
  // normalisation); it may change the batch in place. Host code only: it must not trace
  // lazy ops. What it throws reaches the consumer.
  std::function<void(host_batch&)> transform{};
};

// Where a loader stands: the next fetch hands out batch `next_batch` of `epoch`, in the
// order that `seed` gives.
struct loader_state {
  std::int64_t epoch = 0;
  std::int64_t next_batch = 0;
  std::uint64_t seed = 0;

  friend bool operator==(const loader_state&, const loader_state&) = default;

  // One line: "loader_state v1 epoch=3 next_batch=17 seed=42".
  std::string to_string() const;
  // The inverse of to_string() (a trailing newline is allowed); anything else is a value_error.
  static loader_state from_string(std::string_view text);
};

namespace detail {

// SplitMix64 (Steele, Lea and Flood, 2014): its outputs are fixed by its definition, so a
// seed gives the same order with every compiler and standard library.
class splitmix64 {
public:
  explicit splitmix64(std::uint64_t state) : state_(state) {}

  std::uint64_t operator()() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound) for bound > 0, without modulo bias: draws below 2^64 mod bound are
  // rejected, which leaves a range that is a multiple of bound.
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t rejected = (0 - bound) % bound;
    for (;;) {
      if (const std::uint64_t draw = (*this)(); draw >= rejected) return draw % bound;
    }
  }

private:
  std::uint64_t state_;
};

// The samples of `epoch` in the order they are handed out: a Fisher-Yates shuffle driven by
// a generator keyed by (seed, epoch), or 0..n-1.
inline std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!shuffle) return order;
  splitmix64 draw(splitmix64(splitmix64(seed)() ^ static_cast<std::uint64_t>(epoch))());
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[draw.below(i)]);
  return order;
}

// The loader's thread for one run over batches [first, end) of an epoch: it prepares them
// in order, at most `prefetch` ahead of the consumer. Destroying it stops and joins the thread.
class batch_producer {
public:
  struct source {
    const xlite::tensor<float>& features;
    const xlite::tensor<std::int64_t>& labels;
    const loader_options& options;
    std::uint64_t seed;
    std::int64_t epoch;
    std::int64_t first;
    std::int64_t end;
  };

  explicit batch_producer(const source& s) : source_(s), thread_([this](std::stop_token stop) { run(stop); }) {}

  // The next batch, in order; if preparing it failed, the exception.
  batch pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || failure_; });
    if (ready_.empty()) std::rethrow_exception(failure_);
    batch next = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return next;
  }

private:
  void run(const std::stop_token& stop) {
    try {
      const std::int64_t n = source_.labels.size();
      const std::vector<std::int64_t> order = epoch_order(n, source_.options.shuffle, source_.seed, source_.epoch);
      const auto prefetch = static_cast<std::size_t>(source_.options.prefetch);
      for (std::int64_t index = source_.first; index < source_.end; ++index) {
        { // room first, so that at most `prefetch` batches exist ahead of the consumer
          std::unique_lock lock(mutex_);
          if (!changed_.wait(lock, stop, [&] { return ready_.size() < prefetch; })) return;
        }
        const std::int64_t begin = index * source_.options.batch_size;
        const std::int64_t rows = std::min(source_.options.batch_size, n - begin);
        host_batch host =
            gather(std::span(order).subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(rows)), index);
        if (source_.options.transform) source_.options.transform(host);
        batch uploaded{lazy::tensor::from(host.features, source_.options.device),
                       lazy::tensor::from(host.labels, source_.options.device), index};
        {
          std::scoped_lock lock(mutex_);
          ready_.push_back(std::move(uploaded));
        }
        changed_.notify_all();
      }
    } catch (...) {
      {
        std::scoped_lock lock(mutex_);
        failure_ = std::current_exception();
      }
      changed_.notify_all();
    }
  }

  host_batch gather(std::span<const std::int64_t> samples, std::int64_t index) const {
    const xlite::shape& all = source_.features.shape();
    std::array<std::int64_t, max_rank> dims{};
    std::copy(all.begin(), all.end(), dims.begin());
    const std::int64_t row = std::accumulate(all.begin() + 1, all.end(), std::int64_t{1}, std::multiplies<>());
    dims[0] = static_cast<std::int64_t>(samples.size());
    const xlite::shape features_shape(std::span<const std::int64_t>(dims.data(), all.rank()));
    host_batch host{xlite::tensor<float>(xlite::tensor<float>::uninitialized, features_shape),
                    xlite::tensor<std::int64_t>(xlite::tensor<std::int64_t>::uninitialized, xlite::shape{dims[0]}),
                    source_.epoch, index};
    float* features = host.features.data();
    std::int64_t* labels = host.labels.data();
    for (const std::int64_t sample : samples) {
      features = std::copy_n(source_.features.data() + sample * row, row, features);
      *labels++ = source_.labels.data()[sample];
    }
    return host;
  }

  source source_;
  std::mutex mutex_;
  std::condition_variable_any changed_; // a batch was queued or taken, or preparing failed
  std::deque<batch> ready_;
  std::exception_ptr failure_;
  std::jthread thread_; // last: stopped and joined before the members it uses are destroyed
};

} // namespace detail

// Batches of (features, labels) on a device, an epoch at a time. One consumer thread.
//
// mark_step() is called by next() (and so by a range-for's increment) in two places: before
// handing out a batch when batches_per_execution batches were handed out since the last
// call, and when it reports the end of an epoch, if any batch was handed out since the last
// call. With the default of 1, the step traced on batch k is thus cut when batch k + 1 is
// fetched, and the last one when the epoch ends. A loop that leaves an epoch early calls
// mark_step() itself (or the next fetch does it).
class loader {
public:
  // Takes the dataset (move it in): features of shape (N, ...) and labels of shape (N,).
  loader(xlite::tensor<float> features, xlite::tensor<std::int64_t> labels, loader_options options = {})
      : features_(std::move(features)), labels_(std::move(labels)), options_(std::move(options)), seed_(options_.seed) {
    const auto fail = [](auto&&... parts) { throw value_error(xlite::detail::message("loader: ", parts...)); };
    if (features_.rank() == 0) fail("the features need a first axis of samples; they are a scalar");
    if (labels_.rank() != 1) fail("the labels must have shape (N,), not ", labels_.shape());
    if (features_.shape()[0] != labels_.size()) {
      fail("features of shape ", features_.shape(), " have ", features_.shape()[0], " samples, but there are ",
           labels_.size(), " labels");
    }
    if (options_.batch_size < 1) fail("batch_size must be at least 1, not ", options_.batch_size);
    if (options_.prefetch < 1) fail("prefetch must be at least 1, not ", options_.prefetch);
    if (options_.batches_per_execution < 1) {
      fail("batches_per_execution must be at least 1, not ", options_.batches_per_execution);
    }
  }

  // Stops and joins the loader's thread, wherever the epoch stands.
  ~loader() = default;
  loader(const loader&) = delete;
  loader& operator=(const loader&) = delete;

  // The next batch of the current epoch; at the end of the epoch, std::nullopt, after which
  // the loader stands at the start of the next epoch. Rethrows what failed on the loader's
  // thread while preparing this batch (batches prepared before it are handed out first);
  // the fetch after that tries the batch again.
  std::optional<batch> next() {
    if (next_batch_ == batches_per_epoch()) {
      producer_.reset();
      if (handed_since_step_ > 0) step();
      ++epoch_;
      next_batch_ = 0;
      return std::nullopt;
    }
    if (handed_since_step_ == options_.batches_per_execution) step();
    if (!producer_) {
      producer_ = std::make_unique<detail::batch_producer>(detail::batch_producer::source{
          features_, labels_, options_, seed_, epoch_, next_batch_, batches_per_epoch()});
    }
    try {
      batch b = producer_->pop();
      ++next_batch_;
      ++handed_since_step_;
      return b;
    } catch (...) {
      producer_.reset();
      throw;
    }
  }

  // Range-for over the rest of the current epoch.
  class iterator {
  public:
    using value_type = batch;
    using difference_type = std::ptrdiff_t;

    explicit iterator(loader& owner) : owner_(&owner), current_(owner.next()) {}
    const batch& operator*() const { return *current_; }
    const batch* operator->() const { return &*current_; }
    iterator& operator++() {
      current_ = owner_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return !it.current_; }

  private:
    loader* owner_;
    std::optional<batch> current_;
  };
  iterator begin() { return iterator(*this); }
  std::default_sentinel_t end() const noexcept { return {}; }

  // Goes to the start of `epoch` (its order depends on the seed and the epoch only).
  void start_epoch(std::int64_t epoch) { restore({epoch, 0, seed_}); }

  loader_state state() const noexcept { return {epoch_, next_batch_, seed_}; }

  // Resumes where `s` was taken: the next fetch hands out batch s.next_batch of s.epoch, in
  // the order of s.seed (which replaces the options' seed).
  void restore(const loader_state& s) {
    if (s.epoch < 0) throw value_error(xlite::detail::message("loader: epoch ", s.epoch, " is negative"));
    if (s.next_batch < 0 || s.next_batch > batches_per_epoch()) {
      throw value_error(xlite::detail::message("loader: batch ", s.next_batch, " is outside an epoch of ",
                                               batches_per_epoch(), " batches (a state saved with another dataset, ",
                                               "batch_size or drop_last?)"));
    }
    producer_.reset();
    epoch_ = s.epoch;
    next_batch_ = s.next_batch;
    seed_ = s.seed;
  }

  std::int64_t batches_per_epoch() const noexcept {
    const std::int64_t n = labels_.size();
    const std::int64_t whole = n / options_.batch_size;
    return options_.drop_last || n % options_.batch_size == 0 ? whole : whole + 1;
  }
  std::int64_t epoch() const noexcept { return epoch_; }

private:
  void step() {
    handed_since_step_ = 0;
    xlite::mark_step();
  }

  xlite::tensor<float> features_;
  xlite::tensor<std::int64_t> labels_;
  loader_options options_;
  std::uint64_t seed_;
  std::int64_t epoch_ = 0;
  std::int64_t next_batch_ = 0;
  std::int64_t handed_since_step_ = 0;
  std::unique_ptr<detail::batch_producer> producer_; // last: it reads the members above
};

inline std::string loader_state::to_string() const {
  return xlite::detail::concat("loader_state v1 epoch=", epoch, " next_batch=", next_batch, " seed=", seed);
}

inline loader_state loader_state::from_string(std::string_view text) {
  std::string_view rest = text;
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.remove_suffix(1);
  const auto fail = [&](std::string_view what) {
    throw value_error(xlite::detail::message("loader_state::from_string: \"", text.substr(0, 100),
                                             text.size() > 100 ? "...\"" : "\"", ": ", what,
                                             " (expected \"loader_state v1 epoch=E next_batch=B seed=S\")"));
  };
  const auto take = [&](std::string_view expected) {
    if (!rest.starts_with(expected)) fail(xlite::detail::message("no \"", expected, "\" where expected"));
    rest.remove_prefix(expected.size());
  };
  const auto number = [&](auto& value, std::string_view name) {
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec == std::errc::result_out_of_range) fail(xlite::detail::message(name, " is out of range"));
    if (ec != std::errc() || end == rest.data()) fail(xlite::detail::message(name, " is not a number"));
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  };
  loader_state s;
  take("loader_state v1 epoch=");
  number(s.epoch, "epoch");
  take(" next_batch=");
  number(s.next_batch, "next_batch");
  take(" seed=");
  number(s.seed, "seed");
  if (!rest.empty()) fail("unexpected text after the seed");
  if (s.epoch < 0 || s.next_batch < 0) fail("epoch and next_batch cannot be negative");
  return s;
}

} // namespace xlite::data
