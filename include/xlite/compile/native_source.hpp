#pragma once

// An element-wise kernel's register program as C++ source, which runtime/native_kernels.hpp
// compiles to a native kernel: one loop over the kernel's elements in SIMD batches, the
// range's end in one more (loaded and stored under a mask), that keeps every value of a
// batch in a machine register, where the
// interpreter (runtime/elementwise.hpp) runs each step as a loop of its own over a chunk
// held in memory.
//
// Results are bitwise the interpreter's. Each step calls the functor the interpreter calls
// (kernels/elementwise.hpp) on the same batches of the same arch (the source is compiled
// with the ISA flags this program was compiled with), and round_separately stops the
// compiler from fusing one step's product into the next step's sum, which the interpreter's
// separate loops never do. The invariant steps (constants, single-value inputs, ops of
// those) are computed once, in batches; the interpreter computes them in a range's first
// chunk, in batches too. The end batch's lanes past the range hold what the interpreter's
// padding does (runtime/elementwise.hpp): zeros from memory inputs, and what the steps make
// of them.
//
// Which kernels: element-wise, every value of one dtype whose compute type is itself and
// SIMD (f32, f64, i32, i64), inputs of the kernel's size or single values, steps that are
// constants or ops from that type to itself, and some step that is not invariant. Casts, comparisons, where, bf16 and
// f16, broadcasts along an axis, random numbers and iota stay interpreted.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/compile/native_abi.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/kernels/elementwise.hpp"

namespace xlite::compile {

namespace detail {

inline const char* native_type_name(dtype t) {
  switch (t) {
  case dtype::f32:
    return "float";
  case dtype::f64:
    return "double";
  case dtype::i32:
    return "std::int32_t";
  case dtype::i64:
    return "std::int64_t";
  default:
    return nullptr;
  }
}

// Calls f(std::type_identity<T>{}) for the C++ type T of a native dtype.
template <class F>
decltype(auto) visit_native_type(dtype t, F&& f) {
  switch (t) {
  case dtype::f32:
    return f(std::type_identity<float>{});
  case dtype::f64:
    return f(std::type_identity<double>{});
  case dtype::i32:
    return f(std::type_identity<std::int32_t>{});
  default:
    return f(std::type_identity<std::int64_t>{});
  }
}

// A constant as the interpreter holds it (attributes converted to T), spelled by its bits.
template <class T>
std::string native_constant(const ir::literal& value) {
  const T v = std::is_floating_point_v<T> ? static_cast<T>(value.real) : static_cast<T>(value.integer);
  using bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  char text[64];
  std::snprintf(text, sizeof text, "std::bit_cast<T>(std::uint%d_t{0x%llxu})", static_cast<int>(8 * sizeof(T)),
                static_cast<unsigned long long>(std::bit_cast<bits>(v)));
  return text;
}

} // namespace detail

// The source of k, a kernel of g, or nothing when k is not one a native kernel computes.
inline std::optional<std::string> native_source(const ir::graph& g, const kernel& k) {
  if (!k.group.elementwise || k.program.empty()) return std::nullopt;
  const ir::instruction& root = g.instructions[k.group.root];
  const dtype type = root.type;
  const char* type_name = detail::native_type_name(type);
  if (type_name == nullptr) return std::nullopt;
  for (const ir::value_id extra : k.group.extra_results) {
    if (g.instructions[extra].type != type) return std::nullopt;
  }
  // A kernel whose every step is invariant computes one value: nothing to gain.
  if (std::ranges::all_of(k.program, [](const register_step& step) { return step.invariant; })) return std::nullopt;
  const std::int64_t size = root.shape.numel();
  for (const register_step& step : k.program) {
    if (step.type != type) return std::nullopt;
    if (step.what == register_step::kind::load) {
      const ir::instruction& input = g.instructions[k.group.inputs[step.input]];
      const std::int64_t n = input.shape.numel();
      if (input.type != type || !(n == size || (n == 1 && step.invariant))) return std::nullopt;
    } else if (step.code != op::constant && !detail::visit_native_type(type, [&](auto tag) {
                 return kernels::same_type_op<typename decltype(tag)::type>(step.code);
               })) {
      return std::nullopt;
    }
  }

  // Each step's value is named by the step ("v7"); registers only say where operands are.
  std::vector<std::string> value_of(k.register_count);
  std::string invariants_members, invariants_body, body;
  for (std::size_t s = 0; s < k.program.size(); ++s) {
    const register_step& step = k.program[s];
    const std::string named = (step.invariant ? "inv.v" : "v") + std::to_string(s);
    std::string value;
    if (step.what == register_step::kind::load) {
      const std::string input = "in[" + std::to_string(step.input) + "]";
      value = step.invariant ? "V(" + input + "[0])" : "load<V>(" + input + " + i, count)";
    } else if (step.code == op::constant) {
      value =
          "V(" +
          detail::visit_native_type(
              type, [&](auto tag) { return detail::native_constant<typename decltype(tag)::type>(step.attrs.value); }) +
          ")";
    } else {
      value = "step<xlite::op::" + std::string(name(step.code)) + ">(";
      for (std::size_t o = 0; o < step.operands.size(); ++o) value += (o ? ", " : "") + value_of[step.operands[o]];
      value += ")";
    }
    if (step.invariant) {
      invariants_members += "  V v" + std::to_string(s) + ";\n";
      invariants_body += "  " + named + " = " + value + ";\n";
    } else {
      body += "  const V " + named + " = " + value + ";\n";
    }
    value_of[step.result] = named;
  }
  for (std::size_t r = 0; r < k.result_registers.size(); ++r) {
    const std::string out = "out[" + std::to_string(r) + "] + i";
    body +=
        "  store(" + out + ", " + value_of[k.result_registers[r]] + ", stream[" + std::to_string(r) + "], count);\n";
  }

  const std::string inputs = std::to_string(k.group.inputs.size());
  const std::string outputs = std::to_string(k.result_registers.size());
  return std::string("// Generated by xlite (compile/native_source.hpp) from an element-wise kernel's program.\n") +
         "#include <bit>\n#include <cstdint>\n#include <type_traits>\n\n"
         "#include \"xlite/compile/native_abi.hpp\"\n#include \"xlite/kernels/elementwise.hpp\"\n\n"
         "namespace {\n\n"
         "using T = " +
         type_name +
         ";\n\n"
         "template <xlite::op O, class... V>\n"
         "[[gnu::always_inline]] inline auto step(const V&... operands) {\n"
         "  auto value = xlite::kernels::elementwise<O>{}(operands...);\n"
         "  xlite::kernels::detail::round_separately(value);\n"
         "  return value;\n}\n\n"
         "// count: the lanes in the range, fewer than a batch only at its end.\n"
         "template <class V>\n[[gnu::always_inline]] inline V load(const T* p, std::int64_t count) {\n"
         "  if constexpr (std::is_same_v<V, T>) {\n    return *p;\n"
         "  } else if (count < static_cast<std::int64_t>(V::size)) {\n"
         "    return xlite::kernels::load_first<V>(p, static_cast<std::size_t>(count));\n"
         "  } else {\n    return V::load_unaligned(p);\n  }\n}\n\n"
         "template <class V>\n"
         "[[gnu::always_inline]] inline void store(T* p, const V& v, bool streaming, std::int64_t count) {\n"
         "  if constexpr (std::is_same_v<V, T>) {\n    *p = v;\n"
         "  } else if (count < static_cast<std::int64_t>(V::size)) {\n"
         "    xlite::kernels::store_first(p, v, static_cast<std::size_t>(count));\n"
         "  } else if (streaming) {\n    xlite::kernels::store_streaming(p, v);\n"
         "  } else {\n    v.store_unaligned(p);\n  }\n}\n\n"
         "template <class V>\nstruct invariants {\n" +
         invariants_members +
         "};\n\n"
         "template <class V>\ninvariants<V> compute_invariants([[maybe_unused]] const T* const* in) {\n"
         "  invariants<V> inv;\n" +
         invariants_body +
         "  return inv;\n}\n\n"
         "template <class V>\n"
         "[[gnu::always_inline]] inline void compute([[maybe_unused]] const T* const* in, T* const* out, std::int64_t "
         "i,\n"
         "                                           [[maybe_unused]] const invariants<V>& inv, const bool* stream,\n"
         "                                           std::int64_t count) {\n" +
         body +
         "}\n\n"
         "} // namespace\n\n"
         "extern \"C\" const char* " +
         native_tag_symbol +
         "() {\n"
         "  static const std::string tag = xlite::compile::native_tag();\n  return tag.c_str();\n}\n\n"
         "extern \"C\" void " +
         native_entry_symbol +
         "(const void* const* inputs, void* const* outputs, std::int64_t begin,\n"
         "                                    std::int64_t end, bool simd, bool streaming) {\n"
         "  const T* in[" +
         inputs +
         " + 1];\n"
         "  for (int k = 0; k < " +
         inputs +
         "; ++k) in[k] = static_cast<const T*>(inputs[k]);\n"
         "  T* out[" +
         outputs + "];\n  bool stream[" + outputs +
         "];\n"
         "  for (int r = 0; r < " +
         outputs +
         "; ++r) {\n"
         "    out[r] = static_cast<T*>(outputs[r]);\n    stream[r] = false;\n  }\n"
         "  std::int64_t i = begin;\n"
         "  using arch = xlite::kernels::simd_arch;\n"
         "  if constexpr (!std::is_same_v<arch, xlite::kernels::scalar_arch>) {\n"
         "    if (simd) {\n"
         "      using V = xlite::kernels::batch_t<T, arch>;\n"
         "      constexpr auto width = static_cast<std::int64_t>(V::size);\n"
         "      for (int r = 0; r < " +
         outputs +
         "; ++r) {\n"
         "        stream[r] = streaming && reinterpret_cast<std::uintptr_t>(out[r] + begin) % sizeof(V) == 0;\n      "
         "}\n"
         "      const invariants<V> inv = compute_invariants<V>(in);\n"
         "      for (; i + width <= end; i += width) compute<V>(in, out, i, inv, stream, width);\n"
         "      // The range's end in one batch, its inputs padded with zeros, as the interpreter's.\n"
         "      if (i < end) compute<V>(in, out, i, inv, stream, end - i);\n"
         "      return;\n"
         "    }\n  }\n"
         "  const invariants<T> inv = compute_invariants<T>(in);\n"
         "  for (; i < end; ++i) compute<T>(in, out, i, inv, stream, 1);\n"
         "}\n";
}

// Gives k its native kernel (source only: the runtime builds it) when native_source accepts k.
inline void attach_native_source(const ir::graph& g, kernel& k) {
  if (auto source = native_source(g, k)) k.native = std::make_shared<native_kernel>(std::move(*source));
}

} // namespace xlite::compile
