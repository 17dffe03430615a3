#pragma once

// xlite's exceptions. Everything xlite throws derives from xlite::error, and every message
// names the op (or variable, or file) and the operands that were wrong, in the user's terms.

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
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

// Anything printable, concatenated. Inlined into concat and message wherever they are
// compiled, so that each is compiled as its attributes say.
template <class... Parts>
[[gnu::always_inline]] inline std::string stream_parts(Parts&&... parts) {
  std::ostringstream out;
  ((out << std::forward<Parts>(parts)), ...);
  return std::move(out).str();
}

// A description or a name that code builds on its normal path (a collective's, a loader
// state's line).
template <class... Parts>
std::string concat(Parts&&... parts) {
  return stream_parts(std::forward<Parts>(parts)...);
}

// The text of an exception, or of a failure being reported: on paths that only errors take.
// Cold, so that GCC compiles it, with the stream code, for size and away from its callers'
// code: 4% of the compile time of a file that evaluates E3.
template <class... Parts>
[[gnu::cold]] std::string message(Parts&&... parts) {
  return stream_parts(std::forward<Parts>(parts)...);
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
