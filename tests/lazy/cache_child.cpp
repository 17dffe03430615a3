// A process of the persistent cache's tests: runs the cache program with a persistent cache
// in argv[1] (read-only if argv[3] is "readonly") and writes to argv[2] the counters that
// say what it compiled, then the program's values as exact bit patterns.

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cache_program.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: cache_child <cache dir> <output file> [readonly]\n";
    return 2;
  }
  try {
    xlite::runtime::initialize_cache(argv[1], argc > 3 && std::strcmp(argv[3], "readonly") == 0);
    const auto values = xlite_test::run_cache_program();
    std::ofstream out(argv[2]);
    for (const char* name : {"UncachedCompile", "PersistentCacheHit", "PersistentCacheMiss", "PersistentCacheBadEntry"}) {
      out << name << ' ' << xlite::metrics::counter_value(name) << '\n';
    }
    for (const float v : values) out << std::bit_cast<std::uint32_t>(v) << '\n';
    return out ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "cache_child: " << e.what() << '\n';
    return 1;
  }
}
