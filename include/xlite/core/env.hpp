#pragma once

// Reading XLITE_* environment variables. A variable that is set but malformed is an error
// that names the variable, the value and what was expected; it is never silently ignored.

#include <charconv>
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
inline std::optional<std::int64_t> env_integer(const char* name, std::int64_t min, std::int64_t max) {
  const auto text = env_string(name);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [stop, failure] = std::from_chars(text->data(), end, value);
  if (failure != std::errc{} || stop != end || value < min || value > max) {
    throw config_error(detail::message(name, "='", *text, "' is not an integer in [", min, ", ", max, "]"));
  }
  return value;
}

} // namespace xlite
