#pragma once

// The expression cases: element-wise expressions over arrays of n floats, and reductions,
// the same work for every impl:
//
//   case       computes                          bytes per element (STREAM's counting)
//   e1         z = a * x + y                     12: x, y read, z written (the triad's traffic)
//   e2         z = a * x + b * y - c * w         16
//   e3         z = exp(-x * x) * y + tanh(w)     16
//   e4         z = max(x * y + w, 0)             16
//   sum_xy     sum(x * y)                         8: x, y read
//   argmax_xy  argmax(x * y)                      8: x, y read (below: not every peer has it)
//
// a, b, c are float scalars; x, y, w hold the same deterministic values for every impl.
// The sizes are the triad's, so at each n and thread count triad/limit, measured in the same
// run, is the memory bound of the element-wise cases too (scripts/bench_table.py compares a
// byte-rated case without a limit row of its own with it); sum_xy and argmax_xy, which only
// read, have limit rows of their own, the read bandwidth (machine_limits.cpp).
//
// Each impl registers its benchmarks with register_expressions (its own threads, as xlite and
// torch have) or register_split_expressions (kernels over a range, which a thread_team runs
// on the threads); both check the result after the timed loop and fail the benchmark if it
// is wrong, so a fast row is a correct one. The paired rows (paired_expressions.cpp) run
// xlite and every split impl in turn on one set of operands.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "thread_team.hpp"
#include "triad.hpp"

namespace xlite::bench {

enum class expression { e1, e2, e3, e4, sum_xy };

struct expression_case {
  expression which;
  const char* name;    // the case's name in the table
  std::int64_t arrays; // arrays of n floats read or written, once each
};

inline constexpr std::array<expression_case, 5> expression_cases = {{
    {expression::e1, "e1", 3},
    {expression::e2, "e2", 4},
    {expression::e3, "e3", 4},
    {expression::e4, "e4", 4},
    {expression::sum_xy, "sum_xy", 2},
}};

inline const std::vector<std::int64_t>& expression_sizes = triad_sizes;

// Long enough for a stable rate; at 2^26 floats it is a handful of iterations.
inline constexpr double expression_min_time = 0.2;

constexpr std::int64_t expression_bytes(const expression_case& c, std::int64_t n) {
  return c.arrays * static_cast<std::int64_t>(sizeof(float)) * n;
}

// The scalars a, b, c and the inputs x, y, w (deterministic_floats of three seeds). The
// inputs of each size are made once, by the first benchmark that asks: filling 768 MiB
// takes longer than timing a case on it, and Google Benchmark calls a benchmark function
// more than once. Benchmarks run one at a time on the main thread, so the cache needs no
// lock.
struct expression_inputs {
  static constexpr float a = 3.0f;
  static constexpr float b = 0.5f;
  static constexpr float c = 1.5f;
  static constexpr std::uint32_t x_seed = 11;
  static constexpr std::uint32_t y_seed = 12;
  static constexpr std::uint32_t w_seed = 13;

  static const expression_inputs& of_size(std::int64_t n) {
    static std::map<std::int64_t, expression_inputs> made;
    auto found = made.find(n);
    if (found == made.end()) found = made.try_emplace(n, n).first;
    return found->second;
  }

  explicit expression_inputs(std::int64_t n)
      : x(deterministic_floats(n, x_seed)), y(deterministic_floats(n, y_seed)), w(deterministic_floats(n, w_seed)) {}

  aligned_floats x;
  aligned_floats y;
  aligned_floats w;
};

// A copy of one of the inputs.
inline aligned_floats copy_of(const aligned_floats& values) {
  aligned_floats copy(values.size());
  std::copy_n(values.data(), values.size(), copy.data());
  return copy;
}

// The operands of one benchmark run: copies of the inputs and an output, zeroed, made
// fresh for each run, x, y, w then z, as xlite's runs make their tensors. Where the heap
// puts four arrays changes the time of an in-cache case by up to a third (L1 and L2 set
// conflicts between them); fresh operands give every impl the same draw of placements
// over its repetitions, where shared inputs would give the peers one placement for the
// whole process and xlite another in each run.
struct expression_operands {
  explicit expression_operands(std::int64_t n)
      : x(copy_of(expression_inputs::of_size(n).x)), y(copy_of(expression_inputs::of_size(n).y)),
        w(copy_of(expression_inputs::of_size(n).w)), z(n) {}

  std::int64_t size() const noexcept { return z.size(); }

  aligned_floats x;
  aligned_floats y;
  aligned_floats w;
  aligned_floats z;
};

// ---- checking the result -----------------------------------------------------------------------

// Element i of the case (of x * y for sum_xy), in double, from the inputs' definition.
inline double expected_element(expression e, std::int64_t i) {
  using in = expression_inputs;
  const double x = deterministic_float(i, in::x_seed);
  const double y = deterministic_float(i, in::y_seed);
  const double w = deterministic_float(i, in::w_seed);
  switch (e) {
  case expression::e1:
    return in::a * x + y;
  case expression::e2:
    return in::a * x + in::b * y - in::c * w;
  case expression::e3:
    return std::exp(-x * x) * y + std::tanh(w);
  case expression::e4:
    return std::max(x * y + w, 0.0);
  case expression::sum_xy:
    return x * y;
  }
  return 0.0;
}

// The start of a check's error: "wrong result: ", or with who computed it (a row that runs
// several impls names the one), "wrong result from eigen: ".
inline std::string wrong_result(std::string_view who) {
  return who.empty() ? "wrong result: " : "wrong result from " + std::string(who) + ": ";
}

// After the timed loop: fails the benchmark unless z holds the case's values, to within a
// few float roundings (the impls differ in FMA contraction and in their exp and tanh). A
// sample of every check_stride-th element and the last one, which covers every thread's
// part, every SIMD lane and the tail.
inline void check_elements(benchmark::State& state, expression e, const float* z, std::int64_t n,
                           std::string_view who = {}) {
  const auto matches = [&](std::int64_t i) {
    const double expected = expected_element(e, i);
    if (std::abs(z[i] - expected) <= 1e-5 * (1.0 + std::abs(expected))) return true;
    state.SkipWithError((wrong_result(who) + "element " + std::to_string(i) + " is " + std::to_string(z[i]) +
                         ", expected " + std::to_string(expected))
                            .c_str());
    return false;
  };
  const std::int64_t check_stride = n / 4096 + 1;
  for (std::int64_t i = 0; i < n; i += check_stride) {
    if (!matches(i)) return;
  }
  if (n > 0) matches(n - 1);
}

// sum(x * y) in double, and the sum of |x * y|, the scale of a float sum's rounding error;
// computed once per size (a pass over the inputs, as long as several timed iterations).
struct sum_reference {
  double value = 0.0;
  double magnitude = 0.0;
};

inline const sum_reference& expected_sum(std::int64_t n) {
  static std::map<std::int64_t, sum_reference> made;
  auto found = made.find(n);
  if (found != made.end()) return found->second;
  sum_reference sum;
  for (std::int64_t i = 0; i < n; ++i) {
    const double term = expected_element(expression::sum_xy, i);
    sum.value += term;
    sum.magnitude += std::abs(term);
  }
  return made.emplace(n, sum).first->second;
}

// After the timed loop: fails the benchmark unless sum is sum(x * y) to within float
// accumulation error (1e-6 of the sum of |x * y|; dropping a part or a tail is far more).
inline void check_sum(benchmark::State& state, float sum, std::int64_t n, std::string_view who = {}) {
  const sum_reference& expected = expected_sum(n);
  if (std::abs(sum - expected.value) > 1e-6 * expected.magnitude) {
    state.SkipWithError(
        (wrong_result(who) + "the sum is " + std::to_string(sum) + ", expected " + std::to_string(expected.value))
            .c_str());
  }
}

// ---- argmax_xy: argmax(x * y) -------------------------------------------------------------------
// A fused reduction to a position: 8 bytes per element, read only, so its limit row is the
// read bandwidth, as sum_xy's. Each impl registers its own rows (with the thread counts it
// can use) and checks the index with check_argmax.

constexpr std::int64_t argmax_xy_bytes(std::int64_t n) { return 2 * static_cast<std::int64_t>(sizeof(float)) * n; }

// The first position of the largest float product x[i] * y[i], computed once per size.
inline std::int64_t expected_argmax(std::int64_t n) {
  static std::map<std::int64_t, std::int64_t> made;
  auto found = made.find(n);
  if (found != made.end()) return found->second;
  const expression_inputs& in = expression_inputs::of_size(n);
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i) {
    if (in.x.data()[i] * in.y.data()[i] > in.x.data()[best] * in.y.data()[best]) best = i;
  }
  return made.emplace(n, best).first->second;
}

// After the timed loop: fails the benchmark unless index is argmax(x * y).
inline void check_argmax(benchmark::State& state, std::int64_t index, std::int64_t n) {
  const std::int64_t expected = expected_argmax(n);
  if (index != expected) {
    state.SkipWithError(
        ("wrong result: argmax is " + std::to_string(index) + ", expected " + std::to_string(expected)).c_str());
  }
}

// The timed loop of argmax_xy: evaluate() returns the index; checked after it.
template <class Evaluate>
void time_argmax(benchmark::State& state, Evaluate&& evaluate) {
  std::int64_t index = -1;
  for (auto _ : state) {
    index = evaluate();
    benchmark::DoNotOptimize(index);
  }
  report_bytes(state, argmax_xy_bytes(size_arg(state)));
  check_argmax(state, index, size_arg(state));
}

// ---- timing --------------------------------------------------------------------------------------

// The timed loop of an element-wise case: evaluate() writes z once.
template <class Evaluate>
void time_elementwise(benchmark::State& state, const expression_case& c, Evaluate&& evaluate) {
  for (auto _ : state) {
    evaluate();
    benchmark::ClobberMemory();
  }
  report_bytes(state, expression_bytes(c, size_arg(state)));
}

// The timed loop of sum_xy: evaluate() returns the sum; returns the last one, for the check.
template <class Evaluate>
float time_sum(benchmark::State& state, const expression_case& c, Evaluate&& evaluate) {
  float sum = 0.0f;
  for (auto _ : state) {
    sum = evaluate();
    benchmark::DoNotOptimize(sum);
  }
  report_bytes(state, expression_bytes(c, size_arg(state)));
  return sum;
}

// ---- registration ------------------------------------------------------------------------------

// Registers run(state, case) as "<case>/<impl>/n:<n>/threads:<t>" for every case, size and
// thread count. run sets up the operands in the impl's types and its thread count, times
// with time_elementwise or time_sum, then checks with check_elements or check_sum.
template <class Run>
void register_expressions(std::string_view impl, Run run) {
  for (const expression_case& c : expression_cases) {
    register_sized(
        c.name, impl, [run, c](benchmark::State& state) { run(state, c); }, expression_sizes)
        ->MinTime(expression_min_time);
  }
}

// For impls without threads of their own: Kernels has static functions
//   void e1(expression_operands&, std::int64_t begin, std::int64_t end)   (and e2, e3, e4)
//   float sum_xy(const expression_operands&, std::int64_t begin, std::int64_t end)
// computing the case over [begin, end), which a thread_team runs over its parts. They are
// kept as values (split_kernels), so that the paired rows (paired_expressions.cpp) can run
// every such impl in turn; registered_split_kernels() lists them.
struct split_kernels {
  using elementwise_kernel = void (*)(expression_operands&, std::int64_t begin, std::int64_t end);
  using sum_kernel = float (*)(const expression_operands&, std::int64_t begin, std::int64_t end);
  std::string impl;
  std::string label;                             // e.g. the SIMD arch; may be empty
  std::array<elementwise_kernel, 4> elementwise; // e1, e2, e3, e4
  sum_kernel sum_xy;
};
static_assert(static_cast<int>(expression::e1) == 0 && static_cast<int>(expression::e4) == 3,
              "split_kernels::elementwise is indexed by the case");

inline std::vector<split_kernels>& registered_split_kernels() {
  static std::vector<split_kernels> all;
  return all;
}

// One evaluation of case c by the impl, over the team's parts: z written, or the sum returned.
inline float run_split_once(const split_kernels& k, const expression_case& c, expression_operands& o,
                            thread_team& team) {
  if (c.which == expression::sum_xy) {
    return team.sum_parts(o.size(), [&](std::int64_t begin, std::int64_t end) { return k.sum_xy(o, begin, end); });
  }
  const split_kernels::elementwise_kernel kernel = k.elementwise[static_cast<std::size_t>(c.which)];
  team.for_each_part(o.size(), [&](std::int64_t begin, std::int64_t end) { kernel(o, begin, end); });
  return 0.0f;
}

// After the timed loop: check_sum of the sum returned for sum_xy, else check_elements of z.
inline void check_result(benchmark::State& state, const expression_case& c, const expression_operands& o, float sum,
                         std::string_view who = {}) {
  if (c.which == expression::sum_xy) {
    check_sum(state, sum, o.size(), who);
  } else {
    check_elements(state, c.which, o.z.data(), o.size(), who);
  }
}

// The label (the impl's, if any) gets, with more than one thread, a note that the split is ours.
inline void run_split_expression(benchmark::State& state, const expression_case& c, const split_kernels& k) {
  expression_operands operands(size_arg(state));
  thread_team team(threads_arg(state));
  const auto evaluate = [&] { return run_split_once(k, c, operands, team); };
  float sum = 0.0f;
  if (c.which == expression::sum_xy) {
    sum = time_sum(state, c, evaluate);
  } else {
    time_elementwise(state, c, evaluate);
  }
  check_result(state, c, operands, sum);
  if (team.size() == 1) {
    state.SetLabel(k.label);
  } else {
    state.SetLabel((k.label.empty() ? "" : k.label + ", ") + "split by hand over " + std::to_string(team.size()) +
                   " std::threads");
  }
}

template <class Kernels>
void register_split_expressions(std::string_view impl, std::string label = "") {
  const split_kernels k{
      std::string(impl), std::move(label), {&Kernels::e1, &Kernels::e2, &Kernels::e3, &Kernels::e4}, &Kernels::sum_xy};
  registered_split_kernels().push_back(k);
  register_expressions(impl,
                       [k](benchmark::State& state, const expression_case& c) { run_split_expression(state, c, k); });
}

} // namespace xlite::bench
