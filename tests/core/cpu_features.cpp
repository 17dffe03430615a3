#include <xlite/core/cpu_features.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

using Catch::Matchers::Contains;
using xlite::isa;

namespace {

// The value of the first line of /proc/cpuinfo that starts with `key`: Linux's independent
// reading of the same CPUID bits (and of its XCR0 setup); empty where there is none.
std::string proc_cpuinfo(std::string_view key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key)) return line.substr(line.find(':') + 1);
  }
  return {};
}

std::set<std::string> proc_cpuinfo_flags() {
  std::istringstream words(proc_cpuinfo("flags"));
  std::set<std::string> flags;
  for (std::string flag; words >> flag;) flags.insert(flag);
  return flags;
}

} // namespace

TEST_CASE("detected CPU features agree with the kernel's /proc/cpuinfo", "[cpu_features]") {
  const auto flags = proc_cpuinfo_flags();
  if (flags.empty()) {
    WARN("no /proc/cpuinfo flags on this system: nothing to compare with");
    return;
  }
  const auto &f = xlite::detected_cpu_features();
  CHECK(f.avx2 == flags.contains("avx2"));
  CHECK(f.fma == flags.contains("fma"));
  CHECK(f.avx512f == flags.contains("avx512f"));
  CHECK(f.avx512bw == flags.contains("avx512bw"));
  CHECK(f.avx512vl == flags.contains("avx512vl"));
  CHECK(f.avx512dq == flags.contains("avx512dq"));
  CHECK(f.avx512_bf16 == flags.contains("avx512_bf16"));
  // AMX also needs the per-process permission, which Linux grants whenever the CPU has it.
  CHECK(f.amx_tile == flags.contains("amx_tile"));
  CHECK(f.amx_bf16 == flags.contains("amx_bf16"));
  const std::string vendor = proc_cpuinfo("vendor_id");
  CHECK((f.vendor == xlite::cpu_vendor::intel) == vendor.ends_with("GenuineIntel"));
  CHECK((f.vendor == xlite::cpu_vendor::amd) == vendor.ends_with("AuthenticAMD"));
}

TEST_CASE("best_isa takes the highest level whose every feature is present", "[cpu_features]") {
  xlite::cpu_features f;
  CHECK(f.best_isa() == isa::portable);
  f.avx2 = true;
  CHECK(f.best_isa() == isa::portable); // AVX2 without FMA is not the avx2 path
  f.fma = true;
  CHECK(f.best_isa() == isa::avx2);
  f.avx512f = f.avx512bw = f.avx512vl = true;
  CHECK(f.best_isa() == isa::avx2); // no DQ yet
  f.avx512dq = true;
  CHECK(f.best_isa() == isa::avx512);
  f.amx_tile = f.amx_bf16 = true;
  CHECK(f.best_isa() == isa::avx512); // AMX kernels use AVX512_BF16 around the tiles
  f.amx_tile = f.amx_bf16 = false;
  f.avx512_bf16 = true;
  CHECK(f.best_isa() == isa::avx512_bf16);
  f.amx_tile = true;
  CHECK(f.best_isa() == isa::avx512_bf16); // tiles without bf16
  f.amx_bf16 = true;
  CHECK(f.best_isa() == isa::amx);
  f.avx512f = false;
  CHECK(f.best_isa() == isa::avx2); // AMX kernels need AVX-512 around them
}

TEST_CASE("set_max_isa caps the active ISA and never raises it above the machine", "[cpu_features]") {
  const isa detected = xlite::detected_isa();
  for (const isa cap : xlite::all_isas) {
    xlite::scoped_max_isa scope(cap);
    CHECK(xlite::max_isa() == cap);
    CHECK(xlite::active_isa() == std::min(cap, detected));
  }
  const isa before = xlite::max_isa();
  {
    xlite::scoped_max_isa scope(isa::portable);
    CHECK(xlite::active_isa() == isa::portable);
  }
  CHECK(xlite::max_isa() == before);
}

TEST_CASE("parse_isa reads the five names and rejects others", "[cpu_features]") {
  for (const isa level : xlite::all_isas) CHECK(xlite::parse_isa(xlite::name(level)) == level);
  CHECK_THROWS_AS(xlite::parse_isa("AVX512"), xlite::value_error);
  CHECK_THROWS_WITH(xlite::parse_isa("sse4"),
                    Contains("unknown ISA 'sse4'") && Contains("portable, avx2, avx512, avx512_bf16 or amx"));
}

TEST_CASE("XLITE_ISA=portable", "[.xlite_isa_portable]") {
  CHECK(xlite::max_isa() == isa::portable);
  CHECK(xlite::active_isa() == isa::portable);
  xlite::set_max_isa(isa::amx); // the API still overrides the environment
  CHECK(xlite::active_isa() == xlite::detected_isa());
}

TEST_CASE("XLITE_ISA=sse9", "[.xlite_isa_bad]") {
  CHECK_THROWS_AS(xlite::active_isa(), xlite::config_error);
  CHECK_THROWS_WITH(xlite::active_isa(), Contains("XLITE_ISA='sse9'") && Contains("portable, avx2, avx512, avx512_bf16 or amx"));
}
