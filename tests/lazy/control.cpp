// while_loop and cond: against the same loops run on the host, with trip counts that come
// from data, captured outside values, loops that never run, nesting, only the chosen branch
// running, one compilation whatever the trip count, and the errors of bad bodies.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"

using namespace xlite;

namespace {

lazy::tensor scalar_i64(std::int64_t v) { return lazy::tensor::from(xlite::tensor<std::int64_t>(shape{}, v)); }

ir::graph graph_of(const lazy::tensor& t) {
  const ir::node_ptr outputs[] = {t.node()};
  return ir::capture(outputs).program;
}

// x doubled and shifted `trips` times, as the loop below computes it.
std::vector<float> host_loop(std::vector<float> x, std::int64_t trips, float w, float b) {
  for (std::int64_t t = 0; t < trips; ++t) {
    for (float& v : x) v = v * w + b;
  }
  return x;
}

} // namespace

TEST_CASE("while_loop runs its body until cond is false, trip count from data", "[lazy][control]") {
  const std::vector<float> start{1.0f, -2.0f, 0.5f, 3.0f, 7.0f};
  const auto x = lazy::tensor::from(xlite::tensor<float>({1.0f, -2.0f, 0.5f, 3.0f, 7.0f}));
  const auto w = lazy::tensor::from(xlite::tensor<float>(shape{}, 1.5f));
  mark_step();
  metrics::clear_counters();
  for (const std::int64_t trips : {3, 0, 7, 1}) {
    const auto limit = scalar_i64(trips);       // data: the loop does not know it at trace time
    const auto shift = w * 0.25f;               // computed before the loop, once
    const auto result = lazy::while_loop([&](const auto& s) { return s[0] < limit; },
                                         [&](const auto& s) { return std::vector{s[0] + 1, s[1] * w + shift}; },
                                         {scalar_i64(0), x});
    mark_step();
    INFO("trips " << trips);
    CHECK(result[0].item<std::int64_t>() == trips);
    const auto got = result[1].to_host<float>();
    const auto expected = host_loop(start, trips, 1.5f, 1.5f * 0.25f);
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(got.data()[i] == expected[i]);
  }
  CHECK(metrics::counter_value("UncachedCompile") == 1); // one program for every trip count
  CHECK(x.to_host<float>().data()[1] == -2.0f);          // the initial state is untouched
}

TEST_CASE("a loop's captured values are operands, and its graph prints with its bodies", "[lazy][control]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>({1.0f, 2.0f}));
  const auto w = lazy::tensor::from(xlite::tensor<float>({3.0f, 4.0f}));
  const auto result = lazy::while_loop([](const auto& s) { return lazy::sum(s[0]) < 100.0f; },
                                       [&](const auto& s) { return std::vector{s[0] * w + 1.0f}; }, {x});
  const ir::graph g = graph_of(result[0]);
  const auto loop = std::ranges::find_if(g.instructions, [](const auto& ins) { return ins.code == op::while_loop; });
  REQUIRE(loop != g.instructions.end());
  CHECK(loop->operands.size() == 3); // the state, the scalar 100 (a parameter) and w
  REQUIRE(loop->attrs.subgraphs.size() == 2);
  CHECK(loop->attrs.subgraphs[1]->parameter_count == 3);
  const std::string text = ir::to_text(g);
  CHECK(text.find("while_loop(%0, %1, %2), state=1") != std::string::npos);
  INFO(text);
  CHECK(text.find("  cond {\n") != std::string::npos);
  CHECK(text.find("  body {\n") != std::string::npos);
  // 1,2 -> 4,9 -> 13,37 -> 40,149: the sum passes 100 after three trips.
  const auto got = result[0].to_host<float>();
  CHECK(got.data()[0] == 40.0f);
  CHECK(got.data()[1] == 149.0f);
}

TEST_CASE("nested loops and a loop in a branch", "[lazy][control]") {
  // sum over i < 4, j < i of (i * j), with both counters on the device.
  const auto outer = lazy::while_loop(
      [](const auto& s) { return s[0] < 4; },
      [](const auto& s) {
        const auto inner = lazy::while_loop(
            [&](const auto& t) { return t[0] < s[0]; },
            [&](const auto& t) { return std::vector{t[0] + 1, t[1] + s[0] * t[0]}; }, {scalar_i64(0), s[1]});
        return std::vector{s[0] + 1, inner[1]};
      },
      {scalar_i64(0), scalar_i64(0)});
  std::int64_t expected = 0;
  for (std::int64_t i = 0; i < 4; ++i) {
    for (std::int64_t j = 0; j < i; ++j) expected += i * j;
  }
  CHECK(outer[1].item<std::int64_t>() == expected);

  const auto flag = lazy::tensor::from(xlite::tensor<bool>(shape{}, true));
  const auto branch = lazy::cond(
      flag,
      [](const auto& v) {
        return lazy::while_loop([](const auto& s) { return s[0] < 5; }, [](const auto& s) { return std::vector{s[0] + 2}; },
                                {v[0]});
      },
      [](const auto& v) { return std::vector{v[0] - 1}; }, {scalar_i64(0)});
  CHECK(branch[0].item<std::int64_t>() == 6);
}

TEST_CASE("cond runs only the branch its predicate picks", "[lazy][control]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>({1.0f, 2.0f, 3.0f}));
  const auto bad_index = lazy::tensor::from(xlite::tensor<std::int64_t>({0, 9, 1}));
  const auto pick = [&](bool which) {
    return lazy::cond(
        lazy::sum(x) > (which ? 0.0f : 100.0f),
        [](const auto& v) { return std::vector{v[0] * 2.0f, lazy::sum(v[0])}; },
        // Would fail if it ran: index 9 of 3.
        [&](const auto& v) { return std::vector{lazy::index_select(v[0], 0, bad_index), lazy::amax(v[0])}; }, {x});
  };
  const auto taken = pick(true);
  CHECK(taken[0].to_host<float>().data()[2] == 6.0f);
  CHECK(taken[1].item<float>() == 6.0f);
  const auto failing = pick(false);
  CHECK_THROWS_WITH(failing[1].item<float>(), Catch::Contains("index 9 is out of range"));
}

TEST_CASE("bad bodies are errors that name the op", "[lazy][control]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>({1.0f, 2.0f}));
  const auto step = [](const auto& s) { return std::vector{s[0] + 1.0f}; };
  CHECK_THROWS_WITH(lazy::while_loop([](const auto& s) { return lazy::sum(s[0]); }, step, {x}),
                    Catch::Contains("while_loop") && Catch::Contains("predicate"));
  CHECK_THROWS_WITH(lazy::while_loop([](const auto& s) { return lazy::sum(s[0]) < 3.0f; },
                                     [](const auto& s) { return std::vector{lazy::concat({s[0], s[0]})}; }, {x}),
                    Catch::Contains("while_loop") && Catch::Contains("(4,)") && Catch::Contains("(2,)"));
  CHECK_THROWS_AS(lazy::while_loop([](const auto& s) { return lazy::sum(s[0]) < 3.0f; },
                                   [](const auto& s) { return std::vector{s[0], s[0]}; }, {x}),
                  value_error);
  CHECK_THROWS_WITH(lazy::cond(lazy::sum(x) > 0.0f, step, [](const auto& v) { return std::vector{lazy::cast(v[0], dtype::f64)}; }, {x}),
                    Catch::Contains("cond") && Catch::Contains("float64"));
  CHECK_THROWS_AS(lazy::while_loop([](const auto&) { return lazy::tensor::from(xlite::tensor<bool>({true})); }, step,
                                   std::vector<lazy::tensor>{}),
                  value_error);

  // A tensor made in a body belongs to it.
  std::vector<lazy::tensor> escaped;
  lazy::while_loop([](const auto& s) { return lazy::sum(s[0]) < 3.0f; },
                   [&](const auto& s) {
                     escaped.push_back(s[0] * 2.0f);
                     return std::vector{s[0] + 1.0f};
                   },
                   {x});
  CHECK_THROWS_WITH(escaped[0] + 1.0f, Catch::Contains("outside that body")); // at the line that misuses it
  CHECK_THROWS_WITH(escaped[0].to_host<float>(), Catch::Contains("outside that body"));
  const auto unrelated = x * 2.0f;
  mark_step(); // the step is unaffected
  CHECK(lazy::sum(unrelated).item<float>() == 6.0f);
}

TEST_CASE("a loop's hash covers its bodies", "[lazy][control]") {
  const auto x = lazy::tensor::from(xlite::tensor<float>({1.0f, 2.0f}));
  const auto loop = [&](auto body) {
    const auto r = lazy::while_loop([](const auto& s) { return lazy::sum(s[0]) < 100.0f; }, body, {x});
    return ir::structural_hash(graph_of(r[0]));
  };
  const auto times = [&](const auto& s) { return std::vector{s[0] * 3.0f}; };
  const auto plus = [&](const auto& s) { return std::vector{s[0] + 3.0f}; };
  const auto times_other_scalar = [&](const auto& s) { return std::vector{s[0] * 5.0f}; };
  CHECK(loop(times) == loop(times));
  CHECK(loop(times) == loop(times_other_scalar)); // scalars are parameters
  CHECK(loop(times) != loop(plus));
}

TEST_CASE("draws in a loop: once without a key, anew each trip with a key from the state", "[lazy][control]") {
  const auto zeros = lazy::zeros(shape{3, 4});
  // Without a key the body's draw is an outside value: every trip sees the same numbers.
  const auto fixed = lazy::while_loop([](const auto& s) { return s[0] < 3; },
                                      [](const auto& s) {
                                        const auto u = lazy::rand_uniform(shape{3, 4});
                                        return std::vector{s[0] + 1, s[1] + u, u};
                                      },
                                      {scalar_i64(0), zeros, zeros});
  const auto fixed_total = fixed[1].to_host<float>(), fixed_last = fixed[2].to_host<float>();
  for (std::int64_t i = 0; i < 12; ++i) CHECK(fixed_total.data()[i] == 3 * fixed_last.data()[i]);
  // Keyed by the trip counter: each trip draws anew, and the draws replay from the key.
  const auto fresh = lazy::while_loop([](const auto& s) { return s[0] < 3; },
                                      [](const auto& s) {
                                        const auto u = lazy::rand_uniform(shape{3, 4}, s[0] + 1000);
                                        return std::vector{s[0] + 1, s[1] + u, u};
                                      },
                                      {scalar_i64(0), zeros, zeros});
  const auto total = fresh[1].to_host<float>(), last = fresh[2].to_host<float>();
  const auto replay = [&](std::int64_t key) { return lazy::rand_uniform(shape{3, 4}, scalar_i64(key)).to_host<float>(); };
  const auto t0 = replay(1000), t1 = replay(1001), t2 = replay(1002);
  for (std::int64_t i = 0; i < 12; ++i) {
    CHECK(last.data()[i] == t2.data()[i]);
    CHECK(total.data()[i] == (0.0f + t0.data()[i] + t1.data()[i]) + t2.data()[i]);
  }
  CHECK_FALSE(t0.data()[0] == t1.data()[0]);
}
