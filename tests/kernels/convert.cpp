#include <xlite/core/thread_pool.hpp>
#include <xlite/kernels/convert.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernel_paths.hpp"

using xlite::bfloat16;
using xlite::isa;

TEST_CASE("every float to bfloat16 path gives the scalar bits for all 2^32 floats", "[convert]") {
  // The scalar conversion is checked against the definition in tests/core/bfloat16.cpp; here
  // each vector path is checked against it, block by block, on all the paths at once.
  const std::vector<isa> paths = xlite_test::kernel_paths();
  constexpr std::int64_t block = std::int64_t{1} << 14; // 64 KiB of floats: no mmap per block
  std::vector<std::atomic<std::int64_t>> mismatches(paths.size());
  xlite::default_thread_pool().parallel_for(std::int64_t{1} << 32, block, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t n = end - begin;
    std::vector<float> in(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = std::bit_cast<float>(static_cast<std::uint32_t>(begin + i));
    std::vector<bfloat16> expected(in.size());
    std::vector<bfloat16> got(in.size());
    xlite::kernels::detail::to_bfloat16_portable(in.data(), expected.data(), n);
    for (std::size_t p = 0; p < paths.size(); ++p) {
      xlite::kernels::bf16_conversion_of(paths[p]).to_bfloat16(in.data(), got.data(), n);
      if (std::memcmp(got.data(), expected.data(), got.size() * sizeof(bfloat16)) != 0) ++mismatches[p];
    }
  });
  for (std::size_t p = 0; p < paths.size(); ++p) {
    INFO("path " << paths[p]);
    CHECK(mismatches[p].load() == 0);
  }
}

TEST_CASE("every bfloat16 to float path is exact for all 2^16 values", "[convert]") {
  std::vector<bfloat16> in(1 << 16);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = bfloat16::from_bits(static_cast<std::uint16_t>(i));
  for (const isa path : xlite_test::kernel_paths()) {
    INFO("path " << path);
    std::vector<float> out(in.size());
    xlite::kernels::bf16_conversion_of(path).to_float(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
    for (std::size_t i = 0; i < in.size(); ++i) REQUIRE(std::bit_cast<std::uint32_t>(out[i]) == i << 16);
  }
}

TEST_CASE("conversions handle every tail length and unaligned pointers, and write nothing past the end",
          "[convert]") {
  for (const isa path : xlite_test::kernel_paths()) {
    INFO("path " << path);
    const auto conversion = xlite::kernels::bf16_conversion_of(path);
    for (std::int64_t offset = 0; offset < 3; ++offset) {
      for (std::int64_t n = 0; n <= 70; ++n) {
        INFO("n " << n << ", offset " << offset);
        std::vector<float> in(static_cast<std::size_t>(n + offset));
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = 1.0f + static_cast<float>(i) * 0x1.01p-9f;
        const auto guard = bfloat16::from_bits(0x5a5a);
        std::vector<bfloat16> out(static_cast<std::size_t>(n + offset + 1), guard);
        conversion.to_bfloat16(in.data() + offset, out.data() + offset, n);
        for (std::int64_t i = 0; i < n; ++i) {
          REQUIRE(out[static_cast<std::size_t>(offset + i)].bits() == bfloat16(in[static_cast<std::size_t>(offset + i)]).bits());
        }
        REQUIRE(out.back().bits() == guard.bits());
        std::vector<float> back(static_cast<std::size_t>(n + offset + 1), -7.0f);
        conversion.to_float(out.data() + offset, back.data() + offset, n);
        for (std::int64_t i = 0; i < n; ++i) {
          REQUIRE(back[static_cast<std::size_t>(offset + i)] == static_cast<float>(out[static_cast<std::size_t>(offset + i)]));
        }
        REQUIRE(back.back() == -7.0f);
      }
    }
  }
}

TEST_CASE("convert follows the ISA cap", "[convert]") {
  const std::vector<float> in{1.0f, 0x1.0101p0f, -3.5f};
  for (const isa path : xlite_test::kernel_paths()) {
    xlite::scoped_max_isa cap(path);
    CHECK(xlite::kernels::active_bf16_conversion().level == std::min(path, isa::avx512_bf16));
    std::vector<bfloat16> out(in.size());
    xlite::kernels::convert(in.data(), out.data(), 3);
    CHECK(out[1].bits() == 0x3f81);
  }
}
