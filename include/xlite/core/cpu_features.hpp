#pragma once

// Run-time detection of the instruction sets xlite's kernels use, and the choice of which
// one to run. Kernels ask `active_isa()`; it is the best the CPU and the OS support, capped
// by XLITE_ISA or set_max_isa() so that tests and users can run every path on one machine.
// The cap semantics follow oneDNN's ONEDNN_MAX_CPU_ISA: asking for more than the CPU has
// is not an error, it just gets what the CPU has.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define XLITE_X86_CPUID 1
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace xlite {

// The kernel paths, each a superset of the one before it.
enum class isa : std::uint8_t {
  portable, // plain C++, any CPU
  avx2,     // AVX2 + FMA
  avx512,      // AVX-512 F, BW, VL, DQ
  avx512_bf16, // avx512 plus AVX512_BF16 (VCVTNEPS2BF16, VDPBF16PS)
  amx,         // avx512_bf16 plus AMX tiles with bf16 (TDPBF16PS)
};

inline constexpr isa all_isas[] = {isa::portable, isa::avx2, isa::avx512, isa::avx512_bf16, isa::amx};

constexpr std::string_view name(isa level) {
  constexpr std::string_view names[] = {"portable", "avx2", "avx512", "avx512_bf16", "amx"};
  return names[static_cast<std::size_t>(level)];
}

inline std::ostream& operator<<(std::ostream& out, isa level) { return out << name(level); }

// The ISA named `text` ("portable", "avx2", "avx512", "avx512_bf16" or "amx"), if any.
constexpr std::optional<isa> find_isa(std::string_view text) {
  for (const isa level : all_isas) {
    if (text == name(level)) return level;
  }
  return std::nullopt;
}

// The ISA named `text`; any other text is a value_error naming the choices.
inline isa parse_isa(std::string_view text) {
  if (const std::optional<isa> level = find_isa(text)) return *level;
  throw value_error(detail::message("unknown ISA '", text, "' (choose portable, avx2, avx512, avx512_bf16 or amx)"));
}

// Who made the CPU (CPUID's vendor string), for tuning that differs between designs.
enum class cpu_vendor : std::uint8_t { other, intel, amd };

// What the CPU reports and the OS has enabled. A feature the CPU has but the OS does not
// save on context switches (XCR0), or AMX without the Linux permission, reads as absent.
struct cpu_features {
  cpu_vendor vendor = cpu_vendor::other;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false; // VCVTNE2PS2BF16, VDPBF16PS
  bool amx_tile = false;
  bool amx_bf16 = false;

  constexpr isa best_isa() const noexcept {
    const bool has_avx2 = avx2 && fma;
    const bool has_avx512 = has_avx2 && avx512f && avx512bw && avx512vl && avx512dq;
    if (has_avx512 && avx512_bf16 && amx_tile && amx_bf16) return isa::amx;
    if (has_avx512 && avx512_bf16) return isa::avx512_bf16;
    if (has_avx512) return isa::avx512;
    if (has_avx2) return isa::avx2;
    return isa::portable;
  }
};

namespace detail {

#if XLITE_X86_CPUID
inline std::uint64_t read_xcr0() {
  std::uint32_t eax = 0;
  std::uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}

// Linux hands out AMX tile state only to processes that ask for it (arch_prctl,
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without the request, the first tile
// instruction faults. The permission is per process and asking twice is harmless.
inline bool request_amx_permission() {
#if defined(__linux__)
  constexpr long arch_req_xcomp_perm = 0x1023;
  constexpr long xfeature_xtiledata = 18;
  return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
  return false;
#endif
}

[[gnu::cold, gnu::noinline]] inline cpu_features query_cpu_features() {
  cpu_features f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return f;
  char vendor[12]; // EBX, EDX, ECX
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  const std::string_view vendor_name(vendor, sizeof(vendor));
  if (vendor_name == "GenuineIntel") f.vendor = cpu_vendor::intel;
  if (vendor_name == "AuthenticAMD") f.vendor = cpu_vendor::amd;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1;
  const bool fma = (ecx >> 12) & 1;
  if (!osxsave) return f;
  const std::uint64_t xcr0 = read_xcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;                // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0; // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;        // XTILECFG, XTILEDATA

  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned leaf7_ebx = ebx;
  const unsigned leaf7_edx = edx;
  f.fma = os_avx && fma;
  f.avx2 = os_avx && ((leaf7_ebx >> 5) & 1);
  f.avx512f = os_avx512 && ((leaf7_ebx >> 16) & 1);
  f.avx512dq = os_avx512 && ((leaf7_ebx >> 17) & 1);
  f.avx512bw = os_avx512 && ((leaf7_ebx >> 30) & 1);
  f.avx512vl = os_avx512 && ((leaf7_ebx >> 31) & 1);
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx512_bf16 = os_avx512 && ((eax >> 5) & 1);
  const bool cpu_amx = ((leaf7_edx >> 24) & 1) && ((leaf7_edx >> 22) & 1);
  if (os_amx && cpu_amx && request_amx_permission()) {
    f.amx_tile = true;
    f.amx_bf16 = true;
  }
  return f;
}
#else
inline cpu_features query_cpu_features() { return {}; }
#endif

// The cap from set_max_isa(), or max_isa_unset until XLITE_ISA is read on first use.
inline constexpr std::uint8_t max_isa_unset = 0xff;
inline std::atomic<std::uint8_t> max_isa_setting{max_isa_unset};

[[gnu::cold, gnu::noinline]] inline isa max_isa_from_environment() {
  const auto text = env_string("XLITE_ISA");
  if (!text) return isa::amx;
  if (const std::optional<isa> level = find_isa(*text)) return *level;
  throw config_error(
      detail::message("XLITE_ISA='", *text, "' is not an ISA (choose portable, avx2, avx512, avx512_bf16 or amx)"));
}

} // namespace detail

// Detected once per process; on Linux this also requests the AMX tile permission.
inline const cpu_features& detected_cpu_features() {
  static const cpu_features features = detail::query_cpu_features();
  return features;
}

inline isa detected_isa() { return detected_cpu_features().best_isa(); }

// The cap on the ISA kernels may use: set_max_isa() if called, else XLITE_ISA, else none.
inline isa max_isa() {
  std::uint8_t setting = detail::max_isa_setting.load(std::memory_order_relaxed);
  if (setting == detail::max_isa_unset) {
    setting = static_cast<std::uint8_t>(detail::max_isa_from_environment());
    std::uint8_t expected = detail::max_isa_unset;
    // A concurrent set_max_isa() wins over the environment.
    if (!detail::max_isa_setting.compare_exchange_strong(expected, setting)) setting = expected;
  }
  return static_cast<isa>(setting);
}

inline void set_max_isa(isa cap) { detail::max_isa_setting.store(static_cast<std::uint8_t>(cap)); }

// Caps the ISA for a scope and restores the previous cap after it, e.g. to run a kernel
// once per path in a test.
class scoped_max_isa {
public:
  explicit scoped_max_isa(isa cap) : previous_(max_isa()) { set_max_isa(cap); }
  ~scoped_max_isa() { set_max_isa(previous_); }
  scoped_max_isa(const scoped_max_isa&) = delete;
  scoped_max_isa& operator=(const scoped_max_isa&) = delete;

private:
  isa previous_;
};

// The ISA kernels run: the best the machine has, within the cap.
inline isa active_isa() { return std::min(detected_isa(), max_isa()); }

} // namespace xlite
