#pragma once

// Heap memory on a cache line (64 bytes: also one AVX-512 register), for tensors and the
// kernels' buffers.
//
// It comes from malloc, with the distance back to malloc's block kept in the byte just
// before the aligned address, as Eigen's handmade_aligned_malloc does: glibc's memalign,
// behind std::aligned_alloc and aligned operator new, splits a larger block and merges the
// pieces again on free, about 900 instructions for a small block against 90 for malloc and
// free (callgrind), which was a sixth of the time of sum() over a small tensor. Under
// AddressSanitizer the aligned allocator is kept: it knows the exact size asked for, so
// an overrun into the padding is reported.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include "xlite/core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define XLITE_ALIGNED_MEMORY_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XLITE_ALIGNED_MEMORY_CHECKED 1
#endif
#endif

namespace xlite {

inline constexpr std::size_t cache_line = 64;

namespace detail {

// At least `bytes` bytes (at least one) on a cache line; throws std::bad_alloc.
inline void* allocate_aligned_bytes(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  // No object is larger than PTRDIFF_MAX bytes (GCC warns about a malloc that could ask for
  // more, and AddressSanitizer aborts on one rather than failing it).
  if (bytes > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) - cache_line) throw std::bad_alloc();
#ifdef XLITE_ALIGNED_MEMORY_CHECKED
  return ::operator new (bytes, std::align_val_t{cache_line});
#else
  auto* block = static_cast<unsigned char*>(std::malloc(bytes + cache_line));
  if (block == nullptr) throw std::bad_alloc();
  // Between 1 and cache_line bytes ahead of the block, so the byte before is ours.
  const std::size_t ahead = cache_line - reinterpret_cast<std::uintptr_t>(block) % cache_line;
  unsigned char* aligned = block + ahead;
  aligned[-1] = static_cast<unsigned char>(ahead);
  return aligned;
#endif
}

inline void free_aligned_bytes(void* memory) noexcept {
  if (memory == nullptr) return;
#ifdef XLITE_ALIGNED_MEMORY_CHECKED
  ::operator delete (memory, std::align_val_t{cache_line});
#else
  auto* aligned = static_cast<unsigned char*>(memory);
  std::free(aligned - aligned[-1]);
#endif
}

struct free_aligned {
  void operator()(void* memory) const noexcept { free_aligned_bytes(memory); }
};

} // namespace detail

// An owning pointer to `count` elements of trivial T on a cache line, uninitialised.
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
