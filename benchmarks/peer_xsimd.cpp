// The expression cases as hand-written loops over xsimd::batch<float> of xsimd's default
// arch (the widest this file is compiled for): aligned loads and stores, a scalar loop for
// the last n % lanes elements; the sum is simd_dot.hpp's loop. This is the loop xlite's fused
// expressions promise to match (DESIGN.md: "as fast as a hand-written SIMD loop").

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bench_common.hpp"
#include "expressions.hpp"
#include "simd_dot.hpp"

namespace {

using namespace xlite::bench;

using batch = xsimd::batch<float>;
constexpr std::int64_t lanes = batch::size;
static_assert(thread_team::part_alignment % lanes == 0 &&
                  aligned_floats::alignment % batch::arch_type::alignment() == 0,
              "every part starts on a batch boundary");

// z[i] = f(in[i]...) for i in [begin, end): batches, then floats for the last few.
template <class F, class... In>
void transform(float* z, std::int64_t begin, std::int64_t end, F f, const In*... in) {
  std::int64_t i = begin;
  for (; i + lanes <= end; i += lanes) f(batch::load_aligned(in + i)...).store_aligned(z + i);
  for (; i < end; ++i) z[i] = f(in[i]...);
}

constexpr float a = expression_inputs::a;
constexpr float b = expression_inputs::b;
constexpr float c = expression_inputs::c;

// Each element-wise case is one generic lambda, for batches and for the tail's floats:
// argument-dependent lookup finds xsimd's exp, tanh and max for batches, the
// using-declarations std's for floats.
struct xsimd_kernels {
  static void e1(expression_operands& o, std::int64_t begin, std::int64_t end) {
    transform(
        o.z.data(), begin, end, [](auto x, auto y) { return a * x + y; }, o.x.data(), o.y.data());
  }
  static void e2(expression_operands& o, std::int64_t begin, std::int64_t end) {
    transform(
        o.z.data(), begin, end, [](auto x, auto y, auto w) { return a * x + b * y - c * w; }, o.x.data(), o.y.data(),
        o.w.data());
  }
  static void e3(expression_operands& o, std::int64_t begin, std::int64_t end) {
    transform(
        o.z.data(), begin, end,
        [](auto x, auto y, auto w) {
          using std::exp, std::tanh;
          return exp(-x * x) * y + tanh(w);
        },
        o.x.data(), o.y.data(), o.w.data());
  }
  static void e4(expression_operands& o, std::int64_t begin, std::int64_t end) {
    transform(
        o.z.data(), begin, end,
        [](auto x, auto y, auto w) {
          using V = decltype(x);
          using std::max;
          return max(x * y + w, V(0));
        },
        o.x.data(), o.y.data(), o.w.data());
  }
  static float sum_xy(const expression_operands& o, std::int64_t begin, std::int64_t end) {
    return simd_dot(o.x.data(), o.y.data(), begin, end);
  }
};

} // namespace

void xlite::bench::register_xsimd() { register_split_expressions<xsimd_kernels>("xsimd", batch::arch_type::name()); }
