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

// Concatenates anything printable into an exception message.
template <class... Parts>
std::string message(Parts&&... parts) {
  std::ostringstream out;
  ((out << std::forward<Parts>(parts)), ...);
  return std::move(out).str();
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
