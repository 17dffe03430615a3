#pragma once

// What a piece of a test writes on std::cerr: xlite's warnings and debug analyses.

#include <iostream>
#include <sstream>
#include <string>

namespace xlite_test {

template <class Body>
std::string captured_errors(Body&& body) {
  std::ostringstream captured;
  auto* const previous = std::cerr.rdbuf(captured.rdbuf());
  try {
    body();
  } catch (...) {
    std::cerr.rdbuf(previous);
    throw;
  }
  std::cerr.rdbuf(previous);
  return captured.str();
}

} // namespace xlite_test
