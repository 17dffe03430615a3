#pragma once

// Automatic mixed precision: which dtype each op computes in. A policy is a property of
// compilation, as PyTorch/XLA's XLA_USE_BF16 is: the program a user traces keeps its
// dtypes (a float32 tensor reports float32 and comes back to the host as float32), and the
// compiler runs it in the precision the policy asks for (amp/autocast.hpp).
//
// The modes:
//   fp32           as traced.
//   autocast       matmuls (and so conv2d and linear) multiply bf16 operands and accumulate
//                  in fp32, with an fp32 result; everything else as traced. The TPU's
//                  numerics, and the fast path of AMX and AVX512_BF16.
//   use_bf16       XLITE_USE_BF16=1: float32 and float64 compute in bf16, except the ops
//                  kept in fp32 below; matmuls as in autocast.
//   downcast_bf16  XLITE_DOWNCAST_BF16=1: float32 computes in bf16, float64 in float32,
//                  except the ops kept in fp32.
//
// The lists follow PyTorch's autocast lists for the CPU: the ops that gain from bf16 and
// lose little (matmul) run in bf16; the ops whose range or accumulated error suffers in
// bf16 (exp, log, pow, division, the square roots, sums, means, products) stay in fp32.
// softmax, log_softmax and the losses are composites of those ops, so they stay fp32 too.

#include <cstdint>
#include <mutex>
#include <string_view>

#include "xlite/core/dtype.hpp"
#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/op.hpp"

namespace xlite::amp {

enum class mode : std::uint8_t { fp32, autocast, use_bf16, downcast_bf16 };

constexpr std::string_view name(mode m) {
  switch (m) {
  case mode::fp32: return "fp32";
  case mode::autocast: return "autocast";
  case mode::use_bf16: return "use_bf16";
  case mode::downcast_bf16: return "downcast_bf16";
  }
  return "?";
}

struct policy {
  amp::mode mode = mode::fp32;

  // Ops that multiply bf16 operands and accumulate in fp32, in every mode but fp32.
  static constexpr bool runs_in_bf16(op o) { return o == op::matmul; }

  // Ops that compute in fp32 in the bf16 modes.
  static constexpr bool keeps_fp32(op o) {
    switch (o) {
    case op::exp:
    case op::log:
    case op::log1p:
    case op::pow:
    case op::div:
    case op::sqrt:
    case op::rsqrt:
    case op::sum:
    case op::mean:
    case op::prod: return true;
    default: return false;
    }
  }

  // The dtype a value declared as `declared` is stored and computed in.
  constexpr dtype storage(dtype declared) const {
    if (mode == mode::use_bf16 && (declared == dtype::f32 || declared == dtype::f64)) return dtype::bf16;
    if (mode == mode::downcast_bf16 && declared == dtype::f32) return dtype::bf16;
    if (mode == mode::downcast_bf16 && declared == dtype::f64) return dtype::f32;
    return declared;
  }

  friend bool operator==(const policy&, const policy&) = default;
};

namespace detail {

struct policy_state {
  std::mutex mutex;
  policy current;
  bool from_environment_read = false;
};

inline policy_state& state() {
  static policy_state s;
  return s;
}

inline policy from_environment() {
  const bool use = env_integer("XLITE_USE_BF16", 0, 1).value_or(0) == 1;
  const bool downcast = env_integer("XLITE_DOWNCAST_BF16", 0, 1).value_or(0) == 1;
  if (use && downcast) {
    throw config_error("XLITE_USE_BF16 and XLITE_DOWNCAST_BF16 are both set; they are two different policies, "
                       "set one");
  }
  return {use ? mode::use_bf16 : downcast ? mode::downcast_bf16 : mode::fp32};
}

} // namespace detail

// The policy the next barrier compiles with: XLITE_USE_BF16 or XLITE_DOWNCAST_BF16 when
// set, until set_policy() says otherwise.
inline policy current_policy() {
  auto& s = detail::state();
  std::scoped_lock lock(s.mutex);
  if (!s.from_environment_read) {
    s.current = detail::from_environment();
    s.from_environment_read = true;
  }
  return s.current;
}

inline void set_policy(policy p) {
  auto& s = detail::state();
  std::scoped_lock lock(s.mutex);
  s.current = p;
  s.from_environment_read = true;
}

// Sets a policy for a scope and restores the previous one (the barriers inside the scope
// compile with it).
class policy_scope {
public:
  explicit policy_scope(policy p) : previous_(current_policy()) { set_policy(p); }
  ~policy_scope() { set_policy(previous_); }
  policy_scope(const policy_scope&) = delete;
  policy_scope& operator=(const policy_scope&) = delete;

private:
  policy previous_;
};

} // namespace xlite::amp
