// Built with FMA enabled (-mavx2 -mfma), where GCC contracts a * b + c into an FMA by
// default: the portable fp32 path must still multiply and add in two roundings, as
// kernels/no_contraction.hpp promises for every build, in the GEMM and the vector products.
#include <xlite/kernels/gemm.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "gemm_check.hpp"

using namespace xlite_test;

TEST_CASE("in a build with FMA enabled, the portable fp32 gemm still rounds products and sums apart", "[gemm]") {
  std::mt19937 rng(20261123);
  int differing_cases = 0; // where fusing would change the bits, so that the check can fail
  for (int trial = 0; trial < 40; ++trial) {
    // The last ten are products with a vector, which run as such.
    const gemm_case g = trial < 30 ? random_case(rng, 40) : vector_case(rng, 37 + trial, 29, trial % 2 == 0, true);
    INFO("m " << g.m << ", n " << g.n << ", k " << g.k << ", batch " << g.batch);
    const std::vector<float> unfused = naive_chain(g, false);
    differing_cases += !same_bits(unfused, naive_chain(g, true));
    std::vector<float> c = g.c;
    xlite::scoped_max_isa cap(xlite::isa::portable);
    xlite::kernels::gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::fp32));
    CHECK(same_bits(c, unfused));
  }
  CHECK(differing_cases > 15);
}
