// The fused loop of expr/evaluate.hpp: broadcasting layouts of rank 0 to 5 against a naive
// loop, on every path and on the scalar path; outputs large enough to be split over the
// thread pool; the same bits for any number of threads. (Empty and rank-0 tensors, shared
// subexpressions, lifetimes: evaluate_cases.cpp.)
//
// Most checks here are bitwise: the expressions use ops that IEEE rounds once each, so the
// naive loop, written in the element type, must give the same bits.

#include "page_end.hpp"
#include "reference.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

namespace {

// The expression most tests here evaluate: three leaves, so that every broadcasting
// pattern of the loop plan can occur, `a` read twice, and no product that is then added to
// (a compiler may contract a * b + c into one fma: see assign.cpp).
template <class A, class B, class C>
auto fused(const A& a, const B& b, const C& c) {
  return (a - b) * (c + a);
}

// Its naive loop.
template <class T>
tensor<T> fused_reference(const tensor<T>& a, const tensor<T>& b, const tensor<T>& c) {
  const shape out = broadcast({a.shape(), b.shape(), c.shape()});
  const auto ia = broadcast_index(out, a.shape()), ib = broadcast_index(out, b.shape()),
             ic = broadcast_index(out, c.shape());
  tensor<T> r(out);
  for (std::size_t i = 0; i < ia.size(); ++i) {
    const T x = a.data()[ia[i]];
    r.data()[i] = (x - b.data()[ib[i]]) * (c.data()[ic[i]] + x);
  }
  return r;
}

// Three operand shapes that broadcast together, of the given rank, dimensions up to max_dim.
std::vector<shape> random_layout(rng& g, std::size_t rank, std::int64_t max_dim) {
  std::vector<std::int64_t> dims;
  for (std::size_t d = 0; d < rank; ++d) dims.push_back(integer(g, 1, max_dim));
  const shape out(dims);
  return {broadcastable_to(g, out), broadcastable_to(g, out), broadcastable_to(g, out)};
}

template <class T>
void check_fused_layouts(std::uint64_t seed) {
  rng g(seed);
  std::vector<std::vector<shape>> layouts = shape_cases(3, g);
  const std::int64_t max_dim[] = {1, 40, 12, 7, 5, 4};
  for (int k = 0; k < 240; ++k) layouts.push_back(random_layout(g, static_cast<std::size_t>(k % 6), max_dim[k % 6]));
  for (const auto& layout : layouts) {
    const tensor<T> a = random_tensor<T>(g, layout[0], -8, 8);
    const tensor<T> b = random_tensor<T>(g, layout[1], -8, 8);
    const tensor<T> c = random_tensor<T>(g, layout[2], -8, 8);
    const tensor<T> want = fused_reference(a, b, c);
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO("shapes " << describe(layout) << " on " << path_name());
      const tensor<T> got = fused(a, b, c);
      CHECK(bitwise_equal(got, want));
    });
    // The same loop nest on the scalar path, which a uint8 leaf forces in every program.
    INFO("shapes " << describe(layout) << " on the scalar path");
    CHECK(bitwise_equal(tensor<T>(fused(on_scalar_path(a), b, c)), want));
  }
}

// Pools of these sizes evaluate the same expressions in the thread tests.
const std::vector<std::size_t> thread_counts{1, 2, 3, 5, 8};

} // namespace

TEST_CASE("evaluate: every path of this program is run by the tests", "[evaluate][isa]") {
  // The paths for_each_isa_path visits: the SIMD arch this program is compiled for when the
  // CPU has it, and the scalar path when the SIMD arch is above the baseline.
  std::vector<std::string> visited;
  xlite_test::for_each_isa_path([&](xlite::isa) { visited.push_back(path_name()); });
  const std::string simd = xlite::kernels::simd_arch::name();
  if (xlite::detected_isa() >= xlite::kernels::simd_arch_level) {
    CHECK(std::find(visited.begin(), visited.end(), simd) != visited.end());
  }
  if (xlite::kernels::simd_arch_level > xlite::isa::portable) {
    CHECK(std::find(visited.begin(), visited.end(), "scalar") != visited.end());
  }
  // The programs are built for SSE, AVX2 and AVX-512 (tests/CMakeLists.txt), each for one.
#if defined(__AVX512F__)
  CHECK(simd == "avx512bw");
#elif defined(__AVX2__)
  CHECK(simd == "fma3+avx2");
#elif defined(__SSE2__)
  CHECK((simd == "sse2" || simd == "sse4.2"));
#endif
}

TEST_CASE("evaluate: fused loops over broadcast layouts of rank 0 to 5 match the naive loop bitwise",
          "[evaluate][broadcast]") {
  check_fused_layouts<float>(11);
  check_fused_layouts<double>(12);
}

// The masked store of a row's end: every count below a batch's lanes, each lane type, the
// values in the first `count` elements and nothing else written (sentinels around them that
// differ from the lanes: both values for bools; and an unreadable page right after them).
TEST_CASE("evaluate: store_first writes a batch's first lanes and nothing else", "[evaluate]") {
  using arch = xlite::kernels::simd_arch;
  if constexpr (!std::is_same_v<arch, xlite::kernels::scalar_arch>) {
    const auto check = [&]<class T, class Batch>() {
      constexpr std::size_t n = Batch::size;
      std::array<T, n> lanes; // 1, 2, ... n; for bools true, false, true, ...
      for (std::size_t i = 0; i < n; ++i) lanes[i] = std::is_same_v<T, bool> ? T(i % 2 == 0) : static_cast<T>(i + 1);
      const Batch v = Batch::load_unaligned(lanes.data());
      const std::vector<T> sentinels =
          std::is_same_v<T, bool> ? std::vector<T>{T(false), T(true)} : std::vector<T>{T(77)};
      for (std::size_t count = 1; count < n; ++count) {
        INFO(xlite::dtype_of_v<T> << " on " << arch::name() << ", " << count << " of " << n << " lanes");
        for (const T sentinel : sentinels) {
          std::array<T, 3 * n> memory;
          memory.fill(sentinel);
          xlite::kernels::store_first(memory.data() + n, v, count);
          for (std::size_t i = 0; i < 3 * n; ++i) {
            CHECK(memory[i] == (i >= n && i < n + count ? lanes[i - n] : sentinel));
          }
        }
        const at_page_end<T> end(count);
        xlite::kernels::store_first(end.data(), v, count);
        CHECK(std::equal(end.data(), end.data() + count, lanes.begin()));
      }
    };
    check.template operator()<float, xsimd::batch<float, arch>>();
    check.template operator()<double, xsimd::batch<double, arch>>();
    check.template operator()<std::int32_t, xsimd::batch<std::int32_t, arch>>();
    check.template operator()<std::int64_t, xsimd::batch<std::int64_t, arch>>();
    check.template operator()<bool, xsimd::batch_bool<float, arch>>(); // bools: a batch_bool, through the stack
  }
}

// A row's end, fewer elements than a batch, is one batch loaded and stored under a mask:
// rows of every length 1..40 (shorter than a batch, a batch and a part, several) of x + b
// with b broadcast along the rows, x > b into bools, and sigmoid(x * 2 + b), with x, b and
// the output each ending where an unreadable page begins (a full load or store there
// faults), one row and 19; and c + b with a column c broadcast along the rows (the loop
// for rows that some leaf does not walk with stride 1); float, double, int32, int64.
// Against loops, exactly, for + and >; sigmoid against the same expression over a b tiled
// to x's shape (one flat run, no row ends but the last), bitwise: an element's bits do
// not depend on where its batch starts (true of sigmoid; not of sin and cos, whose range
// reduction depends on the whole batch).
TEST_CASE("evaluate: rows that end at an unreadable page evaluate as a loop does", "[evaluate][broadcast]") {
  rng g(59);
  const auto check = [&]<class T>() {
    for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{19}}) {
      for (std::int64_t n = 1; n <= 40; ++n) {
        INFO(path_name() << ", " << rows << " rows of " << n << " " << xlite::dtype_of_v<T>);
        const auto size = static_cast<std::size_t>(rows * n);
        const at_page_end<T> x_memory(size), b_memory(static_cast<std::size_t>(n)), out_memory(size),
            c_memory(static_cast<std::size_t>(rows));
        const at_page_end<bool> above_memory(size);
        const tensor<T> ones(shape{n}, T(1));
    tensor<T> tiled(shape{rows, n});
        for (std::int64_t i = 0; i < n; ++i) b_memory.data()[i] = static_cast<T>(integer(g, -9, 9));
        for (std::int64_t r = 0; r < rows; ++r) c_memory.data()[r] = static_cast<T>(integer(g, -9, 9));
        for (std::int64_t i = 0; i < rows * n; ++i) {
          x_memory.data()[i] = static_cast<T>(integer(g, -9, 9));
          tiled.data()[i] = b_memory.data()[i % n];
        }
        // Leaves over that memory, each holding its shape (shape_ref::to, which points at
        // one, makes g++ 12 -O2 see an uninitialised shape where the union is never read).
        const xlite::expr::tensor_ref<T> x{x_memory.data(), xlite::expr::shape_ref(shape{rows, n})};
        const xlite::expr::tensor_ref<T> b{b_memory.data(), xlite::expr::shape_ref(shape{n})};
        const xlite::expr::tensor_ref<T> c{c_memory.data(), xlite::expr::shape_ref(shape{rows, 1})};
        xlite::expr::evaluate_into(x + b, out_memory.data()); // what assigning does, into memory of our own
        xlite::expr::evaluate_into(x > b, above_memory.data());
        bool sums_right = true, compares_right = true;
        for (std::int64_t i = 0; i < rows * n; ++i) {
          sums_right = sums_right && out_memory.data()[i] == x_memory.data()[i] + b_memory.data()[i % n];
          compares_right = compares_right && above_memory.data()[i] == (x_memory.data()[i] > b_memory.data()[i % n]);
        }
        CHECK(sums_right);
        CHECK(compares_right);
        xlite::expr::evaluate_into(c + b, out_memory.data());
        bool outer_sums_right = true;
        for (std::int64_t i = 0; i < rows * n; ++i) {
          outer_sums_right =
              outer_sums_right && out_memory.data()[i] == c_memory.data()[i / n] + b_memory.data()[i % n];
        }
        CHECK(outer_sums_right);
        if constexpr (std::is_floating_point_v<T>) {
          xlite::expr::evaluate_into(xlite::sigmoid(x * T(2) + b), out_memory.data());
          const tensor<T> flat = xlite::sigmoid(x * T(2) + tiled);
          const auto bits = [](T v) { return std::bit_cast<std::array<char, sizeof(T)>>(v); };
          CHECK(std::equal(flat.begin(), flat.end(), out_memory.data(),
                           [&](T want, T got) { return bits(want) == bits(got); }));
        }
      }
    }
  };
  xlite_test::for_each_isa_path([&](xlite::isa) {
    check.template operator()<float>();
    check.template operator()<double>();
    check.template operator()<std::int32_t>();
    check.template operator()<std::int64_t>();
  });
}

// A leaf broadcast along the rows (one value per row, as x - mean(x, {1}, true) reads) takes
// the row loop that reads it as one broadcast value: rows shorter than a batch, of a few
// batches and a part, rows that tasks split, each element type and a bool condition, must
// give the bits of the same expression over the leaf tiled along the rows. (sin picks its
// range reduction for a whole batch, so this also checks that both loops batch a row alike:
// its tiled side is multiplied by a row of ones, which makes it walk rows too, where alone it
// would be one flat run whose batches cross from row to row.)
TEST_CASE("evaluate: a leaf broadcast along rows gives the bits of that leaf tiled", "[evaluate][broadcast]") {
  rng g(61);
  const auto check = [&]<class T>(std::int64_t rows, std::int64_t n) {
    INFO(path_name() << ", " << rows << " rows of " << n << " " << xlite::dtype_of_v<T>);
    const tensor<T> x = random_tensor<T>(g, shape{rows, n}, -9, 9);
    const tensor<T> c = random_tensor<T>(g, shape{rows, 1}, -9, 9);
    const tensor<bool> keep = random_tensor<T>(g, shape{rows, 1}, -9, 9) > T(0);
    const tensor<T> ones(shape{n}, T(1));
    tensor<T> tiled(shape{rows, n});
    tensor<bool> keep_tiled(shape{rows, n});
    for (std::int64_t i = 0; i < rows * n; ++i) {
      tiled.data()[i] = c.data()[i / n];
      keep_tiled.data()[i] = keep.data()[i / n];
    }
    CHECK(bitwise_equal(tensor<T>(x - c), tensor<T>(x - tiled)));
    CHECK(bitwise_equal(tensor<T>(xlite::where(keep, x, c)), tensor<T>(xlite::where(keep_tiled, x, tiled))));
    if constexpr (std::is_floating_point_v<T>) {
      CHECK(bitwise_equal(tensor<T>(xlite::sin(x * c * T(1000)) + c),
                          tensor<T>(xlite::sin(x * tiled * T(1000) * ones) + tiled)));
    }
  };
  for (const std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
    xlite::thread_pool pool(threads);
    xlite::scoped_thread_pool use(pool);
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO(threads << " threads");
      for (const std::int64_t n : {1, 7, 16, 127, 128, 129, 136, 300}) {
        check.template operator()<float>(5, n);
        check.template operator()<double>(5, n);
        check.template operator()<std::int32_t>(5, n);
        check.template operator()<std::int64_t>(5, n);
      }
      check.template operator()<float>(2, 40001); // rows split into tasks, which start mid-row
      check.template operator()<double>(2, 40001);
    });
  }
}

TEST_CASE("evaluate: threads claim one run of tasks each on short loops, runs of at most 2^16 elements on long ones",
          "[evaluate][threads]") {
  using xlite::expr::tasks_per_chunk;
  static_assert(xlite::expr::parallel_chunk == 1 << 16);
  CHECK(tasks_per_chunk(4, 1 << 14, 2) == 2);    // 2^16 floats on 2 threads: one claim each
  CHECK(tasks_per_chunk(5, 1 << 14, 2) == 3);    // an odd count: the first claim takes the extra task
  CHECK(tasks_per_chunk(4096, 1 << 14, 2) == 4); // 2^26 floats: claims of 2^16, a thread done early helps
  CHECK(tasks_per_chunk(1000, 10, 8) == 125);    // short rows: an even run for each of 8 threads
  CHECK(tasks_per_chunk(100000, 10, 2) == 6553); // many short rows: at most 2^16 elements per claim
  CHECK(tasks_per_chunk(3, 1 << 20, 2) == 1);    // tasks longer than a claim: one at a time
  CHECK(tasks_per_chunk(1, 1 << 14, 8) == 1);    // fewer tasks than threads
}

TEST_CASE("evaluate: outputs past the parallel threshold match the naive loop on any number of threads",
          "[evaluate][threads]") {
  static_assert(xlite::expr::parallel_threshold == 1 << 15);
  rng g(13);
  const std::vector<std::vector<shape>> layouts = {
      {shape{1 << 15}, shape{1 << 15}, shape{1 << 15}},               // exactly the threshold
      {shape{(1 << 15) - 1}, shape{(1 << 15) - 1}, shape{}},          // one below: serial
      {shape{100003}, shape{100003}, shape{1}},                       // several chunks and a ragged end
      {shape{3, 40001}, shape{40001}, shape{3, 1}},                   // long broadcast rows
      {shape{40001, 3}, shape{40001, 1}, shape{3}},                   // short rows, many of them
      {shape{2, 129, 1, 131}, shape{129, 1, 1}, shape{1, 1, 7, 131}}, // rank 4, every operand broadcast
  };
  for (const auto& layout : layouts) {
    const tensor<float> a = random_tensor<float>(g, layout[0], -4, 4);
    const tensor<float> b = random_tensor<float>(g, layout[1], -4, 4);
    const tensor<float> c = random_tensor<float>(g, layout[2], -4, 4);
    const tensor<float> want = fused_reference(a, b, c);
    for (const std::size_t n : thread_counts) {
      xlite::thread_pool pool(n);
      xlite::scoped_thread_pool use(pool);
      xlite_test::for_each_isa_path([&](xlite::isa) {
        INFO("shapes " << describe(layout) << ", " << n << " threads, " << path_name());
        CHECK(bitwise_equal(tensor<float>(fused(a, b, c)), want));
      });
    }
  }
}

namespace {

// The flat loop with streaming stores (which evaluation takes for outputs larger than the
// last-level cache, see streaming_pays) stores whole aligned batches and then ends as any
// loop does, in a batch stored under a mask, writing nothing past it: three tasks of 2^14
// floats and 0, 1, 5 or a batch less one more, on one thread and on two (whose tasks
// start at multiples of 2^14, aligned), into a buffer with sentinels after the output.
// Asking ahead or not (store_path::streamed_asking_ahead: for each leaf's lines, past the
// end too) changes nothing but the time.
void check_streaming_loop(xlite::expr::store_path path) {
  using arch = xlite::kernels::simd_arch;
  if constexpr (!std::is_same_v<arch, xlite::kernels::scalar_arch>) {
    constexpr auto width = static_cast<std::int64_t>(xsimd::batch<float, arch>::size);
    rng g(16);
    for (const std::int64_t extra : {std::int64_t{0}, std::int64_t{1}, std::int64_t{5}, width - 1}) {
      const std::int64_t n = 3 * xlite::expr::parallel_grain + extra;
      const tensor<float> a = random_tensor<float>(g, shape{n}, -4, 4);
      const tensor<float> b = random_tensor<float>(g, shape{n}, -4, 4);
      const tensor<float> c = random_tensor<float>(g, shape{n}, -4, 4);
      const tensor<float> want = fused_reference(a, b, c);
      const auto e = fused(a, b, c);
      using E = std::remove_cvref_t<decltype(e)>;
      const auto plan = xlite::expr::plan_elementwise(e);
      REQUIRE(plan.contiguous);
      constexpr float sentinel = 77.0f;
      tensor<float> memory(shape{n + 64}, sentinel);
      const xlite::expr::flat_task<arch, float, xlite::expr::bound_root<E>, float> task{xlite::expr::bind(e, plan),
                                                                                        memory.data(), path};
      for (const std::size_t threads : {1, 2}) {
        INFO(n << " floats, " << threads << " threads, asking ahead "
               << (path == xlite::expr::store_path::streamed_asking_ahead));
        std::fill_n(memory.data(), n + 64, sentinel);
        xlite::thread_pool pool(threads);
        xlite::expr::parallel_rows(pool, n, n, task);
        CHECK(std::equal(want.data(), want.data() + n, memory.data(), [](float x, float y) {
          return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
        }));
        CHECK(std::count(memory.data() + n, memory.data() + n + 64, sentinel) == 64);
      }
    }
  }
}

} // namespace

TEST_CASE("evaluate: a flat loop with streaming stores ends in a masked batch and writes nothing past it",
          "[evaluate][threads]") {
  check_streaming_loop(xlite::expr::store_path::streamed);
  check_streaming_loop(xlite::expr::store_path::streamed_asking_ahead);
}

TEST_CASE("evaluate: streaming loops ask ahead on Intel's CPUs only", "[evaluate]") {
  xlite::cpu_features cpu;
  CHECK_FALSE(xlite::kernels::prefetch_pays_on(cpu));
  cpu.vendor = xlite::cpu_vendor::intel;
  CHECK(xlite::kernels::prefetch_pays_on(cpu));
  cpu.vendor = xlite::cpu_vendor::amd;
  CHECK_FALSE(xlite::kernels::prefetch_pays_on(cpu));
}

// XLITE_PREFETCH is read once per process, so each setting runs in a process of its own
// (tests/expr/CMakeLists.txt).
namespace {
constexpr std::size_t streamed_bytes = std::size_t{64} << 20; // past streaming_pays' threshold
}

// Without asking ahead, a loop stores plainly (store_path_for) where it evaluates an
// approximated function for every two arrays it moves on one thread, for every array it
// reads on more; asking ahead, it streams.
TEST_CASE("evaluate: XLITE_PREFETCH=0 chooses streaming without asking ahead", "[.xlite_prefetch_off]") {
  using xlite::expr::store_path, xlite::expr::store_path_for;
  CHECK_FALSE(xlite::kernels::prefetch_pays());
  // Approximations, arrays read, threads.
  CHECK(store_path_for(streamed_bytes, 0, 3, 1) == store_path::streamed);
  CHECK(store_path_for(streamed_bytes, 0, 0, 1) == store_path::streamed);
  CHECK(store_path_for(streamed_bytes, 1, 2, 1) == store_path::streamed);
  CHECK(store_path_for(streamed_bytes, 2, 4, 1) == store_path::streamed);
  CHECK(store_path_for(streamed_bytes, 2, 3, 1) == store_path::cached);
  CHECK(store_path_for(streamed_bytes, 1, 1, 1) == store_path::cached);
  CHECK(store_path_for(streamed_bytes, 1, 0, 1) == store_path::cached);
  CHECK(store_path_for(streamed_bytes, 2, 3, 2) == store_path::streamed);
  CHECK(store_path_for(streamed_bytes, 0, 0, 2) == store_path::streamed);
  CHECK(store_path_for(streamed_bytes, 1, 1, 2) == store_path::cached);
  CHECK(store_path_for(streamed_bytes, 3, 2, 2) == store_path::cached);
  CHECK(store_path_for(streamed_bytes, 1, 0, 4) == store_path::cached);
  CHECK(store_path_for(1024, 0, 3, 1) == store_path::cached);

  const auto n = static_cast<std::int64_t>(streamed_bytes / sizeof(float));
  const tensor<float> x(shape{n}, 0.5f);
  const tensor<float> y(shape{n}, 0.25f);
  const tensor<float> w(shape{n}, -0.5f);
  const auto e3 = xlite::exp(-x * x) * y + xlite::tanh(w);
  CHECK(store_path_for(e3, streamed_bytes, 1) == store_path::cached);
  CHECK(store_path_for(e3, streamed_bytes, 2) == store_path::streamed);
  CHECK(store_path_for(xlite::tanh(x) + y, streamed_bytes, 1) == store_path::streamed);
  CHECK(store_path_for(xlite::exp(x * x) + x, streamed_bytes, 2) == store_path::cached); // one array
  CHECK(store_path_for(xlite::exp(x) * xlite::tanh(y), streamed_bytes, 2) == store_path::cached);
  CHECK(store_path_for(xlite::exp(x) * xlite::tanh(y), 1024, 1) == store_path::cached);
  CHECK(store_path_for(x * 2.0f, streamed_bytes, 1) == store_path::streamed);

  // Counted as computed: the same function of two arrays twice, a shared one (the
  // evaluator computes it once) once, with what it contains.
  CHECK(store_path_for(xlite::tanh(x) * xlite::tanh(y), streamed_bytes, 2) == store_path::cached);
  const auto s = xlite::sigmoid(x);
  CHECK(xlite::expr::approximations_computed(y * s * (1.0f - s)) == 1);
  CHECK(store_path_for(y * s * (1.0f - s), streamed_bytes, 1) == store_path::streamed);
  const auto t = xlite::tanh(xlite::exp(x) + 1.0f);
  CHECK(xlite::expr::approximations_computed(t * y + t * xlite::exp(x)) == 2);
  // The evaluator shares a node type only where all its occurrences agree.
  CHECK(xlite::expr::approximations_computed(xlite::tanh(x) + xlite::tanh(y) + xlite::tanh(x)) == 3);
  using xlite::expr::approximation_count_v;
  static_assert(approximation_count_v<decltype(xlite::tanh(x) * xlite::tanh(y))> == 2);
  static_assert(approximation_count_v<decltype(y * s * (1.0f - s))> == 2);
  static_assert(approximation_count_v<decltype(xlite::exp(-x * x) * y + xlite::tanh(y))> == 2);
  static_assert(approximation_count_v<decltype(xlite::sqrt(x) / y - x * y)> == 0);
}

TEST_CASE("evaluate: XLITE_PREFETCH=1 chooses streaming asking ahead", "[.xlite_prefetch_on]") {
  using xlite::expr::store_path, xlite::expr::store_path_for;
  CHECK(xlite::kernels::prefetch_pays());
  CHECK(store_path_for(streamed_bytes, 0, 3, 1) == store_path::streamed_asking_ahead);
  CHECK(store_path_for(streamed_bytes, 1, 1, 1) == store_path::streamed_asking_ahead);
  CHECK(store_path_for(streamed_bytes, 2, 3, 2) == store_path::streamed_asking_ahead);
  CHECK(store_path_for(1024, 0, 3, 1) == store_path::cached);
}

// An evaluation that would stream fails on the calling thread before it stores anything.
TEST_CASE("evaluate: XLITE_PREFETCH with a bad value is a config_error", "[.xlite_prefetch_bad]") {
  CHECK_THROWS_WITH(xlite::expr::store_path_for(streamed_bytes, 0, 3, 1),
                    Catch::Matchers::Contains("XLITE_PREFETCH='yes'"));
  if (!xlite::kernels::simd_path_active()) return;
  const auto n = static_cast<std::int64_t>(streamed_bytes / sizeof(float));
  const tensor<float> x(shape{n}, 1.0f);
  tensor<float> z(shape{n}, 5.0f);
  CHECK_THROWS_AS(z = x + z, xlite::config_error);
  CHECK_THROWS_AS(z = xlite::tanh(x), xlite::config_error); // a loop that would store plainly reads it too
  CHECK(std::all_of(z.data(), z.data() + n, [](float v) { return v == 5.0f; }));
}

namespace {

// Expressions with math functions, whose bits may differ between paths (and between the
// SIMD and the scalar form of an op) but must not depend on the number of threads; one runs
// in SIMD batches, one on the scalar path (float and double mixed). `x` and `y` have the
// same shape, so the loop is one flat run; `z` broadcasts rows of 30011, no multiple of
// any batch width.
struct thread_inputs {
  tensor<float> x, y;
  tensor<float> z;
  tensor<double> w;
};

thread_inputs make_thread_inputs() {
  rng g(14);
  return {random_tensor<float>(g, shape{5, 30011}, -3, 3), random_tensor<float>(g, shape{5, 30011}, -3, 3),
          random_tensor<float>(g, shape{30011}, -3, 3), random_tensor<double>(g, shape{5, 1}, -3, 3)};
}

// Same-shape operands: one flat run.
tensor<float> flat_expression(const thread_inputs& in) {
  return xlite::tanh(in.x * in.y) + xlite::exp(-in.y) * xlite::where(in.x > in.y, xlite::sigmoid(in.x), in.y);
}

// A broadcast row: the loop walks rows of 30011.
tensor<float> rows_expression(const thread_inputs& in) { return xlite::tanh(in.x * in.z) + xlite::exp(-in.z); }

// Mixed widths: the scalar loop, over broadcast rows.
tensor<double> scalar_expression(const thread_inputs& in) {
  return xlite::cast<double>(xlite::sin(in.x)) * in.w + xlite::log1p(xlite::cast<double>(in.z * in.z));
}

template <class Expression>
void check_thread_counts(const thread_inputs& in, Expression&& expression) {
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    decltype(expression(in)) one;
    for (const std::size_t n : thread_counts) {
      xlite::thread_pool pool(n);
      xlite::scoped_thread_pool use(pool);
      INFO(n << " threads");
      const auto result = expression(in);
      if (n == 1) one = result;
      CHECK(digest(result) == digest(one));
    }
  });
}

} // namespace

TEST_CASE("evaluate: a flat loop gives the same bits for 1, 2, 3, 5 and 8 threads", "[evaluate][threads]") {
  static_assert(!xlite::expr::simd_evaluable_v<decltype(xlite::cast<double>(std::declval<const tensor<float>&>()))>);
  const thread_inputs in = make_thread_inputs();
  check_thread_counts(in, flat_expression);
  check_thread_counts(in, scalar_expression); // one lane: the same code for every element
}

// Rows of 30011 elements, split into tasks. (Tasks also split a row only at a multiple of
// the batch width from its start, so that sin and cos, whose range reduction xsimd picks
// for a whole batch, see the batches of one pass; tanh and exp here compute each lane alone,
// so this case checks the split's bookkeeping, not that rule.)
TEST_CASE("evaluate: a loop over broadcast rows gives the same bits for 1, 2, 3, 5 and 8 threads",
          "[evaluate][threads]") {
  const thread_inputs in = make_thread_inputs();
  check_thread_counts(in, rows_expression);
  // Short rows (1001, against tasks of about 2^14 elements) are not split either.
  rng g(15);
  const tensor<float> many_rows = random_tensor<float>(g, shape{67, 1001}, -3, 3);
  const tensor<float> row = random_tensor<float>(g, shape{1001}, -3, 3);
  check_thread_counts(in, [&](const thread_inputs&) { return tensor<float>(xlite::tanh(many_rows * row)); });
}

// Run by CTest with XLITE_NUM_THREADS=2 (tests/expr/CMakeLists.txt), with the cases of the
// same tag in reduce.cpp, in one process: the default pool, sized once per process from the
// environment, gives the bits of a one-thread pool.
TEST_CASE("evaluate: XLITE_NUM_THREADS=2 gives the bits of one thread", "[.xlite_num_threads_2]") {
  REQUIRE(xlite::default_thread_pool().num_threads() == 2);
  const thread_inputs in = make_thread_inputs();
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const tensor<float> flat = flat_expression(in);
    const tensor<double> scalar = scalar_expression(in);
    xlite::thread_pool one(1);
    xlite::scoped_thread_pool use(one);
    CHECK(bitwise_equal(flat, flat_expression(in)));
    CHECK(bitwise_equal(scalar, scalar_expression(in)));
  });
}

// The same for the broadcast rows above.
TEST_CASE("evaluate: XLITE_NUM_THREADS=2 gives the bits of one thread over broadcast rows",
          "[.xlite_num_threads_2]") {
  REQUIRE(xlite::default_thread_pool().num_threads() == 2);
  const thread_inputs in = make_thread_inputs();
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    const tensor<float> rows = rows_expression(in);
    xlite::thread_pool one(1);
    xlite::scoped_thread_pool use(one);
    CHECK(bitwise_equal(rows, rows_expression(in)));
  });
}
