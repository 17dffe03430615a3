#pragma once

// Reading XLITE_* environment variables. A variable that is set but malformed is an error
// that names the variable, the value and what was expected; it is never silently ignored.

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "xlite/core/error.hpp"

namespace xlite {

// The value of an environment variable, or nullopt when it is unset or empty.
inline std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// An integer environment variable in [min, max], or nullopt when unset or empty.
[[gnu::noinline]] inline std::optional<std::int64_t> env_integer(const char* name, std::int64_t min, std::int64_t max) {
  const auto text = env_string(name);
  if (!text) return std::nullopt;
  // strtoll rather than std::from_chars, whose parser every file that reads a setting
  // would compile (0.5% of the instructions g++ -O3 runs on a file that evaluates E3).
  // Only what from_chars takes: digits with an optional '-', no spaces, no '+'.
  const char* const first = text->c_str();
  const char* const digits = first + (first[0] == '-');
  const bool well_formed = digits[0] >= '0' && digits[0] <= '9';
  const int callers_errno = errno;
  errno = 0;
  char* stop = nullptr;
  const long long value = well_formed ? std::strtoll(first, &stop, 10) : 0;
  const bool out_of_range = errno == ERANGE;
  errno = callers_errno;
  if (!well_formed || out_of_range || stop != first + text->size() || value < min || value > max) {
    throw config_error(detail::message(name, "='", *text, "' is not an integer in [", min, ", ", max, "]"));
  }
  return value;
}

} // namespace xlite
