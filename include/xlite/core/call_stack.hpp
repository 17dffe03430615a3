#pragma once

// The call stack at a point of the program, kept as return addresses: cheap enough to take
// for every traced op when XLITE_IR_DEBUG asks for it, as PyTorch/XLA's XLA_IR_DEBUG keeps
// the Python frames. core/source_lookup.hpp names the frames when someone prints them.

#include <array>
#include <memory>
#include <span>

#if __has_include(<execinfo.h>)
#include <execinfo.h>
#define XLITE_HAS_BACKTRACE 1
#else
#define XLITE_HAS_BACKTRACE 0
#endif

namespace xlite {

class call_stack {
public:
  static constexpr int max_frames = 32;

  // The stack of the calling thread (empty where the C library has no backtrace()).
  static std::shared_ptr<const call_stack> capture() {
    auto stack = std::make_shared<call_stack>();
#if XLITE_HAS_BACKTRACE
    stack->count_ = ::backtrace(stack->frames_.data(), max_frames);
#endif
    return stack;
  }

  // Return addresses, innermost first.
  std::span<void* const> frames() const noexcept {
    return {frames_.data(), static_cast<std::size_t>(count_ < 0 ? 0 : count_)};
  }

private:
  std::array<void*, max_frames> frames_{};
  int count_ = 0;
};

} // namespace xlite
