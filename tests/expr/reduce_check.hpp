#pragma once

// The reduction check shared by reduce.cpp and reduce_integer.cpp: reductions as a user
// writes them (axes lists, keepdims), a naive loop over the same values in long double, the
// error bounds of reduce.cpp's comment, and random shapes and axes.

#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace xlite_test {

using xlite::op;

// The axes of one reduction, as a user would write them.
struct reduction_spec {
  bool no_argument = false;       // sum(x)
  std::vector<std::int64_t> axes; // sum(x, {axes...}); empty: sum(x, {})
  bool keep = false;              // keepdims
};

inline std::string describe(const reduction_spec& s) {
  std::ostringstream out;
  if (s.no_argument) return "no axes argument";
  out << "axes {";
  for (std::size_t i = 0; i < s.axes.size(); ++i) out << (i > 0 ? ", " : "") << s.axes[i];
  out << "}" << (s.keep ? ", keepdims" : "");
  return out.str();
}

inline xlite::axes make_axes(const std::vector<std::int64_t>& a) {
  switch (a.size()) {
  case 0:
    return {};
  case 1:
    return {a[0]};
  case 2:
    return {a[0], a[1]};
  case 3:
    return {a[0], a[1], a[2]};
  case 4:
    return {a[0], a[1], a[2], a[3]};
  case 5:
    return {a[0], a[1], a[2], a[3], a[4]};
  default:
    FAIL("too many axes");
    return {};
  }
}

// Which dimensions a spec reduces (all of them for no argument or {}).
inline std::vector<bool> reduced_dims(const reduction_spec& s, std::size_t rank) {
  std::vector<bool> reduced(rank, s.no_argument || s.axes.empty());
  for (const std::int64_t a : s.axes)
    reduced[static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(rank) : a)] = true;
  return reduced;
}

// The public function for O, with the spec's axes.
template <op O, class E>
auto reduce_with(const E& e, const reduction_spec& s) {
  const auto call = [&](const auto&... args) {
    if constexpr (O == op::sum)
      return xlite::sum(e, args...);
    else if constexpr (O == op::mean)
      return xlite::mean(e, args...);
    else if constexpr (O == op::prod)
      return xlite::prod(e, args...);
    else if constexpr (O == op::max)
      return xlite::max(e, args...);
    else if constexpr (O == op::min)
      return xlite::min(e, args...);
    else
      return xlite::argmax(e, args...);
  };
  if (s.no_argument) return call();
  return s.keep ? call(make_axes(s.axes), xlite::keepdims) : call(make_axes(s.axes));
}

// The naive reduction of `x` (row-major over `in`) over the dimensions marked in `reduced`.
struct naive_result {
  shape out;
  std::vector<long double> value; // sum, prod, max or min; for mean, the sum
  std::vector<long double> abs_sum;
  std::vector<std::int64_t> count;
  std::vector<std::int64_t> argmax; // the first maximum, NaN counting as the largest
};

inline naive_result naive_reduce(op o, const shape& in, const std::vector<long double>& x,
                                 const std::vector<bool>& reduced, bool keep) {
  naive_result r;
  std::vector<std::int64_t> out_dims;
  std::vector<std::int64_t> out_stride(in.rank(), 0);
  for (std::size_t d = 0; d < in.rank(); ++d) {
    if (!reduced[d])
      out_dims.push_back(in[d]);
    else if (keep)
      out_dims.push_back(1);
  }
  r.out = shape(out_dims);
  std::int64_t stride = 1;
  for (std::size_t d = in.rank(); d-- > 0;) {
    if (!reduced[d]) {
      out_stride[d] = stride;
      stride *= in[d];
    }
  }
  const auto n_out = static_cast<std::size_t>(r.out.numel());
  const long double identity = o == op::prod  ? 1.0L
                               : o == op::max ? -std::numeric_limits<long double>::infinity()
                               : o == op::min ? std::numeric_limits<long double>::infinity()
                                              : 0.0L;
  r.value.assign(n_out, identity);
  r.abs_sum.assign(n_out, 0);
  r.count.assign(n_out, 0);
  r.argmax.assign(n_out, -1);
  std::vector<long double> best(n_out, 0);
  std::vector<std::int64_t> index(in.rank(), 0);
  for (std::size_t flat = 0; flat < x.size(); ++flat) {
    std::int64_t at = 0;
    for (std::size_t d = 0; d < in.rank(); ++d) at += index[d] * out_stride[d];
    const auto p = static_cast<std::size_t>(at);
    const long double v = x[flat];
    long double& acc = r.value[p];
    switch (o) {
    case op::prod:
      acc *= v;
      break;
    case op::max:
      acc = std::isnan(acc) || std::isnan(v) ? std::numeric_limits<long double>::quiet_NaN() : std::max(acc, v);
      break;
    case op::min:
      acc = std::isnan(acc) || std::isnan(v) ? std::numeric_limits<long double>::quiet_NaN() : std::min(acc, v);
      break;
    default:
      acc += v;
      break;
    }
    r.abs_sum[p] += std::fabs(v);
    // The first element, then any larger one or the first NaN; nothing replaces a NaN.
    const bool better = r.argmax[p] < 0 || (!std::isnan(best[p]) && (std::isnan(v) || v > best[p]));
    if (better) {
      best[p] = v;
      r.argmax[p] = r.count[p];
    }
    ++r.count[p];
    for (std::size_t d = in.rank(); d-- > 0;) {
      if (++index[d] < in[d]) break;
      index[d] = 0;
    }
  }
  return r;
}

template <class R>
constexpr long double eps_of() {
  if constexpr (std::is_floating_point_v<R>) {
    return std::numeric_limits<R>::epsilon();
  } else {
    return 0;
  }
}

// Checks got against the naive result with the bounds of the file comment (exact when
// `exact`), and returns a description of the first bad element, or "".
template <class R>
std::string compare_reduction(op o, const tensor<R>& got, const naive_result& want, bool exact) {
  if (!(got.shape() == want.out)) {
    std::ostringstream out;
    out << "shape " << got.shape() << ", want " << want.out;
    return out.str();
  }
  for (std::size_t i = 0; i < want.value.size(); ++i) {
    const long double have = static_cast<long double>(got.data()[i]);
    const auto n = static_cast<long double>(want.count[i]);
    long double expected = want.value[i];
    long double bound = 0;
    bool ok = true;
    if (o == op::argmax) {
      expected = static_cast<long double>(want.argmax[i]);
    } else if (o == op::mean) {
      expected = want.value[i] / n;
      if (!exact) bound = eps_of<R>() * want.abs_sum[i] + eps_of<R>() * std::fabs(expected);
    } else if (o == op::sum && !exact) {
      bound = n * eps_of<R>() * want.abs_sum[i];
    } else if (o == op::prod && !exact) {
      bound = n * eps_of<R>() * std::fabs(expected);
    }
    if (exact && o == op::mean) { // the sum is exact: the mean is its one correctly rounded quotient
      expected =
          static_cast<long double>(static_cast<R>(static_cast<R>(want.value[i]) / static_cast<R>(want.count[i])));
    }
    if (std::isnan(expected) || std::isnan(have)) {
      ok = std::isnan(expected) && std::isnan(have);
    } else if (std::isinf(expected) || std::isinf(have)) {
      ok = expected == have;
    } else {
      ok = std::fabs(have - expected) <= bound;
    }
    if (!ok) {
      std::ostringstream out;
      out.precision(21);
      out << "output " << i << " (of " << n << " elements): " << have << ", want " << expected << " within " << bound;
      return out.str();
    }
  }
  return "";
}

// A random reduction of rank 0 to 5 input: which axes, in which order and sign, keepdims.
inline reduction_spec random_spec(rng& g, std::size_t rank, bool one_axis_at_most) {
  reduction_spec s;
  s.keep = chance(g, 0.5);
  const double how = uniform(g, 0, 1);
  if (rank == 0 || how < 0.15) {
    s.no_argument = !s.keep && chance(g, 0.5);
    return s; // all axes, as sum(x) or sum(x, {})
  }
  std::vector<std::int64_t> axes;
  for (std::size_t d = 0; d < rank; ++d) {
    if (chance(g, 0.5)) axes.push_back(static_cast<std::int64_t>(d));
  }
  if (axes.empty() || one_axis_at_most) axes = {integer(g, 0, static_cast<std::int64_t>(rank) - 1)};
  std::shuffle(axes.begin(), axes.end(), g);
  for (auto& a : axes) {
    if (chance(g, 0.5)) a -= static_cast<std::int64_t>(rank);
  }
  s.axes = axes;
  return s;
}

inline shape random_input_shape(rng& g, std::size_t rank) {
  const std::int64_t max_dim[] = {1, 60, 15, 8, 6, 5};
  std::vector<std::int64_t> dims;
  for (std::size_t d = 0; d < rank; ++d) dims.push_back(chance(g, 0.06) ? 0 : integer(g, 1, max_dim[rank]));
  return shape(dims);
}

// Data that every order of accumulation sums (and multiplies) exactly.
template <class T>
tensor<T> exact_data(rng& g, const shape& s, op o) {
  tensor<T> t(tensor<T>::uninitialized, s);
  for (T& v : t) {
    if (o == op::prod) { // +-1, and powers of two rarely enough that no product leaves the range
      const double r = uniform(g, 0, 1);
      double m = 1;
      if constexpr (std::is_floating_point_v<T>) {
        m = r < 0.05 ? 2.0 : r < 0.1 ? 0.5 : 1.0;
      } else {
        m = r < 0.002 ? 2.0 : 1.0;
      }
      v = static_cast<T>(chance(g, 0.5) ? -m : m);
    } else {
      v = static_cast<T>(integer(g, -8, 8));
    }
  }
  return t;
}

// Data for the bounds: several binades, both signs (for prod: close to 1 in log scale).
template <class T>
tensor<T> general_data(rng& g, const shape& s, op o) {
  if (o == op::prod) return random_tensor<T>(g, s, domain{{part::magnitude, -0.3, 0.3}});
  return random_tensor<T>(g, s, domain{{part::magnitude, -10, 10}, {part::uniform, -1, 1}});
}

// Random cases are drawn from every layout; two layouts that were once wrong also get tests
// of their own, which draw only them: reducing only axes of length 1 while a kept axis is
// longer (each output read the first element of its row), and argmax over an axis followed
// by a longer kept axis (its elements were read as if adjacent in memory).
enum class selection { regular, singleton_axes, strided_argmax };

inline bool only_singleton_axes(const shape& in, const std::vector<bool>& reduced) {
  bool reduces_long = false, keeps_long = false;
  for (std::size_t d = 0; d < in.rank(); ++d) {
    if (reduced[d] && in[d] != 1) reduces_long = true;
    if (!reduced[d] && in[d] > 1) keeps_long = true;
  }
  return !reduces_long && keeps_long;
}

inline bool argmax_over_outer_axis(const shape& in, const std::vector<bool>& reduced) {
  const auto axis = static_cast<std::size_t>(std::find(reduced.begin(), reduced.end(), true) - reduced.begin());
  if (axis == in.rank() || std::count(reduced.begin(), reduced.end(), true) != 1 || in[axis] <= 1) return false;
  for (std::size_t d = axis + 1; d < in.rank(); ++d) {
    if (in[d] > 1) return true;
  }
  return false;
}

inline selection classify(op o, const shape& in, const std::vector<bool>& reduced) {
  if (o == op::argmax) return argmax_over_outer_axis(in, reduced) ? selection::strided_argmax : selection::regular;
  return only_singleton_axes(in, reduced) ? selection::singleton_axes : selection::regular;
}

// A random input shape and reduction of the given selection.
inline std::pair<shape, reduction_spec> random_case(rng& g, std::size_t rank, op o, selection which) {
  for (;;) {
    shape in = random_input_shape(g, rank);
    if (which == selection::singleton_axes && rank > 0) { // set some dimensions to 1, reduce those
      std::vector<std::int64_t> dims(in.begin(), in.end());
      reduction_spec spec;
      spec.keep = chance(g, 0.5);
      for (std::size_t d = 0; d < rank; ++d) {
        if (chance(g, 0.4)) {
          dims[d] = 1;
          spec.axes.push_back(chance(g, 0.5) ? static_cast<std::int64_t>(d)
                                             : static_cast<std::int64_t>(d) - static_cast<std::int64_t>(rank));
        }
      }
      if (spec.axes.empty()) continue;
      in = shape(dims);
      if (classify(o, in, reduced_dims(spec, rank)) == which) return {in, spec};
      continue;
    }
    const reduction_spec spec = random_spec(g, rank, o == op::argmax);
    if (which == selection::regular || classify(o, in, reduced_dims(spec, rank)) == which) return {in, spec};
  }
}

// Reduces random inputs with O on T: plain tensors, and when `fused`, x * y with y
// broadcast to x; on integer-valued and on general data; every path. The reference is the
// naive loop over the values the input expression has (x * y rounded to T).
template <op O, class T>
void check_reduction(std::uint64_t seed, bool fused, selection which = selection::regular) {
  rng g(seed);
  using R = typename decltype(reduce_with<O>(std::declval<const tensor<T>&>(), reduction_spec{}))::value_type;
  for (int k = 0; k < 120; ++k) {
    const std::size_t rank =
        which == selection::regular ? static_cast<std::size_t>(k % 6) : 2 + static_cast<std::size_t>(k % 4);
    // Named copies, not a structured binding: Clang 14 cannot capture bindings in lambdas.
    const auto drawn = random_case(g, rank, O, which);
    const auto& in = drawn.first;
    const auto& spec = drawn.second;
    const bool exact = k % 2 == 0 || !std::is_floating_point_v<T>;
    const bool use_y = fused && k % 3 != 0;
    const tensor<T> x = exact || !std::is_floating_point_v<T> ? exact_data<T>(g, in, O) : general_data<T>(g, in, O);
    tensor<T> y =
        exact_data<T>(g, use_y ? broadcastable_to(g, in) : shape{}, op::prod); // +-1, +-2, +-0.5: x * y stays exact
    std::vector<long double> values(static_cast<std::size_t>(in.numel()));
    const auto yi = broadcast_index(in, y.shape());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const T v = use_y ? static_cast<T>(x.data()[i] * y.data()[yi[i]]) : x.data()[i];
      values[i] = static_cast<long double>(v);
    }
    const auto reduced = reduced_dims(spec, rank);
    const naive_result want = naive_reduce(O, in, values, reduced, spec.keep);
    std::int64_t reduced_count = 1;
    for (std::size_t d = 0; d < rank; ++d) reduced_count *= reduced[d] ? in[d] : 1;
    const bool throws = reduced_count == 0 && (O == op::max || O == op::min || O == op::argmax);
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO(name(O) << " of " << (use_y ? "x * y, x " : "x ") << in << (use_y ? " y " + y.shape().to_string() : "")
                   << ", " << describe(spec) << ", " << (exact ? "exact" : "general") << " data, " << path_name());
      if (throws) {
        if (use_y) {
          CHECK_THROWS_AS(reduce_with<O>(x * y, spec), xlite::value_error);
        } else {
          CHECK_THROWS_AS(reduce_with<O>(x, spec), xlite::value_error);
        }
        return;
      }
      const tensor<R> got = use_y ? tensor<R>(reduce_with<O>(x * y, spec)) : tensor<R>(reduce_with<O>(x, spec));
      CHECK(compare_reduction(O, got, want, exact) == "");
    });
  }
}

// Large reductions of x * y (float, y broadcast): outputs and reduced counts big enough for
// several accumulation blocks and for the thread pool. Each of the ops O is checked against
// the naive loop and gives the same bits for 1, 2, 3, 5 and 8 threads, on every path.
template <op... O>
void check_large_reductions(std::uint64_t seed) {
  static_assert(xlite::expr::reduction_block == 1 << 14);
  static_assert(xlite::expr::streamed_slice == 1 << 19 && xlite::expr::streamed_columns == 128);
  static_assert(xlite::expr::grouped_row_bytes == 16 * 1024 && xlite::expr::row_group == 4);
  static_assert(xlite::expr::streamed_panel == 16384 && xlite::expr::panel_min_rows <= 33);
  rng g(seed);
  struct large_case {
    shape x, y;
    reduction_spec spec;
  };
  const std::vector<large_case> cases = {
      {shape{200003}, shape{}, {true, {}, false}},          // one output, 13 blocks
      {shape{3, 50001}, shape{50001}, {false, {1}, false}}, // rows of several blocks
      // Two outer dims that y keeps apart, rows of two blocks: tasks step the block and
      // the output index across both, and chunks start mid-output.
      {shape{2, 3, 20001}, shape{3, 1}, {false, {2}, false}},
      {shape{40001, 5}, shape{5}, {false, {-1}, true}},     // many short rows
      // Short rows, totalled in groups of a batch's lanes, those after the last whole
      // group one by one; chains, batches left over and a masked end in each row.
      {shape{60, 93}, shape{93}, {false, {1}, false}},
      {shape{5, 40001}, shape{5, 1}, {false, {0}, false}},  // columns: SIMD across outputs
      {shape{7, 3, 3001}, shape{3, 1}, {false, {2, 0}, false}},
      // Slices of 2^19 elements or more down 128 columns or more (sum, mean, prod, max and
      // min stream them by rows, in blocks of rows): a masked end in every row;
      // reduced axes that y keeps from merging, y broadcast along the columns; several
      // output rows, each in blocks.
      {shape{4100, 131}, shape{131}, {false, {0}, false}},
      {shape{40, 103, 131}, shape{103, 1}, {false, {0, 1}, false}},
      {shape{3, 4100, 130}, shape{130}, {false, {1}, false}},
      // Rows of grouped_row_bytes or more, in groups of row_group rows: groups that cross
      // the wrap of reduced axes y keeps apart, y broadcast along the columns; several
      // output rows, y broadcast over the rows, each output row in blocks of 63, 63 and 5
      // rows.
      {shape{20, 7, 4099}, shape{7, 1}, {false, {0, 1}, false}},
      {shape{2, 131, 4100}, shape{4100}, {false, {1}, false}},
      // Rows longer than streamed_panel, in panels of 16384 and 19 columns, y broadcast
      // along the columns.
      {shape{2, 33, 16403}, shape{33, 1}, {false, {1}, false}},
  };
  for (const large_case& c : cases) {
    const tensor<float> x = random_tensor<float>(g, c.x, domain{{part::magnitude, -4, 4}, {part::uniform, -1, 1}});
    const tensor<float> y = random_tensor<float>(g, c.y, 0.5, 1.5);
    std::vector<long double> values(static_cast<std::size_t>(x.size()));
    const auto yi = broadcast_index(x.shape(), y.shape());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<long double>(x.data()[i] * y.data()[yi[i]]);
    const auto reduced = reduced_dims(c.spec, c.x.rank());
    const auto check = [&](auto o) {
      constexpr op Op = decltype(o)::value;
      if constexpr (Op == op::argmax) { // one axis or all
        if (c.spec.axes.size() > 1) return;
      }
      const naive_result want = naive_reduce(Op, c.x, values, reduced, c.spec.keep);
      xlite_test::for_each_isa_path([&](xlite::isa) {
        decltype(reduce_with<Op>(x * y, c.spec)) one;
        for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{5}, std::size_t{8}}) {
          xlite::thread_pool pool(n);
          xlite::scoped_thread_pool use(pool);
          INFO(name(Op) << " of x * y, x " << c.x << ", y " << c.y << ", " << describe(c.spec) << ", " << n
                        << " threads, " << path_name());
          const auto got = reduce_with<Op>(x * y, c.spec);
          CHECK(compare_reduction(Op, got, want, Op == op::max || Op == op::min || Op == op::argmax) == "");
          if (n == 1) one = got;
          CHECK(bitwise_equal(got, one));
        }
      });
    };
    (check(std::integral_constant<op, O>{}), ...);
  }
}

} // namespace xlite_test
