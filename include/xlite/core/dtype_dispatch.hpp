#pragma once

// From a run-time dtype to its C++ element type: visit_dtype(t, f) calls f with a
// std::type_identity of the type, so code that works on raw buffers is written once as a
// template and instantiated for each dtype.

#include <cstdint>
#include <type_traits>

#include "xlite/core/bfloat16.hpp"
#include "xlite/core/dtype.hpp"
#include "xlite/core/float16.hpp"

namespace xlite {

template <class F>
decltype(auto) visit_dtype(dtype t, F&& f) {
  switch (t) {
  case dtype::boolean:
    return f(std::type_identity<bool>{});
  case dtype::u8:
    return f(std::type_identity<std::uint8_t>{});
  case dtype::i8:
    return f(std::type_identity<std::int8_t>{});
  case dtype::i32:
    return f(std::type_identity<std::int32_t>{});
  case dtype::i64:
    return f(std::type_identity<std::int64_t>{});
  case dtype::f16:
    return f(std::type_identity<float16>{});
  case dtype::bf16:
    return f(std::type_identity<bfloat16>{});
  case dtype::f32:
    return f(std::type_identity<float>{});
  case dtype::f64:
    break;
  }
  return f(std::type_identity<double>{});
}

} // namespace xlite
