#include <xlite/core/aligned_memory.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

namespace {

std::uintptr_t address_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

bool aligned_to(const void* p, std::size_t alignment) { return address_of(p) % alignment == 0; }

// The mapping that holds an address, from /proc/self/smaps: its range and its VmFlags
// line ("hg" in it: the mapping asked for transparent huge pages).
struct mapping {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::string flags;
};

std::optional<mapping> mapping_at(const void* address) {
  const auto at = address_of(address);
  std::ifstream smaps("/proc/self/smaps");
  std::optional<mapping> found;
  for (std::string line; std::getline(smaps, line);) {
    mapping m;
    char dash = 0;
    if (std::istringstream header(line); header >> std::hex >> m.begin >> dash >> m.end && dash == '-') {
      if (found) return found; // the holding mapping's lines are over
      if (m.begin <= at && at < m.end) found = m;
    } else if (found && line.starts_with("VmFlags:")) {
      found->flags = line + ' ';
    }
  }
  return found;
}

std::uintptr_t round_up(std::uintptr_t n, std::size_t to) { return (n + to - 1) / to * to; }

// What the huge-page checks need: a kernel with transparent huge pages, which marks an
// advised mapping "hg", and /proc/self/smaps to read the marks from.
bool can_see_huge_pages() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled") &&
         std::filesystem::exists("/proc/self/smaps");
}

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

// Huge pages are advice, so what is checked is that the buffer's mapping asked for them
// (VmFlags "hg"), not that the kernel had some to give.
TEST_CASE("aligned_memory: buffers of huge_pages_from bytes or more get a mapping of their own in huge pages",
          "[aligned_memory]") {
  if (!xlite::detail::huge_pages_supported || !can_see_huge_pages()) {
    WARN("skipped: this build takes no huge pages (not Linux, or under AddressSanitizer), or the kernel has none");
    return;
  }
  constexpr std::size_t from = xlite::huge_pages_from;
  for (const std::size_t bytes : {from, 3 * from + 20}) {
    auto buffer = xlite::allocate_aligned<unsigned char>(static_cast<std::int64_t>(bytes));
    CHECK(aligned_to(buffer.get(), xlite::huge_page_size));
    const auto held = mapping_at(buffer.get());
    REQUIRE(held);
    CHECK(held->begin == address_of(buffer.get())); // the whole buffer is advised, and nothing before it
    CHECK(held->end == address_of(buffer.get()) + round_up(bytes, xlite::huge_page_size));
    CHECK_THAT(held->flags, Contains(" hg "));
    std::memset(buffer.get(), 1, bytes); // ordinary memory, usable to its end
    CHECK(buffer[bytes - 1] == 1);
    const unsigned char* const was = buffer.get();
    buffer.reset();
    CHECK_FALSE(mapping_at(was));     // unmapped when freed,
    CHECK_FALSE(mapping_at(was - 1)); // with the page that held its record
  }
  const auto smaller = xlite::allocate_aligned<unsigned char>(static_cast<std::int64_t>(from - 1));
  const auto below = mapping_at(smaller.get() + (from - 1) / 2);
  REQUIRE(below);
  REQUIRE_FALSE(below->flags.empty());
  CHECK_THAT(below->flags, !Contains(" hg "));
}

TEST_CASE("XLITE_HUGE_PAGES=0", "[.xlite_huge_pages_off]") {
  if (!can_see_huge_pages()) {
    WARN("skipped: no transparent huge pages, or no /proc/self/smaps, to look at");
    return;
  }
  constexpr std::size_t bytes = 2 * xlite::huge_pages_from;
  const auto buffer = xlite::allocate_aligned<unsigned char>(static_cast<std::int64_t>(bytes));
  const auto held = mapping_at(buffer.get() + bytes / 2);
  REQUIRE(held);
  REQUIRE_FALSE(held->flags.empty());
  CHECK_THAT(held->flags, !Contains(" hg "));
}

TEST_CASE("XLITE_HUGE_PAGES=yes", "[.xlite_huge_pages_bad]") {
  if (!xlite::detail::huge_pages_supported) {
    WARN("skipped: this build takes no huge pages, and so never reads XLITE_HUGE_PAGES");
    return;
  }
  const auto large = static_cast<std::int64_t>(xlite::huge_pages_from);
  CHECK_THROWS_AS(xlite::allocate_aligned<unsigned char>(large), xlite::config_error);
  CHECK_THROWS_WITH(xlite::allocate_aligned<unsigned char>(large), Contains("XLITE_HUGE_PAGES='yes'"));
  CHECK(xlite::allocate_aligned<unsigned char>(large - 1) != nullptr); // smaller buffers never read it
}
