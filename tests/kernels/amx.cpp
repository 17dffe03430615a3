#include <xlite/kernels/amx.hpp>
#include <xlite/kernels/gemm.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "gemm_check.hpp"

using xlite::isa;
using xlite::kernels::gemm_precision;
namespace amx = xlite::kernels::amx;

namespace {

// A software model of the eight tiles and of TDPBF16PS as Intel's pseudo-code states it,
// so that the AMX micro-kernel and driver run here, on a machine without AMX.
struct model_tiles {
  amx::tile_config config{};
  std::array<std::array<unsigned char, 1024>, 8> tile{};
  bool configured = false;

  void configure(const amx::tile_config& c) {
    config = c;
    configured = true;
  }
  void release() { configured = false; }
  int rows(int t) const { return config.rows[static_cast<std::size_t>(t)]; }
  int bytes(int t) const { return config.bytes_per_row[static_cast<std::size_t>(t)]; }

  template <int T>
  void zero() {
    REQUIRE(configured);
    tile[T].fill(0);
  }
  template <int T>
  void load(const void* base, std::int64_t stride) {
    REQUIRE(configured);
    for (int r = 0; r < rows(T); ++r) {
      std::memcpy(tile[T].data() + r * 64, static_cast<const unsigned char*>(base) + r * stride,
                  static_cast<std::size_t>(bytes(T)));
    }
  }
  template <int T>
  void store(void* base, std::int64_t stride) {
    REQUIRE(configured);
    for (int r = 0; r < rows(T); ++r) {
      std::memcpy(static_cast<unsigned char*>(base) + r * stride, tile[T].data() + r * 64,
                  static_cast<std::size_t>(bytes(T)));
    }
  }
  float f32(int t, int row, int column) const {
    float x;
    std::memcpy(&x, tile[static_cast<std::size_t>(t)].data() + row * 64 + column * 4, 4);
    return x;
  }
  float bf16(int t, int row, int element) const {
    std::uint16_t bits;
    std::memcpy(&bits, tile[static_cast<std::size_t>(t)].data() + row * 64 + element * 2, 2);
    return static_cast<float>(xlite::bfloat16::from_bits(bits));
  }
  template <int C, int A, int B>
  void dpbf16ps() {
    REQUIRE(configured);
    for (int m = 0; m < rows(C); ++m) {
      for (int k = 0; k < bytes(A) / 4; ++k) {
        for (int n = 0; n < bytes(C) / 4; ++n) {
          float acc = f32(C, m, n);
          acc = std::fma(bf16(A, m, 2 * k), bf16(B, k, 2 * n), acc); // even first
          acc = std::fma(bf16(A, m, 2 * k + 1), bf16(B, k, 2 * n + 1), acc);
          std::memcpy(tile[C].data() + m * 64 + n * 4, &acc, 4);
        }
      }
    }
  }
};

// Tiles that give a wrong product: the probe must notice.
struct wrong_tiles : model_tiles {
  template <int C, int A, int B>
  void dpbf16ps() {}
};

} // namespace

TEST_CASE("AMX geometry: an empty CPUID leaf 0x1D means palette 1's architectural tiles", "[amx]") {
  CHECK(amx::palette_from_cpuid(0, 0, 0) == amx::architectural_palette);
  CHECK(amx::architectural_palette.fits_kernel());
  // Sapphire Rapids reports 8 tiles of 1 KiB, 64 bytes per row, 16 rows.
  const amx::palette spr = amx::palette_from_cpuid(0x0400'2000u, 0x0008'0040u, 0x0000'0010u);
  CHECK(spr == amx::palette{8, 64, 16});
  CHECK(spr.fits_kernel());
  CHECK_FALSE(amx::palette_from_cpuid(0x0400'2000u, 0x0004'0040u, 0x0000'0010u).fits_kernel()); // 4 tiles
  const amx::tile_config config = amx::kernel_config();
  CHECK(config.palette_id == 1);
  CHECK(config.rows[7] == 16);
  CHECK(config.bytes_per_row[0] == 64);
  CHECK(config.rows[8] == 0);
}

TEST_CASE("the AMX probe survives SIGILL and rejects a wrong product", "[amx]") {
  CHECK_FALSE(amx::answers_without_sigill([] {
    __builtin_trap(); // ud2: what a CPU or OS without usable AMX raises
    return true;
  }));
  CHECK(amx::answers_without_sigill([] { return true; })); // and the handler is gone again, harmlessly
  model_tiles model;
  CHECK(amx::product_is_right(model));
  CHECK_FALSE(model.configured); // released
  wrong_tiles wrong;
  CHECK_FALSE(amx::product_is_right(wrong));
}

TEST_CASE("the bf16 gemm takes the AMX path exactly when AMX is usable", "[amx]") {
  const auto& cpu = xlite::detected_cpu_features();
  if (cpu.amx_tile && cpu.amx_bf16) {
    // With the OS's permission granted and palette 1 fitting, the probe must pass: a
    // failing probe would quietly send every bf16 GEMM down the AVX512_BF16 path.
    CHECK(amx::usable() == amx::detected_palette().fits_kernel());
    if (amx::usable()) CHECK(xlite::kernels::gemm_path(gemm_precision::bf16) == isa::amx);
    return;
  }
  CHECK_FALSE(amx::usable());
  xlite::scoped_max_isa cap(isa::amx);
  CHECK(xlite::kernels::gemm_path(gemm_precision::bf16) == std::min(xlite::detected_isa(), isa::avx512_bf16));
}

TEST_CASE("the AMX path, on modelled tiles, accumulates each k-pair even then odd, bit for bit", "[amx]") {
  using path = xlite::kernels::gemm_detail::amx_path<model_tiles>;
  std::mt19937 rng(11);
  // Then sizes with k in whole 32-k blocks and A not transposed, where a bfloat16 A is read
  // in place: in one k block and in two (k > kc = 1024), with a packed last block of 16 k
  // and a packed last panel of fewer than 32 rows; and, wider than a column block or with
  // k not in whole blocks, packed. The last is big enough to be split across threads.
  const std::int64_t sizes[][3] = {{70, 45, 96},   {64, 31, 32},  {96, 256, 160}, {35, 7, 288},   {40, 33, 1056},
                                   {33, 20, 1040}, {33, 300, 64}, {40, 20, 33},   {260, 300, 448}};
  constexpr int random_trials = 24;
  for (int trial = 0; trial < random_trials + static_cast<int>(std::size(sizes)); ++trial) {
    const auto* size = trial < random_trials ? nullptr : sizes[trial - random_trials];
    const xlite_test::gemm_case g = size == nullptr
                                        ? xlite_test::random_case(rng, trial < 20 ? 45 : 130)
                                        : xlite_test::random_case_of_size(rng, size[0], size[1], size[2], false);
    INFO("m " << g.m << ", n " << g.n << ", k " << g.k << ", batch " << g.batch << ", trans " << g.trans_a << g.trans_b
              << ", alpha " << g.alpha << ", beta " << g.beta);
    // Intel's pseudo-code, even product then odd, is k in order: a naive loop on the rounded inputs.
    const std::vector<float> expected = xlite_test::naive_chain(g, true, true);
    const std::vector<xlite::bfloat16> a(g.a.begin(), g.a.end()), b(g.b.begin(), g.b.end());
    // The packing: AVX-512 where the CPU has AVX512_BF16, and the scalar routines under a cap.
    for (const isa cap : {isa::avx512_bf16, isa::avx512}) {
      INFO("isa cap " << xlite::name(cap));
      xlite::scoped_max_isa capped(cap);
      std::vector<float> c = g.c, from_bf16 = g.c;
      const auto args = xlite_test::args_of<float, float>(g, g.a.data(), g.b.data(), c.data(), gemm_precision::bf16);
      const auto bf16_args =
          xlite_test::args_of<xlite::bfloat16, float>(g, a.data(), b.data(), from_bf16.data(), gemm_precision::bf16);
      xlite::kernels::gemm_detail::validate(args);
      if (g.m > 0 && g.n > 0) {
        xlite::kernels::gemm_detail::run_path<path>(args, {});
        xlite::kernels::gemm_detail::run_path<path>(bf16_args, {});
      }
      xlite_test::check_against_double(g, c, true, false);
      CHECK(xlite_test::same_bits(c, expected));
      CHECK(xlite_test::same_bits(from_bf16, expected)); // A packed or in place alike
    }
  }
}
