#pragma once

// Memory on a cache line (64 bytes: also one AVX-512 register), for tensors and the
// kernels' buffers; a buffer of page_aligned_from bytes or more starts on a 4 KiB page,
// and one of huge_pages_from or more on a 2 MiB huge page.
//
// Why pages: malloc puts blocks of one size back to back, each 64-80 bytes further into
// its page than the last, so z = a * x + y over three tensors made in a row finds z's
// stores 64 to 256 bytes ahead of the loads from y and x in the low 12 address bits. The
// core then takes a load for a read of an earlier store to the same address ("4K
// aliasing") and waits for it: 6-16% of the time of a pass over 2^13 to 2^16 floats on Zen 4
// (3-10% at 2^20; nothing measurable at 2^11, where smaller buffers stay on cache lines).
// Buffers that all start on a page meet at the same offsets, where a load never trails a
// store of the same pass. The cost is at most a page per buffer, an eighth at the threshold.
//
// Why huge pages: one TLB entry covers 512 times the memory, and a fault fills 2 MiB. On
// the Zen 4 VM, 2^26 floats, one core, z = a * x + y ran 31-33% faster, the e3 expression
// 20-25%, and allocating and first touching such a buffer 5 times faster. A buffer of
// huge_pages_from (32 MiB) or more gets a mapping of its own (mmap), advised as a whole
// (madvise: the kernel may have none to give, and the pages stay 4 KiB); XLITE_HUGE_PAGES=0
// goes back to malloc. Not advice over malloc's block: malloc may serve even a large block
// from a heap that other blocks share (glibc once its thresholds have grown, jemalloc and
// mimalloc always), where the advice would split the heap's mapping and outlive the block.
// Not below 32 MiB: glibc maps larger blocks afresh anyway, while smaller ones reuse freed
// memory without a fault at all. A fault may wait for the kernel to compact memory where
// free memory is fragmented (0.1-0.5 s for the first buffers of a run, here).
//
// Smaller buffers come from malloc, with the distance back to malloc's block kept in the
// two bytes before the aligned address, as Eigen's handmade_aligned_malloc does (one byte
// there); a distance of 0 marks a mapping of xlite's own. Not std::aligned_alloc: glibc's
// memalign, behind it and aligned operator new, splits a larger block and merges the
// pieces again on free, about 900 instructions for a small block against 90 for malloc
// and free (callgrind), which was a sixth of the time of sum() over a small tensor. Under
// AddressSanitizer the aligned allocator is kept, for every size: it knows the exact size
// asked for, so an overrun into the padding is reported (and there are no huge pages).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define XLITE_ALIGNED_MEMORY_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XLITE_ALIGNED_MEMORY_CHECKED 1
#endif
#endif

#ifdef XLITE_ALIGNED_MEMORY_CHECKED
// ASan's record of a block's size as asked for: how free finds the alignment it was made with.
extern "C" std::size_t __sanitizer_get_allocated_size(const volatile void* p);
#elif defined(__linux__) && defined(MADV_HUGEPAGE)
#define XLITE_ALIGNED_MEMORY_HUGE_PAGES 1
#endif

namespace xlite {

inline constexpr std::size_t cache_line = 64;
// 4 KiB: the period of the low address bits x86 cores compare between loads and earlier
// stores (and the smallest page of common systems), not the system's page size.
inline constexpr std::size_t page_alignment = 4096;
// Buffers of at least this many bytes start on a multiple of page_alignment.
inline constexpr std::size_t page_aligned_from = 8 * page_alignment;
// The transparent huge page of x86-64 (and of AArch64 with 4 KiB pages).
inline constexpr std::size_t huge_page_size = std::size_t{2} << 20;
// Buffers of at least this many bytes get a mapping of their own in huge pages, unless
// XLITE_HUGE_PAGES=0 or the build has none (detail::huge_pages_supported).
inline constexpr std::size_t huge_pages_from = std::size_t{32} << 20;

namespace detail {

#ifdef XLITE_ALIGNED_MEMORY_HUGE_PAGES
inline constexpr bool huge_pages_supported = true;
#else
inline constexpr bool huge_pages_supported = false; // not Linux, or under AddressSanitizer
#endif

#ifdef XLITE_ALIGNED_MEMORY_HUGE_PAGES
// Whether XLITE_HUGE_PAGES (read once) lets large buffers have huge pages.
inline bool huge_pages_wanted() {
  static const bool wanted = env_integer("XLITE_HUGE_PAGES", 0, 1).value_or(1) == 1;
  return wanted;
}

// A mapping of xlite's own, recorded just before the buffer it holds.
struct mapping_record {
  void* base;
  std::size_t length;
};

// `bytes` on a 2 MiB boundary in a mapping of their own, advised into huge pages (advice:
// where the kernel has none to give, THP off or none free, the pages stay 4 KiB). The
// mapping keeps one page before the buffer, for the record and the mark, and gives the
// rest of what aligning took back: under THP mode "always" a whole huge page there would
// otherwise be faulted in for the record.
inline void* map_huge_pages(std::size_t bytes) {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t span = (bytes + huge_page_size - 1) / huge_page_size * huge_page_size;
  const std::size_t length = span + huge_page_size; // room to align, and for the record
  void* mapped = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<unsigned char*>(mapped);
  const auto start = reinterpret_cast<std::uintptr_t>(base);
  unsigned char* aligned = base + ((start + page + huge_page_size - 1) / huge_page_size * huge_page_size - start);
  unsigned char* kept = aligned - page;
  if (kept > base) ::munmap(base, static_cast<std::size_t>(kept - base));
  if (base + length > aligned + span)
    ::munmap(aligned + span, static_cast<std::size_t>(base + length - (aligned + span)));
  const mapping_record record{kept, span + page};
  constexpr std::uint16_t own_mapping = 0;
  std::memcpy(aligned - sizeof own_mapping - sizeof record, &record, sizeof record);
  std::memcpy(aligned - sizeof own_mapping, &own_mapping, sizeof own_mapping);
  static_cast<void>(::madvise(aligned, span, MADV_HUGEPAGE));
  return aligned;
}
#endif

constexpr std::size_t alignment_for(std::size_t bytes) noexcept {
  return bytes >= page_aligned_from ? page_alignment : cache_line;
}

// At least `bytes` bytes (at least one) on alignment_for(bytes), on a huge page from
// huge_pages_from on; throws std::bad_alloc, or config_error for a malformed
// XLITE_HUGE_PAGES.
inline void* allocate_aligned_bytes(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  // No object is larger than PTRDIFF_MAX bytes (GCC warns about a malloc that could ask for
  // more, and AddressSanitizer aborts on one rather than failing it).
  if (bytes > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) - page_alignment)
    throw std::bad_alloc();
  const std::size_t alignment = alignment_for(bytes);
#ifdef XLITE_ALIGNED_MEMORY_CHECKED
  return ::operator new (bytes, std::align_val_t{alignment});
#else
#ifdef XLITE_ALIGNED_MEMORY_HUGE_PAGES
  if (bytes >= huge_pages_from && huge_pages_wanted()) return map_huge_pages(bytes);
#endif
  auto* block = static_cast<unsigned char*>(std::malloc(bytes + alignment));
  if (block == nullptr) throw std::bad_alloc();
  // malloc's blocks are aligned for any scalar, so the aligned address is at least
  // alignof(max_align_t) bytes ahead (never 0, the mark of a mapping of our own): the two
  // bytes before it are ours.
  static_assert(alignof(std::max_align_t) >= sizeof(std::uint16_t) &&
                page_alignment <= std::numeric_limits<std::uint16_t>::max());
  const auto ahead = static_cast<std::uint16_t>(alignment - reinterpret_cast<std::uintptr_t>(block) % alignment);
  unsigned char* aligned = block + ahead;
  std::memcpy(aligned - sizeof ahead, &ahead, sizeof ahead);
  return aligned;
#endif
}

inline void free_aligned_bytes(void* memory) noexcept {
  if (memory == nullptr) return;
#ifdef XLITE_ALIGNED_MEMORY_CHECKED
  ::operator delete (memory, std::align_val_t{alignment_for(__sanitizer_get_allocated_size(memory))});
#else
  auto* aligned = static_cast<unsigned char*>(memory);
  std::uint16_t ahead = 0;
  std::memcpy(&ahead, aligned - sizeof ahead, sizeof ahead);
#ifdef XLITE_ALIGNED_MEMORY_HUGE_PAGES
  if (ahead == 0) {
    mapping_record record{};
    std::memcpy(&record, aligned - sizeof ahead - sizeof record, sizeof record);
    ::munmap(record.base, record.length);
    return;
  }
#endif
  std::free(aligned - ahead);
#endif
}

struct free_aligned {
  void operator()(void* memory) const noexcept { free_aligned_bytes(memory); }
};

} // namespace detail

// An owning pointer to `count` elements of trivial T on a cache line (on a page from
// page_aligned_from bytes, on a huge page from huge_pages_from bytes), uninitialised.
template <class T>
using aligned_array = std::unique_ptr<T[], detail::free_aligned>;

// A count too large for memory is std::bad_alloc, a negative one a value_error.
template <class T>
aligned_array<T> allocate_aligned(std::int64_t count) {
  static_assert(std::is_trivially_destructible_v<T>, "aligned arrays hold trivial element types only");
  if (count < 0) throw value_error(detail::message("allocate_aligned: negative element count ", count));
  const auto elements = static_cast<std::size_t>(count);
  if (elements > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_alloc();
  return aligned_array<T>(static_cast<T*>(detail::allocate_aligned_bytes(elements * sizeof(T))));
}

} // namespace xlite
