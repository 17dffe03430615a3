#include <xlite/core/aligned_memory.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <vector>

using Catch::Matchers::Contains;

namespace {

bool aligned_to(const void* p, std::size_t alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

} // namespace

TEST_CASE("aligned_memory: every size is on a cache line, usable to its end, and freed", "[aligned_memory]") {
  // Sizes around the alignment, malloc's size classes and page_aligned_from, and one beyond
  // malloc's mmap threshold.
  constexpr auto paged = static_cast<std::int64_t>(xlite::page_aligned_from);
  const std::vector<std::int64_t> counts = {
      0, 1, 2, 15, 16, 17, 63, 64, 65, 100, 1000, 4095, 4096, paged - 1, paged, paged + 1, 3 * paged + 40, 1 << 18};
  std::vector<xlite::aligned_array<unsigned char>> live;
  std::set<const unsigned char*> seen;
  for (int round = 0; round < 3; ++round) {
    for (const std::int64_t count : counts) {
      auto block = xlite::allocate_aligned<unsigned char>(count);
      REQUIRE(block != nullptr);
      CHECK(aligned_to(block.get(), xlite::cache_line));
      if (count >= paged) CHECK(aligned_to(block.get(), xlite::page_alignment));
      std::memset(block.get(), 0xab, static_cast<std::size_t>(count)); // ASan checks these bounds
      CHECK(seen.insert(block.get()).second);                          // live blocks never overlap
      live.push_back(std::move(block));
    }
  }
  live.clear(); // frees each block through the offset stored before it
  auto doubles = xlite::allocate_aligned<double>(7);
  CHECK(aligned_to(doubles.get(), xlite::cache_line));
}

// Tensors made one after another, as a program makes x, y and z for z = a * x + y, all
// start at the same page offset (so that no load of a pass trails one of its stores in the
// low 12 address bits: 4K aliasing), with malloc's small blocks in between, and again after
// some are freed and others made in their place.
TEST_CASE("aligned_memory: large buffers made in a row share a page offset", "[aligned_memory]") {
  std::vector<xlite::aligned_array<float>> live;
  std::vector<xlite::aligned_array<char>> small; // malloc's heap in between, as in a program
  for (int i = 0; i < 8; ++i) {
    live.push_back(xlite::allocate_aligned<float>(std::int64_t{1} << 16));
    small.push_back(xlite::allocate_aligned<char>(40 + 24 * i));
    CHECK(aligned_to(live.back().get(), xlite::page_alignment));
  }
  live.erase(live.begin() + 2, live.begin() + 5); // freed blocks come back through the stored offset
  for (int i = 0; i < 3; ++i) {
    live.push_back(xlite::allocate_aligned<float>((std::int64_t{1} << 16) + i));
    CHECK(aligned_to(live.back().get(), xlite::page_alignment));
  }
}

TEST_CASE("aligned_memory: impossible sizes are bad_alloc, negative counts a value_error", "[aligned_memory]") {
  CHECK_THROWS_AS(xlite::allocate_aligned<float>(std::numeric_limits<std::int64_t>::max()), std::bad_alloc);
  CHECK_THROWS_AS(xlite::allocate_aligned<char>(std::numeric_limits<std::int64_t>::max()), std::bad_alloc);
  CHECK_THROWS_AS(xlite::allocate_aligned<float>(-1), xlite::value_error);
  CHECK_THROWS_WITH(xlite::allocate_aligned<float>(-3), Contains("allocate_aligned") && Contains("-3"));
}
