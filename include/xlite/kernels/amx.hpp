#pragma once

// Intel AMX for the bf16 GEMM: the CPU's own systolic array, the closest thing to a TPU's
// matrix unit a CPU has. Three parts:
//
// 1. Tile geometry. CPUID leaf 0x1D describes palette 1 (how many tiles, bytes per row,
//    rows). Hypervisors have been seen to hide that leaf (it reads as zeros) while AMX
//    itself works once Linux grants the tile permission; oneDNN 2.6 builds its tile
//    configuration from the leaf and dies with SIGILL there. xlite takes palette 1's
//    architectural geometry (8 tiles of 16 rows x 64 bytes) when the leaf is empty.
// 2. A one-time probe: a small TDPBF16PS product with a known answer, run under a SIGILL
//    guard. If it faults or answers wrong, AMX is reported unusable and the bf16 GEMM
//    takes the AVX512_BF16 path.
// 3. The micro-kernel: a 32 x 32 tile of C in four accumulator tiles, fed by two A tiles
//    (16 rows x 16 k-pairs) and two B tiles (16 k-pairs x 16 columns) per 32 k. It is
//    written against a tile interface (`Tiles`): `amx_tiles` issues the instructions, and
//    tests run the same kernel and driver on a software model of the tiles.
//
// Numerics, from Intel's pseudo-code for TDPBF16PS: per k-pair, the even product then the
// odd one, each a fused multiply-add into the float accumulator, with denormals flushed.
// (VDPBF16PS, for comparison, adds the odd product first.) The hardware does not follow
// the pseudo-code bit for bit: on a Sapphire Rapids machine its result for the tie case of
// gemm.cpp is VDPBF16PS's (odd first), and on random products it differs from VDPBF16PS's
// in the last bits now and then, within the bf16 error bound. So the tests hold the driver
// to the pseudo-code on a software model of the tiles, and the hardware to the bound.

#include <array>
#include <cstdint>
#include <cstring>

#include "xlite/core/cpu_features.hpp"
#include "xlite/kernels/intrinsics.hpp"

#if defined(__linux__)
#include <setjmp.h>
#include <signal.h>
#endif

#if XLITE_X86_KERNELS
#include <cpuid.h>
#endif

namespace xlite::kernels::amx {

// What palette 1 offers (CPUID leaf 0x1D, sub-leaf 1).
struct palette {
  int tiles = 0;
  int bytes_per_row = 0;
  int rows = 0;

  bool fits_kernel() const noexcept { return tiles >= 8 && bytes_per_row >= 64 && rows >= 16; }
  friend bool operator==(const palette&, const palette&) = default;
};

// Palette 1 as the architecture defines it.
inline constexpr palette architectural_palette{8, 64, 16};

// The palette from the registers of CPUID leaf 0x1D, sub-leaf 1; the architectural one when
// they are all zero (a hypervisor that hides the leaf).
constexpr palette palette_from_cpuid(std::uint32_t eax, std::uint32_t ebx, std::uint32_t ecx) noexcept {
  if (eax == 0 && ebx == 0 && ecx == 0) return architectural_palette;
  return {static_cast<int>(ebx >> 16), static_cast<int>(ebx & 0xffff), static_cast<int>(ecx & 0xffff)};
}

inline palette detected_palette() {
#if XLITE_X86_KERNELS
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(0x1d, 1, &eax, &ebx, &ecx, &edx)) return palette_from_cpuid(eax, ebx, ecx);
#endif
  return architectural_palette;
}

// LDTILECFG's 64-byte operand.
struct alignas(64) tile_config {
  std::uint8_t palette_id = 1;
  std::uint8_t start_row = 0;
  std::array<std::uint8_t, 14> reserved{};
  std::array<std::uint16_t, 16> bytes_per_row{};
  std::array<std::uint8_t, 16> rows{};
};
static_assert(sizeof(tile_config) == 64);

// The kernel's configuration: tiles 0-3 hold C (16 x 16 floats), 4-5 A, 6-7 B, all 16
// rows of 64 bytes.
inline tile_config kernel_config() {
  tile_config config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[static_cast<std::size_t>(t)] = 64;
    config.rows[static_cast<std::size_t>(t)] = 16;
  }
  return config;
}

// ---- running code that may fault ---------------------------------------------------------------

namespace detail {
#if defined(__linux__)
inline sigjmp_buf& probe_jump() {
  thread_local sigjmp_buf jump;
  return jump;
}
inline void on_sigill(int) { siglongjmp(probe_jump(), 1); }
#endif
} // namespace detail

// Runs probe() and returns its answer, or false if it raised SIGILL (the process goes on).
// SIGILL's handler is replaced for the duration, so call it once, early, from one thread.
template <class Probe>
bool answers_without_sigill(Probe&& probe) {
#if defined(__linux__)
  struct sigaction guard {};
  struct sigaction previous {};
  guard.sa_handler = detail::on_sigill;
  sigemptyset(&guard.sa_mask);
  if (sigaction(SIGILL, &guard, &previous) != 0) return false;
  bool answer = false;
  if (sigsetjmp(detail::probe_jump(), 1) == 0) answer = probe();
  sigaction(SIGILL, &previous, nullptr);
  return answer;
#else
  static_cast<void>(probe);
  return false;
#endif
}

// ---- the micro-kernel --------------------------------------------------------------------------

// A's 32 rows in blocks of 32 k (16 pairs, 64 bytes a row): each block's rows `row_bytes`
// apart, blocks `block_bytes` apart. Packed panels hold a block's rows one after another;
// a row-major bfloat16 A holds them in place, a row apart (packed() and in_place()).
// B is in the bf16-pair panels of gemm_pack.hpp with 32 columns (a tile is 16 columns,
// rows 128 bytes apart).
inline constexpr int mr = 32;
inline constexpr int nr = 32;
inline constexpr int pairs_per_block = 16;

struct a_blocks {
  const unsigned char* data;
  std::int64_t row_bytes;
  std::int64_t block_bytes;

  static a_blocks packed(const std::uint32_t* panel) {
    return {reinterpret_cast<const unsigned char*>(panel), 64, mr * 64};
  }
  static a_blocks in_place(const void* first_row, std::int64_t row_bytes) {
    return {static_cast<const unsigned char*>(first_row), row_bytes, 64};
  }
};

// C tile (32 x 32, row distance ldc floats) = acc, where acc starts at 0 (start_scale 0)
// or C (start_scale 1) and takes `blocks` blocks in order; the caller scales for other cases.
template <class Tiles>
[[gnu::always_inline]] inline void micro_kernel(Tiles& tiles, std::int64_t blocks, a_blocks a, const std::uint32_t* b,
                                                float* c, std::int64_t ldc, bool start_from_c) {
  const auto c_stride = static_cast<std::int64_t>(ldc * sizeof(float));
  if (start_from_c) {
    tiles.template load<0>(c, c_stride);
    tiles.template load<1>(c + 16, c_stride);
    tiles.template load<2>(c + 16 * ldc, c_stride);
    tiles.template load<3>(c + 16 * ldc + 16, c_stride);
  } else {
    tiles.template zero<0>();
    tiles.template zero<1>();
    tiles.template zero<2>();
    tiles.template zero<3>();
  }
  for (std::int64_t block = 0; block < blocks; ++block) {
    const unsigned char* a_block = a.data + block * a.block_bytes;
    const std::uint32_t* b_block = b + block * pairs_per_block * nr;
    tiles.template load<4>(a_block, a.row_bytes);
    tiles.template load<5>(a_block + 16 * a.row_bytes, a.row_bytes);
    tiles.template load<6>(b_block, 128);
    tiles.template load<7>(b_block + 16, 128);
    tiles.template dpbf16ps<0, 4, 6>();
    tiles.template dpbf16ps<1, 4, 7>();
    tiles.template dpbf16ps<2, 5, 6>();
    tiles.template dpbf16ps<3, 5, 7>();
  }
  tiles.template store<0>(c, c_stride);
  tiles.template store<1>(c + 16, c_stride);
  tiles.template store<2>(c + 16 * ldc, c_stride);
  tiles.template store<3>(c + 16 * ldc + 16, c_stride);
}

#if XLITE_X86_KERNELS
XLITE_INTRINSICS_BEGIN

// The instructions themselves. A tile number must be a literal in the instruction (GCC's
// macros paste it into the assembly), so each template picks its literal.
#define XLITE_AMX_WITH_TILE(T, DO)                                                                                     \
  if constexpr ((T) == 0) {                                                                                            \
    DO(0);                                                                                                             \
  } else if constexpr ((T) == 1) {                                                                                     \
    DO(1);                                                                                                             \
  } else if constexpr ((T) == 2) {                                                                                     \
    DO(2);                                                                                                             \
  } else if constexpr ((T) == 3) {                                                                                     \
    DO(3);                                                                                                             \
  } else if constexpr ((T) == 4) {                                                                                     \
    DO(4);                                                                                                             \
  } else if constexpr ((T) == 5) {                                                                                     \
    DO(5);                                                                                                             \
  } else if constexpr ((T) == 6) {                                                                                     \
    DO(6);                                                                                                             \
  } else {                                                                                                             \
    static_assert((T) == 7, "AMX has tiles 0 to 7");                                                                   \
    DO(7);                                                                                                             \
  }

struct amx_tiles {
  // Not _tile_loadconfig: GCC 12's names only the operand's first 8 bytes, so the optimizer
  // drops the stores of the rows and bytes per row before it; the tiles come out empty and
  // the first TILELOADD faults (seen on a Sapphire Rapids machine). This reads all 64.
  XLITE_TARGET_AMX void configure(const tile_config& config) { __asm__ volatile("ldtilecfg %0" ::"m"(config)); }
  XLITE_TARGET_AMX void release() { _tile_release(); }
  template <int T>
  XLITE_TARGET_AMX void zero() {
#define XLITE_AMX_ZERO(t) _tile_zero(t)
    XLITE_AMX_WITH_TILE(T, XLITE_AMX_ZERO)
#undef XLITE_AMX_ZERO
  }
  // GCC 12's _tile_loadd and _tile_stored pass only the address, with no memory operand:
  // the compiler would be free to move C++ stores to a tile's memory past its load, or
  // C++ reads before its store. The empty asm statements with a memory clobber keep the
  // order (now that these inline into the micro-kernel, nothing else would).
  template <int T>
  XLITE_TARGET_AMX void load(const void* base, std::int64_t stride) {
    __asm__ volatile("" ::: "memory");
#define XLITE_AMX_LOAD(t) _tile_loadd(t, base, stride)
    XLITE_AMX_WITH_TILE(T, XLITE_AMX_LOAD)
#undef XLITE_AMX_LOAD
  }
  template <int T>
  XLITE_TARGET_AMX void store(void* base, std::int64_t stride) {
#define XLITE_AMX_STORE(t) _tile_stored(t, base, stride)
    XLITE_AMX_WITH_TILE(T, XLITE_AMX_STORE)
#undef XLITE_AMX_STORE
    __asm__ volatile("" ::: "memory");
  }
  // The four products of the micro-kernel: C tile 0-3 += A tile 4-5 times B tile 6-7.
  template <int C, int A, int B>
  XLITE_TARGET_AMX void dpbf16ps() {
    static_assert(A == 4 + C / 2 && B == 6 + C % 2, "the kernel's products are C(0..3) += A(4 + C/2) B(6 + C%2)");
    if constexpr (C == 0) {
      _tile_dpbf16ps(0, 4, 6);
    } else if constexpr (C == 1) {
      _tile_dpbf16ps(1, 4, 7);
    } else if constexpr (C == 2) {
      _tile_dpbf16ps(2, 5, 6);
    } else {
      _tile_dpbf16ps(3, 5, 7);
    }
  }
};

#undef XLITE_AMX_WITH_TILE

// The micro-kernel on the instructions themselves, compiled for AMX so that the tile
// operations inline into its loop (called from code without the target, each would be a
// call: 12% of the kernel's time).
XLITE_TARGET_AMX inline void micro_kernel(amx_tiles& tiles, std::int64_t blocks, a_blocks a, const std::uint32_t* b,
                                          float* c, std::int64_t ldc, bool start_from_c) {
  micro_kernel<amx_tiles>(tiles, blocks, a, b, c, ldc, start_from_c);
}

XLITE_INTRINSICS_END
#endif

// The probe's product: A (16 x 32 bf16) all 1.0, B (16 pairs x 16 columns) all 2.0; every
// element of C is 32 * 2 = 64.
template <class Tiles>
bool product_is_right(Tiles& tiles) {
  alignas(64) std::uint32_t a[16 * 16];
  alignas(64) std::uint32_t b[16 * 16];
  alignas(64) float c[16 * 16];
  for (std::uint32_t& word : a) word = 0x3f80'3f80u; // two bfloat16 1.0
  for (std::uint32_t& word : b) word = 0x4000'4000u; // two bfloat16 2.0
  std::memset(c, 0, sizeof c);
  const tile_config config = kernel_config();
  tiles.configure(config);
  tiles.template zero<0>();
  tiles.template load<4>(a, 64);
  tiles.template load<6>(b, 64);
  tiles.template dpbf16ps<0, 4, 6>();
  tiles.template store<0>(c, 64);
  tiles.release();
  for (const float x : c) {
    if (x != 64.0f) return false;
  }
  return true;
}

// Whether the bf16 GEMM may use AMX: the CPU and OS offer it (with the Linux permission),
// palette 1 fits the kernel, and the probe's product is right. Decided once per process,
// by the first bf16 GEMM on an AMX machine, on its thread: for those microseconds SIGILL's
// handler is the probe's, so a program that installs its own SIGILL handler should call
// usable() once at startup, before it does.
inline bool usable() {
  static const bool answer = [] {
    const cpu_features& cpu = detected_cpu_features();
    if (!(cpu.amx_tile && cpu.amx_bf16 && detected_palette().fits_kernel())) return false;
#if XLITE_X86_KERNELS
    amx_tiles tiles;
    if (answers_without_sigill([&] { return product_is_right(tiles); })) return true;
    // A fault after the configuration leaves the tiles configured: release them, itself
    // under the guard (it faults too where AMX is not enabled).
    answers_without_sigill([&] {
      tiles.release();
      return true;
    });
    return false;
#else
    return false;
#endif
  }();
  return answer;
}

} // namespace xlite::kernels::amx
