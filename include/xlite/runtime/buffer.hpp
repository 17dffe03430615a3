#pragma once

// A device buffer: the memory of one value on a (CPU) device, with its dtype and shape.
// Cache-line aligned, so SIMD loops and streaming stores need no prologue; the memory comes
// from, and goes back to, the device's block cache (runtime/block_cache.hpp), and counts in
// the memory_info of the device that makes it (runtime/memory.hpp).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/runtime/block_cache.hpp"
#include "xlite/runtime/memory.hpp"

namespace xlite::runtime {

class buffer {
public:
  buffer(dtype type, const xlite::shape& s)
      : type_(type), shape_(s), capacity_(byte_size()),
        bytes_(static_cast<std::byte*>(device_block_cache().take(block_bytes()))), owner_(detail::memory_owner()) {
    if (owner_ >= 0) detail::count_allocation(owner_, capacity_);
  }
  ~buffer() {
    if (owner_ >= 0) detail::count_release(owner_, capacity_);
    device_block_cache().give(bytes_, block_bytes());
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;

  dtype type() const noexcept { return type_; }
  const xlite::shape& shape() const noexcept { return shape_; }
  std::int64_t byte_size() const noexcept { return shape_.numel() * static_cast<std::int64_t>(size_of(type_)); }
  std::byte* data() noexcept { return bytes_; }
  const std::byte* data() const noexcept { return bytes_; }

  template <class T>
  T* as() noexcept {
    return reinterpret_cast<T*>(bytes_);
  }
  template <class T>
  const T* as() const noexcept {
    return reinterpret_cast<const T*>(bytes_);
  }

  // The same memory as another dtype and shape of at most as many bytes: a buffer the
  // plan hands from one value to the next.
  void reinterpret(dtype type, const xlite::shape& s) {
    if (s.numel() * static_cast<std::int64_t>(size_of(type)) > capacity_) {
      throw value_error(xlite::detail::message("buffer: ", s, " of ", name(type), " does not fit in ", capacity_,
                                               " bytes"));
    }
    type_ = type;
    shape_ = s;
  }

private:
  dtype type_;
  xlite::shape shape_;
  std::size_t block_bytes() const noexcept { return static_cast<std::size_t>(std::max<std::int64_t>(capacity_, 1)); }

  std::int64_t capacity_;
  std::byte* bytes_;
  std::int64_t owner_; // the device whose memory this is, or -1
};

using buffer_ptr = std::shared_ptr<buffer>;

inline buffer_ptr make_buffer(dtype type, const xlite::shape& s) { return std::make_shared<buffer>(type, s); }

} // namespace xlite::runtime
