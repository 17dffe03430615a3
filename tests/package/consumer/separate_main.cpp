// A program built with XLITE_SEPARATE_COMPILATION: this file declares xlite's backend, and
// xlite_backend.cpp defines it. Runs one lazy step to show the two halves link and work.
#include <xlite/lazy.hpp>

#include <iostream>

int main() {
  const auto x = xlite::lazy::full({2, 3}, 1.5f);
  const auto y = xlite::lazy::matmul(x + x, xlite::lazy::full({3, 1}, 2.0f));
  xlite::mark_step();
  const float value = y.to_host<float>()(1, 0);
  std::cout << "separate " << value << '\n';
  return value == 18.0f ? 0 : 1;
}
