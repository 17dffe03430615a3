// The thread pool's row of the triad: the plain C++ triad split over xlite::thread_pool, one
// chunk per thread (xlite's own triad expression is e1; the label says so in the table).
// triad/limit splits the work the same way but never synchronises its threads. At 2^16, in
// cache, where both run the same loop and an iteration takes microseconds, the ratio between
// the two is the pool's cost per parallel_for; at 2^26 it is how the pool scales, times what
// plain stores lose to the limit's streaming ones.

#include <cstdint>

#include "bench_common.hpp"
#include "triad.hpp"
#include "xlite/core/thread_pool.hpp"

namespace {

using namespace xlite::bench;

void run_triad_xlite(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  const int threads = threads_arg(state);
  triad_operands triad(n);
  xlite::thread_pool pool(static_cast<std::size_t>(threads));
  const std::int64_t grain = (n + threads - 1) / threads;
  for (auto _ : state) {
    pool.parallel_for(n, grain, [&triad](std::int64_t begin, std::int64_t end) { triad.run(begin, end); });
    benchmark::ClobberMemory();
  }
  report_bytes(state, triad_bytes(n));
  state.SetLabel("plain C++ loop on xlite::thread_pool, plain stores; the expression is e1");
}

} // namespace

void xlite::bench::register_xlite_thread_pool() {
  register_sized("triad", "xlite", run_triad_xlite, triad_sizes);
}
