// The paired rows: xlite and every split impl (the hand-written xsimd loop, xtensor, Eigen)
// on the same buffers, one call each in turn, on one thread. Rows that each make their own
// operands compare the impls' code and also where the heap put their arrays: in L2, at 2^16
// floats, set conflicts between four arrays move a row by more than the impls differ, and
// fifteen interleaved repetitions still left the same row 5-8% apart from run to run
// (docs/benchmarks.md). Here every impl reads and writes the same memory,
// calls alternate (the first impl rotating), and each call is timed alone, so a slow spell of
// the machine falls on all of them alike.
//
// Named "<case>_paired/xlite/n:<n>/threads:1": the rate is xlite's (manual time: its calls
// only); the label and the counters give xlite's rate over each peer's, from the sums of
// their calls' times. xlite reads the buffers through xtensor adaptors (xlite::adapt) and
// writes z with xlite::assign, its path for memory it does not own. One thread only: on two,
// the thread_team's and the pool's waiting workers would spin on the cores the other impl's
// threads need.
//
// The cold rows ("<case>_paired_cold", 256 floats) pass over a buffer larger than a core's L2
// before each call, untimed, as a program does other work between two small evaluations: a
// call then finds its own data (the expression's leaves, statics, the heap's lists, the
// operands) in L3, and what it costs over the hand loop is how many such lines it reads.

#ifndef XTENSOR_USE_XSIMD
#error "paired_expressions.cpp includes xtensor, as peer_xtensor.cpp does: compile both with -DXTENSOR_USE_XSIMD"
#endif

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "xlite/expr/xtensor.hpp"
#include "xlite_cases.hpp"

namespace {

using namespace xlite::bench;

// An xtensor adaptor of a buffer of the operands (no copy).
auto adaptor_of(aligned_floats& buffer) {
  const auto n = static_cast<std::size_t>(buffer.size());
  return xt::adapt(buffer.data(), n, xt::no_ownership(), std::array<std::size_t, 1>{n});
}

// The cold rows' pass: 4 MiB, at least a core's L2 on the hosts measured (1-2 MiB), each line
// written so that it displaces what was there.
constexpr std::int64_t eviction_floats = std::int64_t{1} << 20;
constexpr std::int64_t cold_size = 256;

void evict_caches(aligned_floats& buffer) {
  float* const data = buffer.data();
  benchmark::DoNotOptimize(data);
  for (std::int64_t i = 0; i < buffer.size(); ++i) data[i] += 1.0f;
  benchmark::ClobberMemory();
}

void run_paired(benchmark::State& state, const expression_case& c, bool cold) {
  expression_operands operands(size_arg(state));
  std::optional<aligned_floats> eviction; // after the operands, and only for the cold rows
  if (cold) eviction.emplace(eviction_floats);
  auto x_buffer = adaptor_of(operands.x), y_buffer = adaptor_of(operands.y), w_buffer = adaptor_of(operands.w);
  auto z = adaptor_of(operands.z);
  const auto x = xlite::adapt(x_buffer), y = xlite::adapt(y_buffer), w = xlite::adapt(w_buffer);
  xlite::thread_pool pool(1);
  xlite::scoped_thread_pool use(pool);
  thread_team team(1);
  const std::vector<split_kernels>& peers = registered_split_kernels();
  const std::size_t impls = peers.size() + 1; // xlite is impl 0
  const auto evaluate = [&](std::size_t impl) {
    return impl == 0 ? evaluate_xlite_case(c.which, x, y, w, [&](const auto& e) { xlite::assign(z, e); })
                     : run_split_once(peers[impl - 1], c, operands, team);
  };

  using steady = std::chrono::steady_clock;
  std::vector<double> seconds(impls, 0.0);
  std::size_t first = 0;
  float sum = 0.0f;
  for (auto _ : state) {
    for (std::size_t k = 0; k < impls; ++k) {
      const std::size_t impl = (first + k) % impls;
      if (cold) evict_caches(*eviction);
      const steady::time_point start = steady::now();
      sum = evaluate(impl);
      benchmark::DoNotOptimize(sum);
      benchmark::ClobberMemory();
      const double took = std::chrono::duration<double>(steady::now() - start).count();
      seconds[impl] += took;
      if (impl == 0) state.SetIterationTime(took);
    }
    first = (first + 1) % impls;
  }
  report_bytes(state, expression_bytes(c, size_arg(state)));

  // Every impl's result, checked after the timed loop (each wrote z over the last one's).
  for (std::size_t impl = 0; impl < impls && !state.error_occurred(); ++impl) {
    check_result(state, c, operands, evaluate(impl), impl == 0 ? "xlite" : peers[impl - 1].impl);
  }
  std::string label = "same buffers in turn; xlite's rate over";
  for (std::size_t k = 0; k < peers.size(); ++k) {
    const double ratio = seconds[k + 1] / seconds[0];
    state.counters[peers[k].impl] = ratio;
    std::array<char, 16> text{};
    std::snprintf(text.data(), text.size(), "%.3f", ratio);
    label += (k == 0 ? " " : ", ") + peers[k].impl + "'s " + text.data();
  }
  state.SetLabel(peers.empty() ? "no split peer built" : label);
}

} // namespace

void xlite::bench::register_paired_expressions() {
  for (const expression_case& c : expression_cases) {
    register_sized(
        std::string(c.name) + "_paired", "xlite", [c](benchmark::State& state) { run_paired(state, c, false); },
        expression_sizes, {1}, timing::manual)
        ->MinTime(expression_min_time);
    // A fixed count: the untimed passes take ~100x the calls, which min_time does not count.
    register_sized(
        std::string(c.name) + "_paired_cold", "xlite", [c](benchmark::State& state) { run_paired(state, c, true); },
        {cold_size}, {1}, timing::manual)
        ->Iterations(4000);
  }
}
