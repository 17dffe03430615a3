// Convolutions on the systolic array (tpu/convolution.hpp): im2col and one GEMM against a
// direct convolution in float64, the GEMM shape SCALE-Sim would simulate, and bad shapes.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "xlite/expr/tensor.hpp"
#include "xlite/tpu/convolution.hpp"
#include "xlite/tpu/systolic_array.hpp"

namespace {

using namespace xlite::tpu;

xlite::tensor<float> random_tensor(const xlite::shape& s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  xlite::tensor<float> t(s);
  for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = normal(rng);
  return t;
}

double bf16(float x) { return static_cast<float>(xlite::bfloat16(x)); }

} // namespace

TEST_CASE("tpu conv2d: im2col and one GEMM equal a direct convolution in float64") {
  std::mt19937 rng(11);
  const systolic_array<8, 8, dataflow::weight_stationary> array;
  struct conv_case {
    xlite::shape input, weights;
    conv2d_options options;
  };
  const conv_case cases[] = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {}},
      {{1, 2, 9, 8}, {5, 2, 3, 2}, {.stride_h = 2, .stride_w = 3, .pad_h = 1, .pad_w = 2}},
      {{3, 1, 6, 6}, {2, 1, 2, 2}, {.pad_h = 1, .pad_w = 1, .dilation_h = 2, .dilation_w = 3}},
      {{1, 16, 4, 4}, {3, 16, 1, 1}, {}},
  };
  for (const conv_case& c : cases) {
    INFO("input " << c.input << " weights " << c.weights);
    const xlite::tensor<float> x = random_tensor(c.input, rng), w = random_tensor(c.weights, rng);
    const auto [y, report] = conv2d(array, x, w, c.options);
    const conv2d_options& o = c.options;
    const std::int64_t n = c.input[0], ch = c.input[1], h = c.input[2], wd = c.input[3];
    const std::int64_t f = c.weights[0], kh = c.weights[2], kw = c.weights[3];
    const std::int64_t oh = (h + 2 * o.pad_h - o.dilation_h * (kh - 1) - 1) / o.stride_h + 1;
    const std::int64_t ow = (wd + 2 * o.pad_w - o.dilation_w * (kw - 1) - 1) / o.stride_w + 1;
    REQUIRE(y.rows() == n * oh * ow);
    REQUIRE(y.cols() == f);
    const std::int64_t k = ch * kh * kw;
    const double u = std::ldexp(1.0, -24), gamma = k * u / (1 - k * u);
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t yy = 0; yy < oh; ++yy) {
        for (std::int64_t zz = 0; zz < ow; ++zz) {
          for (std::int64_t out = 0; out < f; ++out) {
            double exact = 0, magnitude = 0;
            for (std::int64_t cc = 0; cc < ch; ++cc) {
              for (std::int64_t i = 0; i < kh; ++i) {
                for (std::int64_t j = 0; j < kw; ++j) {
                  const std::int64_t hi = yy * o.stride_h - o.pad_h + i * o.dilation_h;
                  const std::int64_t wi = zz * o.stride_w - o.pad_w + j * o.dilation_w;
                  if (hi < 0 || hi >= h || wi < 0 || wi >= wd) continue;
                  const double p = bf16(x(b, cc, hi, wi)) * bf16(w(out, cc, i, j));
                  exact += p;
                  magnitude += std::abs(p);
                }
              }
            }
            CHECK(std::abs(y((b * oh + yy) * ow + zz, out) - exact) <= gamma * magnitude);
          }
        }
      }
    }
    const gemm_shape g =
        conv2d_gemm_shape({c.input.begin(), c.input.end()}, {c.weights.begin(), c.weights.end()}, c.options);
    CHECK(g.m == n * oh * ow);
    CHECK(g.k == k);
    CHECK(g.n == f);
    CHECK(report.total_cycles == array.cost(g).total_cycles);
    CHECK(report.macs == g.macs());
  }
}

TEST_CASE("tpu conv2d: shapes that do not convolve are errors naming both") {
  const systolic_array<4, 4, dataflow::output_stationary> array;
  const xlite::tensor<float> x(xlite::shape{1, 3, 5, 5}), w(xlite::shape{2, 3, 3, 3});
  const auto error = [&](const xlite::tensor<float>& input, const xlite::tensor<float>& weights,
                         conv2d_options o = {}) {
    try {
      conv2d(array, input, weights, o);
    } catch (const xlite::shape_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error(x, xlite::tensor<float>(xlite::shape{2, 4, 3, 3})),
             Catch::Contains("input (1, 3, 5, 5), weights (2, 4, 3, 3): the input's channels"));
  CHECK_THAT(error(xlite::tensor<float>(xlite::shape{3, 5, 5}), w), Catch::Contains("must be 4-D (N, C, H, W)"));
  CHECK_THAT(error(x, xlite::tensor<float>(xlite::shape{2, 27})), Catch::Contains("weights must be 4-D"));
  CHECK_THAT(error(x, xlite::tensor<float>(xlite::shape{2, 3, 6, 3})), Catch::Contains("does not fit"));
  CHECK_THAT(error(x, w, {.stride_h = 0}), Catch::Contains("stride (0, 1)"));
  CHECK_THAT(error(x, w, {.pad_w = -1}), Catch::Contains("padding (0, -1)"));
  CHECK(error(x, w, {.pad_h = 1, .pad_w = 1}) == "no error");
}
