#pragma once

// The reference side of the expression tests, written without the code under test: random
// shapes and data, NumPy broadcasting by index arithmetic, naive loops in double or long
// double, distances in ULPs, and digests of result bits. Only xlite::tensor and
// xlite::shape (as containers) are used from the library.

#include <xlite/expr.hpp>

#include <catch2/catch.hpp>

#include "isa_paths.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace xlite_test {

using xlite::shape;
using xlite::tensor;
using rng = std::mt19937_64;

// ---- random data ------------------------------------------------------------------------------

inline double uniform(rng& g, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
inline std::int64_t integer(rng& g, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(g);
}
inline bool chance(rng& g, double p) { return uniform(g, 0, 1) < p; }

// Where an operand's values are drawn from: one or two parts, each picked with equal
// probability, plus a rate of special values (NaN, +-Inf, +-0).
struct part {
  enum kind_t : std::uint8_t {
    uniform,   // uniform in [lo, hi]
    magnitude, // +-2^u, u uniform in [lo, hi] (sign random if `negative`, else positive)
    integers,  // an integer in [lo, hi]
    quarters,  // k / 4 for an integer k in [4 lo, 4 hi]: exact halves for rounding
  } kind = uniform;
  double lo = 0, hi = 1;
  bool negative = true; // magnitude: both signs
};

struct domain {
  part first{};
  part second = first;
  double specials = 0; // rate of NaN, +Inf, -Inf, +0, -0 (floating point only)
};

inline double draw(rng& g, const part& p) {
  switch (p.kind) {
  case part::uniform:
    return uniform(g, p.lo, p.hi);
  case part::magnitude: {
    const double m = std::exp2(uniform(g, p.lo, p.hi));
    return p.negative && chance(g, 0.5) ? -m : m;
  }
  case part::integers:
    return static_cast<double>(integer(g, static_cast<std::int64_t>(p.lo), static_cast<std::int64_t>(p.hi)));
  case part::quarters:
    return static_cast<double>(integer(g, static_cast<std::int64_t>(4 * p.lo), static_cast<std::int64_t>(4 * p.hi))) /
           4;
  }
  return 0;
}

template <class T>
T draw(rng& g, const domain& d) {
  if constexpr (std::is_floating_point_v<T>) {
    if (d.specials > 0 && chance(g, d.specials)) {
      constexpr T inf = std::numeric_limits<T>::infinity();
      const T specials[] = {std::numeric_limits<T>::quiet_NaN(), inf, -inf, T(0), -T(0)};
      return specials[integer(g, 0, 4)];
    }
  }
  const part& p = chance(g, 0.5) ? d.first : d.second;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (p.kind == part::integers) { // every bit of a 64-bit integer, which a double would lose
      return static_cast<T>(integer(g, static_cast<std::int64_t>(p.lo), static_cast<std::int64_t>(p.hi)));
    }
  }
  const double v = draw(g, p);
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
tensor<T> random_tensor(rng& g, const shape& s, const domain& d) {
  tensor<T> t(tensor<T>::uninitialized, s);
  for (T& v : t) v = draw<T>(g, d);
  return t;
}

template <class T>
tensor<T> random_tensor(rng& g, const shape& s, double lo, double hi) {
  return random_tensor<T>(g, s, domain{{part::uniform, lo, hi}});
}

inline tensor<bool> random_mask(rng& g, const shape& s, double p_true = 0.5) {
  tensor<bool> t(tensor<bool>::uninitialized, s);
  for (bool& v : t) v = chance(g, p_true);
  return t;
}

// ---- shapes and broadcasting ------------------------------------------------------------------

// NumPy's rule, written out again: shapes aligned at the last dimension, 1 stretches.
inline shape broadcast(std::span<const shape> shapes) {
  std::size_t rank = 0;
  for (const shape& s : shapes) rank = std::max(rank, s.rank());
  std::vector<std::int64_t> dims(rank, 1);
  for (const shape& s : shapes) {
    for (std::size_t i = 0; i < s.rank(); ++i) {
      std::int64_t& d = dims[rank - s.rank() + i];
      if (s[i] != 1) d = s[i];
    }
  }
  return shape(dims);
}

inline shape broadcast(std::initializer_list<shape> shapes) {
  return broadcast(std::span(shapes.begin(), shapes.size()));
}

// For each element of `out` in row-major order, the flat index of the element of an operand
// of shape `in` that broadcasting reads.
inline std::vector<std::int64_t> broadcast_index(const shape& out, const shape& in) {
  const std::size_t rank = out.rank();
  std::vector<std::int64_t> in_stride(rank, 0);
  std::int64_t stride = 1;
  for (std::size_t i = in.rank(); i-- > 0;) {
    const std::size_t d = rank - in.rank() + i;
    in_stride[d] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  std::vector<std::int64_t> map(static_cast<std::size_t>(out.numel()));
  std::vector<std::int64_t> index(rank, 0);
  for (std::size_t flat = 0; flat < map.size(); ++flat) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset += index[d] * in_stride[d];
    map[flat] = offset;
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d]) break;
      index[d] = 0;
    }
  }
  return map;
}

// A shape that broadcasts to `out`: a suffix of it (sometimes shorter), with some
// dimensions set to 1.
inline shape broadcastable_to(rng& g, const shape& out) {
  const std::size_t keep =
      chance(g, 0.6) ? out.rank() : static_cast<std::size_t>(integer(g, 0, static_cast<std::int64_t>(out.rank())));
  std::vector<std::int64_t> dims;
  for (std::size_t i = out.rank() - keep; i < out.rank(); ++i) dims.push_back(chance(g, 0.3) ? 1 : out[i]);
  return shape(dims);
}

// The operand shapes an op of `arity` is tested on: every rank from 0 to 5 with random
// broadcasting between the operands, sizes that are no multiple of any SIMD width, long
// rows (SIMD bodies and tails), rows broadcast along either axis, rank 0 against rank 1,
// single elements and empty tensors.
inline std::vector<std::vector<shape>> shape_cases(std::size_t arity, rng& g) {
  std::vector<std::vector<shape>> cases;
  const auto same = [&](const shape& s) { return std::vector<shape>(arity, s); };
  // Random shapes, each rank 0 to 5, dimensions 1 to a bound that keeps sizes moderate.
  const std::int64_t max_dim[] = {1, 70, 19, 9, 6, 5};
  for (std::size_t rank = 0; rank <= 5; ++rank) {
    for (int k = 0; k < 4; ++k) {
      std::vector<std::int64_t> dims;
      for (std::size_t d = 0; d < rank; ++d) dims.push_back(integer(g, 1, max_dim[rank]));
      const shape out(dims);
      std::vector<shape> operands;
      for (std::size_t i = 0; i < arity; ++i) operands.push_back(k == 0 ? out : broadcastable_to(g, out));
      cases.push_back(operands);
    }
  }
  cases.push_back(same(shape{1003})); // 1000 + 3: SIMD body and a tail on every width
  cases.push_back(same(shape{1}));
  cases.push_back(same(shape{7}));
  cases.push_back(same(shape{33}));
  if (arity >= 2) {
    std::vector<shape> rows = same(shape{5, 203});
    rows[1] = shape{203}; // a row repeated down the rows
    cases.push_back(rows);
    std::vector<shape> columns = same(shape{203, 5});
    columns[0] = shape{203, 1}; // a column repeated along the rows: stride 0 inside each row
    cases.push_back(columns);
    std::vector<shape> scalar = same(shape{131});
    scalar[1] = shape{}; // rank 0 against rank 1
    cases.push_back(scalar);
    std::vector<shape> outer = same(shape{1, 37});
    outer[0] = shape{29, 1}; // an outer product: each operand broadcast along one axis
    cases.push_back(outer);
  }
  if (arity >= 3) {
    cases.push_back({shape{}, shape{3, 1, 41}, shape{4, 1}});
  }
  cases.push_back(same(shape{0}));
  cases.push_back(same(shape{3, 0, 2}));
  if (arity >= 2) {
    std::vector<shape> empty = same(shape{4, 0});
    empty[1] = shape{1};
    cases.push_back(empty);
  }
  return cases;
}

inline std::string describe(std::span<const shape> shapes) {
  std::ostringstream out;
  for (std::size_t i = 0; i < shapes.size(); ++i) out << (i > 0 ? " and " : "") << shapes[i];
  return out.str();
}

// ---- ULP distances ----------------------------------------------------------------------------

// The IEEE bit pattern as a signed integer that orders like the values (-0 and +0 are both 0).
template <class T>
std::int64_t ordered(T x) {
  using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  I i;
  std::memcpy(&i, &x, sizeof x);
  return i < 0 ? -static_cast<std::int64_t>(i & std::numeric_limits<I>::max()) : static_cast<std::int64_t>(i);
}

inline constexpr std::uint64_t infinite_ulps = std::numeric_limits<std::uint64_t>::max();

// How many representable values of T lie between a and b: 0 when equal (+0 and -0 are
// equal here, and so are two NaNs), infinite_ulps when only one is NaN. +-Inf are one past
// the largest finite values.
template <class T>
std::uint64_t ulp_distance(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : infinite_ulps;
  const std::int64_t x = ordered(a), y = ordered(b);
  if ((x < 0) == (y < 0)) return static_cast<std::uint64_t>(x < y ? y - x : x - y);
  const std::int64_t pos = std::max(x, y), neg = std::min(x, y);
  return static_cast<std::uint64_t>(pos) + static_cast<std::uint64_t>(-(neg + 1)) + 1;
}

template <class T>
std::string bits_text(T v) {
  std::ostringstream out;
  out.precision(std::numeric_limits<T>::max_digits10);
  out << v;
  return out.str();
}

// ---- digests ----------------------------------------------------------------------------------

// FNV-1a over the bytes of a tensor's elements and its shape.
template <class T>
std::uint64_t digest(const tensor<T>& t) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&](const void* p, std::size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  };
  for (const std::int64_t d : t.shape()) mix(&d, sizeof d);
  mix(t.data(), static_cast<std::size_t>(t.size()) * sizeof(T));
  return h;
}

// Same shape and the same bits in every element (NaN payloads and zero signs included).
template <class T>
bool bitwise_equal(const tensor<T>& a, const tensor<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(T)) == 0;
}

// ---- kernel paths -----------------------------------------------------------------------------

// The path evaluation takes now: the SIMD arch this program is compiled for, or "scalar".
inline std::string path_name() {
  return xlite::kernels::simd_path_active() ? xlite::kernels::simd_arch::name() : "scalar";
}

// ---- the scalar path --------------------------------------------------------------------------

// x * 1 (x && true for bool) through a uint8 leaf: the same values (NaN, -0.0 and Inf
// included), but an expression that no SIMD loop takes, since uint8 has no batches: it runs
// on kernels::scalar_arch whatever the ISA. In the SSE program this is the only way to the
// scalar path; in the others, capping the ISA below the program's SIMD arch is another.
inline const tensor<std::uint8_t>& uint8_one() {
  static const tensor<std::uint8_t> one(shape{}, 1);
  return one;
}
template <class X>
auto on_scalar_path(const X& x) {
  using T = typename std::remove_cvref_t<decltype(xlite::expr::to_operand(x))>::value_type;
  if constexpr (std::is_same_v<T, bool>) {
    return x && xlite::cast<bool>(uint8_one());
  } else {
    return x * xlite::cast<T>(uint8_one());
  }
}

} // namespace xlite_test
