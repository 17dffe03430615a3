// Runs go wrong in several processes: `failures <case>` under mpirun makes one of them, and
// expect_failure.cmake checks that every process ended with an error naming what happened,
// in bounded time. Cases:
//   throw     process 1 throws while process 0 waits in an all_reduce
//   replica   a replica of process 1 throws while the other replicas all_reduce
//   mismatch  the processes all_reduce tensors of different shapes
//   timeout   process 1 never comes to the all_reduce (XLITE_COLLECTIVE_TIMEOUT=2)
//   every     every process throws at once

#include <xlite/lazy.hpp>
#include <xlite/runtime/mpi.hpp>
#include <xlite/runtime/replica.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string_view>

namespace {

// Every process's tensor of `columns` columns, summed over the processes and read back.
void sum_over_processes(std::int64_t columns) {
  auto total = xlite::all_reduce(xlite::reduce_type::sum, xlite::lazy::ones({4, columns}));
  xlite::mark_step();
  const float sum = total.to_host<float>().data()[0];
  std::cout << "process " << xlite::runtime::process_index() << " summed " << sum << std::endl;
}

} // namespace

int main(int argc, char* argv[]) {
  ::setenv("XLITE_NATIVE_KERNELS", "0", 0);
  const std::string_view which = argc > 1 ? argv[1] : "";
  return xlite::mpi::run(argc, argv, [&] {
    const std::int64_t me = xlite::runtime::process_index();
    if (which == "throw") {
      if (me == 1) throw std::runtime_error("boom");
      sum_over_processes(2);
    } else if (which == "replica") {
      xlite::spawn([&](std::int64_t k) {
        if (me == 1 && k == 0) throw std::runtime_error("replica boom");
        auto x = xlite::all_reduce(xlite::reduce_type::sum, xlite::lazy::ones({8}));
        xlite::mark_step();
        (void)x.to_host<float>();
      });
    } else if (which == "mismatch") {
      sum_over_processes(me == 1 ? 3 : 2);
    } else if (which == "timeout") {
      if (me != 1) sum_over_processes(2);
    } else if (which == "every") {
      throw std::runtime_error("everyone fails");
    } else {
      throw std::invalid_argument("failures: unknown case; the cases are throw, replica, mismatch, timeout, every");
    }
  });
}
