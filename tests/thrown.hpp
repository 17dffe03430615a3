#pragma once

#include <string>

namespace xlite_test {

// The message of the E that f() throws; another exception type escapes and fails the test.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(nothing was thrown)";
}

} // namespace xlite_test
