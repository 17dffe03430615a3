#pragma once

// xlite's exceptions. Everything xlite throws derives from xlite::error, and every message
// names the op (or variable, or file) and the operands that were wrong, in the user's terms.

#include <exception>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace xlite {

class error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Shapes that do not fit an op: broadcasting, mismatched operands, bad dimensions.
class shape_error : public error {
public:
  using error::error;
};

// A dtype an op cannot take, or two dtypes that cannot be combined.
class dtype_error : public error {
public:
  using error::error;
};

// An axis or index outside its range.
class index_error : public error {
public:
  using error::error;
};

// An argument whose value is outside what the function accepts.
class value_error : public error {
public:
  using error::error;
};

// A bad environment variable or configuration setting.
class config_error : public error {
public:
  using error::error;
};

// A file that cannot be created, read or written; the message names the file.
class io_error : public error {
public:
  using error::error;
};

namespace detail {

// One part of a text built by concat or message: the part, and how to print it. Parts are
// printed by one function compiled once per file (join_parts), not by a stream inlined into
// every place that builds a message: g++ -O3 inlined message into its callers, so each of
// them compiled a stream's construction, its prints, and their unwinding, in every file.
struct text_part {
  const void* value;
  void (*print)(std::ostream& out, const void* value);
};

template <class T>
void print_part(std::ostream& out, const void* value) {
  out << *static_cast<const T*>(value);
}
inline void print_c_string(std::ostream& out, const void* value) { out << static_cast<const char*>(value); }

// A part by reference: it lives until the end of the full expression that builds the text.
// String literals of every length share one printer.
template <class T>
text_part part_of(const T& value) {
  if constexpr (std::is_array_v<T> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>) {
    return {value, &print_c_string};
  } else {
    return {std::addressof(value), &print_part<T>};
  }
}

[[gnu::noinline]] inline std::string join_parts(std::initializer_list<text_part> parts) {
  std::ostringstream out;
  for (const text_part& part : parts) part.print(out, part.value);
  return std::move(out).str();
}

// A description or a name that code builds on its normal path (a collective's, a loader
// state's line): anything printable, concatenated.
template <class... Parts>
std::string concat(const Parts&... parts) {
  return join_parts({part_of(parts)...});
}

// The text of an exception, or of a failure being reported: on paths that only errors take.
template <class... Parts>
[[gnu::cold]] std::string message(const Parts&... parts) {
  return join_parts({part_of(parts)...});
}

// The message of the exception being handled, for a catch (...) that reports it.
inline std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

} // namespace detail
} // namespace xlite
