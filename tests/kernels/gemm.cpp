#include <xlite/core/thread_pool.hpp>
#include <xlite/kernels/gemm.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gemm_check.hpp"
#include "kernel_paths.hpp"

using Catch::Matchers::Contains;
using xlite::bfloat16;
using xlite::isa;
using xlite::kernels::gemm;
using xlite::kernels::gemm_args;
using xlite::kernels::gemm_precision;
using xlite::kernels::transpose;

namespace {

using namespace xlite_test;

std::vector<isa> fp32_paths() {
  std::set<isa> paths;
  for (const isa level : xlite_test::kernel_paths()) paths.insert(std::min(level, isa::avx512));
  return {paths.begin(), paths.end()};
}

// The trials after the random ones: two wider than a column block, where A is packed rather
// than read in place; two narrow ones deeper than two k blocks (kc = 1024), the first with A
// not transposed, read in place across its k blocks; and one both wide and deep, where the
// blocked order meets C again in every k block.
gemm_case shaped_case(std::mt19937& rng, int index) {
  if (index < 2) return random_case_of_size(rng, 29, 1100, 70);
  if (index < 4) return random_case_of_size(rng, 29, 70, 2100, index == 2 ? std::optional<bool>(false) : std::nullopt);
  return random_case_of_size(rng, 13, 600, 2100);
}

} // namespace

TEST_CASE("fp32 gemm: every path is the naive float accumulation, bit for bit, and within the error bound",
          "[gemm]") {
  std::mt19937 rng(20261122);
  for (int trial = 0; trial < 65; ++trial) {
    const gemm_case g = trial < 60 ? random_case(rng, trial < 50 ? 40 : 300) : shaped_case(rng, trial - 60);
    INFO("m " << g.m << ", n " << g.n << ", k " << g.k << ", batch " << g.batch << ", trans " << g.trans_a << g.trans_b
              << ", alpha " << g.alpha << ", beta " << g.beta);
    const std::vector<float> fused = naive_chain(g, true);
    const std::vector<float> unfused = naive_chain(g, false);
    for (const isa path : fp32_paths()) {
      INFO("path " << path);
      xlite::scoped_max_isa cap(path);
      REQUIRE(xlite::kernels::gemm_path(gemm_precision::fp32) == path);
      std::vector<float> c = g.c;
      gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::fp32));
      CHECK(same_bits(c, path == isa::portable ? unfused : fused));
      check_against_double(g, c, false, false);
    }
  }
}

TEST_CASE("gemm computes a last panel of every row count, and only its rows", "[gemm]") {
  // m = 1 to 25 gives every row count of a last panel under 4-, 6- and 12-row kernels, each
  // with a whole tile of columns and an edge one (n = 40). C is followed by rows that no
  // batch owns: they, like the padding between rows and batches, must keep their values.
  // alpha = 1 with beta 0 or 0.75 writes tiles to C directly, where a row written past m
  // would change a value (with beta = 1 it would write back the same one).
  std::mt19937 rng(25);
  for (std::int64_t m = 1; m <= 25; ++m) {
    gemm_case g = random_case_of_size(rng, m, 40, 37);
    g.alpha = 1.0f;
    g.beta = m % 2 == 0 ? 0.75f : 0.0f;
    g.c.resize(g.c.size() + static_cast<std::size_t>(16 * g.ldc), 7.0f);
    INFO("m " << g.m << ", batch " << g.batch << ", trans " << g.trans_a << g.trans_b << ", alpha " << g.alpha
              << ", beta " << g.beta);
    const std::vector<float> fused = naive_chain(g, true);
    const std::vector<float> unfused = naive_chain(g, false);
    std::vector<float> first_bf16;
    for (const isa path : xlite_test::kernel_paths()) {
      INFO("path " << path);
      xlite::scoped_max_isa cap(path);
      if (path <= isa::avx512) {
        std::vector<float> c = g.c;
        gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::fp32));
        CHECK(same_bits(c, path == isa::portable ? unfused : fused));
      }
      std::vector<float> c = g.c;
      gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::bf16));
      check_against_double(g, c, true, false);
      CHECK(writes_only_c(g, c));
      if (first_bf16.empty()) {
        first_bf16 = c;
      } else if (path != isa::amx) { // see the bf16 test above
        CHECK(same_bits(c, first_bf16));
      }
    }
  }
}

TEST_CASE("fp32 gemm with a vector operand is the naive float accumulation on every path and any thread count",
          "[gemm]") {
  // m = 1, and n = 1 with C's column contiguous, run as vector products (kernels/
  // vector_product.hpp): B (or A) not transposed in one form, transposed in the other. A
  // strided column of C takes the GEMM, which must agree as well. Lengths cross the vector
  // widths, the rows form's register tiles (64 and 128 columns) and the chunks (2048);
  // depths cross the rows form's groups of 8 and the dots form's blocks of 8 and 16.
  std::mt19937 rng(1202);
  const std::int64_t lengths[] = {1, 5, 16, 17, 100, 128, 129, 2047, 2048, 2049, 4500};
  const std::int64_t depths[] = {1, 7, 8, 9, 16, 17, 33, 300};
  for (int trial = 0; trial < 44; ++trial) {
    const std::int64_t length = lengths[trial % 11];
    const std::int64_t depth = depths[std::uniform_int_distribution<int>(0, 7)(rng)];
    const bool row = trial % 2 == 0;
    const gemm_case g = vector_case(rng, length, depth, row, trial % 4 != 3);
    INFO("m " << g.m << ", n " << g.n << ", k " << g.k << ", batch " << g.batch << ", trans " << g.trans_a << g.trans_b
              << ", ldc " << g.ldc << ", alpha " << g.alpha << ", beta " << g.beta);
    const std::vector<float> fused = naive_chain(g, true);
    const std::vector<float> unfused = naive_chain(g, false);
    for (const isa path : fp32_paths()) {
      for (const std::size_t threads : {1, 3}) {
        INFO("path " << path << ", threads " << threads);
        xlite::scoped_max_isa cap(path);
        xlite::thread_pool pool(threads);
        xlite::scoped_thread_pool use(pool);
        std::vector<float> c = g.c;
        gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::fp32));
        CHECK(same_bits(c, path == isa::portable ? unfused : fused));
        CHECK(writes_only_c(g, c));
      }
    }
  }
}

TEST_CASE("fp32 gemm packs an A whose rows crowd one L1 set, and gets the same bits", "[gemm]") {
  using xlite::kernels::gemm_detail::rows_overflow_l1_set;
  CHECK_FALSE(rows_overflow_l1_set(1024, 12)); // 1 KiB apart: three rows to a set
  CHECK(rows_overflow_l1_set(4096, 64));       // 4 KiB apart: 64 rows in one set, more than any L1's ways
  std::mt19937 rng(4096);
  gemm_case g;
  do {
    g = random_case_of_size(rng, 40, 70, 1024, false);
  } while (g.lda != 1024); // rows 4 KiB apart
  const std::vector<float> fused = naive_chain(g, true);
  const std::vector<float> unfused = naive_chain(g, false);
  for (const isa path : fp32_paths()) {
    INFO("path " << path);
    xlite::scoped_max_isa cap(path);
    std::vector<float> c = g.c;
    gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::fp32));
    CHECK(same_bits(c, path == isa::portable ? unfused : fused));
  }
}

TEST_CASE("bf16 gemm: every path but AMX gives the same bits, all within the error bound of the rounded inputs",
          "[gemm]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 45; ++trial) {
    const gemm_case g = trial < 40 ? random_case(rng, trial < 32 ? 40 : 300) : shaped_case(rng, trial - 40);
    INFO("m " << g.m << ", n " << g.n << ", k " << g.k << ", batch " << g.batch << ", trans " << g.trans_a << g.trans_b
              << ", alpha " << g.alpha << ", beta " << g.beta);
    std::vector<bfloat16> a(g.a.begin(), g.a.end());
    std::vector<bfloat16> b(g.b.begin(), g.b.end());
    std::vector<float> first;
    for (const isa path : xlite_test::kernel_paths()) {
      INFO("path " << path);
      xlite::scoped_max_isa cap(path);
      // From float inputs rounded while packing, and from bfloat16 inputs: the same numbers.
      std::vector<float> c = g.c;
      gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::bf16));
      std::vector<float> from_bf16 = g.c;
      gemm(args_of<bfloat16, float>(g, a.data(), b.data(), from_bf16.data(), gemm_precision::bf16));
      CHECK(same_bits(c, from_bf16));
      check_against_double(g, c, true, false);
      if (first.empty()) {
        first = c;
      } else if (path != isa::amx) {
        // Real TDPBF16PS rounds its pair sums its own way (measured on Sapphire Rapids): AMX
        // is held to the error bound above, and its driver to Intel's pseudo-code on
        // modelled tiles (amx.cpp).
        CHECK(same_bits(c, first));
      }
      // bfloat16 output: the float result rounded once.
      std::vector<bfloat16> c16(g.c.begin(), g.c.end());
      gemm(args_of<bfloat16, bfloat16>(g, a.data(), b.data(), c16.data(), gemm_precision::bf16));
      gemm_case widened = g; // beta * C reads the bfloat16 C
      for (std::size_t i = 0; i < widened.c.size(); ++i) widened.c[i] = static_cast<float>(bfloat16(g.c[i]));
      std::vector<float> expected = widened.c;
      gemm(args_of<bfloat16, float>(widened, a.data(), b.data(), expected.data(), gemm_precision::bf16));
      bool rounded_once = true;
      for (std::int64_t p = 0; p < g.batch; ++p) {
        for (std::int64_t i = 0; i < g.m; ++i) {
          for (std::int64_t j = 0; j < g.n; ++j) {
            const std::size_t at = g.c_index(p, i, j);
            rounded_once = rounded_once && c16[at].bits() == bfloat16(expected[at]).bits();
          }
        }
      }
      CHECK(rounded_once);
    }
  }
}

TEST_CASE("bf16 gemm accumulates as VDPBF16PS does: odd k before even k, denormals flushed", "[gemm]") {
  // C = 1 + a0 b0 + a1 b1 with a0 b0 = 1.5 * 2^-24 and a1 b1 = 2^-24, starting from C
  // (beta 1). Odd first: 1 + 2^-24 is a tie and stays 1, then 1 + 1.5 * 2^-24 rounds up to
  // 1 + 2^-23. Even first: 1 + 2^-23, then + 2^-24 is a tie that goes to the even 1 + 2^-22.
  const std::vector<bfloat16> a{bfloat16(0x1.8p-24f), bfloat16(0x1p-24f)};
  const std::vector<bfloat16> b{bfloat16(1.0f), bfloat16(1.0f)};
  const std::vector<float> a32{0x1.8p-24f, 0x1p-24f};
  const std::vector<float> b32{1.0f, 1.0f};
  for (const isa path : xlite_test::kernel_paths()) {
    INFO("path " << path);
    xlite::scoped_max_isa cap(path);
    float c = 1.0f;
    gemm(gemm_args<bfloat16, float>{.m = 1, .n = 1, .k = 2, .a = a.data(), .lda = 2, .b = b.data(), .ldb = 1, .c = &c,
                                    .ldc = 1, .beta = 1.0f});
    CHECK(c == 0x1.000002p0f);
    // fp32 takes k in order: even first.
    float c32 = 1.0f;
    gemm(gemm_args<float, float>{.m = 1, .n = 1, .k = 2, .a = a32.data(), .lda = 2, .b = b32.data(), .ldb = 1,
                                 .c = &c32, .ldc = 1, .beta = 1.0f});
    CHECK(c32 == 0x1.000004p0f);
    // A denormal product is flushed to zero in bf16: (2^-70)(2^-70) = 2^-140.
    const std::vector<bfloat16> tiny{bfloat16(0x1p-70f), bfloat16(0x1p-70f)};
    float d = 5.0f;
    gemm(gemm_args<bfloat16, float>{.m = 1, .n = 1, .k = 1, .a = tiny.data(), .lda = 1, .b = tiny.data() + 1, .ldb = 1,
                                    .c = &d, .ldc = 1});
    CHECK(std::bit_cast<std::uint32_t>(d) == 0u);
    // fp32 keeps it.
    const float x = 0x1p-70f;
    d = 5.0f;
    gemm(gemm_args<float, float>{.m = 1, .n = 1, .k = 1, .a = &x, .lda = 1, .b = &x, .ldb = 1, .c = &d, .ldc = 1});
    CHECK(d == 0x1p-140f);
  }
}

TEST_CASE("gemm gives the same bits for any thread count", "[gemm]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  // Narrow trials run rows first on the paths whose column block holds them, unless A has
  // too few panels per thread, when the threads split columns in the blocked order (trial 0
  // on two threads, most on three and five); the last is wider than every path's.
  // Trials 5 to 8 are products with a vector, m = 1 or n = 1, in both forms (vector_product.hpp),
  // large enough to run on the pool.
  for (int trial = 0; trial < 9; ++trial) {
    gemm_case g{};
    const int vector_trial = trial - 5;
    g.m = trial < 5 ? 150 + trial * 37 : vector_trial % 2 == 0 ? 1 : 3001;
    g.n = trial < 5 ? 90 + trial * 121 : vector_trial % 2 == 0 ? 3001 : 1;
    g.k = trial < 5 ? 400 + trial * 250 : 700;
    g.batch = 1;
    g.trans_a = trial < 5 ? trial % 2 == 1 : vector_trial / 2 == 1;
    g.trans_b = trial < 5 ? trial / 2 == 1 : vector_trial / 2 == 1;
    g.alpha = 1.0f;
    g.beta = trial == 3 ? 1.0f : 0.0f;
    g.lda = g.trans_a ? g.m : g.k;
    g.ldb = g.trans_b ? g.k : g.n;
    g.ldc = g.n;
    for (auto [v, size] : {std::tuple{&g.a, g.m * g.k}, std::tuple{&g.b, g.k * g.n}, std::tuple{&g.c, g.m * g.n}}) {
      v->resize(static_cast<std::size_t>(size));
      for (float& x : *v) x = value(rng);
    }
    for (const gemm_precision precision : {gemm_precision::fp32, gemm_precision::bf16}) {
      std::vector<float> reference;
      for (const std::size_t threads : {1, 2, 3, 5}) {
        INFO("trial " << trial << ", threads " << threads << ", bf16 " << (precision == gemm_precision::bf16));
        xlite::thread_pool pool(threads);
        xlite::scoped_thread_pool use(pool);
        std::vector<float> c = g.c;
        gemm(args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), precision));
        if (reference.empty()) {
          reference = c;
        } else {
          CHECK(same_bits(c, reference));
        }
      }
    }
  }
}

TEST_CASE("gemm with beta 0 does not read C, and K = 0 scales C by beta", "[gemm]") {
  const std::vector<float> a{1.0f, 2.0f};
  const std::vector<float> b{3.0f, 4.0f};
  std::vector<float> c{std::numeric_limits<float>::quiet_NaN()};
  gemm(gemm_args<float, float>{.m = 1, .n = 1, .k = 2, .a = a.data(), .lda = 2, .b = b.data(), .ldb = 1, .c = c.data(),
                               .ldc = 1});
  CHECK(c[0] == 11.0f);
  c[0] = std::numeric_limits<float>::quiet_NaN();
  gemm(gemm_args<float, float>{.m = 1, .n = 1, .k = 0, .a = nullptr, .b = nullptr, .c = c.data(), .ldc = 1});
  CHECK(c[0] == 0.0f);
  c[0] = 3.0f;
  gemm(gemm_args<float, float>{.m = 1, .n = 1, .k = 0, .c = c.data(), .ldc = 1, .alpha = 2.0f, .beta = 0.5f});
  CHECK(c[0] == 1.5f);
}

TEST_CASE("gemm with alpha 0 does not multiply: C = beta * C, NaN in A and B do not reach it", "[gemm]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{nan, 1.0f, 2.0f, 3.0f};
  const std::vector<float> b{std::numeric_limits<float>::infinity(), 1.0f, 2.0f, 3.0f};
  const std::vector<float> start{2.0f, nan, 4.0f, 8.0f};
  for (const float beta : {0.0f, 0.5f}) {
    INFO("beta " << beta);
    const std::vector<float> expected = beta == 0.0f ? std::vector<float>(4, 0.0f) : std::vector<float>{1.0f, nan, 2.0f, 4.0f};
    std::vector<float> c = start;
    gemm(gemm_args<float, float>{.m = 2, .n = 2, .k = 2, .a = a.data(), .lda = 2, .b = b.data(), .ldb = 2, .c = c.data(),
                                 .ldc = 2, .alpha = 0.0f, .beta = beta});
    CHECK(same_bits(c, expected));
    std::vector<bfloat16> c16(start.begin(), start.end());
    gemm(gemm_args<float, bfloat16>{.m = 2, .n = 2, .k = 2, .a = a.data(), .lda = 2, .b = b.data(), .ldb = 2,
                                    .c = c16.data(), .ldc = 2, .alpha = 0.0f, .beta = beta,
                                    .precision = gemm_precision::bf16});
    CHECK(same_bits(std::vector<float>(c16.begin(), c16.end()), expected));
  }
}

TEST_CASE("gemm with an empty batch does nothing", "[gemm]") {
  std::vector<float> c{7.0f};
  gemm(gemm_args<float, float>{.m = 1, .n = 1, .k = 1, .c = c.data(), .ldc = 1, .batch = 0});
  CHECK(c[0] == 7.0f);
}

TEST_CASE("gemm's epilogue may not call gemm, and the refusal leaves gemm usable", "[gemm]") {
  std::vector<float> x(16, 1.0f);
  std::vector<float> c(16);
  const auto args = gemm_args<float, float>{.m = 4, .n = 4, .k = 4, .a = x.data(), .lda = 4, .b = x.data(), .ldb = 4,
                                            .c = c.data(), .ldc = 4};
  const xlite::kernels::gemm_epilogue nested{
      [](void* context, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {
        gemm(*static_cast<const gemm_args<float, float>*>(context));
      },
      const_cast<gemm_args<float, float>*>(&args)};
  CHECK_THROWS_AS(gemm(args, nested), xlite::value_error);
  CHECK_THROWS_WITH(gemm(args, nested), Contains("gemm: called from a gemm epilogue"));
  std::fill(c.begin(), c.end(), 0.0f);
  gemm(args);
  CHECK(c == std::vector<float>(16, 4.0f));
}

TEST_CASE("bf16 gemm flushes denormals only inside, and keeps the exception flags it raised", "[gemm]") {
  xlite::thread_pool pool(1);
  xlite::scoped_thread_pool use(pool);
  // Products of bfloat16 are exact in float; 1 + (1/3) * 2^-20 is not.
  const std::vector<float> a{1.0f, 1.0f / 3, 1.0f / 3, 1.0f, 1.0f / 3, 1.0f / 3, 1.0f, 1.0f / 3, 1.0f / 3};
  const std::vector<float> b{1.0f, 1.0f, 1.0f, 0x1p-20f, 0x1p-20f, 0x1p-20f, 0x1p-20f, 0x1p-20f, 0x1p-20f};
  std::vector<float> c(9);
  for (const isa path : xlite_test::kernel_paths()) {
    // VDPBF16PS and TDPBF16PS neither consult nor set MXCSR's flags: the float kernels do.
    if (path >= isa::avx512_bf16) continue;
    INFO("path " << path);
    xlite::scoped_max_isa cap(path);
    std::feclearexcept(FE_ALL_EXCEPT);
#if XLITE_X86_KERNELS
    const unsigned modes_before = _mm_getcsr() & 0x8040u; // FTZ and DAZ
#endif
    gemm(gemm_args<float, float>{.m = 3, .n = 3, .k = 3, .a = a.data(), .lda = 3, .b = b.data(), .ldb = 3,
                                 .c = c.data(), .ldc = 3, .precision = gemm_precision::bf16});
#if XLITE_X86_KERNELS
    CHECK((_mm_getcsr() & 0x8040u) == modes_before);
#endif
    CHECK(std::fetestexcept(FE_INEXACT) != 0);
  }
}

TEST_CASE("gemm's epilogue sees every region of C once, after C is final", "[gemm]") {
  // The epilogue runs on the pool's threads, where Catch's assertions may not: it records,
  // and the test checks once gemm has returned.
  struct seen {
    std::vector<std::atomic<int>> count;
    const std::vector<float>* c;
    const std::vector<float>* expected;
    std::int64_t n;
    std::atomic<bool> final{true};
    std::atomic<bool> batch_zero{true};
  };
  // n = 1000 is wider than every path's column block (the blocked order), n = 70 narrower
  // (rows first), and m = 40 on two threads too few rows to share (the blocked order, its
  // threads splitting columns); k = 2100 is three k blocks, so the last one must be the
  // one that calls it. m = 1 and n = 1 are vector products, in chunks of C's row or column.
  for (const auto& [threads, m, n] :
       {std::tuple{1, 333, 1000}, std::tuple{2, 333, 1000}, std::tuple{1, 333, 70}, std::tuple{2, 333, 70},
        std::tuple{2, 40, 70}, std::tuple{1, 1, 5000}, std::tuple{2, 1, 5000}, std::tuple{2, 5000, 1}}) {
    INFO("threads " << threads << ", m " << m << ", n " << n);
    xlite::thread_pool pool(static_cast<std::size_t>(threads));
    xlite::scoped_thread_pool use(pool);
    const std::int64_t k = 2100;
    std::vector<float> a(static_cast<std::size_t>(m * k), 0.5f);
    std::vector<float> b(static_cast<std::size_t>(k * n), 0.25f);
    std::vector<float> c(static_cast<std::size_t>(m * n));
    const std::vector<float> expected(c.size(), 0.125f * k);
    seen s{std::vector<std::atomic<int>>(c.size()), &c, &expected, n};
    xlite::kernels::gemm_epilogue epilogue{
        [](void* context, std::int64_t batch, std::int64_t row, std::int64_t col, std::int64_t rows, std::int64_t cols) {
          auto& st = *static_cast<seen*>(context);
          if (batch != 0) st.batch_zero = false;
          for (std::int64_t i = row; i < row + rows; ++i) {
            for (std::int64_t j = col; j < col + cols; ++j) {
              const auto at = static_cast<std::size_t>(i * st.n + j);
              st.count[at].fetch_add(1, std::memory_order_relaxed);
              if ((*st.c)[at] != (*st.expected)[at]) st.final = false;
            }
          }
        },
        &s};
    gemm(gemm_args<float, float>{.m = m, .n = n, .k = k, .a = a.data(), .lda = k, .b = b.data(), .ldb = n, .c = c.data(),
                                 .ldc = n},
         epilogue);
    CHECK(s.batch_zero);
    CHECK(std::all_of(s.count.begin(), s.count.end(), [](const std::atomic<int>& x) { return x == 1; }));
    CHECK(s.final);
  }
}

TEST_CASE("gemm rejects bad arguments with a message naming them", "[gemm]") {
  std::vector<float> x(64);
  const auto base = gemm_args<float, float>{.m = 4, .n = 4, .k = 4, .a = x.data(), .lda = 4, .b = x.data(), .ldb = 4,
                                            .c = x.data(), .ldc = 4};
  auto bad = base;
  bad.m = -1;
  CHECK_THROWS_WITH(gemm(bad), Contains("gemm: negative size") && Contains("m = -1"));
  bad = base;
  bad.lda = 3;
  CHECK_THROWS_AS(gemm(bad), xlite::value_error);
  CHECK_THROWS_WITH(gemm(bad), Contains("lda = 3 is less than the 4 columns of a"));
  bad = base;
  bad.trans_b = transpose::yes;
  bad.k = 6;
  bad.lda = 6;
  bad.ldb = 5;
  CHECK_THROWS_WITH(gemm(bad), Contains("ldb = 5") && Contains("6 columns of b") && Contains("transposed"));
  bad = base;
  bad.c = nullptr;
  CHECK_THROWS_WITH(gemm(bad), Contains("c is null for a 4 x 4 result"));
  bad = base;
  bad.batch = 2;
  bad.stride_c = 8;
  CHECK_THROWS_WITH(gemm(bad), Contains("the 2 results overlap"));
  bad = base;
  bad.batch = -1;
  CHECK_THROWS_WITH(gemm(bad), Contains("gemm: negative batch -1"));
  const std::vector<bfloat16> h(16);
  std::vector<float> out(16);
  CHECK_THROWS_WITH(gemm(gemm_args<bfloat16, float>{.m = 4, .n = 4, .k = 4, .a = h.data(), .lda = 4, .b = h.data(),
                                                    .ldb = 4, .c = out.data(), .ldc = 4,
                                                    .precision = gemm_precision::fp32}),
                    Contains("fp32 precision needs float inputs"));
}
