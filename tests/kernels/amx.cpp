#include <xlite/core/aligned_memory.hpp>
#include <xlite/kernels/amx.hpp>
#include <xlite/kernels/gemm.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <type_traits>
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
  // Not REQUIRE: the driver calls the tiles from the pool's threads, where Catch2's
  // assertions are not safe; the pool rethrows this on the calling thread.
  void require_configured() const {
    if (!configured) throw std::logic_error("a model tile was used outside configure() ... release()");
  }
  int rows(int t) const { return config.rows[static_cast<std::size_t>(t)]; }
  int bytes(int t) const { return config.bytes_per_row[static_cast<std::size_t>(t)]; }

  template <int T>
  void zero() {
    require_configured();
    tile[T].fill(0);
  }
  template <int T>
  void load(const void* base, std::int64_t stride) {
    require_configured();
    for (int r = 0; r < rows(T); ++r) {
      std::memcpy(tile[T].data() + r * 64, static_cast<const unsigned char*>(base) + r * stride,
                  static_cast<std::size_t>(bytes(T)));
    }
  }
  template <int T>
  void store(void* base, std::int64_t stride) {
    require_configured();
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
    require_configured();
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

#if XLITE_X86_KERNELS
TEST_CASE("the AMX path's AVX-512 packing writes the scalar packing's words", "[amx]") {
  if (!xlite::detected_cpu_features().avx512_bf16) {
    WARN("skipped: this CPU has no AVX512_BF16, so the AMX path packs with the scalar routines only");
    return;
  }
  namespace gd = xlite::kernels::gemm_detail;
  constexpr int w = xlite::kernels::amx::mr;
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  const auto run = [&]<class T>(T nan, bool k_major, std::int64_t count, std::int64_t depth) {
    constexpr bool bf16_source = std::is_same_v<T, xlite::bfloat16>;
    INFO("bfloat16 " << bf16_source << ", k_major " << k_major << ", count " << count << ", depth " << depth);
    // The source as stored, its padding between rows NaN: a word that reads it differs.
    const std::int64_t rows = k_major ? depth : count;
    const std::int64_t cols = k_major ? count : depth;
    const std::int64_t ld = cols + 3;
    std::vector<T> source(static_cast<std::size_t>((rows - 1) * ld + cols), nan);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) source[static_cast<std::size_t>(r * ld + c)] = T(value(rng));
    }
    const gd::panel_source<T> src{source.data(), ld, k_major};
    // Both packings into 64-byte aligned buffers (as the driver's), filled with different junk.
    const auto packed_equal = [&](std::int64_t steps, const auto& pack_scalar, const auto& pack_vector) {
      const std::int64_t size = (count + w - 1) / w * w * steps;
      auto scalar = xlite::allocate_aligned<std::uint32_t>(size);
      auto vector = xlite::allocate_aligned<std::uint32_t>(size);
      std::fill_n(scalar.get(), size, 0xdeadbeefu);
      std::fill_n(vector.get(), size, 0xfeedfaceu);
      pack_scalar(scalar.get());
      pack_vector(vector.get());
      return std::equal(scalar.get(), scalar.get() + size, vector.get());
    };
    const std::int64_t padded = (gd::pair_steps(depth) + 15) / 16 * 16;
    CHECK(packed_equal(
        padded, [&](std::uint32_t* dst) { gd::pack_amx_rows<w>(dst, src, count, depth, padded); },
        [&](std::uint32_t* dst) { gd::pack_amx_rows_avx512<w>(dst, src, count, depth, padded); }));
    for (const std::int64_t steps : {gd::pair_steps(depth), padded}) {
      CHECK(packed_equal(
          steps, [&](std::uint32_t* dst) { gd::pack_bf16_pairs<w>(dst, src, count, depth, steps); },
          [&](std::uint32_t* dst) { gd::pack_bf16_pairs_avx512<w>(dst, src, count, depth, steps); }));
    }
  };
  for (const bool k_major : {false, true}) {
    for (const std::int64_t count : {1, 5, 16, 31, 32, 33, 70}) {
      for (const std::int64_t depth : {1, 2, 3, 31, 32, 33, 63, 64, 100}) {
        run(std::numeric_limits<float>::quiet_NaN(), k_major, count, depth);
        run(std::numeric_limits<xlite::bfloat16>::quiet_NaN(), k_major, count, depth);
      }
    }
  }
}
#endif
