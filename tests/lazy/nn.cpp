// The neural-network composites (conv2d, max_pool2d, avg_pool2d, cross_entropy, mse_loss,
// linear) against naive loops in double precision written out below, on fixed and random
// shapes; the lowering each op promises (one matmul, the pooling paths); and the errors.
//
// Tolerances are worst-case bounds of float rounding, not fitted numbers: a float sum of n
// terms, in any order, is within n 2^-24 of the sum of their magnitudes (plus higher-order
// terms), and the bounds below are at least twice that. So a mistake of the size of one
// misplaced term (a swapped KH/KW, a transposed weight, a wrong class) fails them; the
// "would fail" cases check that it does.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../thrown.hpp"
#include "random_inputs.hpp"
#include "xlite/compile/compiler.hpp"
#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"

using namespace xlite;

namespace {

using xlite_test::message_of;

constexpr double unit_roundoff = 0x1p-24; // float's

using random_inputs::random_tensor;
using random_inputs::uniform;

// A value computed in double and the bound its float result must be within.
struct expected {
  std::vector<double> value, bound;
};

// Whether got matches every expected value within its bound (NaN matches NaN); on a
// mismatch, says where.
bool matches(const xlite::tensor<float>& got, const expected& want, std::string* why = nullptr) {
  if (static_cast<std::size_t>(got.size()) != want.value.size()) {
    if (why) *why = "size " + std::to_string(got.size()) + ", expected " + std::to_string(want.value.size());
    return false;
  }
  for (std::size_t i = 0; i < want.value.size(); ++i) {
    const double g = got.data()[i], w = want.value[i];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::abs(g - w) <= want.bound[i];
    if (!ok) {
      if (why) {
        *why = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", expected " + std::to_string(w) +
               " within " + std::to_string(want.bound[i]);
      }
      return false;
    }
  }
  return true;
}

#define CHECK_MATCHES(got, want)                                                                                       \
  do {                                                                                                                 \
    std::string why;                                                                                                   \
    const bool ok = matches(got, want, &why);                                                                          \
    INFO(why);                                                                                                         \
    CHECK(ok);                                                                                                         \
  } while (false)

// Runs `body` on the SIMD path and, with the ISA capped, on the scalar one (another GEMM).
template <class F>
void on_every_path(F body) {
  SECTION("simd path") { body(); }
  SECTION("scalar path") {
    scoped_max_isa cap(isa::portable);
    body();
  }
}

ir::graph graph_of(const lazy::tensor& t) {
  const ir::node_ptr outputs[] = {t.node()};
  return ir::capture(outputs).program;
}

std::size_t count_ops(const ir::graph& g, op code) {
  return static_cast<std::size_t>(
      std::ranges::count_if(g.instructions, [&](const ir::instruction& ins) { return ins.code == code; }));
}

// ---- conv2d ---------------------------------------------------------------------------------------

struct conv_case {
  std::int64_t n, c, h, w, o, kh, kw;
  lazy::size2 stride = 1, padding = 0, dilation = 1;
  bool bias = true;
};

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The definition, as a 7-deep loop; `weight_at(o, c, i, j)` reads the weight, so that a
// test can ask what a wrong reading (a swapped kernel) would give.
expected
conv_reference(const conv_case& k, const xlite::tensor<float>& x, const xlite::tensor<float>* b,
               const std::function<double(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>& weight_at) {
  const std::int64_t oh = out_size(k.h, k.kh, k.stride.h, k.padding.h, k.dilation.h);
  const std::int64_t ow = out_size(k.w, k.kw, k.stride.w, k.padding.w, k.dilation.w);
  expected e;
  for (std::int64_t n = 0; n < k.n; ++n) {
    for (std::int64_t o = 0; o < k.o; ++o) {
      for (std::int64_t y = 0; y < oh; ++y) {
        for (std::int64_t z = 0; z < ow; ++z) {
          double sum = b ? b->data()[o] : 0.0, magnitude = b ? std::abs(b->data()[o]) : 0.0;
          for (std::int64_t c = 0; c < k.c; ++c) {
            for (std::int64_t i = 0; i < k.kh; ++i) {
              for (std::int64_t j = 0; j < k.kw; ++j) {
                const std::int64_t row = y * k.stride.h - k.padding.h + i * k.dilation.h;
                const std::int64_t col = z * k.stride.w - k.padding.w + j * k.dilation.w;
                if (row < 0 || row >= k.h || col < 0 || col >= k.w) continue; // padding: zero
                const double term = x.data()[((n * k.c + c) * k.h + row) * k.w + col] * weight_at(o, c, i, j);
                sum += term;
                magnitude += std::abs(term);
              }
            }
          }
          e.value.push_back(sum);
          // C*KH*KW products and a bias: (terms + 2) 2^-23 of the magnitudes, twice the bound.
          e.bound.push_back(static_cast<double>(k.c * k.kh * k.kw + 2) * 2 * unit_roundoff * magnitude);
        }
      }
    }
  }
  return e;
}

struct conv_run {
  xlite::tensor<float> x, w, b, got;
  expected want;
};

conv_run run_conv(const conv_case& k) {
  conv_run r{random_tensor(shape{k.n, k.c, k.h, k.w}),
             random_tensor(shape{k.o, k.c, k.kh, k.kw}),
             random_tensor(shape{k.o}),
             {},
             {}};
  const auto bias = k.bias ? std::optional(lazy::tensor::from(r.b)) : std::nullopt;
  r.got = lazy::conv2d(lazy::tensor::from(r.x), lazy::tensor::from(r.w), bias, k.stride, k.padding, k.dilation)
              .to_host<float>();
  const xlite::tensor<float>& w = r.w;
  r.want = conv_reference(k, r.x, k.bias ? &r.b : nullptr, [&](auto o, auto c, auto i, auto j) {
    return static_cast<double>(w.data()[((o * k.c + c) * k.kh + i) * k.kw + j]);
  });
  return r;
}

std::string describe(const conv_case& k) {
  std::ostringstream s;
  s << "input (" << k.n << ", " << k.c << ", " << k.h << ", " << k.w << "), weight (" << k.o << ", " << k.c << ", "
    << k.kh << ", " << k.kw << "), stride " << k.stride << ", padding " << k.padding << ", dilation " << k.dilation
    << (k.bias ? ", bias" : ", no bias");
  return s.str();
}

// ---- pooling --------------------------------------------------------------------------------------

struct pool_case {
  std::int64_t n, c, h, w;
  lazy::size2 kernel, stride, padding = 0;
};

// max (avg = false) or average pooling by definition: over the window's elements of x (the
// padding, -inf or 0, never wins a max and adds nothing to a sum), NaN if the window has one.
expected pool_reference(const pool_case& k, const xlite::tensor<float>& x, bool avg, bool count_include_pad) {
  const std::int64_t oh = out_size(k.h, k.kernel.h, k.stride.h, k.padding.h, 1);
  const std::int64_t ow = out_size(k.w, k.kernel.w, k.stride.w, k.padding.w, 1);
  expected e;
  for (std::int64_t nc = 0; nc < k.n * k.c; ++nc) {
    for (std::int64_t y = 0; y < oh; ++y) {
      for (std::int64_t z = 0; z < ow; ++z) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0, magnitude = 0;
        std::int64_t count = 0;
        for (std::int64_t i = 0; i < k.kernel.h; ++i) {
          for (std::int64_t j = 0; j < k.kernel.w; ++j) {
            const std::int64_t row = y * k.stride.h - k.padding.h + i, col = z * k.stride.w - k.padding.w + j;
            if (row < 0 || row >= k.h || col < 0 || col >= k.w) continue;
            const double v = x.data()[(nc * k.h + row) * k.w + col];
            best = std::isnan(v) || std::isnan(best) ? std::numeric_limits<double>::quiet_NaN() : std::max(best, v);
            sum += v;
            magnitude += std::abs(v);
            ++count;
          }
        }
        if (!avg) {
          e.value.push_back(best);
          e.bound.push_back(0); // a max is exact
        } else {
          const double divisor = count_include_pad ? static_cast<double>(k.kernel.h * k.kernel.w) : count;
          e.value.push_back(sum / divisor);
          e.bound.push_back(static_cast<double>(k.kernel.h * k.kernel.w + 2) * 2 * unit_roundoff * magnitude / divisor);
        }
      }
    }
  }
  return e;
}

std::string describe(const pool_case& k) {
  std::ostringstream s;
  s << "input (" << k.n << ", " << k.c << ", " << k.h << ", " << k.w << "), kernel " << k.kernel << ", stride "
    << k.stride << ", padding " << k.padding;
  return s.str();
}

// ---- losses ---------------------------------------------------------------------------------------

// torch's cross_entropy by definition, with log-sum-exp in double; per sample.
expected cross_entropy_reference(const xlite::tensor<float>& logits, const std::vector<std::int64_t>& targets,
                                 double smoothing) {
  const std::int64_t n = logits.shape()[0], classes = logits.shape()[1];
  expected e;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = logits.data() + i * classes;
    double top = -std::numeric_limits<double>::infinity(), largest = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      top = std::max<double>(top, row[c]);
      largest = std::max<double>(largest, std::abs(row[c]));
    }
    double sum = 0;
    for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - top);
    const double lse = top + std::log(sum);
    double loss = 0, magnitude = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      const double q = (c == targets[static_cast<std::size_t>(i)] ? 1 - smoothing : 0) + smoothing / classes;
      loss += q * (lse - row[c]);
      magnitude += q * std::abs(lse - row[c]);
    }
    e.value.push_back(loss);
    // log_softmax's rounding (shift, exp, a sum of C terms, log) grows with C and the logits'
    // size; then a sum of C weighted terms.
    e.bound.push_back(8 * static_cast<double>(classes + 24) * unit_roundoff * (1 + largest + magnitude));
  }
  return e;
}

// Per-element values reduced as the loss is, with the bound of a float sum of them.
expected reduced(const expected& per, lazy::reduction r) {
  if (r == lazy::reduction::none) return per;
  double value = 0, bound = 0, magnitude = 0;
  for (std::size_t i = 0; i < per.value.size(); ++i) {
    value += per.value[i];
    bound += per.bound[i];
    magnitude += std::abs(per.value[i]);
  }
  const auto n = static_cast<double>(per.value.size());
  bound += 2 * (n + 2) * unit_roundoff * magnitude;
  if (r == lazy::reduction::mean) return {{value / n}, {bound / n}};
  return {{value}, {bound}};
}

const char* name_of(lazy::reduction r) {
  return r == lazy::reduction::none ? "none" : r == lazy::reduction::mean ? "mean" : "sum";
}

} // namespace

// ===== conv2d ========================================================================================

TEST_CASE("conv2d equals the definition's 7-deep loop", "[lazy][nn][conv2d]") {
  std::vector<conv_case> cases = {
      {1, 1, 5, 5, 1, 3, 3},                          // the smallest: batch 1, one channel
      {2, 3, 7, 9, 4, 3, 3, 2, 1},                    // stride 2, padding 1, non-square input
      {3, 2, 8, 6, 5, 5, 3, 1, 2},                    // a 5x3 kernel, padding 2
      {2, 3, 9, 10, 2, 3, 3, 1, 2, 2},                // dilation 2
      {2, 4, 5, 6, 3, 1, 1},                          // 1x1: the matmul alone
      {2, 4, 7, 6, 3, 1, 1, 2},                       // 1x1, stride 2
      {2, 2, 11, 9, 3, 5, 3, {2, 1}, {2, 1}, {1, 2}}, // every setting differs between H and W
      {1, 3, 6, 4, 2, 3, 5, 1, {0, 1}, 1, false},     // no bias, a 3x5 kernel
      {2, 1, 4, 4, 2, 6, 6, 1, 1},                    // the kernel is the whole padded input
      {1, 2, 5, 5, 3, 2, 2, 3, 0, 2},                 // stride larger than the kernel: skips rows
  };
  for (int extra = 0; extra < 24; ++extra) { // random shapes and settings that fit
    conv_case k{uniform(1, 3),
                uniform(1, 4),
                uniform(1, 12),
                uniform(1, 12),
                uniform(1, 5),
                uniform(1, 5),
                uniform(1, 5),
                {uniform(1, 3), uniform(1, 3)},
                {uniform(0, 2), uniform(0, 2)},
                {uniform(1, 2), uniform(1, 2)},
                uniform(0, 3) != 0};
    if (k.h + 2 * k.padding.h >= k.dilation.h * (k.kh - 1) + 1 &&
        k.w + 2 * k.padding.w >= k.dilation.w * (k.kw - 1) + 1) {
      cases.push_back(k);
    }
  }
  on_every_path([&] {
    for (const conv_case& k : cases) {
      INFO(describe(k));
      const conv_run r = run_conv(k);
      CHECK(r.got.shape() == shape{k.n, k.o, out_size(k.h, k.kh, k.stride.h, k.padding.h, k.dilation.h),
                                   out_size(k.w, k.kw, k.stride.w, k.padding.w, k.dilation.w)});
      CHECK_MATCHES(r.got, r.want);
    }
  });
}

TEST_CASE("conv2d's check would catch a swapped kernel or a transposed weight", "[lazy][nn][conv2d]") {
  // Square kernels and O == C, so that the wrong readings have the right shape.
  for (const conv_case& k : {conv_case{2, 3, 7, 6, 3, 3, 3, 1, 1}, conv_case{1, 2, 6, 6, 2, 2, 2, 2, 1, 1, false}}) {
    INFO(describe(k));
    const conv_run r = run_conv(k);
    CHECK(matches(r.got, r.want));
    const auto& w = r.w;
    const auto at = [&](auto o, auto c, auto i, auto j) {
      return static_cast<double>(w.data()[((o * k.c + c) * k.kh + i) * k.kw + j]);
    };
    const expected swapped_kernel =
        conv_reference(k, r.x, k.bias ? &r.b : nullptr, [&](auto o, auto c, auto i, auto j) { return at(o, c, j, i); });
    const expected transposed_weight =
        conv_reference(k, r.x, k.bias ? &r.b : nullptr, [&](auto o, auto c, auto i, auto j) { return at(c, o, i, j); });
    const expected flipped_kernel =
        conv_reference(k, r.x, k.bias ? &r.b : nullptr, [&](auto o, auto c, auto i, auto j) {
          return at(o, c, k.kh - 1 - i, k.kw - 1 - j); // a true convolution, not torch's cross-correlation
        });
    CHECK_FALSE(matches(r.got, swapped_kernel));
    CHECK_FALSE(matches(r.got, transposed_weight));
    CHECK_FALSE(matches(r.got, flipped_kernel));
  }
}

TEST_CASE("conv2d lowers to one unfold and one matmul", "[lazy][nn][conv2d]") {
  const auto x = lazy::tensor::from(random_tensor(shape{2, 3, 8, 8}));
  const auto b = lazy::tensor::from(random_tensor(shape{4}));

  const ir::graph g = graph_of(lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 3, 5, 3})), b, 2, 1));
  CHECK(count_ops(g, op::unfold) == 1);
  CHECK(count_ops(g, op::matmul) == 1);
  CHECK(count_ops(g, op::permute) == 0); // the batched layout needs no transposition

  const ir::graph pointwise = graph_of(lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 3, 1, 1}))));
  CHECK(count_ops(pointwise, op::matmul) == 1);
  CHECK(count_ops(pointwise, op::unfold) == 0); // a 1x1 kernel's patches are the input reshaped
}

TEST_CASE("the biases of conv2d and linear run as their GEMM's epilogue", "[lazy][nn]") {
  // An epilogue needs its other inputs ready before the matmul: the bias must come first.
  const auto epilogues = [](const lazy::tensor& t) {
    const auto exe = compile::compile_graph(graph_of(t));
    return std::ranges::count_if(exe->kernels, [](const compile::kernel& k) { return k.group.matmul_epilogue; });
  };
  const auto x = lazy::tensor::from(random_tensor(shape{2, 3, 8, 8}));
  const auto b = lazy::tensor::from(random_tensor(shape{4}));
  CHECK(epilogues(lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 3, 3, 3})), b, 1, 1)) == 1);
  CHECK(epilogues(lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 3, 3, 3})), b * 2.0f)) == 1);
  const auto v = lazy::tensor::from(random_tensor(shape{5, 3}));
  CHECK(epilogues(lazy::linear(v, lazy::tensor::from(random_tensor(shape{4, 3})), b)) == 1);
  CHECK(epilogues(lazy::linear(v, lazy::tensor::from(random_tensor(shape{4, 3})), b * 2.0f)) == 1);
}

TEST_CASE("conv2d's errors name conv2d and the shapes", "[lazy][nn][conv2d][errors]") {
  const auto x = lazy::tensor::from(random_tensor(shape{2, 3, 5, 5}));
  const auto w = lazy::tensor::from(random_tensor(shape{4, 3, 3, 3}));
  using Catch::Contains;

  CHECK_THAT(message_of<shape_error>([&] {
               lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 2, 3, 3})));
             }),
             Contains("conv2d") && Contains("(2, 3, 5, 5)") && Contains("(4, 2, 3, 3)") && Contains("channels"));
  CHECK_THAT(message_of<shape_error>([&] {
               lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 3, 6, 3})));
             }),
             Contains("conv2d") && Contains("kernel (6, 3)") && Contains("(5, 5)"));
  CHECK_THAT(message_of<shape_error>([&] { lazy::conv2d(x, w, std::nullopt, 1, 0, 3); }), // dilated span 7 > 5
             Contains("conv2d") && Contains("dilation (3, 3)"));
  CHECK_NOTHROW(lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 3, 6, 3})), std::nullopt, 1, 1));
  CHECK_THAT(message_of<value_error>([&] {
               lazy::conv2d(x, w, std::nullopt, {1, 0});
             }),
             Contains("conv2d") && Contains("stride (1, 0)"));
  CHECK_THAT(message_of<value_error>([&] { lazy::conv2d(x, w, std::nullopt, 1, -1); }),
             Contains("conv2d") && Contains("padding"));
  CHECK_THAT(message_of<value_error>([&] { lazy::conv2d(x, w, std::nullopt, 1, 0, 0); }),
             Contains("conv2d") && Contains("dilation"));
  CHECK_THAT(message_of<shape_error>([&] {
               lazy::conv2d(lazy::tensor::from(random_tensor(shape{3, 5, 5})), w);
             }),
             Contains("conv2d") && Contains("(3, 5, 5)"));
  CHECK_THAT(message_of<shape_error>([&] {
               lazy::conv2d(x, lazy::tensor::from(random_tensor(shape{4, 3, 3})));
             }),
             Contains("conv2d") && Contains("(4, 3, 3)"));
  CHECK_THAT(message_of<shape_error>([&] { lazy::conv2d(x, w, lazy::tensor::from(random_tensor(shape{3}))); }),
             Contains("conv2d") && Contains("bias") && Contains("(3,)"));
  CHECK_THAT(message_of<dtype_error>([&] { lazy::conv2d(lazy::cast(x, dtype::f64), w); }),
             Contains("conv2d") && Contains("float64"));
  CHECK_THAT(message_of<dtype_error>([&] { lazy::conv2d(lazy::cast(x, dtype::i32), lazy::cast(w, dtype::i32)); }),
             Contains("conv2d") && Contains("int32"));
}

// ===== pooling =======================================================================================

TEST_CASE("max_pool2d and avg_pool2d equal their definitions", "[lazy][nn][pooling]") {
  std::vector<pool_case> cases = {
      {2, 3, 8, 6, 2, 2},              // windows that tile the input
      {1, 2, 7, 9, 2, 2},              // odd sizes: floor mode drops the last row and column
      {2, 1, 9, 8, {3, 2}, {3, 2}},    // tiling with a 3x2 kernel
      {2, 2, 7, 7, 3, 2, 1},           // overlapping 3x3, stride 2, padding 1
      {1, 3, 6, 5, 3, 1},              // overlapping, stride 1
      {2, 2, 6, 7, {2, 3}, {1, 2}, 1}, // a 2x3 kernel, stride (1, 2), padding 1
      {1, 2, 9, 8, 5, 3, 2},           // padding 2
      {2, 1, 8, 7, 2, 3},              // stride larger than the kernel: gaps
      {1, 2, 5, 6, 1, 2},              // a 1x1 kernel with stride 2
      {1, 1, 3, 3, 3, 3, 1},           // padded and one window per axis
      {2, 2, 6, 6, 2, 2, 1},           // stride == kernel with padding
  };
  for (int extra = 0; extra < 20; ++extra) {
    const lazy::size2 kernel{uniform(1, 4), uniform(1, 4)};
    pool_case k{uniform(1, 3),
                uniform(1, 3),
                uniform(1, 11),
                uniform(1, 11),
                kernel,
                {uniform(1, 3), uniform(1, 3)},
                {uniform(0, kernel.h / 2), uniform(0, kernel.w / 2)}};
    if (extra % 4 == 0) { // more tiling windows, max pooling's usual case
      k.stride = k.kernel;
      k.padding = 0;
    }
    if (k.h + 2 * k.padding.h >= k.kernel.h && k.w + 2 * k.padding.w >= k.kernel.w) cases.push_back(k);
  }
  for (const pool_case& k : cases) {
    INFO(describe(k));
    const auto host = random_tensor(shape{k.n, k.c, k.h, k.w});
    const auto x = lazy::tensor::from(host);
    CHECK_MATCHES(lazy::max_pool2d(x, k.kernel, k.stride, k.padding).to_host<float>(),
                  pool_reference(k, host, false, true));
    CHECK_MATCHES(lazy::avg_pool2d(x, k.kernel, k.stride, k.padding).to_host<float>(),
                  pool_reference(k, host, true, true));
    CHECK_MATCHES(lazy::avg_pool2d(x, k.kernel, k.stride, k.padding, false).to_host<float>(),
                  pool_reference(k, host, true, false));
  }
}

TEST_CASE("pooling's stride defaults to the kernel, and NaN propagates", "[lazy][nn][pooling]") {
  auto host = random_tensor(shape{1, 2, 6, 6});
  host.data()[7] = std::numeric_limits<float>::quiet_NaN(); // channel 0, row 1, column 1
  const auto x = lazy::tensor::from(host);
  const pool_case tiled{1, 2, 6, 6, 2, 2}, overlapping{1, 2, 6, 6, 3, 1, 1};
  CHECK_MATCHES(lazy::max_pool2d(x, 2).to_host<float>(), pool_reference(tiled, host, false, true));
  CHECK_MATCHES(lazy::avg_pool2d(x, 2).to_host<float>(), pool_reference(tiled, host, true, true));
  CHECK_MATCHES(lazy::max_pool2d(x, 3, 1, 1).to_host<float>(), pool_reference(overlapping, host, false, true));
  CHECK(std::isnan(lazy::max_pool2d(x, 3, 1, 1).to_host<float>().data()[0]));
  CHECK(std::isnan(lazy::max_pool2d(x, 2).to_host<float>().data()[0]));
}

TEST_CASE("max_pool2d is one window op, avg_pool2d an unfold and a sum", "[lazy][nn][pooling]") {
  const auto x = lazy::tensor::from(random_tensor(shape{2, 3, 8, 7}));
  for (const ir::graph& g : {graph_of(lazy::max_pool2d(x, 2)), graph_of(lazy::max_pool2d(x, 3, 2, 1))}) {
    CHECK(g.instructions.size() == 2); // the parameter and select_window_max
    CHECK(count_ops(g, op::select_window_max) == 1);
  }
  const ir::graph avg = graph_of(lazy::avg_pool2d(x, 3, 2, 1));
  CHECK(count_ops(avg, op::unfold) == 1);
  CHECK(count_ops(avg, op::sum) == 1);
}

TEST_CASE("pooling's errors name the op and the shapes", "[lazy][nn][pooling][errors]") {
  const auto x = lazy::tensor::from(random_tensor(shape{2, 3, 5, 4}));
  using Catch::Contains;
  for (const char* op_name : {"max_pool2d", "avg_pool2d"}) {
    const auto pool = [&](const lazy::tensor& t, lazy::size2 kernel, lazy::size2 stride, lazy::size2 padding) {
      return std::string(op_name) == "max_pool2d" ? lazy::max_pool2d(t, kernel, stride, padding)
                                                  : lazy::avg_pool2d(t, kernel, stride, padding);
    };
    INFO(op_name);
    CHECK_THAT(message_of<value_error>([&] { pool(x, {0, 2}, 1, 0); }), Contains(op_name) && Contains("kernel (0, 2)"));
    CHECK_THAT(message_of<value_error>([&] { pool(x, 2, {1, 0}, 0); }), Contains(op_name) && Contains("stride (1, 0)"));
    CHECK_THAT(message_of<value_error>([&] { pool(x, 3, 1, 2); }), Contains(op_name) && Contains("padding (2, 2)"));
    CHECK_THAT(message_of<value_error>([&] { pool(x, 3, 1, -1); }), Contains(op_name) && Contains("padding"));
    CHECK_THAT(message_of<shape_error>([&] { pool(x, 5, 1, 0); }),
               Contains(op_name) && Contains("kernel (5, 5)") && Contains("(2, 3, 5, 4)"));
    CHECK_NOTHROW(pool(x, 5, 1, 1)); // the padded input (7, 6) holds it
    CHECK_THAT(message_of<shape_error>([&] {
                 pool(lazy::tensor::from(random_tensor(shape{3, 5, 4})), 2, 2, 0);
               }),
               Contains(op_name) && Contains("(3, 5, 4)"));
    CHECK_THAT(message_of<dtype_error>([&] { pool(lazy::cast(x, dtype::i64), 2, 2, 0); }),
               Contains(op_name) && Contains("int64"));
  }
}

// ===== losses and linear =============================================================================

TEST_CASE("cross_entropy equals log-sum-exp in double, for each reduction and label smoothing", "[lazy][nn][losses]") {
  for (int trial = 0; trial < 12; ++trial) {
    const std::int64_t n = trial == 0 ? 1 : uniform(1, 9);
    const std::int64_t classes = trial == 1 ? 1 : uniform(2, 12);
    const double scale = trial % 3 == 2 ? 80 : 8; // 80: exp would overflow float without the shift
    const auto logits_host = random_tensor(shape{n, classes}, -scale, scale);
    std::vector<std::int64_t> targets(static_cast<std::size_t>(n));
    xlite::tensor<std::int64_t> targets_host(shape{n});
    for (std::int64_t i = 0; i < n; ++i)
      targets_host.data()[i] = targets[static_cast<std::size_t>(i)] = uniform(0, classes - 1);
    const auto logits = lazy::tensor::from(logits_host);
    const auto target = lazy::tensor::from(targets_host);
    for (const double smoothing : {0.0, 0.1, 1.0}) {
      const expected per_sample = cross_entropy_reference(logits_host, targets, smoothing);
      for (const auto r : {lazy::reduction::none, lazy::reduction::mean, lazy::reduction::sum}) {
        INFO("logits (" << n << ", " << classes << ") in +-" << scale << ", smoothing " << smoothing << ", reduction "
                        << name_of(r));
        const auto got = lazy::cross_entropy(logits, target, r, smoothing).to_host<float>();
        CHECK(got.shape() == (r == lazy::reduction::none ? shape{n} : shape{}));
        CHECK_MATCHES(got, reduced(per_sample, r));
      }
    }
    if (classes > 1) { // the comparison would catch a wrong class
      std::vector<std::int64_t> wrong = targets;
      for (auto& t : wrong) t = (t + 1) % classes;
      CHECK_FALSE(matches(lazy::cross_entropy(logits, target, lazy::reduction::none).to_host<float>(),
                          cross_entropy_reference(logits_host, wrong, 0.0)));
    }
  }
}

TEST_CASE("cross_entropy takes any integer targets, and one out of range keeps only its smoothing term",
          "[lazy][nn][losses]") {
  const auto logits_host = random_tensor(shape{3, 4}, -2, 2);
  const auto logits = lazy::tensor::from(logits_host);
  const auto targets32 = lazy::tensor::from(xlite::tensor<std::int32_t>({2, 0, 3}));
  CHECK_MATCHES(lazy::cross_entropy(logits, targets32, lazy::reduction::none).to_host<float>(),
                cross_entropy_reference(logits_host, {2, 0, 3}, 0.0));
  const auto outside = lazy::tensor::from(xlite::tensor<std::int64_t>({4, -1, 1}));
  const auto got = lazy::cross_entropy(logits, outside, lazy::reduction::none, 0.2).to_host<float>();
  const expected smoothing_only = cross_entropy_reference(logits_host, {-7, -7, 1}, 0.2); // -7 matches no class
  CHECK_MATCHES(got, smoothing_only);
}

TEST_CASE("mse_loss equals the mean, sum or elements of squared differences", "[lazy][nn][losses]") {
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<std::int64_t> dims;
    for (std::int64_t a = 0, rank = uniform(1, 4); a < rank; ++a) dims.push_back(uniform(1, 9));
    const shape s(dims);
    const auto a = random_tensor(s, -3, 3), b = random_tensor(s, -3, 3);
    expected per;
    for (std::int64_t i = 0; i < a.size(); ++i) {
      const double d = static_cast<double>(a.data()[i]) - b.data()[i];
      per.value.push_back(d * d);
      per.bound.push_back(4 * unit_roundoff * d * d); // a difference and a product, each rounded once
    }
    for (const auto r : {lazy::reduction::none, lazy::reduction::mean, lazy::reduction::sum}) {
      INFO("shape " << s << ", reduction " << name_of(r));
      const auto got = lazy::mse_loss(lazy::tensor::from(a), lazy::tensor::from(b), r).to_host<float>();
      CHECK(got.shape() == (r == lazy::reduction::none ? s : shape{}));
      CHECK_MATCHES(got, reduced(per, r));
    }
  }
}

TEST_CASE("linear equals x times the transposed weight plus the bias", "[lazy][nn][losses]") {
  on_every_path([] {
    for (int trial = 0; trial < 10; ++trial) {
      const std::int64_t in = uniform(1, 20), out = uniform(1, 9);
      std::vector<std::int64_t> dims;
      for (std::int64_t a = 0, rank = trial % 3; a < rank; ++a) dims.push_back(uniform(1, 5)); // rank 1 to 3
      dims.push_back(in);
      const shape s(dims);
      const auto x = random_tensor(s), w = random_tensor(shape{out, in}), b = random_tensor(shape{out});
      const bool with_bias = trial % 2 == 0;
      expected want;
      for (std::int64_t row = 0; row < x.size() / in; ++row) {
        for (std::int64_t o = 0; o < out; ++o) {
          double sum = with_bias ? b.data()[o] : 0.0, magnitude = std::abs(sum);
          for (std::int64_t i = 0; i < in; ++i) {
            const double term = static_cast<double>(x.data()[row * in + i]) * w.data()[o * in + i];
            sum += term;
            magnitude += std::abs(term);
          }
          want.value.push_back(sum);
          want.bound.push_back(static_cast<double>(in + 2) * 2 * unit_roundoff * magnitude);
        }
      }
      INFO("x " << s << ", weight (" << out << ", " << in << ")" << (with_bias ? ", bias" : ""));
      const auto bias = with_bias ? std::optional(lazy::tensor::from(b)) : std::nullopt;
      const auto got = lazy::linear(lazy::tensor::from(x), lazy::tensor::from(w), bias).to_host<float>();
      dims.back() = out;
      CHECK(got.shape() == shape(dims));
      CHECK_MATCHES(got, want);
    }
  });
}

TEST_CASE("the losses' and linear's errors name the op and the shapes", "[lazy][nn][losses][errors]") {
  using Catch::Contains;
  const auto logits = lazy::tensor::from(random_tensor(shape{4, 3}));
  const auto targets = lazy::tensor::from(xlite::tensor<std::int64_t>({0, 1, 2, 1}));
  CHECK_THAT(message_of<shape_error>([&] {
               lazy::cross_entropy(logits, lazy::tensor::from(xlite::tensor<std::int64_t>({0, 1})));
             }),
             Contains("cross_entropy") && Contains("(2,)") && Contains("(4, 3)"));
  CHECK_THAT(message_of<shape_error>([&] { lazy::cross_entropy(lazy::reshape(logits, shape{12}), targets); }),
             Contains("cross_entropy") && Contains("(12,)"));
  CHECK_THAT(message_of<dtype_error>([&] { lazy::cross_entropy(logits, lazy::cast(targets, dtype::f32)); }),
             Contains("cross_entropy") && Contains("float32"));
  CHECK_THAT(message_of<dtype_error>([&] { lazy::cross_entropy(lazy::cast(logits, dtype::i64), targets); }),
             Contains("cross_entropy") && Contains("int64"));
  CHECK_THAT(message_of<value_error>([&] { lazy::cross_entropy(logits, targets, lazy::reduction::mean, 1.5); }),
             Contains("cross_entropy") && Contains("label_smoothing"));
  CHECK_THAT(message_of<value_error>([&] { lazy::cross_entropy(logits, targets, lazy::reduction::mean, -0.1); }),
             Contains("label_smoothing"));

  CHECK_THAT(message_of<shape_error>([&] {
               lazy::mse_loss(logits, lazy::tensor::from(random_tensor(shape{4, 1})));
             }),
             Contains("mse_loss") && Contains("(4, 3)") && Contains("(4, 1)"));
  CHECK_THAT(message_of<dtype_error>([&] { lazy::mse_loss(logits, lazy::cast(logits, dtype::f64)); }),
             Contains("mse_loss") && Contains("float64"));

  const auto w = lazy::tensor::from(random_tensor(shape{5, 3}));
  CHECK_THAT(message_of<shape_error>([&] { lazy::linear(logits, lazy::transpose(w)); }),
             Contains("linear") && Contains("(4, 3)") && Contains("(3, 5)"));
  CHECK_THAT(message_of<shape_error>([&] { lazy::linear(logits, lazy::reshape(w, shape{15})); }),
             Contains("linear") && Contains("(15,)"));
  CHECK_THAT(message_of<shape_error>([&] { lazy::linear(logits, w, lazy::tensor::from(random_tensor(shape{3}))); }),
             Contains("linear") && Contains("bias") && Contains("(3,)"));
  CHECK_THAT(message_of<dtype_error>([&] { lazy::linear(logits, lazy::cast(w, dtype::f64)); }),
             Contains("linear") && Contains("float64"));
}

#undef CHECK_MATCHES
