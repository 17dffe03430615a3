// The Catch2 main of the tests across processes: every process runs the same test cases
// in the same order (their collectives meet), inside xlite::mpi::run. A process whose
// cases fail throws, so that every process ends with a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <xlite/core/error.hpp>
#include <xlite/runtime/mpi.hpp>

#include <cstdlib>

int main(int argc, char* argv[]) {
  ::setenv("XLITE_NATIVE_KERNELS", "0", 0); // as tests/catch_main.cpp
  return xlite::mpi::run(argc, argv, [&] {
    if (const int failed = Catch::Session().run(argc, argv)) {
      throw xlite::error(xlite::detail::message(failed, " test case(s) failed"));
    }
  });
}
