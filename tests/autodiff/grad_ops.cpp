// The gradient of every differentiable op of the op set against central finite
// differences in float64, on random shapes, with broadcasting.

#include "gradient_check.hpp"

using namespace gradient_check;
using xlite::dtype;
using L = lazy::tensor;
using V = std::vector<L>;

namespace {

shape random_shape(std::size_t rank, std::int64_t max_dim = 5) {
  std::vector<std::int64_t> dims;
  for (std::size_t a = 0; a < rank; ++a) dims.push_back(std::uniform_int_distribution<std::int64_t>(1, max_dim)(rng()));
  return shape(dims);
}

// Shape b: a with some dimensions set to 1 and a leading one dropped, so b broadcasts to a.
shape broadcast_partner(const shape& a) {
  std::vector<std::int64_t> dims(a.begin(), a.end());
  for (auto& d : dims) {
    if (rng()() % 3 == 0) d = 1;
  }
  if (!dims.empty() && rng()() % 2 == 0) dims.erase(dims.begin());
  return shape(dims);
}

host positive(const shape& s, double lo = 0.5, double hi = 2) { return random_host(s, lo, hi); }

} // namespace

TEST_CASE("grad of the binary element-wise ops, with broadcasting", "[autodiff]") {
  for (int trial = 0; trial < 3; ++trial) {
    const shape a = random_shape(1 + trial), b = broadcast_partner(a);
    check("add", [](const V& x) { return x[0] + x[1]; }, {random_host(a), random_host(b)});
    check("sub", [](const V& x) { return x[0] - x[1]; }, {random_host(b), random_host(a)});
    check("mul", [](const V& x) { return x[0] * x[1]; }, {random_host(a), random_host(b)});
    check("div", [](const V& x) { return x[0] / x[1]; }, {random_host(a), random_host(b, -2, 2, 0.5)});
    check("minimum", [](const V& x) { return lazy::minimum(x[0], x[1]); }, {random_host(a), random_host(b)});
    check("maximum", [](const V& x) { return lazy::maximum(x[0], x[1]); }, {random_host(a), random_host(b)});
    check("pow", [](const V& x) { return lazy::pow(x[0], x[1]); }, {positive(a), random_host(b)});
    check("fma", [](const V& x) { return lazy::fma(x[0], x[1], x[2]); },
          {random_host(a), random_host(b), random_host(broadcast_partner(a))});
    check("clamp with tensor bounds", [](const V& x) { return lazy::clamp(x[0], x[1], x[2]); },
          {random_host(a, -3, 3), random_host(b, -2, -0.5), random_host(b, 0.5, 2)});
    const L mask = L::from(random_host(a)) > 0.0;
    check("where", [&](const V& x) { return lazy::where(mask, x[0], x[1]); },
          {random_host(a), random_host(b)});
    check("a scalar operand", [](const V& x) { return 2.5 * x[0] - x[0] / 3.0; }, {random_host(a)});
  }
}

TEST_CASE("grad of the unary element-wise ops", "[autodiff]") {
  const shape s = random_shape(2, 6);
  check("neg", [](const L& x) { return -x; }, random_host(s));
  check("abs", [](const L& x) { return lazy::abs(x); }, random_host(s, -2, 2, 0.01));
  check("exp", [](const L& x) { return lazy::exp(x); }, random_host(s));
  check("log", [](const L& x) { return lazy::log(x); }, positive(s));
  check("log1p", [](const L& x) { return lazy::log1p(x); }, random_host(s, -0.5, 2));
  check("sqrt", [](const L& x) { return lazy::sqrt(x); }, positive(s));
  check("rsqrt", [](const L& x) { return lazy::rsqrt(x); }, positive(s));
  check("tanh", [](const L& x) { return lazy::tanh(x); }, random_host(s));
  check("sigmoid", [](const L& x) { return lazy::sigmoid(x); }, random_host(s, -5, 5));
  check("relu", [](const L& x) { return lazy::relu(x); }, random_host(s, -2, 2, 0.01));
  check("gelu", [](const L& x) { return lazy::gelu(x); }, random_host(s, -4, 4));
  check("sin", [](const L& x) { return lazy::sin(x); }, random_host(s, -4, 4));
  check("cos", [](const L& x) { return lazy::cos(x); }, random_host(s, -4, 4));
  check("clamp with scalar bounds", [](const L& x) { return lazy::clamp(x, -1.0, 1.0); }, random_host(s, -2, 2));
  check("a chain", [](const L& x) { return lazy::tanh(lazy::exp(x) * x + lazy::sin(x * x)); }, random_host(s));
}

TEST_CASE("grad of gelu at 0 is 1/2", "[autodiff]") {
  check("gelu near 0", [](const L& x) { return lazy::gelu(x); },
        host(xlite::tensor<double>{0.0, 1e-30, -1e-30, 1e-8, -9.0}));
}

TEST_CASE("floor, ceil, round, comparisons and casts to integers have zero gradient", "[autodiff]") {
  const host values = random_host(shape{4, 3}, -3, 3, 0.1);
  for (const auto& f : std::vector<std::function<L(const L&)>>{
           [](const L& x) { return lazy::floor(x) * x; },
           [](const L& x) { return lazy::ceil(x) + x; },
           [](const L& x) { return lazy::round(x) * 2.0; },
           [](const L& x) { return lazy::cast<double>(x > 0.0) * x; },
           [](const L& x) { return lazy::cast<double>(lazy::cast<std::int32_t>(x * 10.0)); },
       }) {
    check("a piecewise-constant part", f, values);
  }
}

TEST_CASE("grad through casts to and from float32", "[autodiff]") {
  check("cast", [](const L& x) { return lazy::cast<double>(lazy::exp(lazy::cast<float>(x))); }, random_host(shape{5}),
        {.step = 1e-3, .relative = 1e-3});
}

TEST_CASE("grad of the reductions", "[autodiff]") {
  const host x = random_host(shape{3, 4, 5});
  for (const bool keep : {false, true}) {
    check("sum all", [&](const L& t) { return lazy::sum(t, {}, keep); }, x);
    check("sum axes 0, 2", [&](const L& t) { return lazy::sum(t, {0, 2}, keep); }, x);
    check("mean axis 1", [&](const L& t) { return lazy::mean(t, {1}, keep); }, x);
    check("mean all", [&](const L& t) { return lazy::mean(t, {}, keep); }, x);
    check("amax axis -1", [&](const L& t) { return lazy::amax(t, {-1}, keep); }, x);
    check("amin axes 0, 1", [&](const L& t) { return lazy::amin(t, {0, 1}, keep); }, x);
    check("prod axis 1", [&](const L& t) { return lazy::prod(t, {1}, keep); }, x);
  }
}

TEST_CASE("grad of prod is exact where elements are zero", "[autodiff]") {
  // Rows with no zero, one zero and two zeros: the product of the others, not prod / x.
  const xlite::tensor<double> x{{2.0, 3.0, 4.0}, {2.0, 0.0, 4.0}, {0.0, 3.0, 0.0}};
  const L t = L::from(x);
  const auto g = xlite::grad(lazy::sum(lazy::prod(t, {1})), {t})[0].to_host<double>();
  const xlite::tensor<double> expected{{12.0, 8.0, 6.0}, {0.0, 8.0, 0.0}, {0.0, 0.0, 0.0}};
  for (std::int64_t i = 0; i < 9; ++i) CHECK(g.data()[i] == expected.data()[i]);
  check("prod with zeros, perturbed", [](const L& v) { return lazy::prod(v, {1}); }, host(x));
}

TEST_CASE("grad of the layout ops", "[autodiff]") {
  const host x = random_host(shape{3, 4, 5});
  const L scale = L::from(random_host(shape{5, 12}));
  check("reshape", [&](const L& t) { return lazy::reshape(t, {5, -1}) * scale; }, x);
  check("permute", [](const L& t) { return lazy::permute(t, {2, 0, 1}); }, x);
  check("transpose", [](const L& t) { return lazy::transpose(t, 0, 2); }, x);
  check("broadcast_to", [](const L& t) { return lazy::broadcast_to(t, shape{2, 3, 4, 5}); }, x);
  check("broadcast_to of ones", [](const L& t) { return lazy::broadcast_to(t, shape{3, 4, 5}); },
        random_host(shape{3, 1, 1}));
  check("slice", [](const L& t) { return lazy::slice(t, 1, 1, 3); }, x);
  check("slice with step 2", [](const L& t) { return lazy::slice(t, 2, 0, 5, 2); }, x);
  check("slice with step 3 from 1", [](const L& t) { return lazy::slice(t, 2, 1, 5, 3); }, x);
  check("slice of slice", [](const L& t) { return lazy::slice(lazy::slice(t, 0, 1, 3), 1, -3, 4, 2); }, x);
  check("pad", [](const L& t) { return lazy::pad(t, {{1, 0}, {0, 2}, {3, 1}}, 7.5); }, x);
  check("concat", [](const V& t) { return lazy::concat({t[0], t[1], t[0]}, 1); },
        {random_host(shape{2, 3}), random_host(shape{2, 1})});
  const L index = L::from(xlite::tensor<std::int64_t>{{2, 0, 2, 1}, {1, 1, 0, 0}});
  check("gather axis 1", [&](const L& t) { return lazy::gather(t, 1, index); }, random_host(shape{2, 3}));
  const L rows = L::from(xlite::tensor<std::int64_t>{{1, 0, 1}});
  check("gather axis 0, index smaller than input", [&](const L& t) { return lazy::gather(t, 0, rows); },
        random_host(shape{3, 4}));
  const L picks = L::from(xlite::tensor<std::int64_t>{3, 0, 3, 1, 3});
  check("index_select axis 0, repeated", [&](const L& t) { return lazy::index_select(t, 0, picks); },
        random_host(shape{4, 3}));
  check("index_select axis 1", [&](const L& t) { return lazy::index_select(t, 1, picks); }, random_host(shape{2, 4, 3}));
  // Their adjoints: gather and index_select are their gradients, so second derivatives work.
  check("scatter_add axis 1", [&](const V& t) { return lazy::scatter_add(t[0], 1, index, t[1]); },
        {random_host(shape{2, 3}), random_host(shape{2, 4})});
  check("index_add axis 0, repeated", [&](const V& t) { return lazy::index_add(t[0], 0, picks, t[1]); },
        {random_host(shape{4, 3}), random_host(shape{5, 3})});
}

TEST_CASE("grad of matmul, plain, batched and broadcast", "[autodiff]") {
  check("matmul", [](const V& t) { return lazy::matmul(t[0], t[1]); },
        {random_host(shape{3, 4}), random_host(shape{4, 2})});
  check("batched matmul", [](const V& t) { return lazy::matmul(t[0], t[1]); },
        {random_host(shape{2, 3, 4}), random_host(shape{2, 4, 5})});
  check("broadcast batch", [](const V& t) { return lazy::matmul(t[0], t[1]); },
        {random_host(shape{2, 1, 3, 4}), random_host(shape{3, 4, 2})});
  check("a two-layer network", [](const V& t) { return lazy::matmul(lazy::tanh(lazy::matmul(t[0], t[1]) + t[2]), t[3]); },
        {random_host(shape{5, 4}), random_host(shape{4, 6}), random_host(shape{6}), random_host(shape{6, 3})});
}

TEST_CASE("grad of the composites: softmax, log_softmax, one_hot", "[autodiff]") {
  const host x = random_host(shape{3, 5}, -3, 3);
  check("softmax", [](const L& t) { return lazy::softmax(t, -1); }, x);
  check("softmax axis 0", [](const L& t) { return lazy::softmax(t, 0); }, x);
  check("log_softmax", [](const L& t) { return lazy::log_softmax(t, 1); }, x);
  const L labels = L::from(xlite::tensor<std::int64_t>{4, 0, 2});
  check("a cross entropy by hand",
        [&](const L& t) { return -lazy::sum(lazy::log_softmax(t) * lazy::one_hot(labels, 5, dtype::f64)); }, x);
}

TEST_CASE("grad through a random draw: the draw is a constant", "[autodiff]") {
  lazy::set_rng_state(7);
  const host x = random_host(shape{4, 4});
  const L t = L::from(x);
  const L noise = lazy::rand_uniform(shape{4, 4}, 0.0, 1.0, dtype::f64);
  const auto g = xlite::grad(lazy::sum(t * noise), {t})[0].to_host<double>();
  const auto drawn = noise.to_host<double>();
  for (std::int64_t i = 0; i < 16; ++i) CHECK(g.data()[i] == drawn.data()[i]);
}
