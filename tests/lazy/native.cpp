// Native kernels (runtime/native_kernels.hpp): every op a native kernel computes, in every
// dtype it takes, on special and random values, bitwise equal to the interpreter, on the
// SIMD path and on the scalar one, for ranges shorter than a chunk and for several ranges
// ending in a partial batch; kernels it must not take; and a compiler that cannot be run.

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "xlite/compile/native_source.hpp"
#include "xlite/lazy.hpp"

using namespace xlite;

namespace {

// n values of T: the special ones first, then random ones (integers small enough that the
// chain in every_op cannot overflow: signed overflow is undefined behaviour).
template <class T>
xlite::tensor<T> values_of(std::int64_t n, unsigned seed) {
  std::vector<T> special{T(0), T(1), T(-1), T(7), T(-100)};
  if constexpr (std::is_floating_point_v<T>) {
    using limits = std::numeric_limits<T>;
    special.insert(special.end(), {T(-0.0), T(0.5), limits::quiet_NaN(), limits::infinity(), -limits::infinity(),
                                   limits::denorm_min(), limits::min(), limits::max(), T(1e-3)});
  }
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> uniform(-3, 3);
  xlite::tensor<T> t(shape{n});
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    t.data()[i] = k < special.size() ? special[k] : static_cast<T>(uniform(random) * (std::is_integral_v<T> ? 30 : 1));
  }
  return t;
}

// Each op from T to T applied to x (and y, z), one result per op, and a chain with a
// constant and a scalar parameter (the invariant steps): all results of one step.
template <class T>
std::vector<lazy::tensor> every_op(const lazy::tensor& x, const lazy::tensor& y, const lazy::tensor& z) {
  std::vector<lazy::tensor> results;
  for (std::size_t i = 0; i < op_count; ++i) {
    const op o = static_cast<op>(i);
    if (!kernels::same_type_op<T>(o)) continue;
    const std::size_t arity = info(o).arity;
    results.push_back(arity == 1   ? lazy::elementwise(o, {x})
                      : arity == 2 ? lazy::elementwise(o, {x, y})
                                   : lazy::elementwise(o, {x, y, z}));
  }
  const auto scalar = lazy::tensor::from(xlite::tensor<T>(shape{}, T(3)));
  results.push_back(lazy::maximum(lazy::abs(x * y + z) * T(5) - scalar, z) * x + scalar * scalar);
  if constexpr (std::is_floating_point_v<T>) {
    // The end batch's padding, 1e6 / (1 + 0), takes sin to another range reduction than
    // the values' own (padding_sensitive): both kernels must compute the padding alike.
    results.push_back(lazy::sin(T(1e6) / (x * x * T(2e4) + T(1))));
  }
  return results;
}

// Floats x whose sin(1e6 / (x * x * 2e4 + 1)), about 50, xsimd computes with other bits when
// another lane of the batch holds 1e6 (that expression at x = 0) than when it holds 0: sin
// picks its range reduction for the whole batch (found by a search over [1, 1.42]).
constexpr std::array<float, 15> padding_sensitive = {
    1.00329983f, 1.00439978f, 1.00879955f, 1.01649916f, 1.18039083f, 1.25958681f, 1.26288664f, 1.26398659f,
    1.32888329f, 1.33108318f, 1.39817977f, 1.40037966f, 1.4014796f,  1.40257955f, 1.41797876f};

template <class T>
std::vector<xlite::tensor<T>> run_every_op(std::int64_t n) {
  xlite::tensor<T> x_values = values_of<T>(n, 1);
  if constexpr (std::is_same_v<T, float>) { // at the end, in the last batch, which the padding completes
    std::copy(padding_sensitive.begin(), padding_sensitive.end(), x_values.data() + n - std::ssize(padding_sensitive));
  }
  const auto x = lazy::tensor::from(x_values);
  const auto y = lazy::tensor::from(values_of<T>(n, 2));
  const auto z = lazy::tensor::from(values_of<T>(n, 3));
  std::vector<xlite::tensor<T>> host;
  for (const lazy::tensor& r : every_op<T>(x, y, z)) host.push_back(r.to_host<T>());
  return host;
}

// Bitwise equal, except that a NaN's sign and payload are free: IEEE 754 leaves them to the
// implementation, and x86 takes them from whichever operand the compiler put first.
template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a && b != b) return true;
  }
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void check_bitwise_equal(const std::vector<xlite::tensor<T>>& native,
                         const std::vector<xlite::tensor<T>>& interpreted) {
  REQUIRE(native.size() == interpreted.size());
  for (std::size_t r = 0; r < native.size(); ++r) {
    std::int64_t i = 0;
    while (i < native[r].size() && same_value(native[r].data()[i], interpreted[r].data()[i])) ++i;
    INFO("result " << r << ", element " << i);
    if (i < native[r].size()) INFO(native[r].data()[i] << " vs " << interpreted[r].data()[i]);
    CHECK(i == native[r].size());
  }
}

template <class T>
void check_native_matches_interpreter() {
  const auto directory = std::filesystem::temp_directory_path() / ("xlite_native_test_" + std::to_string(::getpid()));
  runtime::initialize_cache(directory);
  // Shorter than a chunk; several ranges, the last one ending in a masked batch.
  for (const std::int64_t n : {std::int64_t{1001}, std::int64_t{3 * 16384 + 5}}) {
    for (const bool simd : {true, false}) {
      INFO("n = " << n << (simd ? ", SIMD path" : ", scalar path"));
      scoped_max_isa cap(simd ? max_isa() : isa::portable);
      runtime::set_native_kernels(false);
      const auto interpreted = run_every_op<T>(n);
      runtime::set_native_kernels(true);
      runtime::clear_compilation_cache(); // compiled again, now with native kernels requested
      run_every_op<T>(n);
      runtime::wait_native_kernels();
      INFO(runtime::native_kernel_error());
      const std::int64_t runs = metrics::counter_value("NativeKernelRun");
      const auto native = run_every_op<T>(n);
      CHECK(metrics::counter_value("NativeKernelRun") > runs);
      check_bitwise_equal(native, interpreted);
    }
  }
  CHECK(metrics::counter_value("NativeKernelFailed") == 0);
  CHECK(metrics::counter_value("NativeKernelBuilt") + metrics::counter_value("NativeKernelLoaded") > 0);
  runtime::disable_persistent_cache();
  std::filesystem::remove_all(directory);
}

compile::executable_ptr compiled(const std::vector<lazy::tensor>& results) {
  std::vector<ir::node_ptr> nodes;
  for (const lazy::tensor& r : results) nodes.push_back(r.node());
  return compile::compile_graph(ir::capture(nodes).program);
}

} // namespace

TEST_CASE("native kernels compute f32 bitwise as the interpreter does", "[native]") {
  check_native_matches_interpreter<float>();
}
TEST_CASE("native kernels compute f64 bitwise as the interpreter does", "[native]") {
  check_native_matches_interpreter<double>();
}
TEST_CASE("native kernels compute i32 bitwise as the interpreter does", "[native]") {
  check_native_matches_interpreter<std::int32_t>();
}
TEST_CASE("native kernels compute i64 bitwise as the interpreter does", "[native]") {
  check_native_matches_interpreter<std::int64_t>();
}

TEST_CASE("native kernels take only the kernels they compute like the interpreter", "[native]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>(shape{64, 8}, 2.0f));
  const auto row = lazy::tensor::from(xlite::tensor<float>(shape{8}, 1.0f));
  const auto accepted = compiled({lazy::sqrt(x * x + 3.0f)});
  REQUIRE(accepted->kernels.size() == 1);
  REQUIRE(accepted->kernels[0].native);
  CHECK(accepted->kernels[0].native->source.find("step<xlite::op::sqrt>") != std::string::npos);

  // One value (every step invariant), a comparison and where, a cast, bf16, a broadcast
  // along an axis: interpreted.
  const auto scalar = lazy::tensor::from(xlite::tensor<float>(shape{}, 2.0f));
  const auto rejected = compiled({scalar * 3.0f, lazy::where(x > 1.0f, x, row), lazy::cast(x, dtype::f64) + 1.0,
                                  lazy::cast(x, dtype::bf16) * lazy::cast(x, dtype::bf16), x + row});
  for (const compile::kernel& k : rejected->kernels) {
    INFO(ir::to_text(rejected->program));
    CHECK_FALSE(k.native);
  }
}

TEST_CASE("a compiler that cannot run leaves kernels interpreted, with a warning", "[.native_no_compiler]") {
  runtime::set_native_kernels(true);
  const auto x = lazy::tensor::from(xlite::tensor<float>(shape{5000}, 2.0f));
  const auto y = lazy::sqrt(x * x + 5.0f);
  const auto first = y.to_host<float>();
  runtime::wait_native_kernels();
  CHECK(runtime::native_kernel_error().find("cannot run /nonexistent/c++") != std::string::npos);
  CHECK(metrics::counter_value("NativeKernelFailed") == 1);
  const auto again = lazy::sqrt(x * x + 5.0f).to_host<float>();
  CHECK(metrics::counter_value("NativeKernelRun") == 0);
  CHECK(again(4999) == 3.0f);
  CHECK(first(0) == 3.0f);
}
