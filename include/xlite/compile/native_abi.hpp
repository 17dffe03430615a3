#pragma once

// What a native kernel (an element-wise kernel's program compiled to machine code, see
// compile/native_source.hpp) and the program that loads it agree on: the entry point's
// signature and a tag that says which build of the kernels it was made from. Both sides
// include this header, so a library built by another compiler, another xlite or for
// another SIMD arch is recognised by its tag and not run.

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "xlite/kernels/simd.hpp"
#include "xlite/version.hpp"

namespace xlite::compile {

// Computes elements [begin, end) of the kernel's results: inputs and outputs are the
// buffers' first elements, in the kernel's order. `simd` is kernels::simd_path_active(),
// `streaming` whether stores bypass the cache (kernels::streaming_pays).
using native_entry = void (*)(const void* const* inputs, void* const* outputs, std::int64_t begin, std::int64_t end,
                              bool simd, bool streaming);

// A kernel's native code: its source (compile/native_source.hpp), and its entry point once
// the runtime has built and loaded it (runtime/native_kernels.hpp); null until then.
struct native_kernel {
  explicit native_kernel(std::string code) : source(std::move(code)) {}
  const std::string source;
  std::atomic<native_entry> entry{nullptr};
};

inline constexpr const char* native_entry_symbol = "xlite_native_kernel";
inline constexpr const char* native_tag_symbol = "xlite_native_tag";

// The xlite version, the SIMD arch of the kernels and the compiler that built them.
inline std::string native_tag() {
  return "xlite " + std::to_string(XLITE_VERSION) + "; simd " + kernels::simd_arch::name() + "; compiler " +
#if defined(__clang__)
         "clang "
#elif defined(__GNUC__)
         "gcc "
#endif
         __VERSION__;
}

} // namespace xlite::compile
