#pragma once

// Each collective against its definition over 8 global devices, on random shapes, dtypes and
// replica groups: run by tests/runtime/collectives.cpp with the 8 devices in one process and
// by tests/mpi/collectives.cpp with them spread over processes. Each process makes every
// device's input from the same seed, runs its own devices, and checks their results.

#include <xlite/runtime/collectives.hpp>
#include <xlite/runtime/processes.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace xlite_test {

using xlite::bfloat16;
using xlite::shape;
using xlite::runtime::buffer_ptr;
using xlite::runtime::device_collectives;
using xlite::runtime::reduce_type;
using xlite::runtime::replica_groups;

constexpr std::int64_t devices = 8;

// Whether global device d is this process's (all are, but in tests/mpi).
inline bool is_local(std::int64_t d) { return xlite::runtime::process_of(d) == xlite::runtime::process_index(); }

// Runs body(device) on one thread per device of this process; returns each device's exception (or null).
inline std::vector<std::exception_ptr> on_every_device(const std::function<void(std::int64_t)>& body) {
  std::vector<std::exception_ptr> errors(devices);
  std::vector<std::thread> threads;
  for (std::int64_t d = 0; d < devices; ++d) {
    if (!is_local(d)) continue;
    threads.emplace_back([&, d] {
      try {
        body(d);
      } catch (...) {
        errors[static_cast<std::size_t>(d)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

inline void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t d = 0; d < errors.size(); ++d) {
    if (errors[d]) FAIL("device " << d << ": " << what(errors[d]));
  }
}

// Random replica groups of equal size over the 8 devices, members shuffled.
inline replica_groups random_groups(std::mt19937_64& rng) {
  const std::int64_t size = std::int64_t{1} << (rng() % 4); // 1, 2, 4 or 8
  std::vector<std::int64_t> ids(devices);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  replica_groups groups;
  for (std::int64_t k = 0; k < devices; k += size) groups.emplace_back(ids.begin() + k, ids.begin() + k + size);
  return groups;
}

inline const std::vector<std::int64_t>& group_of(const replica_groups& groups, std::int64_t d) {
  for (const auto& g : groups) {
    if (std::ranges::find(g, d) != g.end()) return g;
  }
  throw std::logic_error("no group");
}

inline std::size_t position(const std::vector<std::int64_t>& group, std::int64_t d) {
  return static_cast<std::size_t>(std::ranges::find(group, d) - group.begin());
}

template <class T>
inline buffer_ptr random_buffer(const shape& s, std::mt19937_64& rng) {
  const buffer_ptr b = xlite::runtime::make_buffer(xlite::dtype_of_v<T>, s);
  std::normal_distribution<double> normal(0.0, 4.0);
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      b->as<T>()[i] = rng() % 3 != 0;
    } else if constexpr (std::is_integral_v<T>) {
      b->as<T>()[i] = static_cast<T>(static_cast<std::int64_t>(rng() % 2001) - 1000);
    } else {
      b->as<T>()[i] = static_cast<T>(normal(rng));
    }
  }
  return b;
}

// Row-major helpers for the reference results.
inline std::vector<std::int64_t> unravel(std::int64_t flat, const shape& s) {
  std::vector<std::int64_t> index(s.rank());
  for (std::size_t axis = s.rank(); axis-- > 0;) {
    index[axis] = flat % s[axis];
    flat /= s[axis];
  }
  return index;
}

inline std::int64_t ravel(const std::vector<std::int64_t>& index, const shape& s) {
  std::int64_t flat = 0;
  for (std::size_t axis = 0; axis < s.rank(); ++axis) flat = flat * s[axis] + index[axis];
  return flat;
}

// The reduction's definition, member by member in group order: sum of float32 in float32,
// of bfloat16 in float then rounded once, of integers with wrap-around.
template <class T>
inline T reduce_reference(const std::vector<T>& values, reduce_type r, double scale) {
  using A = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;
  A acc = static_cast<A>(values[0]);
  for (std::size_t k = 1; k < values.size(); ++k) {
    const A v = static_cast<A>(values[k]);
    if constexpr (std::is_same_v<T, bool>) {
      acc = r == reduce_type::sum || r == reduce_type::max || r == reduce_type::logical_or ? (acc || v) : (acc && v);
    } else if (r == reduce_type::sum) {
      if constexpr (std::is_integral_v<A>) {
        acc = static_cast<A>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(v));
      } else {
        acc = acc + v;
      }
    } else if (r == reduce_type::max) {
      acc = acc != acc ? acc : (v != v ? v : std::max(acc, v));
    } else {
      acc = acc != acc ? acc : (v != v ? v : std::min(acc, v));
    }
  }
  if constexpr (std::is_floating_point_v<A>) acc = static_cast<A>(acc * static_cast<A>(scale));
  return static_cast<T>(acc);
}

template <class T>
inline bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Each collective against its definition, on random shapes and replica groups.
template <class T>
inline void check_collectives(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  device_collectives collectives;
  for (int round = 0; round < 12; ++round) {
    const replica_groups groups = random_groups(rng);
    const auto members = static_cast<std::int64_t>(groups[0].size());
    const std::size_t rank = 1 + rng() % 3;
    std::vector<std::int64_t> dims(rank);
    for (auto& d : dims) d = 1 + static_cast<std::int64_t>(rng() % 5);
    const std::size_t dim = rng() % rank;
    const std::size_t other = rng() % rank;
    dims[dim] *= members; // so that it splits into the group's parts
    dims[other] *= members;
    const shape s(dims);
    std::vector<buffer_ptr> inputs;
    for (std::int64_t d = 0; d < devices; ++d) inputs.push_back(random_buffer<T>(s, rng));
    std::vector<reduce_type> reductions = {reduce_type::sum, reduce_type::max, reduce_type::min};
    const reduce_type r = reductions[rng() % reductions.size()];
    const double scale = std::is_floating_point_v<T> || std::is_same_v<T, bfloat16> ? 0.5 : 1.0;
    INFO("shape " << s << ", dim " << dim << ", other " << other << ", groups of " << members << ", " << name(r));

    std::vector<buffer_ptr> reduced(devices), gathered(devices), scattered(devices), exchanged(devices);
    require_no_errors(on_every_device([&](std::int64_t d) {
      const auto i = static_cast<std::size_t>(d);
      reduced[i] = collectives.all_reduce(d, inputs[i], r, scale, groups);
      gathered[i] = collectives.all_gather(d, inputs[i], dim, groups);
      scattered[i] = collectives.reduce_scatter(d, inputs[i], r, scale, dim, groups);
      exchanged[i] = collectives.all_to_all(d, inputs[i], dim, other, members, groups);
    }));

    for (std::int64_t d = 0; d < devices; ++d) {
      if (!is_local(d)) continue;
      const auto i = static_cast<std::size_t>(d);
      const auto& group = group_of(groups, d);
      const std::size_t p = position(group, d);
      const auto input = [&](std::size_t k, std::int64_t flat) {
        return inputs[static_cast<std::size_t>(group[k])]->as<T>()[flat];
      };
      const auto reference = [&](std::int64_t flat) {
        std::vector<T> values;
        for (std::size_t k = 0; k < group.size(); ++k) values.push_back(input(k, flat));
        return reduce_reference(values, r, scale);
      };
      // all_reduce: every element reduced over the group.
      REQUIRE(reduced[i]->shape() == s);
      for (std::int64_t e = 0; e < s.numel(); ++e) CHECK(same_bits(reduced[i]->as<T>()[e], reference(e)));

      // all_gather: member k's input at [k * n, (k + 1) * n) along dim.
      shape gathered_shape = s;
      {
        std::vector<std::int64_t> g = dims;
        g[dim] *= members;
        gathered_shape = shape(g);
      }
      REQUIRE(gathered[i]->shape() == gathered_shape);
      for (std::int64_t e = 0; e < gathered_shape.numel(); ++e) {
        std::vector<std::int64_t> at = unravel(e, gathered_shape);
        const auto k = static_cast<std::size_t>(at[dim] / dims[dim]);
        at[dim] %= dims[dim];
        CHECK(same_bits(gathered[i]->as<T>()[e], input(k, ravel(at, s))));
      }

      // reduce_scatter: this member's part along dim of the reduction.
      std::vector<std::int64_t> part = dims;
      part[dim] /= members;
      const shape part_shape(part);
      REQUIRE(scattered[i]->shape() == part_shape);
      for (std::int64_t e = 0; e < part_shape.numel(); ++e) {
        std::vector<std::int64_t> at = unravel(e, part_shape);
        at[dim] += part[dim] * static_cast<std::int64_t>(p);
        CHECK(same_bits(scattered[i]->as<T>()[e], reference(ravel(at, s))));
      }

      // all_to_all: part p (along dim) of each member's input, concatenated along other.
      std::vector<std::int64_t> out = part;
      out[other] *= members;
      const shape out_shape(out);
      REQUIRE(exchanged[i]->shape() == out_shape);
      for (std::int64_t e = 0; e < out_shape.numel(); ++e) {
        std::vector<std::int64_t> at = unravel(e, out_shape);
        const auto k = static_cast<std::size_t>(at[other] / part[other]);
        at[other] %= part[other];
        at[dim] += part[dim] * static_cast<std::int64_t>(p);
        CHECK(same_bits(exchanged[i]->as<T>()[e], input(k, ravel(at, s))));
      }
    }
  }
}

} // namespace xlite_test
