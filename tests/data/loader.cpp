// The loader: coverage and shapes of an epoch, the platform-independent order, resuming,
// the contents that reach the device, when mark_step() happens, errors and shutdown.

#include "xlite/data/loader.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../thrown.hpp"
#include "xlite/lazy/ops.hpp"

using Catch::Matchers::Contains;
using xlite_test::message_of;
namespace data = xlite::data;
namespace lazy = xlite::lazy;

namespace {

// n samples of shape (2, 3): sample s holds 10 s + j, and its label is s, so a batch's
// labels say which samples it holds.
struct dataset {
  xlite::tensor<float> features;
  xlite::tensor<std::int64_t> labels;
};

dataset make_dataset(std::int64_t n) {
  dataset d{xlite::tensor<float>(xlite::shape{n, 2, 3}), xlite::tensor<std::int64_t>(xlite::shape{n})};
  for (std::int64_t s = 0; s < n; ++s) {
    for (std::int64_t j = 0; j < 6; ++j) d.features.data()[s * 6 + j] = static_cast<float>(10 * s + j);
    d.labels.data()[s] = s;
  }
  return d;
}

data::loader make_loader(std::int64_t n, data::loader_options options) {
  dataset d = make_dataset(n);
  return data::loader(std::move(d.features), std::move(d.labels), std::move(options));
}

std::vector<std::int64_t> samples_of(const data::batch& b) {
  const auto labels = b.labels.to_host<std::int64_t>();
  return {labels.begin(), labels.end()};
}

// The samples of the rest of the current epoch, batch by batch.
std::vector<std::vector<std::int64_t>> rest_of_epoch(data::loader& l) {
  std::vector<std::vector<std::int64_t>> batches;
  for (const data::batch& b : l) batches.push_back(samples_of(b));
  return batches;
}

std::vector<std::int64_t> flat(const std::vector<std::vector<std::int64_t>>& batches) {
  std::vector<std::int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

std::int64_t mark_steps() { return xlite::metrics::counter_value("MarkStep"); }

} // namespace

TEST_CASE("an epoch hands out every sample once, in batches of the right shapes", "[data][loader]") {
  for (const bool shuffle : {false, true}) {
    for (const bool drop_last : {false, true}) {
      INFO("shuffle " << shuffle << ", drop_last " << drop_last);
      data::loader l = make_loader(10, {.batch_size = 4, .shuffle = shuffle, .seed = 7, .drop_last = drop_last});
      CHECK(l.batches_per_epoch() == (drop_last ? 2 : 3));
      std::vector<std::int64_t> samples;
      std::int64_t index = 0;
      for (const data::batch& b : l) {
        CHECK(b.index == index++);
        const std::int64_t rows = b.index == 2 ? 2 : 4;
        CHECK(b.features.shape() == xlite::shape{rows, 2, 3});
        CHECK(b.labels.shape() == xlite::shape{rows});
        CHECK(b.features.device() == xlite::device());
        for (const auto s : samples_of(b)) samples.push_back(s);
      }
      CHECK(index == l.batches_per_epoch());
      CHECK(l.epoch() == 1);
      const std::set<std::int64_t> distinct(samples.begin(), samples.end());
      CHECK(distinct.size() == samples.size());
      CHECK(samples.size() == (drop_last ? 8U : 10U));
      if (!shuffle) {
        std::vector<std::int64_t> in_order(samples.size());
        std::iota(in_order.begin(), in_order.end(), std::int64_t{0});
        CHECK(samples == in_order);
      }
    }
  }
}

TEST_CASE("without shuffling, an epoch is in dataset order", "[data][loader]") {
  data::loader l = make_loader(10, {.batch_size = 3});
  CHECK(rest_of_epoch(l) == std::vector<std::vector<std::int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}});
  data::loader one_batch = make_loader(10, {.batch_size = std::numeric_limits<std::int64_t>::max()});
  CHECK(one_batch.batches_per_epoch() == 1);
  CHECK(rest_of_epoch(one_batch) == std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}});
}

TEST_CASE("a batch on the device holds the gathered rows, after the transform", "[data][loader]") {
  const dataset d = make_dataset(9);
  data::loader_options options{.batch_size = 4, .shuffle = true, .seed = 3};
  options.transform = [](data::host_batch& b) {
    for (float& x : b.features) x += 0.5f;
  };
  data::loader l(d.features, d.labels, options);
  for (const data::batch& b : l) {
    const auto features = b.features.to_host<float>();
    const auto samples = samples_of(b);
    REQUIRE(features.size() == static_cast<std::int64_t>(samples.size()) * 6);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      for (std::int64_t j = 0; j < 6; ++j) {
        CHECK(features.data()[static_cast<std::int64_t>(i) * 6 + j] == d.features.data()[samples[i] * 6 + j] + 0.5f);
      }
    }
  }
}

TEST_CASE("the order depends on the seed and the epoch only, and is the same on every platform", "[data][loader]") {
  // Written out from an independent implementation (Python) of SplitMix64 and Fisher-Yates
  // with the rejection-sampled draw: a shuffle that depends on the standard library fails.
  const auto first_ten = [](std::uint64_t seed, std::int64_t epoch) {
    data::loader l = make_loader(100, {.batch_size = 10, .shuffle = true, .seed = seed});
    l.start_epoch(epoch);
    return samples_of(*l.next());
  };
  CHECK(first_ten(42, 0) == std::vector<std::int64_t>{17, 8, 94, 71, 41, 51, 13, 90, 95, 33});
  CHECK(first_ten(42, 1) == std::vector<std::int64_t>{12, 58, 11, 21, 78, 86, 38, 45, 80, 96});
  CHECK(first_ten(0, 0) == std::vector<std::int64_t>{34, 47, 61, 58, 62, 49, 79, 91, 39, 14});
  CHECK(first_ten(2024, 7) == std::vector<std::int64_t>{39, 87, 83, 75, 21, 91, 81, 3, 22, 29});
  data::loader small = make_loader(10, {.batch_size = 10, .shuffle = true, .seed = 42});
  CHECK(samples_of(*small.next()) == std::vector<std::int64_t>{6, 1, 8, 5, 2, 7, 4, 3, 9, 0});

  // Epochs advance by themselves, and epoch 2 reached that way is epoch 2 started directly.
  data::loader walked = make_loader(30, {.batch_size = 8, .shuffle = true, .seed = 5});
  const auto epoch0 = flat(rest_of_epoch(walked));
  const auto epoch1 = flat(rest_of_epoch(walked));
  const auto epoch2 = flat(rest_of_epoch(walked));
  CHECK(walked.epoch() == 3);
  CHECK(epoch0 != epoch1);
  CHECK(epoch1 != epoch2);
  data::loader direct = make_loader(30, {.batch_size = 8, .shuffle = true, .seed = 5});
  direct.start_epoch(2);
  CHECK(flat(rest_of_epoch(direct)) == epoch2);
  direct.start_epoch(0);
  CHECK(flat(rest_of_epoch(direct)) == epoch0);
}

TEST_CASE("a loader restored from a saved state hands out what an uninterrupted run would", "[data][loader]") {
  const data::loader_options options{.batch_size = 7, .shuffle = true, .seed = 5, .prefetch = 3};
  data::loader uninterrupted = make_loader(50, options);
  const auto epoch0 = rest_of_epoch(uninterrupted);
  const auto epoch1 = rest_of_epoch(uninterrupted);
  REQUIRE(epoch1.size() == 8);

  std::string saved;
  {
    data::loader interrupted = make_loader(50, options);
    rest_of_epoch(interrupted);
    for (int i = 0; i < 3; ++i) interrupted.next();
    CHECK(interrupted.state() == data::loader_state{1, 3, 5});
    saved = interrupted.state().to_string();
  } // destroyed with batches prefetched

  data::loader_options other_seed = options;
  other_seed.seed = 999; // the state's seed wins
  data::loader resumed = make_loader(50, other_seed);
  resumed.restore(data::loader_state::from_string(saved));
  std::vector<std::vector<std::int64_t>> rest;
  std::int64_t index = 3;
  for (const data::batch& b : resumed) {
    CHECK(b.index == index++);
    rest.push_back(samples_of(b));
  }
  CHECK(rest == std::vector<std::vector<std::int64_t>>(epoch1.begin() + 3, epoch1.end()));
  CHECK(resumed.state() == data::loader_state{2, 0, 5});

  // A state saved after the last batch ends its epoch at the next fetch.
  data::loader at_end = make_loader(50, options);
  at_end.restore({0, 8, 5});
  CHECK_FALSE(at_end.next().has_value());
  CHECK(at_end.state() == data::loader_state{1, 0, 5});

  const data::loader_state past_the_end{0, 9, 5};
  CHECK_THAT(message_of<xlite::value_error>([&] { resumed.restore(past_the_end); }),
             Contains("batch 9 is outside an epoch of 8 batches"));
  CHECK_THAT(message_of<xlite::value_error>([&] { resumed.start_epoch(-1); }), Contains("epoch -1 is negative"));
}

TEST_CASE("loader_state round-trips through one line of text, and malformed text is a value_error", "[data][loader]") {
  const data::loader_state s{3, 17, 42};
  CHECK(s.to_string() == "loader_state v1 epoch=3 next_batch=17 seed=42");
  CHECK(data::loader_state::from_string(s.to_string()) == s);
  CHECK(data::loader_state::from_string(s.to_string() + "\n") == s);
  const data::loader_state extremes{std::numeric_limits<std::int64_t>::max(), 0,
                                    std::numeric_limits<std::uint64_t>::max()};
  CHECK(data::loader_state::from_string(extremes.to_string()) == extremes);

  for (const char* bad :
       {"", "loader_state v1", "loader_state v2 epoch=3 next_batch=17 seed=42",
        "loader_state v1 epoch=x next_batch=17 seed=42", "loader_state v1 epoch=3 next_batch=17",
        "loader_state v1 epoch=3  next_batch=17 seed=42", "loader_state v1 epoch=-1 next_batch=0 seed=0",
        "loader_state v1 epoch=3 next_batch=17 seed=42 and more",
        "loader_state v1 epoch=3 next_batch=17 seed=18446744073709551616"}) {
    INFO(bad);
    CHECK_THAT(message_of<xlite::value_error>([&] { data::loader_state::from_string(bad); }),
               Contains("loader_state::from_string: \"" + std::string(bad) + "\""));
  }
}

TEST_CASE("mark_step runs on the fetch after batches_per_execution batches, and at the end of the epoch",
          "[data][loader]") {
  struct expected {
    std::int64_t batches_per_execution;
    std::vector<std::int64_t> marks;    // MarkStep's count after each fetch, from the first
    std::vector<bool> previous_pending; // at fetch k > 0, whether the step traced on batch k - 1 is still pending
  };
  for (const auto& e :
       {expected{1, {0, 1, 2, 3}, {false, false, false}}, expected{2, {0, 0, 1, 2}, {true, false, false}}}) {
    INFO("batches_per_execution " << e.batches_per_execution);
    data::loader l = make_loader(6, {.batch_size = 2, .batches_per_execution = e.batches_per_execution});
    const std::int64_t start = mark_steps();
    std::vector<std::int64_t> marks;
    std::vector<bool> previous_pending;
    std::vector<lazy::tensor> traced;
    for (;;) {
      const std::optional<data::batch> b = l.next();
      marks.push_back(mark_steps() - start);
      if (!traced.empty()) previous_pending.push_back(traced.back().has_pending_trace());
      if (!b) break;
      traced.push_back(b->features * 2.0f); // the "step" traced on this batch
    }
    CHECK(marks == e.marks);
    CHECK(previous_pending == e.previous_pending);
    for (const auto& t : traced) CHECK_FALSE(t.has_pending_trace());
    CHECK(traced.back().to_host<float>().data()[0] == 2.0f * 40.0f); // sample 4's first value, doubled
  }
}

TEST_CASE("a dataset whose features and labels disagree, or bad options, are value_errors", "[data][loader]") {
  const dataset d = make_dataset(5);
  const auto refused = [](auto make) { return message_of<xlite::value_error>(make); };
  CHECK_THAT(refused([&] { data::loader(d.features, xlite::tensor<std::int64_t>(xlite::shape{4})); }),
             Contains("features of shape (5, 2, 3) have 5 samples, but there are 4 labels"));
  CHECK_THAT(refused([&] {
               data::loader(d.features, xlite::tensor<std::int64_t>(xlite::shape{5, 1}));
             }),
             Contains("the labels must have shape (N,), not (5, 1)"));
  CHECK_THAT(refused([&] { data::loader(xlite::tensor<float>(xlite::shape{}), d.labels); }), Contains("scalar"));
  CHECK_THAT(refused([&] { data::loader(d.features, d.labels, {.batch_size = 0}); }),
             Contains("batch_size must be at least 1, not 0"));
  CHECK_THAT(refused([&] { data::loader(d.features, d.labels, {.prefetch = 0}); }),
             Contains("prefetch must be at least 1, not 0"));
  CHECK_THAT(refused([&] { data::loader(d.features, d.labels, {.batches_per_execution = 0}); }),
             Contains("batches_per_execution must be at least 1, not 0"));
}

TEST_CASE("a failure on the loader's thread reaches the consumer at its batch, and the next fetch tries again",
          "[data][loader]") {
  std::atomic<int> failures_left{1};
  data::loader_options options{.batch_size = 2};
  options.transform = [&](data::host_batch& b) {
    if (b.index == 2 && failures_left.fetch_sub(1) > 0) throw xlite::value_error("injected failure");
  };
  data::loader l = make_loader(10, options);
  CHECK(l.next()->index == 0);
  CHECK(l.next()->index == 1);
  CHECK_THROWS_MATCHES(l.next(), xlite::value_error, Catch::Message("injected failure"));
  CHECK(l.state() == data::loader_state{0, 2, 0});
  const auto retried = l.next();
  REQUIRE(retried.has_value());
  CHECK(retried->index == 2);
  CHECK(samples_of(*retried) == std::vector<std::int64_t>{4, 5});
  CHECK(rest_of_epoch(l) == std::vector<std::vector<std::int64_t>>{{6, 7}, {8, 9}});
}

TEST_CASE("the loader's thread stays at most prefetch batches ahead", "[data][loader]") {
  const auto uploads = [] { return xlite::metrics::counter_value("TransferToDevice"); };
  const std::int64_t before = uploads();
  data::loader l = make_loader(100, {.batch_size = 1, .prefetch = 3});
  l.next();
  // Two uploads per batch: the one handed out and the three the thread then prepares.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (uploads() - before < 2 * (1 + 3) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50)); // time to overshoot, if it would
  CHECK(uploads() - before == 2 * (1 + 3));
  l.next();
  while (uploads() - before < 2 * (2 + 3) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(uploads() - before == 2 * (2 + 3));
}

TEST_CASE("destroying a loader mid-epoch stops its thread without hanging", "[data][loader]") {
  const auto began = std::chrono::steady_clock::now();
  { // its thread waits for room in a full queue
    data::loader l = make_loader(1000, {.batch_size = 1});
    l.next();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  { // never started
    data::loader l = make_loader(1000, {.batch_size = 1});
  }
  { // its thread is in the transform
    data::loader_options slow{.batch_size = 1};
    slow.transform = [](data::host_batch&) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
    data::loader l = make_loader(1000, slow);
    l.next();
  }
  { // its thread has failed and exited
    data::loader_options failing{.batch_size = 1};
    failing.transform = [](data::host_batch& b) {
      if (b.index == 1) throw std::runtime_error("injected failure");
    };
    data::loader l = make_loader(1000, failing);
    l.next();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(10));
}
