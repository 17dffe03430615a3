#include <xlite/runtime/collectives.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collective_checks.hpp"
#include "eight_devices.hpp"

using namespace xlite_test; // shape, buffer_ptr, device_collectives, reduce_type, ... and the checks
using Catch::Matchers::Contains;
using xlite::dtype;
using xlite::runtime::buffer;
using xlite::runtime::collective_error;

TEST_CASE("collectives: all_reduce, all_gather, reduce_scatter and all_to_all match their definitions",
          "[collectives]") {
  use_eight_devices();
  check_collectives<float>(1);
  check_collectives<double>(2);
  check_collectives<bfloat16>(3);
  check_collectives<std::int32_t>(4);
  check_collectives<std::int8_t>(5);
  check_collectives<bool>(6);
}

TEST_CASE("collectives: integer sums wrap, logical reductions, and NaN wins min and max", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  std::vector<buffer_ptr> sums(devices), ands(devices), maxima(devices);
  require_no_errors(on_every_device([&](std::int64_t d) {
    const auto i = static_cast<std::size_t>(d);
    auto x = xlite::runtime::make_buffer(dtype::i32, shape{3});
    x->as<std::int32_t>()[0] = INT32_MAX;           // sum wraps
    x->as<std::int32_t>()[1] = d == 3 ? 0 : 0b1011; // and
    x->as<std::int32_t>()[2] = static_cast<std::int32_t>(d);
    sums[i] = collectives.all_reduce(d, x, reduce_type::sum);
    ands[i] = collectives.all_reduce(d, x, reduce_type::logical_and);
    auto f = xlite::runtime::make_buffer(dtype::f32, shape{2});
    f->as<float>()[0] = d == 5 ? std::nanf("") : static_cast<float>(d);
    f->as<float>()[1] = static_cast<float>(d);
    maxima[i] = collectives.all_reduce(d, f, reduce_type::max);
  }));
  for (std::size_t i = 0; i < devices; ++i) {
    CHECK(sums[i]->as<std::int32_t>()[0] == static_cast<std::int32_t>(8u * static_cast<std::uint32_t>(INT32_MAX)));
    CHECK(sums[i]->as<std::int32_t>()[2] == 28);
    CHECK(ands[i]->as<std::int32_t>()[1] == 0);
    CHECK(ands[i]->as<std::int32_t>()[2] == 0); // 0 & 1 & ... & 7
    CHECK(std::isnan(maxima[i]->as<float>()[0]));
    CHECK(maxima[i]->as<float>()[1] == 7.0f);
  }
}

TEST_CASE("collectives: a member may reuse its input as soon as its call returns", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  // Each member overwrites its input right after each call, as the buffer plan may; the
  // final barrier keeps that from reaching another member that still reads it.
  std::vector<std::vector<buffer_ptr>> results(devices);
  require_no_errors(on_every_device([&](std::int64_t d) {
    const auto i = static_cast<std::size_t>(d);
    for (int round = 0; round < 25; ++round) {
      auto x = xlite::runtime::make_buffer(dtype::f32, shape{8, 64});
      for (std::int64_t e = 0; e < 8 * 64; ++e) x->as<float>()[e] = static_cast<float>(d);
      const auto scribble = [&] { std::fill_n(x->as<float>(), 8 * 64, -1.0f); };
      results[i].push_back(collectives.all_gather(d, x, 0));
      scribble();
      for (std::int64_t e = 0; e < 8 * 64; ++e) x->as<float>()[e] = static_cast<float>(d);
      results[i].push_back(collectives.all_to_all(d, x, 0, 1, devices));
      scribble();
      for (std::int64_t e = 0; e < 8 * 64; ++e) x->as<float>()[e] = static_cast<float>(d);
      results[i].push_back(
          collectives.collective_permute(d, x, {{0, 7}, {1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 4}, {6, 5}, {7, 6}}));
      scribble();
    }
  }));
  std::int64_t wrong = 0;
  for (std::int64_t d = 0; d < devices; ++d) {
    for (std::size_t r = 0; r < results[static_cast<std::size_t>(d)].size(); ++r) {
      const buffer& b = *results[static_cast<std::size_t>(d)][r];
      for (std::int64_t e = 0; e < b.shape().numel(); ++e) wrong += b.as<float>()[e] < 0 ? 1 : 0;
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("memory: a buffer counts against the device it is made for, an all_reduce's scratch against none",
          "[collectives][memory]") {
  use_eight_devices();
  using xlite::runtime::allocating_on;
  using xlite::runtime::memory_info;
  const auto device = [](std::int64_t d) { return xlite::device("cpu:" + std::to_string(d)); };
  const std::int64_t used_before = memory_info(device(3)).bytes_used;
  {
    const allocating_on on(device(3));
    const buffer_ptr counted = xlite::runtime::make_buffer(dtype::f32, shape{10, 10});
    {
      const auto scratch = allocating_on::nowhere();
      const buffer_ptr uncounted = xlite::runtime::make_buffer(dtype::f32, shape{1000});
      CHECK(memory_info(device(3)).bytes_used == used_before + 400);
    }
    CHECK(memory_info(device(3)).peak_bytes_used >= used_before + 400);
  }
  CHECK(memory_info(device(3)).bytes_used == used_before);
  xlite::runtime::reset_peak_memory(device(3));
  CHECK(memory_info(device(3)).peak_bytes_used == used_before);

  // Each member's peak during an all_reduce is its result: the shared scratch is no one's.
  device_collectives collectives;
  std::vector<buffer_ptr> inputs, results(devices);
  for (std::int64_t d = 0; d < devices; ++d) {
    const allocating_on on(device(d));
    inputs.push_back(xlite::runtime::make_buffer(dtype::f32, shape{256}));
    std::fill_n(inputs.back()->as<float>(), 256, 1.0f);
  }
  std::vector<std::int64_t> before;
  for (std::int64_t d = 0; d < devices; ++d) {
    xlite::runtime::reset_peak_memory(device(d));
    before.push_back(memory_info(device(d)).bytes_used);
  }
  require_no_errors(on_every_device([&](std::int64_t d) {
    const allocating_on on(device(d));
    results[static_cast<std::size_t>(d)] = collectives.all_reduce(d, inputs[static_cast<std::size_t>(d)], reduce_type::sum);
  }));
  for (std::int64_t d = 0; d < devices; ++d) {
    CHECK(results[static_cast<std::size_t>(d)]->as<float>()[255] == 8.0f);
    CHECK(memory_info(device(d)).bytes_used == before[static_cast<std::size_t>(d)] + 1024);
    CHECK(memory_info(device(d)).peak_bytes_used == before[static_cast<std::size_t>(d)] + 1024);
  }
}

TEST_CASE("collectives: collective_permute sends along pairs; other devices get zeros", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  const std::vector<std::pair<std::int64_t, std::int64_t>> ring = {{0, 1}, {1, 2}, {2, 3}, {3, 0}, {5, 6}};
  std::vector<buffer_ptr> results(devices);
  require_no_errors(on_every_device([&](std::int64_t d) {
    auto x = xlite::runtime::make_buffer(dtype::i64, shape{2, 2});
    for (int k = 0; k < 4; ++k) x->as<std::int64_t>()[k] = 10 * d + k;
    results[static_cast<std::size_t>(d)] = collectives.collective_permute(d, x, ring);
  }));
  const std::int64_t from[devices] = {3, 0, 1, 2, -1, -1, 5, -1};
  for (std::int64_t d = 0; d < devices; ++d) {
    for (int k = 0; k < 4; ++k) {
      CHECK(results[static_cast<std::size_t>(d)]->as<std::int64_t>()[k] == (from[d] < 0 ? 0 : 10 * from[d] + k));
    }
  }
  CHECK_THROWS_WITH(collectives.collective_permute(0, results[0], {{0, 1}, {0, 2}}),
                    Contains("device 0 is the source of two pairs"));
  CHECK_THROWS_WITH(collectives.collective_permute(0, results[0], {{0, 9}}), Contains("9 is not a device"));
}

TEST_CASE("collectives: rendezvous returns every payload in replica order", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  std::vector<std::vector<std::string>> seen(devices), evens(devices);
  require_no_errors(on_every_device([&](std::int64_t d) {
    seen[static_cast<std::size_t>(d)] = collectives.rendezvous(d, "init", "from " + std::to_string(d));
    if (d % 2 == 0)
      evens[static_cast<std::size_t>(d)] = collectives.rendezvous(d, "evens", std::to_string(d), {6, 4, 2, 0});
  }));
  for (std::int64_t d = 0; d < devices; ++d) {
    const auto& payloads = seen[static_cast<std::size_t>(d)];
    REQUIRE(payloads.size() == devices);
    for (std::int64_t j = 0; j < devices; ++j)
      CHECK(payloads[static_cast<std::size_t>(j)] == "from " + std::to_string(j));
    if (d % 2 == 0) CHECK(evens[static_cast<std::size_t>(d)] == std::vector<std::string>{"6", "4", "2", "0"});
  }
}

TEST_CASE("collectives: members that disagree all fail, naming each member's call", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  const auto errors = on_every_device([&](std::int64_t d) {
    auto x = xlite::runtime::make_buffer(dtype::f32, d == 2 ? shape{4, 3} : shape{4, 2});
    std::memset(x->data(), 0, static_cast<std::size_t>(x->byte_size()));
    collectives.all_reduce(d, x, reduce_type::sum, 1.0, {{0, 1, 2, 3}, {4, 5, 6, 7}});
  });
  for (std::int64_t d = 0; d < 4; ++d) {
    REQUIRE(errors[static_cast<std::size_t>(d)]);
    const std::string message = what(errors[static_cast<std::size_t>(d)]);
    CHECK_THAT(message, Contains("all_reduce: the members of group [0, 1, 2, 3] disagree"));
    CHECK_THAT(message, Contains("device 1: all_reduce(sum, scale=1) of float32 (4, 2)"));
    CHECK_THAT(message, Contains("device 2: all_reduce(sum, scale=1) of float32 (4, 3)"));
  }
  // A failure is final: later collectives, of any group, fail at once with it until reset().
  auto x = xlite::runtime::make_buffer(dtype::f32, shape{1});
  CHECK_THROWS_WITH(collectives.all_gather(0, x, 0, {{0}, {1, 2, 3, 4, 5, 6, 7}}),
                    Contains("all_gather: all_reduce: the members of group [0, 1, 2, 3] disagree"));
  REQUIRE(collectives.failure().has_value());
  collectives.reset();
  CHECK_FALSE(collectives.failure().has_value());
  CHECK(collectives.all_gather(0, x, 0, {{0}, {1, 2, 3, 4, 5, 6, 7}})->shape() == shape{1});
}

TEST_CASE("collectives: the call site and the groups are part of what members compare", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  // One disagreement per run: the first failure is final, so of two the other may never be
  // reported (which one comes first is up to the threads).
  const auto all_reduce_with = [&](auto groups_of, auto site_of) {
    return on_every_device([&](std::int64_t d) {
      auto x = xlite::runtime::make_buffer(dtype::f32, shape{2});
      collectives.all_reduce(d, x, reduce_type::sum, 1.0, groups_of(d), site_of(d));
    });
  };
  const replica_groups groups{{0, 1}, {2, 3, 4, 5, 6, 7}};
  SECTION("one member names the groups in another order") {
    const auto errors = all_reduce_with(
        [&](std::int64_t d) {
          return d == 1 ? replica_groups{{1, 0}, {2, 3, 4, 5, 6, 7}} : groups;
        },
        [](std::int64_t) { return "a.cpp:1"; });
    REQUIRE(errors[0]);
    CHECK_THAT(what(errors[0]), Contains("device 1: all_reduce(sum, scale=1) of float32 (2,) in groups [[1, 0], [2, "
                                         "3, 4, 5, 6, 7]] at a.cpp:1"));
    CHECK_THAT(what(errors[0]), Contains("device 0: all_reduce(sum, scale=1) of float32 (2,) in groups [[0, 1], [2, "
                                         "3, 4, 5, 6, 7]] at a.cpp:1"));
  }
  SECTION("one member calls from another site") {
    const auto errors = all_reduce_with([&](std::int64_t) { return groups; },
                                        [](std::int64_t d) { return d == 4 ? "b.cpp:2" : "a.cpp:1"; });
    REQUIRE(errors[4]);
    CHECK_THAT(what(errors[4]), Contains("device 4: all_reduce(sum, scale=1) of float32 (2,) in groups [[0, 1], [2, "
                                         "3, 4, 5, 6, 7]] at b.cpp:2"));
    CHECK_THAT(what(errors[4]), Contains("device 5: all_reduce(sum, scale=1) of float32 (2,) in groups [[0, 1], [2, "
                                         "3, 4, 5, 6, 7]] at a.cpp:1"));
  }
}

TEST_CASE("collectives: abort fails the meetings in progress and the later ones, until reset", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  std::atomic<int> waiting{0};
  const auto errors = on_every_device([&](std::int64_t d) {
    if (d == 0) {
      while (waiting.load() < 7) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      collectives.abort("replica 0 failed: out of memory");
      return;
    }
    ++waiting;
    auto x = xlite::runtime::make_buffer(dtype::f32, shape{2});
    collectives.all_reduce(d, x, reduce_type::sum); // waits for device 0, which never comes
  });
  for (std::int64_t d = 1; d < devices; ++d) {
    REQUIRE(errors[static_cast<std::size_t>(d)]);
    CHECK_THAT(what(errors[static_cast<std::size_t>(d)]), Contains("replica 0 failed: out of memory"));
  }
  CHECK_THROWS_WITH(collectives.rendezvous(0, "later", "", {0}), Contains("replica 0 failed: out of memory"));
  collectives.reset();
  CHECK(collectives.rendezvous(0, "later", "x", {0}) == std::vector<std::string>{"x"});
}

TEST_CASE("collectives: a member that never comes is a timeout error for every member", "[collectives]") {
  use_eight_devices();
  device_collectives collectives;
  collectives.set_timeout(std::chrono::milliseconds(200));
  const auto begin = std::chrono::steady_clock::now();
  const auto errors = on_every_device([&](std::int64_t d) {
    if (d == 6) return; // never calls
    auto x = xlite::runtime::make_buffer(dtype::f32, shape{4});
    collectives.all_gather(d, x, 0);
  });
  CHECK(std::chrono::steady_clock::now() - begin < std::chrono::seconds(10));
  for (std::int64_t d = 0; d < devices; ++d) {
    if (d == 6) continue;
    REQUIRE(errors[static_cast<std::size_t>(d)]);
    CHECK_THAT(what(errors[static_cast<std::size_t>(d)]),
               Contains("all_gather: timed out waiting for device(s) [6] of group [0, 1, 2, 3, 4, 5, 6, 7]"));
  }
  // The late member finds the failed meeting and fails too, without waiting.
  auto x = xlite::runtime::make_buffer(dtype::f32, shape{4});
  CHECK_THROWS_AS(collectives.all_gather(6, x, 0), collective_error);
}

TEST_CASE("collectives: bad replica groups and arguments are collective_errors", "[collectives]") {
  use_eight_devices();
  device_collectives collectives(std::chrono::milliseconds(200));
  auto x = xlite::runtime::make_buffer(dtype::f32, shape{6, 2});
  CHECK_THROWS_WITH(collectives.all_reduce(0, x, reduce_type::sum, 1.0, {{0, 1}, {1, 2}}),
                    Contains("device 1 is in more than one replica group"));
  CHECK_THROWS_WITH(collectives.all_reduce(0, x, reduce_type::sum, 1.0, {{1, 2}}),
                    Contains("device 0 is in none of the replica groups"));
  CHECK_THROWS_WITH(collectives.all_reduce(0, x, reduce_type::sum, 1.0, {{0, 8}}),
                    Contains("replica group member 8 is not a device; there are 8 devices"));
  CHECK_THROWS_WITH(collectives.all_reduce(0, x, reduce_type::sum, 1.0, {{0}, {}}),
                    Contains("a replica group is empty"));
  const replica_groups alone = {{0}, {1, 2, 3, 4, 5, 6, 7}}; // device 0 meets itself at once
  CHECK_THROWS_WITH(collectives.all_reduce(0, x, reduce_type::logical_or, 1.0, alone),
                    Contains("or takes bool and integer tensors"));
  auto i = xlite::runtime::make_buffer(dtype::i32, shape{6, 2});
  CHECK_THROWS_WITH(collectives.all_reduce(0, i, reduce_type::sum, 0.5, alone),
                    Contains("scale 0.5 applies to floating-point tensors, not int32"));
  CHECK_THROWS_WITH(collectives.all_gather(0, x, 2, alone),
                    Contains("all_gather: dimension 2 is out of range for shape (6, 2)"));
  CHECK(collectives.reduce_scatter(0, x, reduce_type::sum, 1.0, 1, alone)->shape() == shape{6, 2});
  CHECK_THROWS_WITH(collectives.all_to_all(0, x, 0, 1, 2, alone),
                    Contains("all_to_all: split_count is 2 but the group has 1 members"));
  // A bad argument found after the meeting fails every member, none waits.
  const auto errors = on_every_device([&](std::int64_t d) {
    auto y = xlite::runtime::make_buffer(dtype::f32, shape{3, 2});
    collectives.reduce_scatter(d, y, reduce_type::sum, 1.0, 0, {{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  });
  for (const auto& e : errors) {
    REQUIRE(e);
    CHECK_THAT(what(e), Contains("reduce_scatter: dimension 0 of shape (3, 2) (3) does not split into 2 equal parts"));
  }
}
