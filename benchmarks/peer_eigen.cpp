// Eigen's triad: a = b + s * c over Eigen::Map views of the same buffers, with noalias()
// so Eigen writes straight into a. Eigen does not parallelise coefficient-wise
// expressions, so it runs on one thread only.

#include <Eigen/Core>

#include <cstdint>

#include "bench_common.hpp"
#include "triad.hpp"

namespace {

using namespace xlite::bench;

using aligned_vector = Eigen::Map<Eigen::VectorXf, Eigen::Aligned64>;
using const_aligned_vector = Eigen::Map<const Eigen::VectorXf, Eigen::Aligned64>;
static_assert(aligned_floats::alignment == 64, "the maps promise Eigen 64-byte alignment");

void run_triad_eigen(benchmark::State& state) {
  const std::int64_t n = size_arg(state);
  triad_operands triad(n);
  aligned_vector a(triad.a.data(), n);
  const const_aligned_vector b(triad.b.data(), n);
  const const_aligned_vector c(triad.c.data(), n);
  for (auto _ : state) {
    a.noalias() = b + triad_operands::s * c;
    benchmark::ClobberMemory();
  }
  report_bytes(state, triad_bytes(n));
}

} // namespace

void xlite::bench::register_eigen() {
  register_sized("triad", "eigen", run_triad_eigen, triad_sizes, {1});
}
