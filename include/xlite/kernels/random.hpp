#pragma once

// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random
// Numbers: As Easy as 1, 2, 3", SC 2011), the generator behind PyTorch's CUDA tensors and
// cuRAND. A draw is a pure function of a key and a counter, so element i of a random tensor
// is computed from (key, i) alone: in any order, on any thread, in any chunk, with the same
// result, and a kernel can fuse it like any element-wise op.

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

namespace xlite::kernels {

using philox_block = std::array<std::uint32_t, 4>;

constexpr philox_block philox4x32_10(philox_block counter, std::array<std::uint32_t, 2> key) {
  constexpr std::uint64_t multiplier0 = 0xD2511F53, multiplier1 = 0xCD9E8D57;
  constexpr std::uint32_t bump0 = 0x9E3779B9, bump1 = 0xBB67AE85; // golden ratio, sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = multiplier0 * counter[0];
    const std::uint64_t p1 = multiplier1 * counter[2];
    counter = {static_cast<std::uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key[0] += bump0;
    key[1] += bump1;
  }
  return counter;
}

// The 128 random bits of element `index` of the draw keyed by `key`.
constexpr philox_block random_bits(std::uint64_t key, std::uint64_t index) {
  return philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0, 0},
                       {static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)});
}

// A uniform draw from [0, 1) with `digits` random significant bits (at most 53): the
// multiples of 2^-digits, each exactly representable in a type of that precision, so a
// draw rounded to its storage type (bfloat16: 8 digits) never becomes 1.
inline double uniform_from_bits(const philox_block& bits, int digits) {
  const std::uint64_t word = std::uint64_t{bits[0]} << 32 | bits[1];
  return std::ldexp(static_cast<double>(word >> (64 - digits)), -digits);
}

// A standard normal draw (Box-Muller), in double precision from 53-bit uniforms.
inline double normal_from_bits(const philox_block& bits) {
  const std::uint64_t w0 = std::uint64_t{bits[0]} << 32 | bits[1];
  const std::uint64_t w1 = std::uint64_t{bits[2]} << 32 | bits[3];
  const double u0 = std::ldexp(static_cast<double>((w0 >> 11) + 1), -53); // (0, 1]: log stays finite
  const double u1 = std::ldexp(static_cast<double>(w1 >> 11), -53);
  return std::sqrt(-2.0 * std::log(u0)) * std::cos(2.0 * std::numbers::pi * u1);
}

} // namespace xlite::kernels
