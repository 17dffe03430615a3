// The window ops (ir/window.hpp: unfold, fold, select_window_max, scatter_window_max)
// against their definitions written as loops below, on random geometries (kernel, stride,
// padding, dilation, each differing between H and W) and dtypes; the adjoint identities
// autodiff relies on; the tie and NaN rules of max pooling; results that do not depend on
// the thread count; and the errors.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../thrown.hpp"
#include "random_inputs.hpp"
#include "xlite/autodiff.hpp"
#include "xlite/core/thread_pool.hpp"
#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"
#include "xlite/runtime/window.hpp"

using namespace xlite;

namespace {

using xlite_test::message_of;

using random_inputs::random_tensor;
using random_inputs::uniform;

// A random input shape and a window geometry with at least one window over it; `max_ops`
// also keeps every window's taps from falling only into the padding.
struct window_case {
  shape input;
  ir::window2d w;
};

bool holds_elements(std::int64_t size, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                    std::int64_t dilation) {
  for (std::int64_t p = 0; p < ir::window2d::count(size, kernel, stride, pad, dilation); ++p) {
    bool holds = false;
    for (std::int64_t i = 0; i < kernel; ++i) {
      const std::int64_t at = p * stride - pad + i * dilation;
      holds = holds || (at >= 0 && at < size);
    }
    if (!holds) return false;
  }
  return true;
}

std::vector<window_case> random_cases(int count, bool max_ops) {
  std::vector<window_case> cases = {
      {shape{2, 3, 6, 6}, {2, 2, 2, 2}},                 // max pooling's usual 2x2
      {shape{1, 2, 7, 9}, {3, 3, 1, 1, 1, 1}},           // a 3x3 convolution's, padded
      {shape{2, 1, 9, 8}, {3, 2, 2, 1, 1, 0, 2, 1}},     // every setting differs between H and W
      {shape{1, 1, 1, 1}, {1, 1}},                       // one pixel (a reshape)
      {shape{1, 2, 5, 5}, {2, 2, 3, 3}},                 // stride past the kernel: gaps
  };
  while (static_cast<int>(cases.size()) < count) {
    window_case k{shape{uniform(1, 3), uniform(1, 3), uniform(1, 10), uniform(1, 10)},
                  {uniform(1, 4), uniform(1, 4), uniform(1, 3), uniform(1, 3), uniform(0, 2), uniform(0, 2),
                   uniform(1, 3), uniform(1, 3)}};
    const ir::window2d& w = k.w;
    if (w.out_h(k.input[2]) < 1 || w.out_w(k.input[3]) < 1) continue;
    if (max_ops && !(holds_elements(k.input[2], w.kernel_h, w.stride_h, w.pad_h, w.dilation_h) &&
                     holds_elements(k.input[3], w.kernel_w, w.stride_w, w.pad_w, w.dilation_w))) {
      continue;
    }
    cases.push_back(k);
  }
  return cases;
}

std::string describe_window(const window_case& k) {
  std::ostringstream s;
  s << "input " << k.input << ", " << k.w;
  return s.str();
}

// Element (row, col) of window (y, x) along with tap (i, j), or -1 in the padding.
std::int64_t tap_at(const window_case& k, std::int64_t y, std::int64_t x, std::int64_t i, std::int64_t j) {
  const ir::window2d& w = k.w;
  const std::int64_t row = y * w.stride_h - w.pad_h + i * w.dilation_h;
  const std::int64_t col = x * w.stride_w - w.pad_w + j * w.dilation_w;
  return row < 0 || row >= k.input[2] || col < 0 || col >= k.input[3] ? -1 : row * k.input[3] + col;
}

// Calls f(n*C + c, plane offset of the tap or -1, unfolded row, window index) for every
// tap of every window, in unfold's order.
template <class F>
void for_each_tap(const window_case& k, F f) {
  const ir::window2d& w = k.w;
  const std::int64_t oh = w.out_h(k.input[2]), ow = w.out_w(k.input[3]);
  for (std::int64_t p = 0; p < k.input[0] * k.input[1]; ++p) {
    for (std::int64_t i = 0; i < w.kernel_h; ++i) {
      for (std::int64_t j = 0; j < w.kernel_w; ++j) {
        for (std::int64_t y = 0; y < oh; ++y) {
          for (std::int64_t x = 0; x < ow; ++x) f(p, tap_at(k, y, x, i, j), i * w.kernel_w + j, y * ow + x);
        }
      }
    }
  }
}

template <class T>
std::vector<double> unfold_reference(const window_case& k, const xlite::tensor<T>& x) {
  const std::int64_t taps = k.w.kernel_h * k.w.kernel_w;
  const std::int64_t blocks = k.w.out_h(k.input[2]) * k.w.out_w(k.input[3]);
  const std::int64_t plane = k.input[2] * k.input[3];
  std::vector<double> out(static_cast<std::size_t>(k.input[0] * k.input[1] * taps * blocks));
  for_each_tap(k, [&](std::int64_t p, std::int64_t at, std::int64_t tap, std::int64_t block) {
    out[static_cast<std::size_t>((p * taps + tap) * blocks + block)] =
        at < 0 ? 0.0 : static_cast<double>(x.data()[p * plane + at]);
  });
  return out;
}

std::vector<double> fold_reference(const window_case& k, const xlite::tensor<double>& cols) {
  const std::int64_t taps = k.w.kernel_h * k.w.kernel_w;
  const std::int64_t blocks = k.w.out_h(k.input[2]) * k.w.out_w(k.input[3]);
  const std::int64_t plane = k.input[2] * k.input[3];
  std::vector<double> out(static_cast<std::size_t>(k.input.numel()));
  for_each_tap(k, [&](std::int64_t p, std::int64_t at, std::int64_t tap, std::int64_t block) {
    if (at >= 0) out[static_cast<std::size_t>(p * plane + at)] += cols.data()[(p * taps + tap) * blocks + block];
  });
  return out;
}

// The plane offset of each window's first maximum (NaN the largest), plane by plane.
std::vector<std::int64_t> argmax_reference(const window_case& k, const xlite::tensor<double>& x) {
  const std::int64_t oh = k.w.out_h(k.input[2]), ow = k.w.out_w(k.input[3]), plane = k.input[2] * k.input[3];
  std::vector<std::int64_t> best;
  for (std::int64_t p = 0; p < k.input[0] * k.input[1]; ++p) {
    for (std::int64_t y = 0; y < oh; ++y) {
      for (std::int64_t z = 0; z < ow; ++z) {
        std::int64_t at_best = -1;
        for (std::int64_t i = 0; i < k.w.kernel_h; ++i) {
          for (std::int64_t j = 0; j < k.w.kernel_w; ++j) {
            const std::int64_t at = tap_at(k, y, z, i, j);
            if (at < 0) continue;
            const double v = x.data()[p * plane + at];
            const double b = at_best < 0 ? 0.0 : x.data()[p * plane + at_best];
            if (at_best < 0 || v > b || (std::isnan(v) && !std::isnan(b))) at_best = at;
          }
        }
        best.push_back(at_best);
      }
    }
  }
  return best;
}

template <class T>
std::vector<double> values(const xlite::tensor<T>& t) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < t.size(); ++i) v.push_back(static_cast<double>(t.data()[i]));
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

lazy::tensor op_node(const lazy::tensor& like, ir::node_ptr n) { return lazy::tensor(like.device(), std::move(n)); }

} // namespace

TEST_CASE("unfold equals its definition for any geometry and dtype", "[lazy][window]") {
  for (const window_case& k : random_cases(40, false)) {
    INFO(describe_window(k));
    const auto x = random_tensor(k.input);
    const auto got = op_node(lazy::tensor::from(x), ir::unfold(lazy::tensor::from(x).node(), k.w));
    CHECK(got.shape() == shape{k.input[0], k.input[1] * k.w.kernel_h * k.w.kernel_w,
                               k.w.out_h(k.input[2]) * k.w.out_w(k.input[3])});
    CHECK(values(got.to_host<float>()) == unfold_reference(k, x)); // moved, not computed: exact
    // Other element sizes take the same path as raw bytes.
    const auto xi = random_tensor<std::int32_t>(k.input, -100, 100);
    CHECK(values(lazy::cast(got, dtype::f64).to_host<double>()) == unfold_reference(k, x));
    const auto unfolded_ints =
        op_node(lazy::tensor::from(xi), ir::unfold(lazy::tensor::from(xi).node(), k.w)).to_host<std::int32_t>();
    CHECK(values(unfolded_ints) == unfold_reference(k, xi));
    const auto xb = lazy::cast(lazy::tensor::from(x), dtype::bf16);
    const auto unfolded_bf16 = lazy::cast(op_node(xb, ir::unfold(xb.node(), k.w)), dtype::f64).to_host<double>();
    CHECK(values(unfolded_bf16) == unfold_reference(k, lazy::cast(xb, dtype::f64).to_host<double>()));
  }
}

TEST_CASE("fold equals its definition and is unfold's adjoint", "[lazy][window]") {
  for (const window_case& k : random_cases(40, false)) {
    INFO(describe_window(k));
    const shape cols_shape{k.input[0], k.input[1] * k.w.kernel_h * k.w.kernel_w,
                           k.w.out_h(k.input[2]) * k.w.out_w(k.input[3])};
    const auto cols = random_tensor<double>(cols_shape);
    const auto c = lazy::tensor::from(cols);
    const auto folded = op_node(c, ir::fold(c.node(), k.w, k.input[2], k.input[3]));
    CHECK(folded.shape() == k.input);
    const std::vector<double> want = fold_reference(k, cols), got = values(folded.to_host<double>());
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      // At most KH*KW terms per element, each |v| <= 1: their double sums agree to that.
      CHECK(std::abs(got[i] - want[i]) <= 1e-15 * static_cast<double>(k.w.kernel_h * k.w.kernel_w));
    }
    // <unfold(x), y> = <x, fold(y)>: the identity autodiff's rules (each the other's
    // gradient) rest on.
    const auto x = random_tensor<double>(k.input);
    const double lhs = dot(unfold_reference(k, x), values(cols));
    const double rhs = dot(values(x), got);
    CHECK(lhs == Approx(rhs).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("fold in bfloat16 and float32 sums in float and rounds once", "[lazy][window]") {
  // Four windows overlap on the centre of a 3x3 plane: 1 + 3 * 2^-9 is not a bf16, but each
  // partial sum rounded to bf16 would lose the 2^-9s one by one.
  const window_case k{shape{1, 1, 3, 3}, {2, 2}};
  xlite::tensor<float> cols(shape{1, 4, 4}, 0.0f);
  cols.data()[0 * 4 + 3] = 1.0f;                       // tap (0, 0) of window (1, 1): the centre
  for (int tap = 1; tap < 4; ++tap) cols.data()[tap * 4 + 3 - tap] = 0x1p-9f; // the other taps onto the centre
  const auto c = lazy::cast(lazy::tensor::from(cols), dtype::bf16);
  const auto folded = lazy::cast(op_node(c, ir::fold(c.node(), k.w, 3, 3)), dtype::f32).to_host<float>();
  CHECK(folded.data()[4] == static_cast<float>(bfloat16(1.0f + 3 * 0x1p-9f)));
}

TEST_CASE("select_window_max takes y at each window's first maximum of x; scatter is its adjoint",
          "[lazy][window]") {
  for (const window_case& k : random_cases(40, true)) {
    INFO(describe_window(k));
    // Few distinct values, so windows hold ties and the first-maximum rule is exercised.
    auto x = random_tensor<double>(k.input);
    for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = std::round(x.data()[i] * 2);
    const auto y = random_tensor<double>(k.input);
    const auto lx = lazy::tensor::from(x), ly = lazy::tensor::from(y);
    const std::vector<std::int64_t> best = argmax_reference(k, x);
    const std::int64_t plane = k.input[2] * k.input[3], per_plane = k.w.out_h(k.input[2]) * k.w.out_w(k.input[3]);

    const auto selected = op_node(lx, ir::select_window_max(lx.node(), ly.node(), k.w)).to_host<double>();
    std::vector<double> want;
    for (std::size_t o = 0; o < best.size(); ++o) {
      want.push_back(y.data()[static_cast<std::int64_t>(o) / per_plane * plane + best[o]]);
    }
    CHECK(values(selected) == want);

    const auto g = random_tensor<double>(shape{k.input[0], k.input[1], k.w.out_h(k.input[2]), k.w.out_w(k.input[3])});
    const auto lg = lazy::tensor::from(g);
    const auto scattered = op_node(lx, ir::scatter_window_max(lx.node(), lg.node(), k.w)).to_host<double>();
    std::vector<double> want_scattered(static_cast<std::size_t>(x.size()));
    for (std::size_t o = 0; o < best.size(); ++o) {
      want_scattered[static_cast<std::size_t>(static_cast<std::int64_t>(o) / per_plane * plane + best[o])] +=
          g.data()[o];
    }
    const std::vector<double> got = values(scattered);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want_scattered[i]).margin(1e-15));
    // <select(x, y), g> = <y, scatter(x, g)>
    CHECK(dot(values(selected), values(g)) == Approx(dot(values(y), got)).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("max_pool2d gives a tie's gradient to the window's first maximum, and propagates NaN", "[lazy][window]") {
  // One 2x2 window of four equal values, and one whose maximum appears last.
  const auto x = lazy::tensor::from(xlite::tensor<float>{{{{1, 1, 0, 0}, {1, 1, 0, 3}}}});
  const auto pooled = lazy::max_pool2d(x, 2);
  CHECK(values(pooled.to_host<float>()) == std::vector<double>{1, 3});
  xlite::tensor<float> weights(shape{1, 1, 1, 2});
  weights.data()[0] = 2;
  weights.data()[1] = 5;
  // A fresh trace: reading `pooled` back made it a device value, which grad sees as a leaf.
  const auto dx = xlite::grad(lazy::sum(lazy::max_pool2d(x, 2) * lazy::tensor::from(weights)), {x})[0];
  CHECK(values(dx.to_host<float>()) == std::vector<double>{2, 0, 0, 0, 0, 0, 0, 5});

  auto with_nan = xlite::tensor<float>{{{{1, 2, 0, 0}, {std::numeric_limits<float>::quiet_NaN(), 4, 0, 0}}}};
  const auto nan_input = lazy::tensor::from(with_nan);
  const auto nan_pooled = lazy::max_pool2d(nan_input, 2).to_host<float>();
  CHECK(std::isnan(nan_pooled.data()[0]));
  CHECK(nan_pooled.data()[1] == 0);
  const auto nan_dx = xlite::grad(lazy::sum(lazy::max_pool2d(nan_input, 2)), {nan_input})[0].to_host<float>();
  CHECK(values(nan_dx) == std::vector<double>{0, 0, 1, 0, 1, 0, 0, 0}); // the NaN's position takes it
}

TEST_CASE("the window ops give the same bits on one thread and on many", "[lazy][window]") {
  // The runtime's kernels on pools of one and of three threads, on planes enough to split.
  const ir::window2d w{3, 3, 1, 2, 1, 1};
  const shape input{4, 8, 17, 15}, cols{4, 8 * 9, w.out_h(17) * w.out_w(15)}, pooled{4, 8, w.out_h(17), w.out_w(15)};
  const auto buffer_of = [](const shape& s) {
    auto b = runtime::make_buffer(dtype::f32, s);
    const auto host = random_tensor(s);
    std::copy(host.data(), host.data() + host.size(), b->as<float>());
    return b;
  };
  const auto x = buffer_of(input), c = buffer_of(cols), g = buffer_of(pooled);
  const auto run = [&](thread_pool& pool) {
    std::vector<std::vector<float>> results;
    const auto one_op = [&](op code, const shape& result, std::vector<const runtime::buffer*> inputs) {
      ir::instruction ins{code, dtype::f32, result, {}, {}};
      ins.attrs.ints = w.ints();
      auto out = runtime::make_buffer(dtype::f32, result);
      runtime::run_window(ins, inputs, *out, pool);
      results.emplace_back(out->as<float>(), out->as<float>() + result.numel());
    };
    one_op(op::unfold, cols, {x.get()});
    one_op(op::fold, input, {c.get()});
    one_op(op::scatter_window_max, input, {x.get(), g.get()});
    return results;
  };
  thread_pool one(1), three(3);
  CHECK(run(one) == run(three));
}

TEST_CASE("the window ops' errors name the op, the shapes and the window", "[lazy][window][errors]") {
  const auto x = lazy::tensor::from(random_tensor(shape{2, 3, 5, 4}));
  using Catch::Contains;
  CHECK_THAT(message_of<shape_error>([&] {
               lazy::unfold(lazy::tensor::from(random_tensor(shape{3, 5, 4})), 2);
             }),
             Contains("unfold") && Contains("(3, 5, 4)"));
  CHECK_THAT(message_of<value_error>([&] {
               lazy::unfold(x, {0, 2});
             }),
             Contains("unfold") && Contains("kernel=(0, 2)"));
  CHECK_THAT(message_of<value_error>([&] { lazy::unfold(x, 2, 1, -1); }),
             Contains("unfold") && Contains("padding=(-1, -1)"));
  CHECK_THAT(message_of<shape_error>([&] { lazy::unfold(x, 6); }), Contains("unfold") && Contains("5 x 4"));

  const auto cols = lazy::unfold(x, 2); // (2, 12, 12)
  CHECK(lazy::fold(cols, {5, 4}, 2).shape() == shape{2, 3, 5, 4});
  CHECK_THAT(message_of<shape_error>([&] {
               lazy::fold(cols, {5, 5}, 2);
             }),
             Contains("fold") && Contains("(2, 12, 12)") && Contains("5 x 5"));
  CHECK_THAT(message_of<shape_error>([&] {
               lazy::fold(cols, {5, 4}, 3);
             }),
             Contains("fold") && Contains("(2, 12, 12)"));
  CHECK_THAT(message_of<shape_error>([&] { lazy::fold(x, {5, 4}, 2); }), Contains("fold") && Contains("not 3-D"));
  CHECK_THAT(message_of<dtype_error>([&] {
               lazy::fold(lazy::cast(cols, dtype::boolean), {5, 4}, 2);
             }),
             Contains("fold") && Contains("bool"));

  const ir::window2d only_padding{1, 1, 1, 1, 1, 0}; // a 1x1 window on the padding row
  CHECK_THAT(message_of<value_error>([&] { ir::select_window_max(x.node(), x.node(), only_padding); }),
             Contains("select_window_max") && Contains("only padding"));
  CHECK_THAT(message_of<dtype_error>([&] {
               const auto xi = lazy::cast(x, dtype::i32);
               ir::select_window_max(xi.node(), xi.node(), {2, 2, 2, 2});
             }),
             Contains("select_window_max") && Contains("int32"));
  CHECK_THAT(message_of<shape_error>([&] {
               ir::scatter_window_max(x.node(), x.node(), {2, 2, 2, 2});
             }),
             Contains("scatter_window_max") && Contains("(2, 3, 5, 4)") && Contains("(2, 3, 2, 2)"));
}
