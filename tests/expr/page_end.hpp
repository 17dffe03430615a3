#pragma once

// Memory whose end is the start of an unreadable page, for tests that a loop reads and
// writes nothing past a row's end.

#include <catch2/catch.hpp>

#include <cstddef>

#include <sys/mman.h>
#include <unistd.h>

namespace xlite_test {

// `count` elements of T that end where an unreadable page begins: a load or store past them
// faults.
template <class T>
class at_page_end {
public:
  explicit at_page_end(std::size_t count)
      : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
        bytes_((count * sizeof(T) + page_ - 1) / page_ * page_ + page_) {
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base != MAP_FAILED);
    base_ = static_cast<char*>(base);
    REQUIRE(mprotect(base_ + bytes_ - page_, page_, PROT_NONE) == 0);
    data_ = reinterpret_cast<T*>(base_ + bytes_ - page_) - count;
  }
  at_page_end(const at_page_end&) = delete;
  at_page_end& operator=(const at_page_end&) = delete;
  ~at_page_end() { munmap(base_, bytes_); }
  T* data() const { return data_; }

private:
  std::size_t page_;
  std::size_t bytes_;
  char* base_ = nullptr;
  T* data_ = nullptr;
};

} // namespace xlite_test
