#pragma once

// A graph as an MLIR module in upstream dialects, for other compilers: one func.func whose
// arguments are the graph's parameters and whose results are its outputs, with the ops
// written in linalg (linalg.generic for element-wise ops, broadcasts, transposes,
// reductions, matmuls and iota), arith and math for the scalar work inside them, and tensor
// for reshapes, slices, concatenation and padding. Debian's mlir-opt-16 verifies what this
// prints, and its standard lowering runs it (docs/io.md gives the pipeline).
//
// The numbers are xlite's: NaN-propagating minimum and maximum (arith.minf/maxf), relu(NaN)
// = NaN, round half to even, exact-erf gelu, fma for the matmul's multiply-adds, and
// bfloat16 and float16 work computed in float32 and rounded once per op, as xlite's
// kernels do; sums and products of 16-bit floats accumulate in float32. What differs is
// the order of additions in reductions and matmuls, and math functions (exp, tanh, ...)
// come from whatever the consumer lowers them to.
//
// Ops without an MLIR form here (gather and scatter, the window ops, random numbers,
// control flow, collectives, argmax) are a value_error that names them.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/bfloat16.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/float16.hpp"
#include "xlite/core/op.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/graph.hpp"

namespace xlite::ir {

namespace detail {

// How a dtype's scalars are computed on.
enum class arithmetic { boolean, signed_int, unsigned_int, floating };

inline arithmetic arithmetic_of(dtype t) {
  if (t == dtype::boolean) return arithmetic::boolean;
  if (t == dtype::u8) return arithmetic::unsigned_int;
  return is_floating_point(t) ? arithmetic::floating : arithmetic::signed_int;
}

inline std::string_view element_type(dtype t) {
  switch (t) {
  case dtype::boolean:
    return "i1";
  case dtype::u8:
  case dtype::i8:
    return "i8";
  case dtype::i32:
    return "i32";
  case dtype::i64:
    return "i64";
  case dtype::f16:
    return "f16";
  case dtype::bf16:
    return "bf16";
  case dtype::f32:
    return "f32";
  case dtype::f64:
    break;
  }
  return "f64";
}

// The smallest and largest values of an integral or bool dtype.
inline std::pair<std::int64_t, std::int64_t> integer_range(dtype t) {
  switch (t) {
  case dtype::boolean:
    return {0, 1};
  case dtype::u8:
    return {0, std::numeric_limits<std::uint8_t>::max()};
  case dtype::i8:
    return {std::numeric_limits<std::int8_t>::min(), std::numeric_limits<std::int8_t>::max()};
  case dtype::i32:
    return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
  default:
    return {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()};
  }
}

inline int bits_of(dtype t) { return t == dtype::boolean ? 1 : static_cast<int>(size_of(t)) * 8; }

// 16-bit floats are computed on in float32 and rounded once per op.
inline dtype compute_type(dtype t) { return t == dtype::f16 || t == dtype::bf16 ? dtype::f32 : t; }

inline std::string tensor_type(dtype t, const xlite::shape& s) {
  std::string text = "tensor<";
  for (const std::int64_t d : s) text += std::to_string(d) + "x";
  return text + std::string(element_type(t)) + ">";
}

// "affine_map<(d0, d1) -> (d1, 0)>"
inline std::string affine_map(std::size_t dims, const std::vector<std::string>& results) {
  std::string text = "affine_map<(";
  for (std::size_t d = 0; d < dims; ++d) text += (d ? ", d" : "d") + std::to_string(d);
  text += ") -> (";
  for (std::size_t k = 0; k < results.size(); ++k) text += (k ? ", " : "") + results[k];
  return text + ")>";
}

inline std::string dim(std::size_t d) { return "d" + std::to_string(d); }

// The map that reads an operand of shape `from` broadcast (NumPy's rule) to `to`.
inline std::string broadcast_map(const xlite::shape& from, const xlite::shape& to) {
  std::vector<std::string> results;
  const std::size_t offset = to.rank() - from.rank();
  for (std::size_t a = 0; a < from.rank(); ++a) {
    results.push_back(from[a] == 1 && to[a + offset] != 1 ? "0" : dim(a + offset));
  }
  return affine_map(to.rank(), results);
}

inline std::string identity_map(std::size_t rank) {
  std::vector<std::string> results;
  for (std::size_t d = 0; d < rank; ++d) results.push_back(dim(d));
  return affine_map(rank, results);
}

class mlir_printer {
public:
  explicit mlir_printer(const graph& g) : g_(g), values_(g.instructions.size()) {}

  std::string module(std::string_view function) {
    std::vector<std::string> arguments(g_.parameter_count);
    for (std::size_t id = 0; id < g_.instructions.size(); ++id) {
      const instruction& ins = g_.instructions[id];
      if (ins.code == op::parameter) {
        const auto position = static_cast<std::size_t>(ins.attrs.ints[0]);
        values_[id] = "%arg" + std::to_string(position);
        arguments[position] = values_[id] + ": " + tensor_type(ins.type, ins.shape);
      } else {
        values_[id] = emit(ins);
      }
    }
    std::string results, returned, returned_types;
    for (std::size_t k = 0; k < g_.outputs.size(); ++k) {
      const instruction& out = g_.instructions[g_.outputs[k]];
      results += (k ? ", " : "") + tensor_type(out.type, out.shape);
      returned += (k ? ", " : "") + values_[g_.outputs[k]];
    }
    std::string text = "module {\n  func.func @" + std::string(function) + "(";
    for (std::size_t k = 0; k < arguments.size(); ++k) text += (k ? ", " : "") + arguments[k];
    text += ") -> (" + results + ") {\n" + body_.str();
    text += "    return " + returned + " : " + results + "\n  }\n}\n";
    return text;
  }

private:
  std::string fresh() { return "%" + std::to_string(next_++); }

  std::string emit(const instruction& ins) {
    const op code = ins.code;
    if (code == op::mark_sharding) return value(ins.operands[0]); // an annotation, not a computation
    if (info(code).kind == op_kind::elementwise) return elementwise(ins);
    if (info(code).kind == op_kind::reduction && code != op::argmax) return reduction(ins);
    switch (code) {
    case op::constant:
      return constant(ins);
    case op::iota:
      return iota(ins);
    case op::reshape:
      return reshape(value(ins.operands[0]), operand(ins, 0).shape, ins.shape, ins.type);
    case op::permute:
      return permute(ins);
    case op::broadcast_to:
      return generic(ins.type, ins.shape, {{ins.operands[0], broadcast_map(operand(ins, 0).shape, ins.shape)}},
                     std::vector<std::string>(ins.shape.rank(), "parallel"), nullptr,
                     [&](const std::vector<std::string>& in, std::ostringstream&) { return in[0]; });
    case op::slice:
      return slice(ins);
    case op::concat:
      return concat(ins);
    case op::pad:
      return pad(ins);
    case op::matmul:
      return matmul(ins);
    default:
      throw value_error(xlite::detail::message(
          "mlir_text: op '", name(code),
          "' has no MLIR form yet (exported: element-wise ops, casts, reductions but argmax, matmul, reshape, "
          "permute, broadcast_to, slice, concat, pad, iota, constants)"));
    }
  }

  const std::string& value(value_id id) const { return values_[id]; }
  const instruction& operand(const instruction& ins, std::size_t k) const { return g_.instructions[ins.operands[k]]; }

  void line(const std::string& text) { body_ << "    " << text << '\n'; }

  // A scalar of dtype t from the literal, exactly (floats by their bits).
  static std::string literal_text(const literal& v, dtype t) {
    char hex[24];
    switch (t) {
    case dtype::boolean:
      return v.integer != 0 ? "true" : "false";
    case dtype::u8:
    case dtype::i8:
      return std::to_string(static_cast<std::int8_t>(v.integer));
    case dtype::i32:
      return std::to_string(static_cast<std::int32_t>(v.integer));
    case dtype::i64:
      return std::to_string(v.integer);
    case dtype::f16:
      std::snprintf(hex, sizeof hex, "0x%04X", static_cast<unsigned>(std::bit_cast<std::uint16_t>(float16(v.real))));
      return hex;
    case dtype::bf16:
      std::snprintf(hex, sizeof hex, "0x%04X", static_cast<unsigned>(std::bit_cast<std::uint16_t>(bfloat16(v.real))));
      return hex;
    case dtype::f32:
      std::snprintf(hex, sizeof hex, "0x%08X", std::bit_cast<std::uint32_t>(static_cast<float>(v.real)));
      return hex;
    case dtype::f64:
      break;
    }
    std::snprintf(hex, sizeof hex, "0x%016llX", static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(v.real)));
    return hex;
  }

  // A scalar constant in `out` (a region's body, or the function's).
  std::string scalar(const literal& v, dtype t, std::ostringstream& out) {
    const std::string name = fresh();
    out << "    " << name << " = arith.constant " << literal_text(v, t);
    if (t != dtype::boolean) out << " : " << element_type(t); // true and false are i1 already
    out << '\n';
    return name;
  }

  std::string constant(const instruction& ins) {
    const std::string element = scalar(ins.attrs.value, ins.type, body_);
    const std::string name = fresh();
    line(name + " = tensor.from_elements " + element + " : " + tensor_type(ins.type, ins.shape));
    return name;
  }

  // Converts scalar `x` of dtype `from` to dtype `to` in `out` (a cast's C++ semantics:
  // to bool is "not zero", from bool is 0 or 1).
  std::string convert(const std::string& x, dtype from, dtype to, std::ostringstream& out) {
    if (element_type(from) == element_type(to) && arithmetic_of(from) == arithmetic_of(to)) return x;
    const std::string name = fresh();
    const std::string a = std::string(element_type(from)), b = std::string(element_type(to));
    const arithmetic af = arithmetic_of(from), at = arithmetic_of(to);
    if (at == arithmetic::boolean) {
      const std::string zero = scalar(literal{}, from, out);
      out << "    " << name << " = " << (af == arithmetic::floating ? "arith.cmpf une, " : "arith.cmpi ne, ") << x
          << ", " << zero << " : " << a << '\n';
    } else if (bits_of(to) == 16 && from != dtype::f32 && bits_of(from) != 8 && bits_of(from) != 1) {
      // To a 16-bit float through float32, as xlite computes: from the other 16-bit float,
      // and from float64, int32 and int64, which would otherwise round once, not twice.
      return convert(convert(x, from, dtype::f32, out), dtype::f32, to, out);
    } else if (af == arithmetic::floating && bits_of(to) == 8) {
      // To int8 or uint8 through int32, as xlite computes: out-of-range values wrap rather
      // than being poison.
      return convert(convert(x, from, dtype::i32, out), dtype::i32, to, out);
    } else if (af == arithmetic::floating && at == arithmetic::floating) {
      out << "    " << name << " = " << (bits_of(to) > bits_of(from) ? "arith.extf " : "arith.truncf ") << x << " : "
          << a << " to " << b << '\n';
    } else if (at == arithmetic::floating) {
      out << "    " << name << " = " << (af == arithmetic::signed_int ? "arith.sitofp " : "arith.uitofp ") << x << " : "
          << a << " to " << b << '\n';
    } else if (af == arithmetic::floating) {
      out << "    " << name << " = " << (at == arithmetic::signed_int ? "arith.fptosi " : "arith.fptoui ") << x << " : "
          << a << " to " << b << '\n';
    } else if (bits_of(to) > bits_of(from)) {
      out << "    " << name << " = " << (af == arithmetic::signed_int ? "arith.extsi " : "arith.extui ") << x << " : "
          << a << " to " << b << '\n';
    } else if (bits_of(to) < bits_of(from)) {
      out << "    " << name << " = arith.trunci " << x << " : " << a << " to " << b << '\n';
    } else {
      return x; // i8 and u8: the same bits
    }
    return name;
  }

  // The scalar work of an element-wise op on arguments already in `t` (its compute dtype).
  std::string scalar_op(op code, dtype t, const std::vector<std::string>& x, std::ostringstream& out) {
    const std::string e = std::string(element_type(t));
    const arithmetic kind = arithmetic_of(t);
    const bool fp = kind == arithmetic::floating;
    const auto emit = [&](const std::string& text) {
      const std::string name = fresh();
      out << "    " << name << " = " << text << '\n';
      return name;
    };
    const auto binary = [&](std::string_view floating, std::string_view integer, const std::string& a,
                            const std::string& b) {
      return emit(std::string(fp ? floating : integer) + " " + a + ", " + b + " : " + e);
    };
    const auto one = [&] { return scalar(literal::of(1.0), t, out); };
    const auto zero = [&] { return scalar(literal{}, t, out); };
    const auto compare = [&](std::string_view floating, std::string_view signed_int, std::string_view unsigned_int) {
      const std::string_view predicate = fp ? floating : kind == arithmetic::signed_int ? signed_int : unsigned_int;
      return emit(std::string(fp ? "arith.cmpf " : "arith.cmpi ") + std::string(predicate) + ", " + x[0] + ", " + x[1] +
                  " : " + e);
    };
    const bool is_signed = kind == arithmetic::signed_int;
    const auto minimum = [&](const std::string& a, const std::string& b) {
      return binary("arith.minf", is_signed ? "arith.minsi" : "arith.minui", a, b);
    };
    const auto maximum = [&](const std::string& a, const std::string& b) {
      return binary("arith.maxf", is_signed ? "arith.maxsi" : "arith.maxui", a, b);
    };
    const auto math = [&](std::string_view function, const std::string& a) {
      if (!fp) throw value_error(xlite::detail::message("mlir_text: ", name(code), " of ", name(t)));
      return emit("math." + std::string(function) + " " + a + " : " + e);
    };
    if (kind == arithmetic::boolean && (code == op::add || code == op::sub || code == op::mul || code == op::neg)) {
      throw value_error(xlite::detail::message("mlir_text: ", name(code), " on bool has no MLIR form; cast first"));
    }
    switch (code) {
    case op::add:
      return binary("arith.addf", "arith.addi", x[0], x[1]);
    case op::sub:
      return binary("arith.subf", "arith.subi", x[0], x[1]);
    case op::mul:
      return binary("arith.mulf", "arith.muli", x[0], x[1]);
    case op::div:
      return binary("arith.divf", is_signed ? "arith.divsi" : "arith.divui", x[0], x[1]);
    case op::neg:
      return fp ? emit("arith.negf " + x[0] + " : " + e) : binary("", "arith.subi", zero(), x[0]);
    case op::equal:
      return compare("oeq", "eq", "eq");
    case op::not_equal:
      return compare("une", "ne", "ne");
    case op::less:
      return compare("olt", "slt", "ult");
    case op::less_equal:
      return compare("ole", "sle", "ule");
    case op::greater:
      return compare("ogt", "sgt", "ugt");
    case op::greater_equal:
      return compare("oge", "sge", "uge");
    case op::logical_and:
      return emit("arith.andi " + x[0] + ", " + x[1] + " : i1");
    case op::logical_or:
      return emit("arith.ori " + x[0] + ", " + x[1] + " : i1");
    case op::logical_not: {
      const std::string yes = scalar(literal::of(std::int64_t{1}), dtype::boolean, out);
      return emit("arith.xori " + x[0] + ", " + yes + " : i1");
    }
    case op::where:
      return emit("arith.select " + x[0] + ", " + x[1] + ", " + x[2] + " : " + e);
    case op::fma:
      return fp ? emit("math.fma " + x[0] + ", " + x[1] + ", " + x[2] + " : " + e)
                : binary("", "arith.addi", binary("", "arith.muli", x[0], x[1]), x[2]);
    case op::minimum:
      return minimum(x[0], x[1]);
    case op::maximum:
      return maximum(x[0], x[1]);
    case op::clamp:
      return minimum(maximum(x[0], x[1]), x[2]);
    case op::pow:
      return emit("math.powf " + x[0] + ", " + x[1] + " : " + e);
    case op::abs:
      if (kind == arithmetic::unsigned_int) return x[0];
      return fp ? math("absf", x[0]) : emit("math.absi " + x[0] + " : " + e);
    case op::exp:
      return math("exp", x[0]);
    case op::log:
      return math("log", x[0]);
    case op::log1p:
      return math("log1p", x[0]);
    case op::sqrt:
      return math("sqrt", x[0]);
    case op::rsqrt:
      return binary("arith.divf", "", one(), math("sqrt", x[0]));
    case op::tanh:
      return math("tanh", x[0]);
    case op::sigmoid: // 1 / (1 + exp(-x)), as xlite computes it
      return binary("arith.divf", "", one(),
                    binary("arith.addf", "", one(), math("exp", emit("arith.negf " + x[0] + " : " + e))));
    case op::relu: { // x < 0 ? 0 : x, so relu(NaN) is NaN
      const std::string z = zero();
      const std::string negative = emit(std::string(fp          ? "arith.cmpf olt, "
                                                    : is_signed ? "arith.cmpi slt, "
                                                                : "arith.cmpi ult, ") +
                                        x[0] + ", " + z + " : " + e);
      return emit("arith.select " + negative + ", " + z + ", " + x[0] + " : " + e);
    }
    case op::gelu: { // 0.5 x (1 + erf(x / sqrt 2))
      const std::string half = scalar(literal::of(0.5), t, out);
      const std::string inverse_root2 = scalar(literal::of(0.7071067811865476), t, out);
      const std::string erf = math("erf", binary("arith.mulf", "", x[0], inverse_root2));
      return binary("arith.mulf", "", binary("arith.mulf", "", half, x[0]), binary("arith.addf", "", one(), erf));
    }
    case op::sin:
      return math("sin", x[0]);
    case op::cos:
      return math("cos", x[0]);
    case op::floor:
      return fp ? math("floor", x[0]) : x[0];
    case op::ceil:
      return fp ? math("ceil", x[0]) : x[0];
    case op::round:
      return fp ? math("roundeven", x[0]) : x[0];
    default:
      throw value_error(xlite::detail::message("mlir_text: op '", name(code), "' has no MLIR form yet"));
    }
  }

  // One linalg.generic: `inputs` (value, indexing map) over the iteration space of
  // `iterators`, writing a tensor of `type` and `s` (initialised with `init`, or empty),
  // each element what `body(input scalars, region)` returns.
  using body_builder = std::function<std::string(const std::vector<std::string>&, std::ostringstream&)>;
  std::string generic(dtype type, const xlite::shape& s, const std::vector<std::pair<value_id, std::string>>& inputs,
                      const std::vector<std::string>& iterators, const std::string* init, const body_builder& body,
                      const std::string& output_map = "") {
    std::vector<std::pair<std::string, std::string>> named; // value, type
    for (const auto& [id, map] : inputs) {
      named.emplace_back(value(id), tensor_type(g_.instructions[id].type, g_.instructions[id].shape));
    }
    std::vector<dtype> types;
    for (const auto& [id, map] : inputs) types.push_back(g_.instructions[id].type);
    std::vector<std::string> maps;
    for (const auto& [id, map] : inputs) maps.push_back(map);
    return generic_of(type, s, named, types, maps, iterators, init, body, output_map);
  }

  std::string generic_of(dtype type, const xlite::shape& s,
                         const std::vector<std::pair<std::string, std::string>>& inputs,
                         const std::vector<dtype>& input_types, std::vector<std::string> maps,
                         const std::vector<std::string>& iterators, const std::string* init, const body_builder& body,
                         const std::string& output_map = "") {
    const std::string result_type = tensor_type(type, s);
    std::string out = init ? *init : "";
    if (!init) {
      out = fresh();
      line(out + " = tensor.empty() : " + result_type);
    }
    maps.push_back(output_map.empty() ? identity_map(iterators.size()) : output_map);
    std::string head = "linalg.generic {indexing_maps = [";
    for (std::size_t k = 0; k < maps.size(); ++k) head += (k ? ", " : "") + maps[k];
    head += "], iterator_types = [";
    for (std::size_t k = 0; k < iterators.size(); ++k) head += (k ? ", \"" : "\"") + iterators[k] + "\"";
    head += "]}";
    if (!inputs.empty()) {
      head += " ins(";
      for (std::size_t k = 0; k < inputs.size(); ++k) head += (k ? ", " : "") + inputs[k].first;
      head += " : ";
      for (std::size_t k = 0; k < inputs.size(); ++k) head += (k ? ", " : "") + inputs[k].second;
      head += ")";
    }
    head += " outs(" + out + " : " + result_type + ")";
    std::ostringstream region;
    std::vector<std::string> arguments;
    std::string block = "    ^bb0(";
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      arguments.push_back(fresh());
      block += arguments.back() + ": " + std::string(element_type(input_types[k])) + ", ";
    }
    arguments.push_back(fresh()); // the output's element, for reductions
    block += arguments.back() + ": " + std::string(element_type(type)) + "):\n";
    const std::string yielded = body(arguments, region);
    const std::string name = fresh();
    body_ << "    " << name << " = " << head << " {\n" << block << region.str();
    body_ << "    linalg.yield " << yielded << " : " << element_type(type) << "\n    } -> " << result_type << '\n';
    return name;
  }

  std::string elementwise(const instruction& ins) {
    std::vector<std::pair<value_id, std::string>> inputs;
    for (const value_id id : ins.operands) inputs.emplace_back(id, broadcast_map(g_.instructions[id].shape, ins.shape));
    const std::vector<std::string> parallel(ins.shape.rank(), "parallel");
    return generic(ins.type, ins.shape, inputs, parallel, nullptr,
                   [&](const std::vector<std::string>& x, std::ostringstream& out) {
                     if (ins.code == op::cast) return convert(x[0], operand(ins, 0).type, ins.type, out);
                     // Operands in their compute dtype (bf16 and f16 in f32), the op, then the result's dtype.
                     std::vector<std::string> args;
                     dtype compute = dtype::boolean;
                     for (std::size_t k = 0; k < ins.operands.size(); ++k) {
                       const dtype t = operand(ins, k).type;
                       args.push_back(convert(x[k], t, compute_type(t), out));
                       if (!(ins.code == op::where && k == 0)) compute = compute_type(t);
                     }
                     const std::string r = scalar_op(ins.code, compute, args, out);
                     const dtype produced = info(ins.code).rule == dtype_rule::to_boolean ? dtype::boolean : compute;
                     return convert(r, produced, ins.type, out);
                   });
  }

  std::string fill(dtype type, const xlite::shape& s, const literal& v) {
    const std::string element = scalar(v, type, body_);
    const std::string empty = fresh();
    line(empty + " = tensor.empty() : " + tensor_type(type, s));
    const std::string name = fresh();
    line(name + " = linalg.fill ins(" + element + " : " + std::string(element_type(type)) + ") outs(" + empty + " : " +
         tensor_type(type, s) + ") -> " + tensor_type(type, s));
    return name;
  }

  // The tensor `x` (of dtype t) converted element by element to dtype u, optionally divided by `divisor`.
  std::string finish(const std::string& x, dtype t, dtype u, const xlite::shape& s, std::int64_t divisor = 1) {
    if (t == u && divisor == 1) return x;
    return generic_of(
        u, s, {{x, tensor_type(t, s)}}, {t}, {identity_map(s.rank())}, std::vector<std::string>(s.rank(), "parallel"),
        nullptr, [&](const std::vector<std::string>& in, std::ostringstream& out) {
          std::string v = in[0];
          if (divisor != 1) {
            const std::string count = scalar(literal::of(static_cast<double>(divisor)), t, out);
            const std::string q = fresh();
            out << "    " << q << " = arith.divf " << v << ", " << count << " : " << element_type(t) << '\n';
            v = q;
          }
          return convert(v, t, u, out);
        });
  }

  std::string reduction(const instruction& ins) {
    const instruction& x = operand(ins, 0);
    const std::vector<std::int64_t>& axes = ins.attrs.ints;
    const auto reduced = [&](std::size_t a) {
      return std::ranges::find(axes, static_cast<std::int64_t>(a)) != axes.end();
    };
    std::vector<std::int64_t> kept;
    std::vector<std::string> iterators, out_dims;
    std::int64_t count = 1;
    for (std::size_t a = 0; a < x.shape.rank(); ++a) {
      iterators.emplace_back(reduced(a) ? "reduction" : "parallel");
      if (reduced(a)) {
        count *= x.shape[a];
      } else {
        kept.push_back(x.shape[a]);
        out_dims.push_back(dim(a));
      }
    }
    const xlite::shape kept_shape(kept);
    const dtype accumulator = compute_type(ins.type);
    const op code = ins.code;
    const bool fp = is_floating_point(accumulator);
    literal identity{};
    if (code == op::prod) identity = literal::of(1.0);
    if (code == op::max || code == op::min) {
      if (fp) {
        identity = literal::of(code == op::max ? -HUGE_VAL : HUGE_VAL);
      } else { // the type's own extreme
        const auto [low, high] = integer_range(accumulator);
        identity = literal::of(code == op::max ? low : high);
      }
    }
    const std::string init = fill(accumulator, kept_shape, identity);
    const std::string sum = generic(
        accumulator, kept_shape, {{ins.operands[0], identity_map(x.shape.rank())}}, iterators, &init,
        [&](const std::vector<std::string>& in, std::ostringstream& out) {
          const std::string v = convert(in[0], x.type, accumulator, out);
          const op combine = code == op::sum || code == op::mean ? op::add
                             : code == op::prod                  ? op::mul
                             : code == op::max                   ? op::maximum
                                                                 : op::minimum;
          return scalar_op(combine, accumulator, {in[1], v}, out);
        },
        affine_map(x.shape.rank(), out_dims));
    const std::string result = finish(sum, accumulator, ins.type, kept_shape, code == op::mean ? count : 1);
    return reshape(result, kept_shape, ins.shape, ins.type);
  }

  // x of shape `from` as shape `to` (same elements, row-major): collapsed to one dimension
  // and expanded again, through rank 0 when there is one element.
  std::string reshape(const std::string& x, const xlite::shape& from, const xlite::shape& to, dtype t) {
    if (from == to) return x;
    const auto group = [](std::size_t rank) {
      std::string text = "[[";
      for (std::size_t d = 0; d < rank; ++d) text += (d ? ", " : "") + std::to_string(d);
      return text + "]]";
    };
    const xlite::shape flat{from.numel()};
    std::string v = x;
    if (from.rank() != 1) {
      const std::string name = fresh();
      if (from.rank() == 0) {
        line(name + " = tensor.expand_shape " + v + " [] : " + tensor_type(t, from) + " into " + tensor_type(t, flat));
      } else {
        line(name + " = tensor.collapse_shape " + v + " " + group(from.rank()) + " : " + tensor_type(t, from) +
             " into " + tensor_type(t, flat));
      }
      v = name;
    }
    if (to.rank() != 1) {
      const std::string name = fresh();
      if (to.rank() == 0) {
        line(name + " = tensor.collapse_shape " + v + " [] : " + tensor_type(t, flat) + " into " + tensor_type(t, to));
      } else {
        line(name + " = tensor.expand_shape " + v + " " + group(to.rank()) + " : " + tensor_type(t, flat) + " into " +
             tensor_type(t, to));
      }
      v = name;
    }
    return v;
  }

  std::string permute(const instruction& ins) {
    // Output dimension j reads input dimension perm[j].
    std::vector<std::string> reads(ins.shape.rank());
    for (std::size_t j = 0; j < ins.attrs.ints.size(); ++j) reads[static_cast<std::size_t>(ins.attrs.ints[j])] = dim(j);
    return generic(ins.type, ins.shape, {{ins.operands[0], affine_map(ins.shape.rank(), reads)}},
                   std::vector<std::string>(ins.shape.rank(), "parallel"), nullptr,
                   [](const std::vector<std::string>& in, std::ostringstream&) { return in[0]; });
  }

  std::string iota(const instruction& ins) {
    const auto axis = ins.attrs.ints[0];
    return generic(ins.type, ins.shape, {}, std::vector<std::string>(ins.shape.rank(), "parallel"), nullptr,
                   [&](const std::vector<std::string>&, std::ostringstream& out) {
                     const std::string index = fresh(), wide = fresh();
                     out << "    " << index << " = linalg.index " << axis << " : index\n";
                     out << "    " << wide << " = arith.index_cast " << index << " : index to i64\n";
                     return convert(wide, dtype::i64, ins.type, out);
                   });
  }

  static std::string list(const std::vector<std::int64_t>& values) {
    std::string text = "[";
    for (std::size_t k = 0; k < values.size(); ++k) text += (k ? ", " : "") + std::to_string(values[k]);
    return text + "]";
  }

  std::string slice(const instruction& ins) {
    std::vector<std::int64_t> offsets, sizes(ins.shape.begin(), ins.shape.end()), strides;
    for (std::size_t a = 0; a < ins.shape.rank(); ++a) {
      offsets.push_back(ins.attrs.ints[3 * a]);
      strides.push_back(ins.attrs.ints[3 * a + 2]);
    }
    const std::string name = fresh();
    line(name + " = tensor.extract_slice " + value(ins.operands[0]) + list(offsets) + list(sizes) + list(strides) +
         " : " + tensor_type(ins.type, operand(ins, 0).shape) + " to " + tensor_type(ins.type, ins.shape));
    return name;
  }

  std::string concat(const instruction& ins) {
    const auto axis = static_cast<std::size_t>(ins.attrs.ints[0]);
    std::string into = fresh();
    line(into + " = tensor.empty() : " + tensor_type(ins.type, ins.shape));
    std::int64_t at = 0;
    for (std::size_t k = 0; k < ins.operands.size(); ++k) {
      const xlite::shape& part = operand(ins, k).shape;
      std::vector<std::int64_t> offsets(ins.shape.rank(), 0), sizes(part.begin(), part.end()),
          strides(ins.shape.rank(), 1);
      offsets[axis] = at;
      at += part[axis];
      const std::string name = fresh();
      line(name + " = tensor.insert_slice " + value(ins.operands[k]) + " into " + into + list(offsets) + list(sizes) +
           list(strides) + " : " + tensor_type(ins.type, part) + " into " + tensor_type(ins.type, ins.shape));
      into = name;
    }
    return into;
  }

  std::string pad(const instruction& ins) {
    std::vector<std::int64_t> low, high;
    for (std::size_t a = 0; a < ins.shape.rank(); ++a) {
      low.push_back(ins.attrs.ints[2 * a]);
      high.push_back(ins.attrs.ints[2 * a + 1]);
    }
    const std::string fill_value = scalar(ins.attrs.value, ins.type, body_);
    const std::string name = fresh();
    std::string indices;
    for (std::size_t a = 0; a < ins.shape.rank(); ++a) indices += (a ? ", " : "") + fresh() + ": index";
    line(name + " = tensor.pad " + value(ins.operands[0]) + " low" + list(low) + " high" + list(high) +
         " {\n    ^bb0(" + indices + "):\n      tensor.yield " + fill_value + " : " +
         std::string(element_type(ins.type)) + "\n    } : " + tensor_type(ins.type, operand(ins, 0).shape) + " to " +
         tensor_type(ins.type, ins.shape));
    return name;
  }

  // (..., m, k) x (..., k, n) over the iteration space (batch..., m, n, k), with the
  // transposes and the batch broadcast in the indexing maps; multiply-adds are fma for
  // floats, accumulated in float32 for 16-bit floats.
  std::string matmul(const instruction& ins) {
    const std::size_t batch = ins.shape.rank() - 2;
    const std::size_t m = batch, n = batch + 1, k = batch + 2;
    const auto operand_map = [&](std::size_t which, bool transposed, std::size_t rows, std::size_t cols) {
      const xlite::shape& s = operand(ins, which).shape;
      const std::size_t own_batch = s.rank() - 2;
      std::vector<std::string> results;
      for (std::size_t a = 0; a < own_batch; ++a) {
        const std::size_t d = a + batch - own_batch;
        results.push_back(s[a] == 1 && ins.shape[d] != 1 ? "0" : dim(d));
      }
      results.push_back(dim(transposed ? cols : rows));
      results.push_back(dim(transposed ? rows : cols));
      return affine_map(batch + 3, results);
    };
    std::vector<std::string> iterators(batch + 2, "parallel");
    iterators.emplace_back("reduction");
    std::vector<std::string> out_dims;
    for (std::size_t d = 0; d < batch + 2; ++d) out_dims.push_back(dim(d));
    const dtype accumulator = compute_type(ins.type);
    const std::string init = fill(accumulator, ins.shape, literal{});
    const std::string product = generic(
        accumulator, ins.shape,
        {{ins.operands[0], operand_map(0, ins.attrs.ints[0] != 0, m, k)},
         {ins.operands[1], operand_map(1, ins.attrs.ints[1] != 0, k, n)}},
        iterators, &init,
        [&](const std::vector<std::string>& in, std::ostringstream& out) {
          const std::string a = convert(in[0], operand(ins, 0).type, accumulator, out);
          const std::string b = convert(in[1], operand(ins, 1).type, accumulator, out);
          return scalar_op(op::fma, accumulator, {a, b, in[2]}, out);
        },
        affine_map(batch + 3, out_dims));
    return finish(product, accumulator, ins.type, ins.shape);
  }

  const graph& g_;
  std::vector<std::string> values_;
  std::ostringstream body_;
  std::size_t next_ = 0;
};

} // namespace detail

// The graph as an MLIR module with one function named `function`.
inline std::string to_mlir(const graph& g, std::string_view function = "main") {
  return detail::mlir_printer(g).module(function);
}

} // namespace xlite::ir
