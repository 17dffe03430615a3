// pad, gather, index_select, their adjoints scatter_add and index_add, and one_hot against naive loops over
// multi-indices, on random shapes, axes and element sizes; and their errors, at trace time and, for indices out of
// range, when the step runs.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"
#include "xlite/runtime/scatter.hpp"

#include "random_inputs.hpp"

using namespace xlite;

namespace {

using namespace random_inputs;

std::vector<std::int64_t> unravel(std::int64_t i, const shape& s) {
  std::vector<std::int64_t> p(s.rank());
  for (std::size_t a = s.rank(); a-- > 0;) {
    p[a] = i % s[a];
    i /= s[a];
  }
  return p;
}

std::int64_t ravel(const std::vector<std::int64_t>& p, const shape& s) {
  std::int64_t i = 0;
  for (std::size_t a = 0; a < s.rank(); ++a) i = i * s[a] + p[a];
  return i;
}

template <class T>
void check_pad(const shape& in) {
  const auto host = random_integers<T>(in, -100, 100);
  std::vector<ir::padding> widths;
  for (std::size_t a = 0; a < in.rank(); ++a) widths.push_back({uniform(0, 3), uniform(0, 3)});
  const T fill = static_cast<T>(7);
  const auto x = lazy::tensor::from(host);
  const lazy::tensor padded_on_device = lazy::pad(x, widths, 7);
  const xlite::tensor<T> padded = padded_on_device.to_host<T>();
  for (std::int64_t i = 0; i < padded.size(); ++i) {
    std::vector<std::int64_t> p = unravel(i, padded.shape());
    bool inside = true;
    for (std::size_t a = 0; a < in.rank(); ++a) {
      p[a] -= widths[a].low;
      inside = inside && p[a] >= 0 && p[a] < in[a];
    }
    INFO(in << " position " << i);
    CHECK(padded.data()[i] == (inside ? host.data()[ravel(p, in)] : fill));
  }
}

} // namespace

TEST_CASE("pad surrounds its operand with the fill on every axis", "[lazy][indexing]") {
  for (int trial = 0; trial < 12; ++trial) {
    const shape in = random_shape(static_cast<std::size_t>(uniform(1, 4)), 7);
    check_pad<float>(in);
    check_pad<std::int64_t>(in);
    check_pad<std::uint8_t>(in);
    check_pad<bfloat16>(in);
  }
  const auto x = lazy::tensor::from(xlite::tensor<float>({{1.0f, 2.0f}}));
  const auto p = lazy::pad(x, {{1, 0}, {0, 2}}, -1.5f).to_host<float>();
  CHECK(p.shape() == shape{2, 4});
  CHECK(p(0, 0) == -1.5f);
  CHECK(p(1, 1) == 2.0f);
  CHECK(p(1, 3) == -1.5f);
  CHECK_THROWS_AS(lazy::pad(x, {{1, 0}}), index_error);
  CHECK_THROWS_WITH(lazy::pad(x, {{1, 0}, {-1, 0}}), Catch::Contains("pad") && Catch::Contains("negative"));
}

TEST_CASE("gather and index_select read along an axis at the given indices", "[lazy][indexing]") {
  for (int trial = 0; trial < 24; ++trial) {
    const std::size_t rank = static_cast<std::size_t>(uniform(1, 4));
    const shape in = random_shape(rank, 7);
    const auto axis = static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(rank) - 1));
    const auto host = random_integers<float>(in, -100, 100);
    const auto x = lazy::tensor::from(host);
    INFO(in << " axis " << axis);

    // gather: an index no larger than x off the axis, any length along it.
    std::vector<std::int64_t> index_dims(in.begin(), in.end());
    for (std::size_t a = 0; a < rank; ++a) index_dims[a] = a == axis ? uniform(0, 5) : uniform(1, in[a]);
    const auto index = random_integers<std::int32_t>(shape(index_dims), 0, in[axis] - 1);
    const auto gathered = lazy::gather(x, static_cast<std::int64_t>(axis), lazy::tensor::from(index)).to_host<float>();
    REQUIRE(gathered.shape() == index.shape());
    for (std::int64_t i = 0; i < gathered.size(); ++i) {
      std::vector<std::int64_t> p = unravel(i, index.shape());
      p[axis] = index.data()[i];
      CHECK(gathered.data()[i] == host.data()[ravel(p, in)]);
    }

    // index_select: a 1-D index, repeats allowed.
    const auto positions = random_integers<std::int64_t>(shape{uniform(0, 6)}, 0, in[axis] - 1);
    const auto selected =
        lazy::index_select(x, static_cast<std::int64_t>(axis), lazy::tensor::from(positions)).to_host<float>();
    for (std::int64_t i = 0; i < selected.size(); ++i) {
      std::vector<std::int64_t> p = unravel(i, selected.shape());
      p[axis] = positions.data()[p[axis]];
      CHECK(selected.data()[i] == host.data()[ravel(p, in)]);
    }
  }
}

TEST_CASE("gather and index_select report bad indices", "[lazy][indexing]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}));
  const auto two = lazy::tensor::from(xlite::tensor<std::int64_t>({0, 2}));
  CHECK_THROWS_WITH(lazy::gather(x, 1, two), Catch::Contains("gather") && Catch::Contains("(2,)"));
  CHECK_THROWS_AS(lazy::gather(x, 1, lazy::tensor::from(xlite::tensor<std::int64_t>(shape{3, 1}, 0))), shape_error);
  CHECK_THROWS_AS(lazy::index_select(x, 1, lazy::tensor::from(xlite::tensor<float>({0.0f}))), dtype_error);
  CHECK_THROWS_AS(lazy::index_select(x, 2, two), index_error);
  // Out of range is only known when the step runs: the tensor fails, naming the index.
  const auto beyond = lazy::index_select(x, 1, lazy::tensor::from(xlite::tensor<std::int64_t>({1, 3})));
  CHECK_THROWS_WITH(beyond.to_host<float>(), Catch::Contains("index_select: index 3 is out of range for axis 1"));
  const auto negative = lazy::gather(x, 0, lazy::tensor::from(xlite::tensor<std::int64_t>({{-1, 0, 0}})));
  CHECK_THROWS_AS(negative.to_host<float>(), index_error);
}

TEST_CASE("scatter_add and index_add sum into input along an axis, as torch's", "[lazy][indexing]") {
  // Against loops in double; indices repeat, so several elements land on one place. Integer
  // values keep the float sums exact in any order; bf16 rounds once, from the float sum.
  for (int trial = 0; trial < 24; ++trial) {
    const std::size_t rank = static_cast<std::size_t>(uniform(1, 4));
    const shape in = random_shape(rank, 7);
    const auto axis = static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(rank) - 1));
    const auto a = static_cast<std::int64_t>(axis);
    const auto base = random_integers<float>(in, -20, 20);
    INFO(in << " axis " << axis);

    std::vector<std::int64_t> index_dims(in.begin(), in.end());
    for (std::size_t d = 0; d < rank; ++d) index_dims[d] = d == axis ? uniform(0, 9) : uniform(1, in[d]);
    const auto index = random_integers<std::int64_t>(shape(index_dims), 0, in[axis] - 1);
    std::vector<std::int64_t> src_dims = index_dims;
    src_dims[0] += uniform(0, 2); // src may be larger than index: only index's part counts
    const auto src = random_integers<float>(shape(src_dims), -20, 20);
    std::vector<double> expected(base.data(), base.data() + base.size());
    for (std::int64_t i = 0; i < index.size(); ++i) {
      std::vector<std::int64_t> p = unravel(i, index.shape());
      const double value = src.data()[ravel(p, src.shape())];
      p[axis] = index.data()[i];
      expected[static_cast<std::size_t>(ravel(p, in))] += value;
    }
    const auto scattered =
        lazy::scatter_add(lazy::tensor::from(base), a, lazy::tensor::from(index), lazy::tensor::from(src))
            .to_host<float>();
    REQUIRE(scattered.shape() == in);
    for (std::int64_t i = 0; i < scattered.size(); ++i)
      CHECK(scattered.data()[i] == expected[static_cast<std::size_t>(i)]);

    const auto positions = random_integers<std::int32_t>(shape{uniform(0, 9)}, 0, in[axis] - 1);
    std::vector<std::int64_t> source_dims(in.begin(), in.end());
    source_dims[axis] = positions.size();
    const auto source = random_integers<float>(shape(source_dims), -20, 20);
    std::vector<double> summed(base.data(), base.data() + base.size());
    for (std::int64_t i = 0; i < source.size(); ++i) {
      std::vector<std::int64_t> p = unravel(i, source.shape());
      p[axis] = positions.data()[p[axis]];
      summed[static_cast<std::size_t>(ravel(p, in))] += source.data()[i];
    }
    const auto to_bf16 = [](const xlite::tensor<float>& t) { return lazy::cast(lazy::tensor::from(t), dtype::bf16); };
    const auto added = lazy::index_add(to_bf16(base), a, lazy::tensor::from(positions), to_bf16(source));
    const auto got = lazy::cast(added, dtype::f32).to_host<float>();
    for (std::int64_t i = 0; i < got.size(); ++i) {
      // bf16 holds these small integers exactly; the sum rounds once (then bf16 + bf16 once more).
      const auto once =
          static_cast<float>(bfloat16(static_cast<float>(summed[static_cast<std::size_t>(i)] - base.data()[i])));
      CHECK(got.data()[i] == static_cast<float>(bfloat16(base.data()[i] + once)));
    }
  }
}

TEST_CASE("scatter_add and index_add give the same bits on 1 and 3 threads", "[lazy][indexing]") {
  // The runtime's kernel on pools of one and of three threads: float sums of many elements
  // landing on few places, where any other order would give other bits.
  const shape s{3000, 40}, result{5, 40};
  const auto src = runtime::make_buffer(dtype::f32, s);
  std::uniform_real_distribution<float> d(-1, 1);
  for (std::int64_t i = 0; i < s.numel(); ++i) src->as<float>()[i] = d(rng());
  const auto index_of = [](const shape& at) {
    auto b = runtime::make_buffer(dtype::i64, at);
    for (std::int64_t i = 0; i < at.numel(); ++i) b->as<std::int64_t>()[i] = uniform(0, 4);
    return b;
  };
  const auto elements = index_of(s), rows = index_of(shape{3000});
  const auto run = [&](thread_pool& pool) {
    std::vector<std::vector<float>> results;
    for (const auto& [code, index] : {std::pair{op::scatter_add, elements}, std::pair{op::index_add, rows}}) {
      ir::instruction ins{code, dtype::f32, result, {}, {}};
      ins.attrs.ints = {0};
      auto out = runtime::make_buffer(dtype::f32, result);
      const runtime::buffer* inputs[] = {src.get(), index.get()};
      runtime::run_scatter(ins, inputs, *out, pool);
      results.emplace_back(out->as<float>(), out->as<float>() + result.numel());
    }
    return results;
  };
  thread_pool one(1), three(3);
  CHECK(run(one) == run(three));
}

TEST_CASE("scatter_add and index_add report bad arguments", "[lazy][indexing]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}));
  const auto index = lazy::tensor::from(xlite::tensor<std::int64_t>({{0, 2}}));
  const auto src = lazy::tensor::from(xlite::tensor<float>({{1.0f, 1.0f}}));
  CHECK(lazy::scatter_add(x, 1, index, src).to_host<float>()(0, 2) == 4.0f);
  CHECK_THROWS_WITH(lazy::scatter_add(x, 1, lazy::tensor::from(xlite::tensor<std::int64_t>(shape{1, 3}, 0)), src),
                    Catch::Contains("scatter_add: index of shape (1, 3) does not fit src of shape (1, 2)"));
  CHECK_THROWS_WITH(lazy::scatter_add(x, 1, lazy::tensor::from(xlite::tensor<std::int64_t>(shape{3, 1}, 0)),
                                      lazy::tensor::from(xlite::tensor<float>(shape{3, 1}, 1.0f))),
                    Catch::Contains("scatter_add") && Catch::Contains("(2, 3)"));
  CHECK_THROWS_AS(lazy::scatter_add(x, 1, index, lazy::cast(src, dtype::f64)), dtype_error);
  CHECK_THROWS_AS(lazy::scatter_add(x, 2, index, src), index_error);
  const auto rows = lazy::tensor::from(xlite::tensor<std::int64_t>({1, 1}));
  CHECK_THROWS_WITH(lazy::index_add(x, 0, rows, lazy::tensor::from(xlite::tensor<float>(shape{2, 4}, 1.0f))),
                    Catch::Contains("index_add: source of shape (2, 4) does not match input of shape (2, 3)"));
  CHECK_THROWS_AS(lazy::index_add(x, 0, rows, lazy::tensor::from(xlite::tensor<float>(shape{3, 3}, 1.0f))),
                  shape_error);
  const auto flags = lazy::tensor::from(xlite::tensor<bool>({true, false}));
  CHECK_THROWS_AS(lazy::index_add(flags, 0, lazy::tensor::from(xlite::tensor<std::int64_t>({0})),
                                  lazy::tensor::from(xlite::tensor<bool>({true}))),
                  dtype_error);
  // Out of range is only known when the step runs: the tensor fails, naming the index.
  const auto beyond = lazy::index_add(x, 0, lazy::tensor::from(xlite::tensor<std::int64_t>({2})),
                                      lazy::tensor::from(xlite::tensor<float>(shape{1, 3}, 1.0f)));
  CHECK_THROWS_WITH(beyond.to_host<float>(), Catch::Contains("index_add: index 2 is out of range for axis 0"));
}

TEST_CASE("one_hot marks each index on a new last axis", "[lazy][indexing]") {
  const auto labels = xlite::tensor<std::int32_t>({{0, 3}, {2, 5}}); // 5 is outside 4 classes: a zero row
  const auto encoded = lazy::one_hot(lazy::tensor::from(labels), 4, dtype::f32).to_host<float>();
  REQUIRE(encoded.shape() == shape{2, 2, 4});
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 2; ++j) {
      for (std::int64_t c = 0; c < 4; ++c) CHECK(encoded(i, j, c) == (labels(i, j) == c ? 1.0f : 0.0f));
    }
  }
  CHECK(lazy::one_hot(lazy::tensor::from(labels), 4).type() == dtype::i64);
  CHECK_THROWS_AS(lazy::one_hot(lazy::tensor::from(xlite::tensor<float>({1.0f})), 4), dtype_error);
  CHECK_THROWS_AS(lazy::one_hot(lazy::tensor::from(labels), 0), value_error);
}
