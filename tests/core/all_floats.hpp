#pragma once

// Exhaustive checks over the 2^32 float bit patterns, spread over the default pool.

#include <xlite/core/thread_pool.hpp>

#include <atomic>
#include <bit>
#include <cstdint>

namespace xlite_test {

// The float with these bits.
inline float float_from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

struct float_sweep {
  std::int64_t failures = 0;
  std::uint32_t first_failure = 0; // bits of a float that failed (the first of its block)
};

// Calls passes(x) for every float x; counts the floats for which it returns false.
template <class Passes>
float_sweep sweep_all_floats(const Passes& passes) {
  constexpr std::int64_t block = std::int64_t{1} << 20;
  std::atomic<std::int64_t> failures{0};
  std::atomic<std::uint32_t> first{0};
  xlite::default_thread_pool().parallel_for(std::int64_t{1} << 32, block, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t local = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      if (!passes(std::bit_cast<float>(static_cast<std::uint32_t>(i)))) {
        if (local++ == 0 && failures.load() == 0) first = static_cast<std::uint32_t>(i);
      }
    }
    failures += local;
  });
  return {failures.load(), first.load()};
}

} // namespace xlite_test
