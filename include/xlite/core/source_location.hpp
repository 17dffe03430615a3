#pragma once

// Where in the user's program a call came from, for diagnostics that point at a line:
// `void f(source_location where = source_location::current())` sees its caller's line.
// std::source_location's shape, built on the __builtin_FILE/LINE/FUNCTION that GCC and
// Clang evaluate at the call site. Not std::source_location itself: libstdc++ provides it
// only to compilers with __builtin_source_location, which Clang 14 lacks.

namespace xlite {

class source_location {
public:
  static constexpr source_location current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE(),
                                           const char* function = __builtin_FUNCTION()) noexcept {
    return source_location(file, line, function);
  }
  constexpr source_location() noexcept = default;

  constexpr const char* file_name() const noexcept { return file_; }
  constexpr unsigned line() const noexcept { return line_; }
  constexpr const char* function_name() const noexcept { return function_; }

private:
  constexpr source_location(const char* file, unsigned line, const char* function) noexcept
      : file_(file), line_(line), function_(function) {}

  const char* file_ = "";
  unsigned line_ = 0;
  const char* function_ = "";
};

} // namespace xlite
