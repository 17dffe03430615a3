// Must not compile: a body that owns a container, given workers_may_copy. The pool's copy
// for the workers is never destroyed: its vector's buffer would leak with every job.
#include <xlite/core/thread_pool.hpp>

#include <cstdint>
#include <vector>

void check(xlite::thread_pool& pool) {
  std::vector<float> values(64, 1.0f);
  pool.parallel_for(
      64, 16, [values](std::int64_t begin, std::int64_t end) { static_cast<void>(values[begin] + values[end - 1]); },
      xlite::thread_pool::workers_may_copy);
}
