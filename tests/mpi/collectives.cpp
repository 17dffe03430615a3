// The collectives with their members spread over processes: run under mpirun with 2 and 4
// processes and 8 global devices (XLITE_NUM_DEVICES = 8 / processes).

#include <xlite/lazy.hpp>
#include <xlite/runtime/collectives.hpp>
#include <xlite/runtime/processes.hpp>
#include <xlite/runtime/replica.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "../runtime/collective_checks.hpp"

using Catch::Matchers::Contains;
using namespace xlite_test;
using xlite::runtime::collective_error;

TEST_CASE("mpi: the run's devices are numbered across processes", "[mpi]") {
  REQUIRE(xlite::runtime::global_runtime_device_count() == devices);
  CHECK(xlite::runtime::process_count() * xlite::device_count() == devices);
  CHECK(xlite::runtime::global_device(xlite::device("cpu:1")) ==
        xlite::runtime::process_index() * xlite::device_count() + 1);
}

TEST_CASE("mpi: all_reduce, all_gather, reduce_scatter and all_to_all match their definitions across processes",
          "[mpi]") {
  check_collectives<float>(1);
  check_collectives<double>(2);
  check_collectives<bfloat16>(3);
  check_collectives<std::int32_t>(4);
  check_collectives<bool>(6);
}

TEST_CASE("mpi: collective_permute and rendezvous across processes", "[mpi]") {
  device_collectives collectives;
  std::vector<buffer_ptr> results(devices);
  std::vector<std::vector<std::string>> seen(devices);
  const xlite::ir::permute_pairs ring = {{0, 7}, {7, 3}, {3, 4}, {4, 0}, {5, 6}};
  const std::int64_t from[devices] = {4, -1, -1, 7, 3, -1, 5, 0};
  require_no_errors(on_every_device([&](std::int64_t d) {
    const buffer_ptr x = xlite::runtime::make_buffer(xlite::dtype::i64, shape({3}));
    for (std::int64_t i = 0; i < 3; ++i) x->as<std::int64_t>()[i] = 10 * d + i;
    results[static_cast<std::size_t>(d)] = collectives.collective_permute(d, x, ring);
    seen[static_cast<std::size_t>(d)] = collectives.rendezvous(d, "hello", "from " + std::to_string(d));
  }));
  for (std::int64_t d = 0; d < devices; ++d) {
    if (!is_local(d)) continue;
    const auto i = static_cast<std::size_t>(d);
    for (std::int64_t e = 0; e < 3; ++e) {
      CHECK(results[i]->as<std::int64_t>()[e] == (from[d] < 0 ? 0 : 10 * from[d] + e));
    }
    REQUIRE(seen[i].size() == devices);
    for (std::int64_t j = 0; j < devices; ++j)
      CHECK(seen[i][static_cast<std::size_t>(j)] == "from " + std::to_string(j));
  }
}

TEST_CASE("mpi: members in different processes that disagree all fail, naming each member's call", "[mpi]") {
  device_collectives collectives;
  const std::vector<std::exception_ptr> errors = on_every_device([&](std::int64_t d) {
    const std::int64_t columns = d == devices - 1 ? 3 : 2; // the last device is in the last process
    collectives.all_reduce(d, xlite::runtime::make_buffer(xlite::dtype::f32, shape({4, columns})), reduce_type::sum);
  });
  for (std::int64_t d = 0; d < devices; ++d) {
    if (!is_local(d)) continue;
    const auto& e = errors[static_cast<std::size_t>(d)];
    REQUIRE(e);
    CHECK_THAT(what(e), Contains("disagree") && Contains("device 0: all_reduce(sum, scale=1) of float32 (4, 2)") &&
                            Contains("device 7: all_reduce(sum, scale=1) of float32 (4, 3)"));
  }
}

TEST_CASE("mpi: replicas of every process reduce, gather and meet lazily", "[mpi]") {
  const std::int64_t world = devices;
  std::mutex mutex;
  std::vector<std::string> failures; // Catch's checks are not thread-safe: replicas record, the test checks after
  xlite::spawn([&](std::int64_t local) {
    std::vector<std::string> mine;
    const auto expect = [&](bool ok, const std::string& what) {
      if (!ok) mine.push_back(what);
    };
    const std::int64_t me = xlite::runtime::global_ordinal();
    expect(xlite::runtime::world_size() == world, "world_size");
    expect(me == xlite::runtime::process_index() * xlite::device_count() + local, "global_ordinal");
    expect(xlite::runtime::local_ordinal() == local, "local_ordinal");
    const xlite::device on;
    // Values whose float sums are exact, so that any order would agree: the check is of who meets whom.
    auto x = xlite::lazy::full({2, 3}, static_cast<float>(me + 1), xlite::dtype::f32, on);
    auto total = xlite::all_reduce(xlite::reduce_type::sum, x);
    auto everyone = xlite::all_gather(xlite::lazy::full({1}, static_cast<float>(me), xlite::dtype::f32, on), 0);
    auto largest = xlite::all_reduce(xlite::reduce_type::max, x, 1.0, {{0, 2, 4, 6}, {1, 3, 5, 7}});
    xlite::mark_step();
    for (const float v : total.to_host<float>()) expect(v == static_cast<float>(world * (world + 1) / 2), "all_reduce");
    const auto all = everyone.to_host<float>();
    expect(all.size() == world, "all_gather's size");
    for (std::int64_t k = 0; k < all.size(); ++k) expect(all.data()[k] == static_cast<float>(k), "all_gather");
    expect(largest.to_host<float>().data()[0] == static_cast<float>(world - 1 + me % 2), "max in groups");
    const auto payloads = xlite::rendezvous("ready", std::to_string(me));
    expect(payloads.size() == static_cast<std::size_t>(world), "rendezvous's size");
    for (std::size_t k = 0; k < payloads.size(); ++k) expect(payloads[k] == std::to_string(k), "rendezvous");
    std::scoped_lock lock(mutex);
    for (auto& f : mine) failures.push_back("replica " + std::to_string(me) + ": " + f);
  });
  for (const auto& f : failures) FAIL_CHECK(f);
}

TEST_CASE("mpi: spawn across processes runs one replica per device", "[mpi]") {
  if (xlite::runtime::process_count() == 1 || xlite::device_count() == 1) return; // any count, or the only one
  CHECK_THROWS_WITH(xlite::spawn([](std::int64_t) {}, 1), Contains("one replica per device"));
}
