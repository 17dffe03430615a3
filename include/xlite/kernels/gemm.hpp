#pragma once

// GEMM: C = alpha * op(A) * op(B) + beta * C on row-major matrices, with transposes and
// batches, in two precisions:
//   fp32  float products, float accumulation;
//   bf16  the TPU's numerics: bfloat16 products (float inputs are rounded to bfloat16 as
//         they are packed), float accumulation, float or bfloat16 output.
//
// Paths, chosen at run time under active_isa():
//   fp32  avx512: 12x32 FMA micro-kernel; avx2: 6x16; portable: plain C++ 4x16.
//   bf16  amx: AMX tiles (TDPBF16PS), when the one-time probe of kernels/amx.hpp passes;
//         avx512_bf16: 12x32 VDPBF16PS micro-kernel; avx512, avx2, portable: the fp32
//         micro-kernels on bfloat16 values widened to float, k taken in VDPBF16PS's order.
//
// Numerics, the same for any thread count and any blocking:
//   - each element of op(A) op(B) is ONE accumulator that takes k = 0, 1, ..., K-1 in order
//     (fp32: fused multiply-adds; bf16: for each pair (2p, 2p+1), the odd product then the
//     even one, each added with one rounding, as VDPBF16PS does; the portable fp32 path
//     multiplies and adds in two roundings);
//   - the accumulator starts at beta * C when alpha is 1 (at 0 when beta is 0: C is not
//     read, so NaNs in it do not propagate, as in BLAS) and is the result; otherwise it
//     starts at 0 and the result is alpha * acc (beta = 0) or fma(alpha, acc, beta * C);
//   - bf16 runs with denormals-are-zero and flush-to-zero, as VDPBF16PS and the TPU do, so
//     that the avx512_bf16, avx512, avx2 and portable bf16 paths give the same bits. The
//     AMX path follows Intel's pseudo-code for TDPBF16PS instead, even product before odd,
//     so its results may differ from theirs in the last place;
//   - alpha = 0 does not multiply, as in BLAS: C = beta * C (0 when beta is 0), so NaN or
//     Inf in A and B do not reach C.
//
// C must not overlap A or B (xlite::matmul makes sure of it; a direct caller must).

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <type_traits>

#if defined(__unix__)
#include <unistd.h>
#endif

#include "xlite/core/aligned_memory.hpp"
#include "xlite/core/bfloat16.hpp"
#include "xlite/core/cpu_features.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/kernels/amx.hpp"
#include "xlite/kernels/convert.hpp"
#include "xlite/kernels/gemm_microkernel.hpp"
#include "xlite/kernels/gemm_pack.hpp"
#include "xlite/kernels/intrinsics.hpp"
#include "xlite/kernels/vector_product.hpp"

namespace xlite::kernels {

enum class transpose : bool { no, yes };

enum class gemm_precision : std::uint8_t { fp32, bf16 };

// One GEMM, or a batch of them: problem b reads A at a + b * stride_a (stride 0: every
// problem shares the operand), and so on. op(A) is m x k, op(B) k x n, C m x n; lda, ldb
// and ldc are the distances between rows as stored (A is k x m when transposed).
template <class In, class Out = float>
struct gemm_args {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  const In* a = nullptr;
  std::int64_t lda = 0;
  transpose trans_a = transpose::no;
  const In* b = nullptr;
  std::int64_t ldb = 0;
  transpose trans_b = transpose::no;
  Out* c = nullptr;
  std::int64_t ldc = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  std::int64_t batch = 1;
  std::int64_t stride_a = 0;
  std::int64_t stride_b = 0;
  std::int64_t stride_c = 0;
  gemm_precision precision = std::is_same_v<In, bfloat16> ? gemm_precision::bf16 : gemm_precision::fp32;
};

namespace gemm_detail {
// Set while an epilogue runs on this thread: gemm() refuses to be called from one, since
// the outer call's packing buffers are this thread's.
inline thread_local bool in_epilogue = false;
} // namespace gemm_detail

// Work on C once a region of it is final: called for each finished region (problem b of
// the batch, rows [row, row + rows), columns [col, col + cols)) exactly once, on the thread
// that finished it, while the region is still in that core's cache; C there holds the
// results in the output type (bfloat16 output included). Regions of one problem do not
// overlap and cover C. An epilogue may not call gemm() (it throws xlite::value_error).
struct gemm_epilogue {
  void (*apply)(void* context, std::int64_t batch, std::int64_t row, std::int64_t col, std::int64_t rows,
                std::int64_t cols) = nullptr;
  void* context = nullptr;

  explicit operator bool() const noexcept { return apply != nullptr; }
  void operator()(std::int64_t b, std::int64_t row, std::int64_t col, std::int64_t rows, std::int64_t cols) const {
    const bool outer = gemm_detail::in_epilogue;
    gemm_detail::in_epilogue = true;
    struct restore {
      bool value;
      ~restore() { gemm_detail::in_epilogue = value; }
    } on_exit{outer};
    apply(context, b, row, col, rows, cols);
  }
};

namespace gemm_detail {

// ---- memory ------------------------------------------------------------------------------------

// A buffer that keeps its largest size: the packing buffers of a thread are allocated once,
// not per call (their size is bounded by the blocking, and a whole packed B by
// whole_b_elements).
class scratch {
public:
  template <class T>
  T* get(std::int64_t count) {
    const auto bytes = static_cast<std::size_t>(count) * sizeof(T);
    if (bytes > capacity_) {
      memory_ = allocate_aligned<unsigned char>(static_cast<std::int64_t>(bytes)); // throws before changing anything
      capacity_ = bytes;
    }
    return reinterpret_cast<T*>(memory_.get());
  }

private:
  aligned_array<unsigned char> memory_;
  std::size_t capacity_ = 0;
};

enum class scratch_use { packed_a, packed_b };

template <scratch_use Use>
scratch& thread_scratch() {
  thread_local scratch buffer;
  return buffer;
}

// Denormals-are-zero and flush-to-zero for the scope (bf16 numerics), on this thread.
class scoped_flush_denormals {
public:
  explicit scoped_flush_denormals(bool enable) {
#if XLITE_X86_KERNELS
    if (enable) {
      saved_ = _mm_getcsr() & flush_bits;
      _mm_setcsr(_mm_getcsr() | flush_bits);
      active_ = true;
    }
#else
    static_cast<void>(enable);
#endif
  }
  ~scoped_flush_denormals() {
#if XLITE_X86_KERNELS
    // Only the two mode bits go back: exception flags raised meanwhile stay raised.
    if (active_) _mm_setcsr((_mm_getcsr() & ~flush_bits) | saved_);
#endif
  }
  scoped_flush_denormals(const scoped_flush_denormals&) = delete;
  scoped_flush_denormals& operator=(const scoped_flush_denormals&) = delete;

private:
  static constexpr unsigned flush_bits = 0x8040u; // FTZ (bit 15) and DAZ (bit 6) of MXCSR
  unsigned saved_ = 0;
  bool active_ = false;
};

// ---- paths ---------------------------------------------------------------------------------

// How a path packs and multiplies. Steps: see gemm_microkernel.hpp. kc (in k), mc and nc
// are the cache blocking (BLIS's, with A and B in each other's roles, since C is row-major
// here): the micro-kernel takes an MR x kc panel of A against the NR x kc panels of a
// kc x nc block of B in turn, writing C tiles side by side along MR rows. The packed B
// block is shared by the threads; A is read in place where it can be (see
// a_read_in_place), else packed in mc x kc blocks, also shared. Products one column block
// wide run rows first instead (run_rows_first): each thread packs its own B and A.
//
// kc is 1024 on the vector paths, as on AMX: a micro-kernel call loads and stores its C
// tile once, and at kc = 256 that cost more than an A panel kept in L1 saved. Measured on
// a Zen 4 VM (L1 32 KiB, L2 1 MiB) in one process, kc = 1024 against 256 (nc = 512): fp32
// 2048^3 3% faster on one core and 8% on two, 1024^3 9% on one, 4096 x 64 x 1024 8% on
// one, AVX2 (capped) 2048^3 1.2x; VDPBF16PS against kc = 768 and nc = 384, 2048^3 and
// 1024^3 4-7%; 256^3 level. The panels then stream from L2 and L3 (the AVX-512 FMA kernel
// prefetches B, the AVX-512 kernels the next A panel, the hardware the rest). Not measured
// on Intel CPUs. A thread's scratch holds up to mc x kc of packed A (12 MiB in fp32) and
// kc x nc of packed B (2 MiB).
enum class step_kind { floats, swapped_pairs, bf16_pairs };

template <class Path, class Packed, int MR, int NR, step_kind Steps, std::int64_t KC, std::int64_t MC, std::int64_t NC>
struct path_traits {
  using packed = Packed;
  static constexpr int mr = MR;
  static constexpr int nr = NR;
  static constexpr step_kind steps_kind = Steps;
  static constexpr std::int64_t kc = KC;
  static constexpr std::int64_t mc = MC;
  static constexpr std::int64_t nc = NC;

  static constexpr std::int64_t steps(std::int64_t depth) {
    if constexpr (Steps == step_kind::floats) return depth;
    if constexpr (Steps == step_kind::swapped_pairs) return 2 * pair_steps(depth);
    return pair_steps(depth);
  }

  template <int W, class T>
  static void pack(Packed* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
    if constexpr (Steps == step_kind::floats) {
      pack_floats<W>(dst, src, count, depth);
    } else if constexpr (Steps == step_kind::swapped_pairs) {
      pack_swapped_pairs<W>(dst, src, count, depth);
    } else {
      pack_bf16_pairs<W>(dst, src, count, depth, pair_steps(depth));
    }
  }

  // A's panels have MR rows and B's NR columns; a path may pack them differently (Path::pack).
  template <class T>
  static void pack_a(Packed* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
    Path::template pack<MR>(dst, src, count, depth);
  }
  template <class T>
  static void pack_b(Packed* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
    Path::template pack<NR>(dst, src, count, depth);
  }

  // Problems below this many FLOPs run on the calling thread: a parallel loop costs a few
  // microseconds, about what 1 MFLOP takes on the vector paths.
  static constexpr std::int64_t parallel_flops = std::int64_t{1} << 21;

  // Around each thread's run of micro-kernels (AMX loads its tile configuration here).
  static void begin_task() {}
  static void end_task() {}

  // Whether the path's micro-kernel can also read A where it is (Path::micro_in_place): for
  // k blocks of a multiple of in_place_k_multiple elements, and, unless in_place_when_wide,
  // only while C is one column block wide (a_read_in_place).
  static constexpr bool reads_a_in_place = false;
  static constexpr bool packs_crowded_rows = true; // see rows_overflow_l1_set
  static constexpr std::int64_t in_place_k_multiple = Steps == step_kind::floats ? 1 : 2;
  static constexpr bool in_place_when_wide = Steps != step_kind::floats;

  // Whether Path::micro(rows, ...) computes and writes only its first `rows` rows (else a
  // whole MR-row tile).
  static constexpr bool exact_rows = true;
};

template <step_kind Steps>
struct portable_path : path_traits<portable_path<Steps>, float, 4, 16, Steps, 256, 2048, 256> {
  static constexpr isa level = isa::portable;
  static void micro(int rows, std::int64_t s, const float* a, const float* b, float* c, std::int64_t ldc,
                    const tile_update& u) {
    with_rows<4>(rows, [&]<int R>() { micro_kernel_portable<R, 16>(s, packed_a<float, 4>{a}, b, c, ldc, u); });
  }
  static constexpr auto vector_rows = vector_rows_portable;
  static constexpr auto vector_dots = vector_dots_portable;
};

#if XLITE_X86_KERNELS
template <step_kind Steps>
struct avx2_path : path_traits<avx2_path<Steps>, float, 6, 16, Steps, 1024, 3072, 512> {
  static constexpr isa level = isa::avx2;
  static void micro(int rows, std::int64_t s, const float* a, const float* b, float* c, std::int64_t ldc,
                    const tile_update& u) {
    with_rows<6>(rows, [&]<int R>() { micro_kernel_avx2<R, 2>(s, packed_a<float, 6>{a}, b, c, ldc, u); });
  }
  static constexpr auto vector_rows = vector_rows_avx2;
  static constexpr auto vector_dots = vector_dots_avx2;
};

template <step_kind Steps>
struct avx512_path : path_traits<avx512_path<Steps>, float, 12, 32, Steps, 1024, 3072, 512> {
  using traits = path_traits<avx512_path<Steps>, float, 12, 32, Steps, 1024, 3072, 512>;
  static constexpr isa level = isa::avx512;
  template <int W, class T>
  static void pack(float* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
    if constexpr (std::is_same_v<T, float> && Steps == step_kind::floats) {
      if (!src.k_major) return pack_floats_index_major_avx512<W>(dst, src.data, src.ld, count, depth);
    }
    traits::template pack<W>(dst, src, count, depth);
  }
  static void micro(int rows, std::int64_t s, const float* a, const float* b, float* c, std::int64_t ldc,
                    const tile_update& u) {
    with_rows<12>(rows, [&]<int R>() { micro_kernel_avx512<R, 2>(s, packed_a<float, 12>{a}, b, c, ldc, u); });
  }
  // A read in place (float steps only: the other step kinds convert while packing).
  static constexpr bool reads_a_in_place = Steps == step_kind::floats;
  static void micro_in_place(std::int64_t s, const void* a, std::int64_t row_bytes, const float* b, float* c,
                             std::int64_t ldc, const tile_update& u) {
    micro_kernel_avx512<12, 2>(s, a_in_place<float, 12>{static_cast<const unsigned char*>(a), row_bytes}, b, c, ldc, u);
  }
  static constexpr auto vector_rows = vector_rows_avx512;
  static constexpr auto vector_dots = vector_dots_avx512;
};

struct avx512_bf16_path : path_traits<avx512_bf16_path, std::uint32_t, 12, 32, step_kind::bf16_pairs, 1024, 3072, 512> {
  static constexpr isa level = isa::avx512_bf16;
  template <int W, class T>
  static void pack(std::uint32_t* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
    pack_bf16_pairs_avx512<W>(dst, src, count, depth, pair_steps(depth));
  }
  static void micro(int rows, std::int64_t s, const std::uint32_t* a, const std::uint32_t* b, float* c,
                    std::int64_t ldc, const tile_update& u) {
    with_rows<12>(rows,
                  [&]<int R>() { micro_kernel_avx512_bf16<R, 2>(s, packed_a<std::uint32_t, 12>{a}, b, c, ldc, u); });
  }
  // A read in place: bfloat16 inputs, whose k-pairs are the 32-bit words of a row.
  static constexpr bool reads_a_in_place = true;
  static void micro_in_place(std::int64_t s, const void* a, std::int64_t row_bytes, const std::uint32_t* b, float* c,
                             std::int64_t ldc, const tile_update& u) {
    micro_kernel_avx512_bf16<12, 2>(s, a_in_place<std::uint32_t, 12>{static_cast<const unsigned char*>(a), row_bytes},
                                    b, c, ldc, u);
  }
};

// AMX tiles (kernels/amx.hpp), through Tiles: amx::amx_tiles, or a model of them in tests.
// Steps are k-pairs padded to whole 16-pair blocks.
template <class Tiles>
struct amx_path
    : path_traits<amx_path<Tiles>, std::uint32_t, amx::mr, amx::nr, step_kind::bf16_pairs, 1024, 3072, 256> {
  static constexpr isa level = isa::amx;
  static constexpr std::int64_t block = amx::pairs_per_block;
  // At a TFLOP/s a product splits well only from about 64 MFLOP: below, two threads
  // measured slower than one (256^3: 48 against 44 us; 320^3 even; 384^3 1.2x faster), as
  // each thread reads the B panels the other packed.
  static constexpr std::int64_t parallel_flops = std::int64_t{1} << 26;

  static constexpr std::int64_t steps(std::int64_t depth) { return (pair_steps(depth) + block - 1) / block * block; }
  // Packing with AVX512_BF16, which every AMX machine has; the scalar routines where the
  // ISA is capped below it (the tests' modelled tiles run either).
  static bool vector_packing() { return active_isa() >= isa::avx512_bf16; }
  template <class T>
  static void pack_a(std::uint32_t* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
    if (vector_packing()) return pack_amx_rows_avx512<amx::mr>(dst, src, count, depth, steps(depth));
    pack_amx_rows<amx::mr>(dst, src, count, depth, steps(depth));
  }
  template <class T>
  static void pack_b(std::uint32_t* dst, const panel_source<T>& src, std::int64_t count, std::int64_t depth) {
    if (vector_packing()) return pack_bf16_pairs_avx512<amx::nr>(dst, src, count, depth, steps(depth));
    pack_bf16_pairs<amx::nr>(dst, src, count, depth, steps(depth));
  }

  static Tiles& tiles() {
    thread_local Tiles t;
    return t;
  }
  static void begin_task() { tiles().configure(amx::kernel_config()); }
  static void end_task() { tiles().release(); }

  static void run_micro(std::int64_t s, amx::a_blocks a, const std::uint32_t* b, float* c, std::int64_t ldc,
                        const tile_update& u) {
    const auto scale = [&](float factor) {
      for (int i = 0; i < amx::mr; ++i) {
        for (int j = 0; j < amx::nr; ++j) c[i * ldc + j] *= factor;
      }
    };
    if (u.start_scale != 0.0f && u.start_scale != 1.0f) scale(u.start_scale); // the tiles start from C or 0
    amx::micro_kernel(tiles(), s / block, a, b, c, ldc, u.start_scale != 0.0f);
    if (u.alpha != 1.0f) scale(u.alpha);
  }
  // Whole tiles only (exact_rows is false): a last panel's missing rows, zeros, are
  // multiplied too, into the driver's edge tile.
  static void micro(int /*rows*/, std::int64_t s, const std::uint32_t* a, const std::uint32_t* b, float* c,
                    std::int64_t ldc, const tile_update& u) {
    run_micro(s, amx::a_blocks::packed(a), b, c, ldc, u);
  }
  static constexpr bool exact_rows = false;
  // A read in place: bfloat16 rows hold a block's 16 pairs in 64 contiguous bytes, a tile
  // row, so whole blocks of 32 k need no packing.
  static constexpr bool reads_a_in_place = true;
  static constexpr std::int64_t in_place_k_multiple = 2 * block;
  static constexpr bool in_place_when_wide = false;
  // Tile loads read 16 rows a block; whether they pay for packing crowded rows is not
  // measured (see rows_overflow_l1_set).
  static constexpr bool packs_crowded_rows = false;
  static_assert(amx_path::kc % in_place_k_multiple == 0, "every k block but the last can be read in place");
  static void micro_in_place(std::int64_t s, const void* a, std::int64_t row_bytes, const std::uint32_t* b, float* c,
                             std::int64_t ldc, const tile_update& u) {
    run_micro(s, amx::a_blocks::in_place(a, row_bytes), b, c, ldc, u);
  }
};
#endif

// ---- one problem ---------------------------------------------------------------------------

// One problem of a batch, ready for a path: C is float, alpha and beta are folded into
// how the accumulators start and end (see the numerics at the top).
template <class In>
struct problem {
  std::int64_t m, n, k;
  const In* a;
  std::int64_t lda;
  bool trans_a;
  const In* b;
  std::int64_t ldb;
  bool trans_b;
  float* c;
  std::int64_t ldc;
  float first_start_scale; // of C, at the first k block
  float alpha;             // applied at the last k block
  bool flush_denormals;    // bf16 numerics
};

// op(A) from row `row` and op(B) from column `col`, both from k = depth on, as the packing
// routines read them.
template <class In>
panel_source<In> a_source(const problem<In>& p, std::int64_t row, std::int64_t depth) {
  return {p.trans_a ? p.a + depth * p.lda + row : p.a + row * p.lda + depth, p.lda, p.trans_a};
}
template <class In>
panel_source<In> b_source(const problem<In>& p, std::int64_t col, std::int64_t depth) {
  return {p.trans_b ? p.b + col * p.ldb + depth : p.b + depth * p.ldb + col, p.ldb, !p.trans_b};
}

// Runs body(task) for task in [0, count), on the pool's threads when `pool` is set.
template <class Body>
void for_tasks(thread_pool* pool, std::int64_t count, std::int64_t grain, Body&& body) {
  if (pool == nullptr) {
    for (std::int64_t t = 0; t < count; ++t) body(t);
  } else {
    pool->parallel_for(count, grain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) body(t);
    });
  }
}

// Whether `rows` rows of A, `row_bytes` apart, read in place a step at a time (a line of
// each row), need more lines of one L1 set than the set has ways. x86 L1 data caches have
// 64 sets of 64-byte lines, a 4 KiB way, so rows a multiple of 4 KiB apart all share one
// set: 12 rows fit Sapphire Rapids' 12 ways, not Zen 4's 8. There, bf16 at 2048^3 (rows of
// 4 KiB) ran 1.1-1.4x faster with A packed than in place; at 1024^3 (2 KiB, six rows to a
// set) in place stays ahead on two cores. fp32 4096 x 64 x 1024 (rows of 4 KiB) ran level
// either way.
inline bool rows_overflow_l1_set(std::int64_t row_bytes, int rows) {
  static const long ways = [] {
#if defined(_SC_LEVEL1_DCACHE_ASSOC)
    const long reported = sysconf(_SC_LEVEL1_DCACHE_ASSOC);
    if (reported > 0) return reported;
#endif
    return 8L;
  }();
  constexpr std::int64_t line = 64;
  constexpr std::int64_t sets = 64;
  for (int i = 0; i < rows; ++i) {
    long sharing = 0;
    for (int j = 0; j < rows; ++j) sharing += (i * row_bytes / line - j * row_bytes / line) % sets == 0;
    if (sharing > ways) return true;
  }
  return false;
}

// Whether the micro-kernels read this k block of A where it is rather than from packed
// panels. A row-major A that is not transposed already holds each row's steps one after
// another, and reading it in place saves the pass that packs it: 4096 x 1024 x 64 runs
// 1.4x faster in fp32 and 3.8x in bf16. For float steps that pays while C is at most one
// block of columns wide (n <= nc; 2048 x 512 x 2048: 5%); wider, each A panel is read once
// per column block and the contiguous packed panels win (one thread: n = 1024 5%, 2048^3
// 4-8%; A's rows lda apart share cache sets, at powers of two most). VDPBF16PS pairs read
// A in place at every width: their packing of A gathers pairs row by row and costs more,
// and in place they reach 89% of the VDPBF16PS peak at 2048^3. AMX reads whole 32-k blocks
// in place while C is one column block wide (4096 x 1024 x 64: 5.6x); wider, its tile
// loads of rows lda apart lose to packed panels (2048^3: about 10%). It needs A of the
// panels' own element type (float steps: float; bf16 pairs: bfloat16, whole pairs), which
// also means no rounding to do while packing; and, but for AMX, rows that do not overflow
// an L1 set.
template <class Path, class In>
bool a_read_in_place(const problem<In>& p, std::int64_t kb) {
  if constexpr (Path::reads_a_in_place) {
    constexpr bool same_values =
        Path::steps_kind == step_kind::floats ? std::is_same_v<In, float> : std::is_same_v<In, bfloat16>;
    if constexpr (same_values) {
      const bool whole_steps = kb % Path::in_place_k_multiple == 0;
      const bool narrow_enough = Path::in_place_when_wide || p.n <= Path::nc;
      if (p.trans_a || !whole_steps || !narrow_enough) return false;
      return !Path::packs_crowded_rows ||
             !rows_overflow_l1_set(p.lda * static_cast<std::int64_t>(sizeof(In)), Path::mr);
    }
  }
  return false;
}

// One k block of a row block and a column block of C, as the micro-kernels see it: rows
// [row, row + rows) and columns [col, col + cols) of C, k from `depth` on, `steps` steps.
// A's panels from row packed_from of the block on are in packed_a (the ones before are
// read in place), B's panels in packed_b.
template <class Path>
struct panel_block {
  std::int64_t row, rows, col, cols, depth, kb, steps;
  tile_update update;
  const typename Path::packed* packed_a;
  std::int64_t packed_from;
  const typename Path::packed* packed_b;
};

// Multiplies A panels [first_a, last_a) of the block by its B panels [first_b, last_b):
// each A panel meets the B panels in order, so the C tiles it writes lie side by side
// along the same rows.
template <class Path, class In>
void multiply_panels(const problem<In>& p, const panel_block<Path>& blk, std::int64_t first_a, std::int64_t last_a,
                     std::int64_t first_b, std::int64_t last_b) {
  using packed = typename Path::packed;
  constexpr int mr = Path::mr;
  constexpr int nr = Path::nr;
  for (std::int64_t ap = first_a; ap < last_a; ++ap) {
    const std::int64_t i = ap * mr;
    const std::int64_t rows = std::min<std::int64_t>(mr, blk.rows - i);
    const auto micro = [&](const packed* b_panel, float* c, std::int64_t ldc) {
      if constexpr (Path::reads_a_in_place) {
        if (i < blk.packed_from) {
          return Path::micro_in_place(blk.steps, p.a + (blk.row + i) * p.lda + blk.depth,
                                      p.lda * static_cast<std::int64_t>(sizeof(In)), b_panel, c, ldc, blk.update);
        }
      }
      Path::micro(static_cast<int>(rows), blk.steps, blk.packed_a + (i - blk.packed_from) * blk.steps, b_panel, c, ldc,
                  blk.update);
    };
    for (std::int64_t bp = first_b; bp < last_b; ++bp) {
      const std::int64_t j = bp * nr;
      const std::int64_t cols = std::min<std::int64_t>(nr, blk.cols - j);
      const packed* b_panel = blk.packed_b + j * blk.steps;
      float* c_tile = p.c + (blk.row + i) * p.ldc + blk.col + j;
      if (cols == nr && (rows == mr || Path::exact_rows)) {
        micro(b_panel, c_tile, p.ldc);
        continue;
      }
      // An edge tile (fewer than nr columns, or a path's whole tile for fewer than mr rows):
      // through a full tile on the stack (read only when C is).
      alignas(64) float edge[mr * nr];
      if (blk.update.start_scale != 0.0f) {
        std::fill_n(edge, mr * nr, 0.0f);
        for (std::int64_t r = 0; r < rows; ++r) std::copy_n(c_tile + r * p.ldc, cols, edge + r * nr);
      }
      micro(b_panel, edge, nr);
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(edge + r * nr, cols, c_tile + r * p.ldc);
    }
  }
}

// The k block at `depth`: its size, steps and how its accumulators start and end.
template <class Path, class In>
panel_block<Path> k_block_of(const problem<In>& p, std::int64_t depth) {
  panel_block<Path> blk{};
  blk.depth = depth;
  blk.kb = std::min(Path::kc, p.k - depth);
  blk.steps = Path::steps(blk.kb);
  blk.update = {depth == 0 ? p.first_start_scale : 1.0f, depth + blk.kb == p.k ? p.alpha : 1.0f};
  return blk;
}

// Products whose C is one column block wide (n <= nc) run rows first: each thread packs
// its own copy of B whole and takes an equal run of chunks of C's rows, each through every
// k block, so that a chunk stays in the core's cache from the first k block to the last
// and the threads meet once per product, not three times per k block. Chunks hold about
// chunk_c_bytes of C and at most mc rows; their count is a multiple of the thread count.
// Measured on a Zen 4 VM, each against the order before it in the same process:
//   - rows first (B then packed once, shared) against the blocked order: fp32
//     4096 x 64 x 1024 4-6% faster on one core, 1-25% on two, 2048 x 512 x 2048 on two
//     4-31% (the blocked order's rate varies from process to process there), 256^3 level;
//   - a private B against the shared one: 256^3 on two cores fp32 5-8% and bf16 8-40%
//     faster (packing the shared B took 20-60 us of a 190 us product, 8 us on one core:
//     panels another core wrote cross between the cores on every call), 2048 x 512 x 2048
//     1-1.5% slower (B packed twice), the tall shape level.
// A late thread's share is taken whole by another, not chunk by chunk.
inline constexpr std::int64_t chunk_c_bytes = std::int64_t{64} << 10;
// Beyond this many packed B elements per thread (4 MiB of floats) the B panels of a k
// block are packed as they are needed, shared (the blocked order).
inline constexpr std::int64_t whole_b_elements = std::int64_t{1} << 20;

// Whether the threads split C's columns rather than its rows: when A has too few panels to
// share evenly (fewer than panels_per_thread each, so that a last, partial panel or one
// panel more is a large part of a thread's work: m = 16 on two cores was 12 rows against 4)
// and B has a panel for every thread. Only the blocked order splits columns. Measured on
// the Zen 4 VM, two cores, k = n = 1024, against splitting rows: m = 16 1.7x, m = 40 1.38x,
// m = 64 1.23x, m = 88 1.16x, m = 130 1.13x; with 16 panels per thread, m = 200, n = 64
// lost 17%.
inline constexpr std::int64_t panels_per_thread = 8;
inline bool split_columns(std::int64_t a_panels, std::int64_t b_panels, std::int64_t threads) {
  return threads > 1 && a_panels < panels_per_thread * threads && b_panels >= threads;
}

// The sizes of a rows-first run: B's panels and k blocks (k block q of the packed B at
// q * b_block_size, b_size elements in all), A's panels, and the chunks of rows (a multiple
// of the thread count).
struct rows_first_plan {
  std::int64_t b_panels, k_blocks, b_block_size, b_size, a_panels, chunks;
};

// The plan for p on `threads` threads, or none where the blocked order runs: C wider than
// a column block, B too large to pack whole per thread, fewer A panels than chunks, or the
// threads better split columns (split_columns).
template <class Path, class In>
std::optional<rows_first_plan> plan_rows_first(const problem<In>& p, std::int64_t threads) {
  rows_first_plan plan{};
  plan.b_panels = (p.n + Path::nr - 1) / Path::nr;
  plan.k_blocks = (p.k + Path::kc - 1) / Path::kc;
  plan.b_block_size = plan.b_panels * Path::nr * Path::steps(Path::kc);
  const std::int64_t last_steps = k_block_of<Path>(p, (plan.k_blocks - 1) * Path::kc).steps;
  plan.b_size = (plan.k_blocks - 1) * plan.b_block_size + plan.b_panels * Path::nr * last_steps;
  plan.a_panels = (p.m + Path::mr - 1) / Path::mr;
  const std::int64_t c_row_bytes = p.n * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t chunks =
      std::max((p.m * c_row_bytes + chunk_c_bytes - 1) / chunk_c_bytes, (p.m + Path::mc - 1) / Path::mc);
  plan.chunks = (chunks + threads - 1) / threads * threads;
  const bool fits = p.n <= Path::nc && plan.b_size <= whole_b_elements;
  const bool rows_split = plan.a_panels >= plan.chunks && !split_columns(plan.a_panels, plan.b_panels, threads);
  if (!fits || !rows_split) return std::nullopt;
  return plan;
}

// Chunk `chunk` of the plan, a run of whole A panels, through every k block; B packed
// whole at packed_b.
template <class Path, class In>
void run_row_chunk(const problem<In>& p, const rows_first_plan& plan, std::int64_t chunk,
                   const typename Path::packed* packed_b, std::int64_t batch_index, const gemm_epilogue& epilogue) {
  using packed = typename Path::packed;
  constexpr int mr = Path::mr;
  const std::int64_t row = plan.a_panels * chunk / plan.chunks * mr;
  const std::int64_t rows = std::min(plan.a_panels * (chunk + 1) / plan.chunks * mr, p.m) - row;
  const std::int64_t a_panels = (rows + mr - 1) / mr;
  {
    scoped_flush_denormals flush(p.flush_denormals);
    Path::begin_task();
    for (std::int64_t q = 0; q < plan.k_blocks; ++q) {
      panel_block<Path> blk = k_block_of<Path>(p, q * Path::kc);
      blk.row = row;
      blk.rows = rows;
      blk.col = 0;
      blk.cols = p.n;
      blk.packed_b = packed_b + q * plan.b_block_size;
      blk.packed_from = a_read_in_place<Path>(p, blk.kb) ? rows / mr * mr : 0;
      // This thread's panels of A from packed_from on (none, or a last partial one, when A
      // is read in place).
      packed* packed_a =
          thread_scratch<scratch_use::packed_a>().get<packed>((a_panels - blk.packed_from / mr) * mr * blk.steps);
      if (blk.packed_from < rows) {
        Path::pack_a(packed_a, a_source(p, row + blk.packed_from, blk.depth), rows - blk.packed_from, blk.kb);
      }
      blk.packed_a = packed_a;
      multiply_panels(p, blk, 0, a_panels, 0, plan.b_panels);
    }
    Path::end_task();
  }
  if (epilogue) epilogue(batch_index, row, 0, rows, p.n);
}

// Which call of run_rows_first this thread's packed B belongs to.
inline std::atomic<std::uint64_t> rows_first_calls{0};
inline thread_local std::uint64_t b_packed_for_call = 0;

template <class Path, class In>
void run_rows_first(const problem<In>& p, const rows_first_plan& plan, thread_pool* pool, std::int64_t threads,
                    std::int64_t batch_index, const gemm_epilogue& epilogue) {
  using packed = typename Path::packed;
  const std::int64_t chunks_per_task = plan.chunks / threads;
  const std::uint64_t call = rows_first_calls.fetch_add(1, std::memory_order_relaxed) + 1;
  for_tasks(pool, threads, 1, [&](std::int64_t task) {
    // This thread's own copy of B, packed once per call (a thread may run a late thread's
    // task too, or all of them where the pool runs the loop serially).
    packed* packed_b = thread_scratch<scratch_use::packed_b>().get<packed>(plan.b_size);
    if (b_packed_for_call != call) {
      for (std::int64_t q = 0; q < plan.k_blocks; ++q) {
        const panel_block<Path> blk = k_block_of<Path>(p, q * Path::kc);
        Path::pack_b(packed_b + q * plan.b_block_size, b_source(p, 0, blk.depth), p.n, blk.kb);
      }
      b_packed_for_call = call;
    }
    for (std::int64_t chunk = task * chunks_per_task; chunk < (task + 1) * chunks_per_task; ++chunk) {
      run_row_chunk<Path>(p, plan, chunk, packed_b, batch_index, epilogue);
    }
  });
}

// Any product, in BLIS's loop order (see path_traits): row blocks of mc, k blocks of kc,
// column blocks of nc, each packed once and shared by the threads.
template <class Path, class In>
void run_blocked(const problem<In>& p, thread_pool* pool, std::int64_t batch_index, const gemm_epilogue& epilogue) {
  using packed = typename Path::packed;
  constexpr int mr = Path::mr;
  constexpr int nr = Path::nr;
  const std::int64_t threads = pool == nullptr ? 1 : static_cast<std::int64_t>(pool->num_threads());
  if (const auto plan = plan_rows_first<Path>(p, threads)) {
    return run_rows_first<Path>(p, *plan, pool, threads, batch_index, epilogue);
  }
  // Packing splits into about two parts per thread, so that a late thread is helped.
  const auto grain_for = [&](std::int64_t panels) { return std::max<std::int64_t>(1, panels / (2 * threads)); };

  for (std::int64_t ic = 0; ic < p.m; ic += Path::mc) {
    const std::int64_t mb = std::min(Path::mc, p.m - ic);
    const std::int64_t a_panels = (mb + mr - 1) / mr;
    for (std::int64_t pc = 0; pc < p.k; pc += Path::kc) {
      panel_block<Path> blk = k_block_of<Path>(p, pc);
      blk.row = ic;
      blk.rows = mb;

      // The A block -> panels of mr rows, except where the micro-kernel reads A in place:
      // then only a last, partial panel.
      blk.packed_from = a_read_in_place<Path>(p, blk.kb) ? mb / mr * mr : 0;
      const std::int64_t packed_panels = a_panels - blk.packed_from / mr;
      packed* packed_a = thread_scratch<scratch_use::packed_a>().get<packed>(packed_panels * mr * blk.steps);
      const std::int64_t a_grain = grain_for(packed_panels);
      for_tasks(pool, (packed_panels + a_grain - 1) / a_grain, 1, [&](std::int64_t task) {
        const std::int64_t first = blk.packed_from + task * a_grain * mr;
        Path::pack_a(packed_a + (first - blk.packed_from) * blk.steps, a_source(p, ic + first, pc),
                     std::min(a_grain * mr, mb - first), blk.kb);
      });
      blk.packed_a = packed_a;

      for (std::int64_t jc = 0; jc < p.n; jc += Path::nc) {
        blk.col = jc;
        blk.cols = std::min(Path::nc, p.n - jc);
        const std::int64_t b_panels = (blk.cols + nr - 1) / nr;

        // The B block -> panels of nr columns (streamed by the micro-kernel).
        packed* packed_b = thread_scratch<scratch_use::packed_b>().get<packed>(b_panels * nr * blk.steps);
        const std::int64_t b_grain = grain_for(b_panels);
        for_tasks(pool, (b_panels + b_grain - 1) / b_grain, 1, [&](std::int64_t task) {
          const std::int64_t first = task * b_grain * nr;
          Path::pack_b(packed_b + first * blk.steps, b_source(p, jc + first, pc),
                       std::min(b_grain * nr, blk.cols - first), blk.kb);
        });
        blk.packed_b = packed_b;

        // Tasks: groups of A panels, split across columns too when there are fewer A
        // panels than threads; groups of B panels alone where split_columns says so.
        const std::int64_t row_groups = split_columns(a_panels, b_panels, threads) ? 1 : std::min(a_panels, threads);
        const std::int64_t col_groups = std::min(b_panels, (threads + row_groups - 1) / row_groups);
        for_tasks(pool, row_groups * col_groups, 1, [&](std::int64_t task) {
          const std::int64_t rg = task / col_groups;
          const std::int64_t cg = task % col_groups;
          const std::int64_t first_a = a_panels * rg / row_groups;
          const std::int64_t last_a = a_panels * (rg + 1) / row_groups;
          const std::int64_t first_b = b_panels * cg / col_groups;
          const std::int64_t last_b = b_panels * (cg + 1) / col_groups;
          {
            scoped_flush_denormals flush(p.flush_denormals);
            Path::begin_task();
            multiply_panels(p, blk, first_a, last_a, first_b, last_b);
            Path::end_task();
          }
          if (pc + blk.kb == p.k && epilogue && first_a < last_a && first_b < last_b) {
            const std::int64_t row = ic + first_a * mr;
            const std::int64_t col = jc + first_b * nr;
            epilogue(batch_index, row, col, std::min(ic + last_a * mr, ic + mb) - row,
                     std::min(jc + last_b * nr, jc + blk.cols) - col);
          }
        });
      }
    }
  }
}

// ---- products with a vector ------------------------------------------------------------------

// A product whose op(A) is one row (m = 1) or whose op(B) is one column (n = 1): out = x M
// or M x, for the operand that is a matrix, M, and the one that is a vector, x, in the
// form their layout gives (vector_product.hpp): `rows` where M is stored with its rows
// along k (B not transposed, or A transposed), `dots` where along the outputs. C's column
// must be contiguous (ldc 1) when out is one.
struct vector_product {
  const float* matrix;
  std::int64_t ld;
  vector_operand<float> x;
  float* out;
  std::int64_t length;
  bool dots;       // else rows
  bool out_is_row; // C's row 0 (m = 1), else its column 0 (n = 1)
};

inline std::optional<vector_product> as_vector_product(const problem<float>& p) {
  if (p.m == 1) {
    const vector_operand<float> row{p.a, p.trans_a ? p.lda : 1};
    return vector_product{p.b, p.ldb, row, p.c, p.n, p.trans_b, true};
  }
  if (p.n == 1 && p.ldc == 1) {
    const vector_operand<float> column{p.b, p.trans_b ? 1 : p.ldb};
    return vector_product{p.a, p.lda, column, p.c, p.m, !p.trans_a, false};
  }
  return std::nullopt;
}

// Chunks of out, each through all of k on one thread, in parallel when `pool` is set. A
// chunk is at most vector_chunk floats (8 KiB: in the rows form, in L1 while the matrix
// streams) and small enough for each thread to have two; every element's chain is computed
// whole on one thread, so the bits do not depend on the chunks.
inline constexpr std::int64_t vector_chunk = 2048;

template <class Path>
void run_vector_product(const vector_product& v, const problem<float>& p, thread_pool* pool, std::int64_t batch_index,
                        const gemm_epilogue& epilogue) {
  const std::int64_t threads = pool == nullptr ? 1 : static_cast<std::int64_t>(pool->num_threads());
  const std::int64_t shared = (v.length + 2 * threads - 1) / (2 * threads);
  const std::int64_t chunk = std::min(vector_chunk, std::max<std::int64_t>(64, (shared + 63) / 64 * 64));
  const tile_update update{p.first_start_scale, p.alpha};
  for_tasks(pool, (v.length + chunk - 1) / chunk, 1, [&](std::int64_t task) {
    const std::int64_t first = task * chunk;
    const std::int64_t width = std::min(chunk, v.length - first);
    if (v.dots) {
      Path::vector_dots(v.matrix + first * v.ld, v.ld, v.x, p.k, v.out + first, width, update);
    } else {
      Path::vector_rows(v.matrix + first, v.ld, v.x, p.k, v.out + first, width, update);
    }
    if (!epilogue) return;
    if (v.out_is_row) {
      epilogue(batch_index, 0, first, 1, width);
    } else {
      epilogue(batch_index, first, 0, width, 1);
    }
  });
}

// K = 0, or alpha = 0: the accumulators start and end as in a micro-kernel with no steps.
template <class In>
void run_empty_product(const problem<In>& p, std::int64_t batch_index, const gemm_epilogue& epilogue) {
  {
    scoped_flush_denormals flush(p.flush_denormals);
    for (std::int64_t i = 0; i < p.m; ++i) {
      float* row = p.c + i * p.ldc;
      for (std::int64_t j = 0; j < p.n; ++j) {
        const float acc = p.first_start_scale == 0.0f ? 0.0f : p.first_start_scale * row[j];
        row[j] = p.alpha == 1.0f ? acc : p.alpha * acc;
      }
    }
  }
  if (epilogue && p.m > 0 && p.n > 0) epilogue(batch_index, 0, 0, p.m, p.n);
}

// ---- validation ----------------------------------------------------------------------------

template <class In, class Out>
void validate(const gemm_args<In, Out>& g) {
  const auto fail = [](const auto&... parts) { throw value_error(xlite::detail::message("gemm: ", parts...)); };
  if (g.m < 0 || g.n < 0 || g.k < 0) fail("negative size (m = ", g.m, ", n = ", g.n, ", k = ", g.k, ")");
  if (g.batch < 0) fail("negative batch ", g.batch);
  if (g.precision == gemm_precision::fp32 && !std::is_same_v<In, float>) {
    fail("fp32 precision needs float inputs; bfloat16 inputs compute in bf16");
  }
  if (g.batch == 0) return; // no operand is read or written
  const auto check_operand = [&](const char* name, const void* data, bool transposed, std::int64_t rows,
                                 std::int64_t cols, std::int64_t ld) {
    // Stored as `rows` x `cols` (op(X)'s dimensions swapped when transposed).
    const std::int64_t stored_rows = transposed ? cols : rows;
    const std::int64_t stored_cols = transposed ? rows : cols;
    if (stored_rows == 0 || stored_cols == 0) return;
    if (data == nullptr) fail(name, " is null for a ", stored_rows, " x ", stored_cols, " operand");
    if (ld < stored_cols) {
      fail("ld", name, " = ", ld, " is less than the ", stored_cols, " columns of ", name, " as stored (", stored_rows,
           " x ", stored_cols, transposed ? ", transposed" : "", ")");
    }
  };
  check_operand("a", g.a, g.trans_a == transpose::yes, g.m, g.k, g.lda);
  check_operand("b", g.b, g.trans_b == transpose::yes, g.k, g.n, g.ldb);
  if (g.m > 0 && g.n > 0) {
    if (g.c == nullptr) fail("c is null for a ", g.m, " x ", g.n, " result");
    if (g.ldc < g.n) fail("ldc = ", g.ldc, " is less than the ", g.n, " columns of C");
    if (g.batch > 1 && std::abs(g.stride_c) < (g.m - 1) * g.ldc + g.n) {
      fail("the ", g.batch, " results overlap: stride_c = ", g.stride_c, " but each C spans ", (g.m - 1) * g.ldc + g.n,
           " elements");
    }
  }
}

// ---- running a batch on a path ----------------------------------------------------------------

template <class Path, class In, class Out>
void run_path(const gemm_args<In, Out>& g, const gemm_epilogue& epilogue) {
  constexpr bool float_out = std::is_same_v<Out, float>;
  const bool bf16 = g.precision == gemm_precision::bf16;
  // The accumulators live in C itself when C is float and the result is acc or alpha*acc;
  // otherwise in a float buffer, combined with C at the end.
  const bool through_buffer = !float_out || (g.alpha != 1.0f && g.beta != 0.0f);
  const std::int64_t flops = 2 * g.m * g.n * std::max<std::int64_t>(g.k, 1);
  thread_pool& pool = current_thread_pool();
  const bool parallel = pool.num_threads() > 1 && flops * g.batch >= Path::parallel_flops;

  const auto run_one = [&](std::int64_t b, thread_pool* inner_pool) {
    problem<In> p{g.m,
                  g.n,
                  g.k,
                  g.a + b * g.stride_a,
                  g.lda,
                  g.trans_a == transpose::yes,
                  g.b + b * g.stride_b,
                  g.ldb,
                  g.trans_b == transpose::yes,
                  nullptr,
                  g.ldc,
                  g.alpha == 1.0f ? g.beta : 0.0f,
                  g.alpha,
                  bf16};
    Out* c = g.c + b * g.stride_c;
    gemm_epilogue finish = epilogue;
    struct combine_context {
      const gemm_args<In, Out>& g;
      Out* c;
      const float* acc;
      const gemm_epilogue& user;
    };
    combine_context combine{g, c, nullptr, epilogue};
    aligned_array<float> acc_memory;
    if (through_buffer) {
      acc_memory = allocate_aligned<float>(g.m * g.n);
      float* acc = acc_memory.get();
      p.c = acc;
      p.ldc = g.n;
      p.first_start_scale = 0.0f;
      if (!float_out && g.alpha == 1.0f && g.beta != 0.0f) { // start from beta * C, widened
        for (std::int64_t i = 0; i < g.m; ++i) {
          for (std::int64_t j = 0; j < g.n; ++j) acc[i * g.n + j] = static_cast<float>(c[i * g.ldc + j]);
        }
        p.first_start_scale = g.beta;
      }
      p.alpha = 1.0f;
      combine.acc = acc;
      // Each finished region: C = acc (which started at beta * C when alpha is 1),
      // alpha * acc (beta 0) or fma(alpha, acc, beta * C); then rounded to Out.
      finish.context = &combine;
      finish.apply = [](void* context, std::int64_t batch, std::int64_t row, std::int64_t col, std::int64_t rows,
                        std::int64_t cols) {
        const auto& cc = *static_cast<const combine_context*>(context);
        const float alpha = cc.g.alpha;
        const float beta = cc.g.beta;
        {
          scoped_flush_denormals flush(cc.g.precision == gemm_precision::bf16);
          for (std::int64_t i = row; i < row + rows; ++i) {
            for (std::int64_t j = col; j < col + cols; ++j) {
              const float a = cc.acc[i * cc.g.n + j];
              Out& out = cc.c[i * cc.g.ldc + j];
              if (alpha == 1.0f) {
                out = static_cast<Out>(a);
              } else if (beta == 0.0f) {
                out = static_cast<Out>(alpha * a);
              } else {
                out = static_cast<Out>(std::fma(alpha, a, beta * static_cast<float>(out)));
              }
            }
          }
        }
        if (cc.user) cc.user(batch, row, col, rows, cols);
      };
    } else {
      if constexpr (float_out) p.c = c;
    }
    if (g.k == 0 || g.alpha == 0.0f) { // alpha = 0: the product is not computed, as in BLAS
      return run_empty_product(p, b, finish);
    }
    if constexpr (std::is_same_v<In, float> && Path::steps_kind == step_kind::floats) {
      if (const auto v = as_vector_product(p)) return run_vector_product<Path>(*v, p, inner_pool, b, finish);
    }
    run_blocked<Path>(p, inner_pool, b, finish);
  };

  if (!parallel) {
    for (std::int64_t b = 0; b < g.batch; ++b) run_one(b, nullptr);
  } else if (g.batch > 1 && flops < Path::parallel_flops) {
    // Many small problems: one per task, each on one thread.
    pool.parallel_for(g.batch, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) run_one(b, nullptr);
    });
  } else {
    for (std::int64_t b = 0; b < g.batch; ++b) run_one(b, &pool);
  }
}

// The float micro-kernels of Path: float steps in fp32 precision, swapped pairs in bf16
// (bfloat16 inputs always compute in bf16).
template <template <step_kind> class Path, class In, class Out>
void run_float_kernels(const gemm_args<In, Out>& g, const gemm_epilogue& epilogue) {
  if constexpr (std::is_same_v<In, float>) {
    if (g.precision == gemm_precision::fp32) return run_path<Path<step_kind::floats>>(g, epilogue);
  }
  run_path<Path<step_kind::swapped_pairs>>(g, epilogue);
}

} // namespace gemm_detail

// The path gemm() takes for this precision under the current ISA cap: AMX only once its
// probe has passed (kernels/amx.hpp).
inline isa gemm_path(gemm_precision precision) {
  const isa active = active_isa();
  if (precision == gemm_precision::fp32) return std::min(active, isa::avx512);
  if (active == isa::amx && amx::usable()) return isa::amx;
  return std::min(active, isa::avx512_bf16);
}

template <class In, class Out>
void gemm(const gemm_args<In, Out>& args, gemm_epilogue epilogue = {}) {
  static_assert(std::is_same_v<In, float> || std::is_same_v<In, bfloat16>, "gemm: inputs are float or bfloat16");
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, bfloat16>, "gemm: outputs are float or bfloat16");
  if (gemm_detail::in_epilogue) {
    throw value_error("gemm: called from a gemm epilogue, whose thread's packing buffers are in use");
  }
  gemm_detail::validate(args);
  if (args.m == 0 || args.n == 0 || args.batch == 0) return;
  using namespace gemm_detail;
  switch (gemm_path(args.precision)) {
#if XLITE_X86_KERNELS
  case isa::amx:
    return run_path<amx_path<amx::amx_tiles>>(args, epilogue);
  case isa::avx512_bf16:
    return run_path<avx512_bf16_path>(args, epilogue);
  case isa::avx512:
    return run_float_kernels<avx512_path>(args, epilogue);
  case isa::avx2:
    return run_float_kernels<avx2_path>(args, epilogue);
#endif
  default:
    return run_float_kernels<portable_path>(args, epilogue);
  }
}

} // namespace xlite::kernels
