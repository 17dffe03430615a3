#include <xlite/autodiff.hpp>
#include <xlite/lazy.hpp>
#include <xlite/optim.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "../runtime/eight_devices.hpp"
#include "profile_reader.hpp"

using Catch::Matchers::Contains;
using xlite::reduce_type;
using xlite::shape;
using xlite::lazy::tensor;

namespace {

constexpr std::int64_t replicas = 8;

// Replica k's value: element i is 100 k + i.
tensor value_of(std::int64_t k, const shape& s) {
  xlite::tensor<float> host(s);
  for (std::int64_t i = 0; i < s.numel(); ++i) host.data()[i] = static_cast<float>(100 * k + i);
  return tensor::from(host);
}

std::vector<float> elements(const tensor& t) {
  const auto host = t.to_host<float>();
  return {host.data(), host.data() + host.size()};
}

// Runs body(k) on every replica, collecting each replica's failed checks as text: Catch's
// assertions are not thread-safe, so the replicas only record, and the test checks after.
void on_replicas(const std::function<void(std::int64_t, std::vector<std::string>&)>& body) {
  std::mutex mutex;
  std::vector<std::string> failures;
  xlite::spawn([&](std::int64_t k) {
    std::vector<std::string> mine;
    body(k, mine);
    std::scoped_lock lock(mutex);
    for (auto& f : mine) failures.push_back("replica " + std::to_string(k) + ": " + f);
  });
  for (const auto& f : failures) FAIL_CHECK(f);
}

void expect(std::vector<std::string>& failures, bool ok, const std::string& what) {
  if (!ok) failures.push_back(what);
}

} // namespace

TEST_CASE("spawn: each replica runs on its own device with its ordinal", "[replicas]") {
  use_eight_devices();
  CHECK(xlite::runtime::world_size() == 1);
  CHECK(xlite::runtime::global_ordinal() == 0);
  std::vector<std::int64_t> seen(replicas, -1);
  std::vector<std::int64_t> devices(replicas, -1);
  std::atomic<std::int64_t> masters{0};
  xlite::spawn([&](std::int64_t k) {
    seen[static_cast<std::size_t>(k)] = xlite::runtime::global_ordinal() + 100 * xlite::runtime::world_size();
    devices[static_cast<std::size_t>(k)] = xlite::device().ordinal();
    masters += xlite::runtime::is_master_ordinal() ? 1 : 0;
  });
  for (std::int64_t k = 0; k < replicas; ++k) {
    CHECK(seen[static_cast<std::size_t>(k)] == k + 800);
    CHECK(devices[static_cast<std::size_t>(k)] == k);
  }
  CHECK(masters == 1);
  CHECK(xlite::runtime::world_size() == 1);

  std::vector<std::int64_t> some;
  std::mutex mutex;
  xlite::spawn(
      [&](std::int64_t k) {
        std::scoped_lock lock(mutex);
        some.push_back(k + 10 * xlite::runtime::world_size());
      },
      3);
  std::ranges::sort(some);
  CHECK(some == std::vector<std::int64_t>{30, 31, 32});
  CHECK_THROWS_WITH(xlite::spawn([](std::int64_t) {}, 9),
                    Contains("spawn: 9 replicas need as many devices; there are 8"));
  CHECK_THROWS_WITH(xlite::spawn([](std::int64_t) { xlite::spawn([](std::int64_t) {}); }, 2),
                    Contains("spawn does not nest"));
}

TEST_CASE("replicas: collectives in the graph give their definitions", "[replicas]") {
  use_eight_devices();
  on_replicas([](std::int64_t k, std::vector<std::string>& failures) {
    const tensor x = value_of(k, shape{8, 2});
    const tensor sum = xlite::all_reduce(reduce_type::sum, x * 1.0f, 0.5); // fused into the step's graph
    const tensor max = xlite::all_reduce(reduce_type::max, x, 1.0, {{0, 1, 2, 3}, {4, 5, 6, 7}});
    const tensor gathered = xlite::all_gather(x, 1);
    const tensor scattered = xlite::reduce_scatter(reduce_type::sum, x, 1.0, 0, 8);
    const tensor exchanged = xlite::all_to_all(x, 0, 1, 8);
    const tensor shifted = xlite::collective_permute(x, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}});
    xlite::mark_step();

    const auto s = elements(sum);
    const auto m = elements(max);
    for (std::int64_t i = 0; i < 16; ++i) {
      expect(failures, s[static_cast<std::size_t>(i)] == 0.5f * static_cast<float>(100 * 28 + 8 * i), "all_reduce sum");
      const std::int64_t top = k < 4 ? 3 : 7;
      expect(failures, m[static_cast<std::size_t>(i)] == static_cast<float>(100 * top + i), "all_reduce max in groups");
    }
    // all_gather along dim 1: row r is [x_0[r], x_1[r], ..., x_7[r]], each of 2 elements.
    const auto g = elements(gathered);
    expect(failures, gathered.shape() == shape{8, 16}, "all_gather shape");
    for (std::int64_t r = 0; r < 8; ++r) {
      for (std::int64_t j = 0; j < 8; ++j) {
        for (std::int64_t c = 0; c < 2; ++c) {
          expect(failures, g[static_cast<std::size_t>(r * 16 + j * 2 + c)] == static_cast<float>(100 * j + r * 2 + c),
                 "all_gather element");
        }
      }
    }
    // reduce_scatter along dim 0: replica k gets row k of the sum.
    const auto rs = elements(scattered);
    expect(failures, scattered.shape() == shape{1, 2}, "reduce_scatter shape");
    for (std::int64_t c = 0; c < 2; ++c) {
      expect(failures, rs[static_cast<std::size_t>(c)] == static_cast<float>(2800 + 8 * (k * 2 + c)),
             "reduce_scatter element");
    }
    // all_to_all: replica k gets row k of every replica, side by side along dim 1.
    const auto a = elements(exchanged);
    expect(failures, exchanged.shape() == shape{1, 16}, "all_to_all shape");
    for (std::int64_t j = 0; j < 8; ++j) {
      for (std::int64_t c = 0; c < 2; ++c) {
        expect(failures, a[static_cast<std::size_t>(j * 2 + c)] == static_cast<float>(100 * j + k * 2 + c),
               "all_to_all element");
      }
    }
    // collective_permute: replica k holds k - 1's value; replica 0 is no target: zeros.
    const auto p = elements(shifted);
    for (std::int64_t i = 0; i < 16; ++i) {
      expect(failures, p[static_cast<std::size_t>(i)] == (k == 0 ? 0.0f : static_cast<float>(100 * (k - 1) + i)),
             "collective_permute element");
    }
  });
}

TEST_CASE("replicas: gradients flow back through the collectives", "[replicas]") {
  use_eight_devices();
  on_replicas([](std::int64_t k, std::vector<std::string>& failures) {
    // loss_k = sum(w_k * all_gather(x)); d(sum over replicas of loss)/dx_j, on replica j, is the
    // sum over k of w_k's j-th block: the reduce_scatter of the w's.
    const tensor x = value_of(k, shape{2});
    const tensor w = value_of(k + 1, shape{16});
    const tensor loss = xlite::lazy::sum(w * xlite::all_gather(x, 0), {0}, false);
    const auto grads = xlite::grad(loss, {x});
    xlite::mark_step();
    const auto gx = elements(grads[0]);
    for (std::int64_t c = 0; c < 2; ++c) {
      float expected = 0;
      for (std::int64_t r = 0; r < 8; ++r) expected += static_cast<float>(100 * (r + 1) + 2 * k + c);
      expect(failures, gx[static_cast<std::size_t>(c)] == expected, "gradient of all_gather");
    }
  });
}

TEST_CASE("replicas: optimizer_step applies the group's mean gradient on every replica", "[replicas]") {
  use_eight_devices();
  on_replicas([](std::int64_t k, std::vector<std::string>& failures) {
    std::vector<tensor> params = {value_of(0, shape{3})};      // 0, 1, 2 on every replica
    const std::vector<tensor> grads = {value_of(k, shape{3})}; // 100 k + i: differs by replica
    xlite::optim::sgd opt(params, {.lr = 1.0});
    xlite::optimizer_step(opt, std::span(params), std::span(grads), {}, true);
    // p - mean over replicas of (100 k + i) = i - (350 + i) = -350
    for (const float p : elements(params[0])) expect(failures, p == -350.0f, "parameter after the mean step");

    // In groups of 4: the mean over {0..3} is 150 + i, over {4..7} 550 + i.
    std::vector<tensor> again = {value_of(0, shape{3})};
    xlite::optim::sgd opt2(again, {.lr = 1.0});
    xlite::optimizer_step(opt2, std::span(again), std::span(grads), {{0, 1, 2, 3}, {4, 5, 6, 7}}, true);
    for (const float p : elements(again[0])) {
      expect(failures, p == (k < 4 ? -150.0f : -550.0f), "parameter after the group's mean step");
    }
  });
}

TEST_CASE("replicas: rendezvous and mesh_reduce exchange host values", "[replicas]") {
  use_eight_devices();
  on_replicas([](std::int64_t k, std::vector<std::string>& failures) {
    const auto payloads = xlite::rendezvous("hello", "replica " + std::to_string(k));
    for (std::int64_t j = 0; j < replicas; ++j) {
      expect(failures, payloads[static_cast<std::size_t>(j)] == "replica " + std::to_string(j), "rendezvous payload");
    }
    const double accuracy = 0.5 + 0.01 * static_cast<double>(k);
    const double mean = xlite::mesh_reduce("accuracy", accuracy, [](const std::vector<double>& all) {
      return std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size());
    });
    expect(failures, std::abs(mean - 0.535) < 1e-12, "mesh_reduce mean");
  });
}

TEST_CASE("replicas: a replica that throws fails the spawn at once, naming it", "[replicas]") {
  use_eight_devices();
  const auto begin = std::chrono::steady_clock::now();
  try {
    xlite::spawn([](std::int64_t k) {
      if (k == 3) throw std::runtime_error("no data for this shard");
      const tensor y = xlite::all_reduce(reduce_type::sum, value_of(k, shape{4}));
      xlite::mark_step();
      (void)elements(y); // waits for replica 3, which never comes
    });
    FAIL("spawn did not throw");
  } catch (const xlite::runtime::replica_error& e) {
    CHECK_THAT(e.what(), Contains("spawn: replica 3 of 8 failed: no data for this shard"));
    CHECK_THROWS_WITH(std::rethrow_if_nested(e), Contains("no data for this shard"));
  }
  CHECK(std::chrono::steady_clock::now() - begin < std::chrono::seconds(60));

  // The collectives work again in the next spawn.
  on_replicas([](std::int64_t k, std::vector<std::string>& failures) {
    const tensor y = xlite::all_reduce(reduce_type::sum, value_of(k, shape{1}));
    xlite::mark_step();
    expect(failures, elements(y)[0] == 2800.0f, "all_reduce after a failed spawn");
  });
}

TEST_CASE("replicas: replicas whose collectives disagree all fail with each call named", "[replicas]") {
  use_eight_devices();
  try {
    xlite::spawn([](std::int64_t k) {
      const tensor y = xlite::all_reduce(reduce_type::sum, value_of(k, k == 2 ? shape{4, 3} : shape{4, 2}));
      xlite::mark_step();
      (void)elements(y);
    });
    FAIL("spawn did not throw");
  } catch (const xlite::runtime::replica_error& e) {
    CHECK_THAT(e.what(), Contains("disagree"));
    CHECK_THAT(e.what(), Contains("device 2: all_reduce(sum, scale=1) of float32 (4, 3)"));
  }
  // Trace-time errors name the op and the shapes.
  const tensor x = value_of(0, shape{3, 2});
  const xlite::replica_groups pairs = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  CHECK_THROWS_WITH(xlite::reduce_scatter(reduce_type::sum, x, 1.0, 0, 2, pairs),
                    Contains("reduce_scatter: dimension 0 of shape (3, 2) does not split into 2 equal parts"));
  CHECK_THROWS_WITH(xlite::reduce_scatter(reduce_type::sum, x, 1.0, 0, 4, pairs),
                    Contains("shard_count is 4 but the replica groups have 2 members"));
  CHECK_THROWS_WITH(xlite::all_reduce(reduce_type::sum, x, 1.0, {{0, 1}, {1}}),
                    Contains("replica groups must be non-empty and of one size"));
  CHECK_THROWS_WITH(xlite::all_reduce(reduce_type::sum, x, 1.0, {{0, 1}, {1, 2}}),
                    Contains("device 1 is in more than one replica group"));
  CHECK_THROWS_WITH(xlite::all_reduce(reduce_type::logical_or, x), Contains("or takes bool and integer tensors"));
  CHECK_THROWS_WITH(xlite::all_to_all(x, 0, 1, 3, pairs), Contains("split_count is 3 but the replica groups have 2"));
  CHECK_THROWS_WITH(xlite::all_gather(x, 2), Contains("all_gather"));
}

TEST_CASE("replicas: a replica that reads a value early fails or agrees, never pairs the wrong collectives",
          "[replicas]") {
  use_eight_devices();
  // Replica 0's item() runs rb's collective before ra's; the others run both at the barrier.
  // Each collective's call site tells them apart: either the orders agree, or all fail.
  bool wrong = false;
  try {
    xlite::spawn([&](std::int64_t k) {
      const tensor a = value_of(k, shape{1});
      const tensor b = value_of(k, shape{1}) * 100.0f;
      const tensor ra = xlite::all_reduce(reduce_type::sum, a);
      const tensor rb = xlite::all_reduce(reduce_type::sum, b);
      if (k == 0) (void)rb.item<float>();
      xlite::mark_step();
      if (ra.item<float>() != 2800.0f || rb.item<float>() != 280000.0f) wrong = true;
    });
  } catch (const xlite::runtime::replica_error& e) {
    CHECK_THAT(e.what(), Contains("disagree"));
  }
  CHECK_FALSE(wrong);
}

TEST_CASE("replicas: a collective that fails in a step nobody reads still fails the spawn", "[replicas]") {
  use_eight_devices();
  auto& collectives = xlite::runtime::collectives();
  collectives.set_timeout(std::chrono::milliseconds(300));
  CHECK_THROWS_WITH(xlite::spawn([](std::int64_t k) {
                      if (k != 0) return; // the others never come
                      const tensor y = xlite::all_reduce(reduce_type::sum, value_of(k, shape{2}));
                      xlite::mark_step();
                    }),
                    Contains("spawn: a collective failed in a step no replica read: all_reduce: timed out waiting"));
  collectives.set_timeout(xlite::runtime::collective_timeout());
}

TEST_CASE("replicas: collectives name only replicas, and take the replica's own tensors", "[replicas]") {
  use_eight_devices();
  std::mutex mutex;
  std::vector<std::string> messages;
  xlite::spawn(
      [&](std::int64_t k) {
        const auto message_of = [](const auto& call) {
          try {
            call();
          } catch (const xlite::error& e) {
            return std::string(e.what());
          }
          return std::string("no error");
        };
        const tensor x = value_of(k, shape{2});
        const tensor elsewhere = tensor::from(xlite::tensor<float>(shape{2}, 1.0f), xlite::device("cpu:7"));
        std::scoped_lock lock(mutex);
        messages.push_back(message_of([&] { (void)xlite::collective_permute(x, {{0, 5}}); }));
        messages.push_back(message_of([&] { (void)xlite::all_gather(x, 0, {{0, 1, 2}, {3, 4, 5}}); }));
        messages.push_back(message_of([&] { (void)xlite::all_reduce(reduce_type::sum, elsewhere); }));
      },
      3);
  REQUIRE(messages.size() == 9);
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK_THAT(messages[3 * r], Contains("collective_permute: 5 is not a replica; the spawn has 3"));
    CHECK_THAT(messages[3 * r + 1], Contains("all_gather: 3 is not a replica; the spawn has 3"));
    CHECK_THAT(messages[3 * r + 2],
               Contains("passed a tensor on cpu:7; a replica's collectives take its own device's"));
  }
}

TEST_CASE("replicas: a profile draws each collective on the row of every device that takes part",
          "[replicas][profiler]") {
  use_eight_devices();
  const auto file =
      std::filesystem::temp_directory_path() / ("xlite-profile-collectives-" + std::to_string(::getpid()) + ".json");
  xlite::profiler::start(file);
  xlite::spawn([](std::int64_t k) {
    const auto x = tensor::from(xlite::tensor<float>(shape{4, 2}, static_cast<float>(k)));
    const tensor total = xlite::all_reduce(reduce_type::sum, x);
    xlite::mark_step();
    (void)total.to_host<float>();
  });
  xlite::profiler::stop();
  auto by_track = xlite_test::read_profile(file);
  for (std::int64_t k = 0; k < 8; ++k) {
    const std::string track = "device cpu:" + std::to_string(k);
    INFO(track);
    const auto collectives = xlite_test::named(by_track[track], "all_reduce float32(4, 2)");
    CHECK(collectives.size() == 1);
    CHECK(xlite_test::nested_in(collectives, xlite_test::named(by_track[track], "execute")));
  }
  CHECK(by_track.count("collectives") == 0); // the program's own row: xlite draws nothing there
}
