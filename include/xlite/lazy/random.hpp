#pragma once

// Random tensors, drawn on the device. Each device has an RNG state: a seed and the number
// of draws made since it was set (PyTorch/XLA's xm.set_rng_state / xm.get_rng_state). Each
// rand_uniform or rand_normal call takes the next draw's key from the state and records a
// node keyed by it; the key is a graph parameter, so a training step that draws dropout
// masks compiles once and still gets new numbers at every step. The numbers themselves come
// from Philox4x32-10 (kernels/random.hpp): the same seed gives the same tensors, whatever
// the thread count.

#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

#include "xlite/core/dtype.hpp"
#include "xlite/core/error.hpp"
#include "xlite/core/shape.hpp"
#include "xlite/ir/build.hpp"
#include "xlite/kernels/random.hpp"
#include "xlite/lazy/ops.hpp"
#include "xlite/lazy/tensor.hpp"
#include "xlite/runtime/device.hpp"

namespace xlite::lazy {

struct rng_state {
  std::uint64_t seed = 0;
  std::uint64_t draws = 0; // draws made from this seed
  friend bool operator==(const rng_state&, const rng_state&) = default;
};

namespace detail {

struct rng_registry {
  std::mutex mutex;
  std::vector<rng_state> by_device = std::vector<rng_state>(static_cast<std::size_t>(device_count()));
};

inline rng_registry& rngs() {
  static rng_registry r;
  return r;
}

// The key of the next draw on d, as a graph parameter; advances d's state.
inline ir::node_ptr next_key(const xlite::device& d) {
  rng_registry& r = rngs();
  std::uint64_t key = 0;
  {
    std::scoped_lock lock(r.mutex);
    rng_state& state = r.by_device[static_cast<std::size_t>(d.ordinal())];
    const kernels::philox_block bits = kernels::random_bits(state.seed, state.draws++);
    key = std::uint64_t{bits[0]} << 32 | bits[1];
  }
  return scalar_parameter(static_cast<std::int64_t>(key), dtype::i64, d);
}

inline tensor draw(op code, const shape& s, dtype type, const xlite::device& d, ir::node_ptr key) {
  if (!is_floating_point(type)) {
    throw dtype_error(xlite::detail::message(code == op::random_uniform ? "rand_uniform" : "rand_normal",
                                             ": draws are floating point, not ", name(type)));
  }
  return make(d, ir::random(code, std::move(key), type, s));
}

inline tensor scaled(const tensor& unit, double scale, double shift) {
  return scale == 1 && shift == 0 ? unit : unit * scale + shift;
}

inline void check_uniform_range(double low, double high) {
  if (!(low < high) || !std::isfinite(high - low)) {
    throw value_error(xlite::detail::message("rand_uniform: needs finite low < high, got [", low, ", ", high, ")"));
  }
}

inline void check_normal(double mean, double stddev) {
  if (!(stddev >= 0) || !std::isfinite(stddev) || !std::isfinite(mean)) {
    throw value_error(xlite::detail::message("rand_normal: needs a finite mean and stddev >= 0, got ", mean, ", ",
                                             stddev));
  }
}

} // namespace detail

// Restarts d's generator from `seed`.
inline void set_rng_state(std::uint64_t seed, const xlite::device& d = xlite::device()) {
  detail::rng_registry& r = detail::rngs();
  std::scoped_lock lock(r.mutex);
  r.by_device[static_cast<std::size_t>(d.ordinal())] = {seed, 0};
}

inline rng_state get_rng_state(const xlite::device& d = xlite::device()) {
  detail::rng_registry& r = detail::rngs();
  std::scoped_lock lock(r.mutex);
  return r.by_device[static_cast<std::size_t>(d.ordinal())];
}

// Uniform draws from [0, 1) scaled to [low, high) (torch.rand(...) * (high - low) + low; as
// there, the scaling's rounding may give `high` itself). A draw has the dtype's precision:
// bfloat16 draws from [0, 1) are multiples of 2^-8.
inline tensor rand_uniform(const shape& s, double low = 0, double high = 1, dtype type = dtype::f32,
                           const xlite::device& d = xlite::device()) {
  detail::check_uniform_range(low, high);
  return detail::scaled(detail::draw(op::random_uniform, s, type, d, detail::next_key(d)), high - low, low);
}

// Normal draws with mean `mean` and standard deviation `stddev` (torch.randn scaled).
inline tensor rand_normal(const shape& s, double mean = 0, double stddev = 1, dtype type = dtype::f32,
                          const xlite::device& d = xlite::device()) {
  detail::check_normal(mean, stddev);
  return detail::scaled(detail::draw(op::random_normal, s, type, d, detail::next_key(d)), stddev, mean);
}

// Draws keyed by `key`, a rank-0 int64 tensor, instead of by the device's state (as
// jax.random does): equal keys give equal draws, distinct keys independent ones. A body of
// while_loop is traced once, so a rand_* call in it draws once, before the loop; a key
// computed from the loop's state (its trip counter) draws anew on every trip.
inline tensor rand_uniform(const shape& s, const tensor& key, double low = 0, double high = 1,
                           dtype type = dtype::f32) {
  detail::check_uniform_range(low, high);
  return detail::scaled(detail::draw(op::random_uniform, s, type, key.device(), key.node()), high - low, low);
}

inline tensor rand_normal(const shape& s, const tensor& key, double mean = 0, double stddev = 1,
                          dtype type = dtype::f32) {
  detail::check_normal(mean, stddev);
  return detail::scaled(detail::draw(op::random_normal, s, type, key.device(), key.node()), stddev, mean);
}

} // namespace xlite::lazy
