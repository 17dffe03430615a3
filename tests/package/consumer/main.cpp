// Uses xlite the way a downstream program does; prints what it found so the test can check it.
#include <xlite/xlite.hpp>

#include <atomic>
#include <iostream>

#if XLITE_HAS_ZLIB
#include <zlib.h>
#endif

int main() {
  const xlite::shape s = xlite::broadcast_shapes(xlite::shape{3, 1}, xlite::shape{4}, "add");
  std::atomic<std::int64_t> sum{0};
  xlite::thread_pool pool(2);
  pool.parallel_for(s.numel(), 5, [&](std::int64_t begin, std::int64_t end) { sum += end - begin; });
  std::cout << "xlite " << XLITE_VERSION_MAJOR << '.' << XLITE_VERSION_MINOR << ' ' << s << ' ' << sum << ' '
            << xlite::promote_types(xlite::dtype::i32, xlite::dtype::bf16) << '\n';
#if XLITE_HAS_ZLIB
  std::cout << "zlib " << zlibVersion() << '\n';
#endif
  // Where native kernels look for xlite's headers: the installed ones, or the source tree's.
  std::cout << "native include " << XLITE_NATIVE_INCLUDE << '\n';
  return sum == 12 ? 0 : 1;
}
