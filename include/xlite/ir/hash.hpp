#pragma once

// The hash xlite keys its caches with: graphs, shardings, cache keys and the disk cache's
// checksum are all fed to it word by word.

#include <cstdint>

namespace xlite::ir {

namespace detail {

// The high and low halves of a 64 x 64-bit product, folded (wyhash's mixing step): one
// multiplication mixes every input bit into the result.
__extension__ typedef unsigned __int128 uint128; // GCC and Clang; __extension__ quiets -Wpedantic

constexpr std::uint64_t fold_multiply(std::uint64_t a, std::uint64_t b) {
  const uint128 product = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(product >> 64) ^ static_cast<std::uint64_t>(product);
}

} // namespace detail

// A 64-bit hash fed word by word: the structural hash, the cache key and the disk cache's
// checksum. Fast and well mixed, not cryptographic.
struct hasher {
  std::uint64_t state = 0x6a09e667f3bcc908ULL;
  void add(std::uint64_t word) {
    state = detail::fold_multiply(state ^ word, 0x9e3779b97f4a7c15ULL) + 0xa0761d6478bd642fULL;
  }
};

} // namespace xlite::ir
