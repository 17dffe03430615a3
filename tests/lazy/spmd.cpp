// SPMD mode on 8 virtual devices: sharded tensors, the partitioner's per-device programs and
// their results against the same programs on whole values.

#include <xlite/autodiff.hpp>
#include <xlite/lazy.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../runtime/eight_devices.hpp"

using Catch::Matchers::Contains;
using xlite::shape;
using xlite::ir::sharding;
using xlite::lazy::tensor;
namespace spmd = xlite::spmd;

namespace {

void use_spmd_on_eight_devices() {
  use_eight_devices();
  xlite::runtime::use_spmd();
}

std::vector<std::int64_t> all_devices() { return {0, 1, 2, 3, 4, 5, 6, 7}; }

xlite::tensor<float> random_host(const shape& s, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  xlite::tensor<float> host(s);
  for (std::int64_t i = 0; i < s.numel(); ++i) host.data()[i] = dist(gen);
  return host;
}

std::vector<float> elements(const xlite::tensor<float>& t) { return {t.data(), t.data() + t.size()}; }
std::vector<float> elements(const tensor& t) { return elements(t.to_host<float>()); }

// How many instructions of the per-device program are `code`.
std::size_t count(const xlite::ir::graph& g, xlite::op code) {
  return static_cast<std::size_t>(
      std::ranges::count_if(g.instructions, [&](const xlite::ir::instruction& ins) { return ins.code == code; }));
}

// The shape of the first `code` instruction of a per-device program.
std::optional<shape> first_shape(const xlite::ir::graph& g, xlite::op code) {
  const auto found = std::ranges::find_if(g.instructions, [&](const auto& ins) { return ins.code == code; });
  if (found == g.instructions.end()) return std::nullopt;
  return found->shape;
}

std::size_t collectives_in(const xlite::ir::graph& g) {
  return static_cast<std::size_t>(std::ranges::count_if(g.instructions, [](const xlite::ir::instruction& ins) {
    return xlite::info(ins.code).kind == xlite::op_kind::collective && ins.code != xlite::op::local_shard;
  }));
}

// What each device has sent in collectives while `run` ran, in bytes.
std::vector<std::int64_t> bytes_sent_during(const std::function<void()>& run) {
  std::vector<std::int64_t> sent;
  for (const auto& d : xlite::devices()) sent.push_back(-xlite::runtime::collective_bytes_counter(d).load());
  run();
  xlite::wait_device_ops(); // to_host waits for one replica of each tile only
  for (const auto& d : xlite::devices()) {
    sent[static_cast<std::size_t>(d.ordinal())] += xlite::runtime::collective_bytes_counter(d).load();
  }
  return sent;
}

} // namespace

TEST_CASE("mark_sharding needs SPMD mode", "[spmd]") {
  // CTest runs each test case in a process of its own (catch_discover_tests): here use_spmd()
  // was never called.
  if (xlite::runtime::is_spmd()) {
    WARN("SPMD mode is already on in this process: the check needs a process of its own");
    return;
  }
  use_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"data"});
  const tensor x = tensor::from(random_host(shape{8, 2}, 1));
  REQUIRE_THROWS_WITH(spmd::mark_sharding(x, m, {"data", spmd::none}), Contains("use_spmd()"));
}

TEST_CASE("a sharded value is cut into shards and put together again, uneven tiles padded", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {2, 4}, {"x", "y"});
  const auto host = random_host(shape{5, 7}, 2);
  const tensor t = tensor::from(host);
  CHECK(spmd::sharding_of(t)->is_replicated());
  spmd::mark_sharding(t, m, {"x", "y"});
  CHECK(spmd::sharding_of(t)->to_string() == "{devices=[2,4]0,1,2,3,4,5,6,7}");
  CHECK(elements(t) == elements(host));
  CHECK_THAT(spmd::visualize(t), Contains("0") && Contains("7"));
  spmd::clear_sharding(t);
  CHECK(spmd::sharding_of(t)->is_replicated());
  CHECK(elements(t) == elements(host));
}

TEST_CASE("a pending tensor's sharding is its annotation until the barrier decides it", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"data"});
  const tensor x = tensor::from(random_host(shape{16, 4}, 3));
  spmd::mark_sharding(x, m, {"data", spmd::none});
  const tensor y = xlite::lazy::relu(x);
  CHECK_FALSE(spmd::sharding_of(y).has_value());
  REQUIRE_THROWS_WITH(spmd::visualize(y), Contains("no sharding yet"));
  xlite::mark_step();
  CHECK(*spmd::sharding_of(y) == *spmd::sharding_of(x)); // element-wise ops keep their operand's tiles
  const tensor z = xlite::lazy::exp(x);
  spmd::mark_sharding(z, m, {spmd::none, "data"}); // a user's sharding wins
  CHECK(spmd::sharding_of(z)->tile_count(1) == 8);
  xlite::mark_step();
  CHECK(spmd::sharding_of(z)->tile_count(1) == 8);
}

TEST_CASE("element-wise programs on shards equal the program on whole values, bitwise", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {2, 4}, {"x", "y"});
  const auto a = random_host(shape{6, 10}, 4), b = random_host(shape{10}, 5);
  const auto program = [](const tensor& x, const tensor& bias) {
    return xlite::lazy::relu(x * x + bias) - xlite::lazy::abs(x) / (bias * bias + 1.0f); // correctly rounded ops
  };
  const auto whole = elements(program(tensor::from(a), tensor::from(b)));
  for (const spmd::partition_spec& spec :
       {spmd::partition_spec{"x", "y"}, spmd::partition_spec{"y", "x"}, spmd::partition_spec{spmd::none, {"x", "y"}}}) {
    const tensor x = tensor::from(a), bias = tensor::from(b);
    spmd::mark_sharding(x, m, spec);
    const tensor y = program(x, bias);
    CHECK(collectives_in(spmd::device_program({y})) == 0);
    CHECK(elements(y) == whole);
  }
}

TEST_CASE("a column-parallel matmul needs no collective, a row-parallel one an all-reduce", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"model"});
  const auto xs = random_host(shape{4, 16}, 6), ws = random_host(shape{16, 24}, 7);
  const auto whole = elements(xlite::lazy::relu(xlite::lazy::matmul(tensor::from(xs), tensor::from(ws))));

  SECTION("column parallel: w's columns over the devices") {
    const tensor x = tensor::from(xs), w = tensor::from(ws);
    spmd::mark_sharding(w, m, {spmd::none, "model"});
    const tensor y = xlite::lazy::relu(xlite::lazy::matmul(x, w));
    CHECK(collectives_in(spmd::device_program({y})) == 0);
    const auto got = elements(y);
    REQUIRE(got.size() == whole.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(whole[i]).margin(1e-5));
    CHECK(spmd::sharding_of(y)->tile_count(1) == 8);
  }
  SECTION("row parallel: the contracted dimension over the devices") {
    const tensor x = tensor::from(xs), w = tensor::from(ws);
    spmd::mark_sharding(x, m, {spmd::none, "model"});
    spmd::mark_sharding(w, m, {"model", spmd::none});
    const tensor y = xlite::lazy::relu(xlite::lazy::matmul(x, w));
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 1);
    CHECK(count(program, xlite::op::all_reduce) == 1);
    const auto got = elements(y);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(whole[i]).margin(1e-5));
  }
}

TEST_CASE("a partial sum stays pending until a consumer needs the full value", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"model"});
  const auto xs = random_host(shape{4, 16}, 8), ws = random_host(shape{16, 3}, 9);
  const double expected = [&] {
    double total = 0;
    for (std::int64_t i = 0; i < 4; ++i) {
      for (std::int64_t j = 0; j < 3; ++j) {
        for (std::int64_t k = 0; k < 16; ++k) total += double(xs(i, k)) * double(ws(k, j));
      }
    }
    return total;
  }();
  const tensor x = tensor::from(xs), w = tensor::from(ws);
  spmd::mark_sharding(x, m, {spmd::none, "model"});
  spmd::mark_sharding(w, m, {"model", spmd::none});
  const tensor total = xlite::lazy::sum(xlite::lazy::matmul(x, w) * 2.0f) - xlite::lazy::sum(xlite::lazy::matmul(x, w));
  CHECK(collectives_in(spmd::device_program({total})) == 0);
  xlite::mark_step();
  const auto s = spmd::sharding_of(total);
  REQUIRE(s.has_value());
  CHECK(s->is_partial());
  CHECK_THAT(s->to_string(), Contains("partial_sum"));
  CHECK(total.item<float>() == Approx(expected).epsilon(1e-4));
  // A consumer that needs the whole value all-reduces it once.
  const tensor positive = xlite::lazy::relu(total);
  CHECK(count(spmd::device_program({positive}), xlite::op::all_reduce) == 1);
  CHECK(positive.item<float>() == Approx(std::max(expected, 0.0)).epsilon(1e-4));
}

TEST_CASE("data parallel: the weight gradient is all-reduced over the batch's devices", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"data"});
  const auto xs = random_host(shape{16, 5}, 10), gs = random_host(shape{16, 3}, 11), ws = random_host(shape{5, 3}, 12);
  const tensor x = tensor::from(xs), g = tensor::from(gs), w = tensor::from(ws);
  spmd::mark_sharding(x, m, {"data", spmd::none});
  spmd::mark_sharding(g, m, {"data", spmd::none});
  const tensor y = xlite::lazy::matmul(x, w);                          // forward: no collective
  const tensor dw = xlite::lazy::matmul(xlite::lazy::transpose(x), g); // summed over the batch
  const tensor updated = w - dw * 0.1f;
  CHECK(collectives_in(spmd::device_program({y})) == 0);
  const auto program = spmd::device_program({updated});
  CHECK(collectives_in(program) == 1);
  CHECK(count(program, xlite::op::all_reduce) == 1);
  std::vector<float> got;
  // The ring all-reduce of the 5 x 3 float gradient: each device sends 2 * 7/8 of its 60 bytes.
  CHECK(bytes_sent_during([&] { got = elements(updated); }) == std::vector<std::int64_t>(8, 105));
  for (std::int64_t i = 0; i < 5; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      double grad = 0;
      for (std::int64_t b = 0; b < 16; ++b) grad += double(xs(b, i)) * double(gs(b, j));
      CHECK(got[static_cast<std::size_t>(i * 3 + j)] == Approx(ws(i, j) - 0.1 * grad).margin(1e-5));
    }
  }
}

TEST_CASE("on a 2-D mesh, batch over one axis and columns over the other need no collective", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {2, 4}, {"data", "model"});
  const auto xs = random_host(shape{6, 5}, 13), ws = random_host(shape{5, 12}, 14);
  const auto whole = elements(xlite::lazy::matmul(tensor::from(xs), tensor::from(ws)));
  const tensor x = tensor::from(xs), w = tensor::from(ws);
  spmd::mark_sharding(x, m, {"data", spmd::none});
  spmd::mark_sharding(w, m, {spmd::none, "model"});
  const tensor y = xlite::lazy::matmul(x, w);
  CHECK(collectives_in(spmd::device_program({y})) == 0);
  xlite::mark_step();
  CHECK(*spmd::sharding_of(y) == spmd::to_sharding(m, {"data", "model"}, y.shape()));
  const auto got = elements(y);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(whole[i]).margin(1e-5));
}

TEST_CASE("resharding between incompatible layouts gathers, then cuts locally", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const auto host = random_host(shape{9, 10}, 15); // uneven over 8: padded tiles
  const tensor x = tensor::from(host);
  spmd::mark_sharding(x, m, {"d", spmd::none});
  const tensor y = x * 2.0f;
  spmd::mark_sharding(y, m, {spmd::none, "d"});
  const auto program = spmd::device_program({y});
  CHECK(count(program, xlite::op::all_gather) == 1);
  CHECK(count(program, xlite::op::local_shard) == 1);
  xlite::mark_step();
  CHECK(spmd::sharding_of(y)->tile_count(1) == 8);
  const auto got = elements(y);
  for (std::int64_t i = 0; i < host.size(); ++i) CHECK(got[static_cast<std::size_t>(i)] == host.data()[i] * 2.0f);
}

TEST_CASE("a partial gradient that several ops use is all-reduced once", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"data"});
  const auto xs = random_host(shape{16, 5}, 16), gs = random_host(shape{16, 3}, 17), ws = random_host(shape{5, 3}, 18);
  const auto adam_like = [](const tensor& x, const tensor& g, const tensor& w) {
    const tensor dw = xlite::lazy::matmul(xlite::lazy::transpose(x), g);
    const tensor first = dw * 0.1f, second = dw * dw * 0.01f; // the moments of a first step
    return w - first * xlite::lazy::rsqrt(second + 1e-8f) * 0.001f;
  };
  const auto whole = elements(adam_like(tensor::from(xs), tensor::from(gs), tensor::from(ws)));
  const tensor x = tensor::from(xs), g = tensor::from(gs), w = tensor::from(ws);
  spmd::mark_sharding(x, m, {"data", spmd::none});
  spmd::mark_sharding(g, m, {"data", spmd::none});
  const tensor updated = adam_like(x, g, w);
  const auto program = spmd::device_program({updated});
  CHECK(collectives_in(program) == 1);
  CHECK(count(program, xlite::op::all_reduce) == 1);
  const auto got = elements(updated);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(whole[i]).margin(1e-6));
  // Ops that keep a partial sum partial (transpose, reshape, sum) follow the same rule.
  const auto four_uses = [](const tensor& x, const tensor& g) {
    const tensor dw = xlite::lazy::matmul(xlite::lazy::transpose(x), g);
    return xlite::lazy::sum(xlite::lazy::transpose(dw)) + xlite::lazy::sum(xlite::lazy::reshape(dw, shape{15})) +
           xlite::lazy::sum(dw) + xlite::lazy::sum(xlite::lazy::relu(dw));
  };
  const tensor uses = four_uses(x, g);
  CHECK(collectives_in(spmd::device_program({uses})) == 1);
  CHECK(uses.item<float>() == Approx(four_uses(tensor::from(xs), tensor::from(gs)).item<float>()).epsilon(1e-5));
}

TEST_CASE("a partial sum wanted tiled along a dimension is reduce-scattered", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"fsdp"});
  const auto xs = random_host(shape{8, 16}, 19), gs = random_host(shape{8, 3}, 20), ws = random_host(shape{16, 3}, 21);
  const tensor x = tensor::from(xs), g = tensor::from(gs), w = tensor::from(ws);
  spmd::mark_sharding(x, m, {"fsdp", spmd::none});
  spmd::mark_sharding(g, m, {"fsdp", spmd::none});
  spmd::mark_sharding(w, m, {"fsdp", spmd::none}); // each device keeps 2 of the 16 rows
  const tensor updated = w - xlite::lazy::matmul(xlite::lazy::transpose(x), g) * 0.1f;
  const auto program = spmd::device_program({updated});
  CHECK(collectives_in(program) == 1);
  CHECK(count(program, xlite::op::reduce_scatter) == 1);
  std::vector<float> got;
  // The ring reduce-scatter of the 16 x 3 float gradient: each device sends 7/8 of its 192
  // bytes, half what an all-reduce would.
  CHECK(bytes_sent_during([&] { got = elements(updated); }) == std::vector<std::int64_t>(8, 168));
  CHECK(*spmd::sharding_of(updated) == *spmd::sharding_of(w));
  for (std::int64_t i = 0; i < 16; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      double grad = 0;
      for (std::int64_t b = 0; b < 8; ++b) grad += double(xs(b, i)) * double(gs(b, j));
      CHECK(got[static_cast<std::size_t>(i * 3 + j)] == Approx(ws(i, j) - 0.1 * grad).margin(1e-5));
    }
  }
}

TEST_CASE("a mean over a tiled dimension is a partial sum of the shards' sums", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const auto host = random_host(shape{16, 5}, 22);
  const tensor x = tensor::from(host);
  spmd::mark_sharding(x, m, {"d", spmd::none});
  const tensor column_means = xlite::lazy::mean(x, {0});
  CHECK(collectives_in(spmd::device_program({column_means})) == 0);
  xlite::mark_step();
  CHECK(spmd::sharding_of(column_means)->is_partial());
  const auto got = elements(column_means);
  for (std::int64_t j = 0; j < 5; ++j) {
    double total = 0;
    for (std::int64_t i = 0; i < 16; ++i) total += host(i, j);
    CHECK(got[static_cast<std::size_t>(j)] == Approx(total / 16).margin(1e-6));
  }
}

TEST_CASE("mark_sharding inside a loop body is an error, not an annotation silently dropped", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const tensor x = tensor::from(random_host(shape{8, 4}, 23));
  const auto body = [&](const std::vector<tensor>& s) {
    spmd::mark_sharding(s[1], m, {"d", spmd::none});
    return std::vector<tensor>{s[0] + 1, s[1] * 2.0f};
  };
  REQUIRE_THROWS_WITH(xlite::lazy::while_loop([](const auto& s) { return s[0] < 3; }, body,
                                              {xlite::lazy::zeros(shape{}, xlite::dtype::i64), x}),
                      Contains("mark_sharding: inside a while_loop or cond body"));
}

TEST_CASE("a reshape keeps the tiles of a major dimension and gathers the others", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {2, 4}, {"a", "b"});
  const auto host = random_host(shape{8, 3, 4}, 24);
  SECTION("flattening a batch sharded over its rows moves nothing") {
    const tensor x = tensor::from(host);
    spmd::mark_sharding(x, m, {"b", spmd::none, spmd::none});
    const tensor y = xlite::lazy::reshape(x, shape{8, 12});
    CHECK(collectives_in(spmd::device_program({y})) == 0);
    xlite::mark_step();
    CHECK(*spmd::sharding_of(y) == spmd::to_sharding(m, {"b", spmd::none}, y.shape()));
    CHECK(elements(y) == elements(host));
  }
  SECTION("dimensions of size 1 do not take a run's major place") {
    const auto column = random_host(shape{1, 8, 6}, 26);
    const tensor x = tensor::from(column);
    spmd::mark_sharding(x, m, {spmd::none, "b", spmd::none});
    const tensor y = xlite::lazy::reshape(x, shape{8, 1, 6});
    CHECK(collectives_in(spmd::device_program({y})) == 0);
    xlite::mark_step();
    CHECK(spmd::sharding_of(y)->tile_count(0) == 4);
    CHECK(elements(y) == elements(column));
  }
  SECTION("a tiled minor dimension of a merge is gathered") {
    const tensor x = tensor::from(host);
    spmd::mark_sharding(x, m, {"b", "a", spmd::none}); // 3 rows over 2: uneven too
    const tensor y = xlite::lazy::reshape(x, shape{24, 4});
    const auto program = spmd::device_program({y});
    CHECK(count(program, xlite::op::all_gather) == 1);
    xlite::mark_step();
    CHECK(spmd::sharding_of(y)->tile_count(0) == 4);
    CHECK(elements(y) == elements(host));
  }
}

TEST_CASE("a whole value cannot be made partial, and a partial input's gradient is whole", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const auto host = random_host(shape{16, 3}, 25);
  const tensor x = tensor::from(host);
  spmd::mark_sharding(x, m, {"d", spmd::none});
  const tensor column_sums = xlite::lazy::sum(x, {0});
  xlite::mark_step();
  const sharding partial = *spmd::sharding_of(column_sums);
  REQUIRE(partial.is_partial());
  // Cutting a whole value into parts that sum to it is no reshard: an error, not 8x the value.
  const tensor whole = column_sums * column_sums;
  xlite::mark_step();
  REQUIRE_FALSE(spmd::sharding_of(whole)->is_partial());
  const tensor made_partial =
      xlite::lazy::detail::make(whole.device(), xlite::ir::mark_sharding(whole.node(), partial));
  REQUIRE_THROWS_WITH(spmd::device_program({made_partial}), Contains("cannot be made partial"));
  // d/dy sum(y * y) = 2y for a pending partial y: its gradient is whole, not laid out as y.
  const tensor g = xlite::grad(xlite::lazy::sum(column_sums * column_sums), {column_sums})[0];
  const auto got = elements(g);
  for (std::int64_t j = 0; j < 3; ++j) {
    double total = 0;
    for (std::int64_t i = 0; i < 16; ++i) total += host(i, j);
    CHECK(got[static_cast<std::size_t>(j)] == Approx(2 * total).margin(1e-5));
  }
}

TEST_CASE("slice and concat keep the tiles of the dimensions they take whole", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const std::int64_t n = GENERATE(16, 15); // 15 rows over 8 devices: the last tile padded
  const auto host = random_host(shape{n, 6}, 27);
  const tensor x = tensor::from(host);
  spmd::mark_sharding(x, m, {"d", spmd::none});
  const tensor columns = xlite::lazy::slice(x, 1, 1, 5);
  const tensor joined = xlite::lazy::concat({x, columns}, 1);
  CHECK(collectives_in(spmd::device_program({joined})) == 0);
  const tensor rows = xlite::lazy::slice(x, 0, 3, 11); // cuts the tiled dimension: gathered
  CHECK(count(spmd::device_program({rows}), xlite::op::all_gather) == 1);
  xlite::mark_step();
  CHECK(*spmd::sharding_of(joined) == *spmd::sharding_of(x));
  const auto got = elements(joined), got_rows = elements(rows);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < 10; ++j) {
      CHECK(got[static_cast<std::size_t>(i * 10 + j)] == (j < 6 ? host(i, j) : host(i, j - 5)));
    }
  }
  for (std::int64_t i = 3; i < 11; ++i) {
    for (std::int64_t j = 0; j < 6; ++j) CHECK(got_rows[static_cast<std::size_t>((i - 3) * 6 + j)] == host(i, j));
  }
}

TEST_CASE("a batched matmul multiplies the shards of a sharded batch or contracting dimension", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {2, 4}, {"batch", "model"});
  const auto xs = random_host(shape{4, 3, 8}, 28), ws = random_host(shape{4, 8, 5}, 29);
  const auto whole = elements(xlite::lazy::matmul(tensor::from(xs), tensor::from(ws)));
  const tensor x = tensor::from(xs), w = tensor::from(ws);
  spmd::mark_sharding(x, m, {"batch", spmd::none, "model"});
  spmd::mark_sharding(w, m, {"batch", "model", spmd::none});
  const tensor y = xlite::lazy::matmul(x, w);
  CHECK(collectives_in(spmd::device_program({y})) == 0);
  xlite::mark_step();
  const sharding s = *spmd::sharding_of(y);
  CHECK(s.tile_count(0) == 2);
  CHECK(s.is_partial()); // summed over the contracting dimension's 4 tiles
  const auto got = elements(y);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(whole[i]).margin(1e-5));
}

TEST_CASE("tiles that move to another dimension are exchanged all-to-all, not gathered", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const auto host = random_host(shape{16, 8}, 30);
  const tensor x = tensor::from(host);
  spmd::mark_sharding(x, m, {"d", spmd::none});
  const tensor y = x * 2.0f;
  spmd::mark_sharding(y, m, {spmd::none, "d"});
  const auto program = spmd::device_program({y});
  CHECK(collectives_in(program) == 1);
  CHECK(count(program, xlite::op::all_to_all) == 1);
  std::vector<float> got;
  // Each device sends 7 of the 8 pieces of its 2 x 8 tile: 56 bytes, where an all-gather
  // would send 448.
  CHECK(bytes_sent_during([&] { got = elements(y); }) == std::vector<std::int64_t>(8, 56));
  CHECK(*spmd::sharding_of(y) == spmd::to_sharding(m, {spmd::none, "d"}, y.shape()));
  for (std::int64_t i = 0; i < host.size(); ++i) CHECK(got[static_cast<std::size_t>(i)] == host.data()[i] * 2.0f);
}

TEST_CASE("an annotation is carried back: ops on whole operands compute only their tile", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const auto xs = random_host(shape{16, 4}, 31), bs = random_host(shape{4}, 32);
  const tensor x = tensor::from(xs), b = tensor::from(bs); // whole on every device
  const tensor y = xlite::lazy::transpose(xlite::lazy::exp(x * 2.0f + b));
  spmd::mark_sharding(y, m, {spmd::none, "d"});
  const auto program = spmd::device_program({y});
  CHECK(collectives_in(program) == 0);
  // exp runs on the 2 x 4 tile of x cut locally, not on all of it.
  CHECK(first_shape(program, xlite::op::exp) == shape{2, 4});
  const auto got = elements(y);
  for (std::int64_t i = 0; i < 16; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) {
      CHECK(got[static_cast<std::size_t>(j * 16 + i)] == Approx(std::exp(xs(i, j) * 2.0f + bs(j))).epsilon(1e-6));
    }
  }
  // Through a reduction: the rows' sums wanted in row tiles, exp runs on the rows' tiles.
  const tensor row_sums = xlite::lazy::sum(xlite::lazy::exp(tensor::from(xs)), {1});
  spmd::mark_sharding(row_sums, m, {"d"});
  const auto reduced = spmd::device_program({row_sums});
  CHECK(collectives_in(reduced) == 0);
  CHECK(first_shape(reduced, xlite::op::exp) == shape{2, 4});
  const auto sums = elements(row_sums);
  for (std::int64_t i = 0; i < 16; ++i) {
    double total = 0;
    for (std::int64_t j = 0; j < 4; ++j) total += std::exp(double(xs(i, j)));
    CHECK(sums[static_cast<std::size_t>(i)] == Approx(total).epsilon(1e-6));
  }
}

TEST_CASE("an annotation is carried back through matmuls, reshapes, slices and concats", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"d"});
  const auto xs = random_host(shape{16, 8}, 51), ws = random_host(shape{8, 12}, 52);
  const tensor x = tensor::from(xs), w = tensor::from(ws); // whole on every device
  // x @ w in f64, with f applied to x's and g to w's elements first.
  const auto product = [&](float (*f)(float), float (*g)(float), std::int64_t i, std::int64_t j) {
    double total = 0;
    for (std::int64_t k = 0; k < 8; ++k) total += double(f(xs(i, k))) * double(g(ws(k, j)));
    return total;
  };
  const auto relu = [](float v) { return std::max(v, 0.0f); };
  const auto tanh = [](float v) { return std::tanh(v); };
  const auto same = [](float v) { return v; };
  const auto check_product = [&](const tensor& y, float (*f)(float), float (*g)(float)) {
    const auto got = elements(y);
    for (std::int64_t i = 0; i < 16; ++i) {
      for (std::int64_t j = 0; j < 12; ++j) {
        CHECK(got[static_cast<std::size_t>(i * 12 + j)] == Approx(product(f, g, i, j)).margin(1e-5));
      }
    }
  };
  SECTION("rows of a product wanted: the left operand is computed on row tiles") {
    const tensor y = xlite::lazy::matmul(xlite::lazy::relu(x), w);
    spmd::mark_sharding(y, m, {"d", spmd::none});
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 0);
    CHECK(first_shape(program, xlite::op::relu) == shape{2, 8});
    CHECK(first_shape(program, xlite::op::matmul) == shape{2, 12});
    check_product(y, relu, same);
  }
  SECTION("columns of a product wanted: the right operand is computed on column tiles") {
    // 12 columns in 8 tiles of 2: devices 6 and 7 hold padding only.
    const tensor y = xlite::lazy::matmul(x, xlite::lazy::tanh(w));
    spmd::mark_sharding(y, m, {spmd::none, "d"});
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 0);
    CHECK(first_shape(program, xlite::op::tanh) == shape{8, 2});
    CHECK(first_shape(program, xlite::op::matmul) == shape{16, 2});
    check_product(y, same, tanh);
  }
  SECTION("an operand whose partner's layout is not known before the forward pass is computed whole") {
    const tensor y = xlite::lazy::matmul(xlite::lazy::relu(x), xlite::lazy::tanh(w));
    spmd::mark_sharding(y, m, {"d", spmd::none});
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 0);
    CHECK(first_shape(program, xlite::op::relu) == shape{16, 8});
    CHECK(first_shape(program, xlite::op::matmul) == shape{2, 12}); // both came whole: cut locally
    check_product(y, relu, tanh);
  }
  SECTION("not towards an operand whose partner is tiled along the contraction: the partial sum is scattered") {
    const tensor w_rows = tensor::from(ws);
    spmd::mark_sharding(w_rows, m, {"d", spmd::none});
    const tensor y = xlite::lazy::matmul(xlite::lazy::relu(x), w_rows);
    spmd::mark_sharding(y, m, {"d", spmd::none});
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 1);
    CHECK(count(program, xlite::op::reduce_scatter) == 1);
    CHECK(first_shape(program, xlite::op::relu) == shape{16, 8}); // whole, then cut along k locally
    check_product(y, relu, same);
  }
  SECTION("a batch and columns on a 2-D mesh: the batch's tiles of a batched operand, a 2-D one whole") {
    const spmd::mesh grid(all_devices(), {2, 4}, {"a", "b"});
    const auto hs = random_host(shape{4, 6, 8}, 54);
    const tensor y = xlite::lazy::matmul(xlite::lazy::relu(tensor::from(hs)), w);
    spmd::mark_sharding(y, grid, {"a", spmd::none, "b"});
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 0);
    CHECK(first_shape(program, xlite::op::relu) == shape{2, 6, 8});
    CHECK(first_shape(program, xlite::op::matmul) == shape{2, 6, 3});
    const auto got = elements(y);
    for (std::int64_t b = 0; b < 4; ++b) {
      for (std::int64_t i = 0; i < 6; ++i) {
        for (std::int64_t j = 0; j < 12; ++j) {
          double total = 0;
          for (std::int64_t k = 0; k < 8; ++k) total += double(relu(hs(b, i, k))) * double(ws(k, j));
          CHECK(got[static_cast<std::size_t>((b * 6 + i) * 12 + j)] == Approx(total).margin(1e-5));
        }
      }
    }
  }
  SECTION("not through a slice of a tiled dimension: the whole value is cut locally, not gathered") {
    const spmd::mesh grid(all_devices(), {2, 4}, {"a", "b"});
    const tensor cut = xlite::lazy::slice(xlite::lazy::exp(x), 1, 2, 6);
    spmd::mark_sharding(cut, grid, {"a", "b"});
    const auto program = spmd::device_program({cut});
    CHECK(collectives_in(program) == 0);
    CHECK(first_shape(program, xlite::op::exp) == shape{16, 8});
    const auto got = elements(cut);
    for (std::int64_t i = 0; i < 16; ++i) {
      for (std::int64_t j = 2; j < 6; ++j)
        CHECK(got[static_cast<std::size_t>(i * 4 + j - 2)] == Approx(std::exp(xs(i, j))));
    }
  }
  SECTION("through a reshape, a slice and a concat, element-wise ops compute their tiles") {
    const auto hs = random_host(shape{8, 2, 6}, 53);
    const tensor h = tensor::from(hs);
    const tensor flat = xlite::lazy::reshape(xlite::lazy::exp(h), shape{16, 6});
    const tensor cut = xlite::lazy::slice(xlite::lazy::exp(x), 1, 2, 6);
    const tensor joined = xlite::lazy::concat({xlite::lazy::exp(tensor::from(xs)), -x}, 1); // (16, 16)
    for (const tensor* t : {&flat, &cut, &joined}) {
      spmd::mark_sharding(*t, m, {"d", spmd::none});
      CHECK(collectives_in(spmd::device_program({*t})) == 0);
    }
    CHECK(first_shape(spmd::device_program({flat}), xlite::op::exp) == shape{1, 2, 6});
    CHECK(first_shape(spmd::device_program({cut}), xlite::op::exp) == shape{2, 8});
    CHECK(first_shape(spmd::device_program({joined}), xlite::op::exp) == shape{2, 8});
    CHECK(first_shape(spmd::device_program({joined}), xlite::op::neg) == shape{2, 8});
    const auto got_flat = elements(flat), got_cut = elements(cut), got_joined = elements(joined);
    for (std::int64_t i = 0; i < hs.size(); ++i) {
      CHECK(got_flat[static_cast<std::size_t>(i)] == Approx(std::exp(hs.data()[i])));
    }
    for (std::int64_t i = 0; i < 16; ++i) {
      for (std::int64_t j = 0; j < 8; ++j) {
        if (j >= 2 && j < 6) CHECK(got_cut[static_cast<std::size_t>(i * 4 + j - 2)] == Approx(std::exp(xs(i, j))));
        CHECK(got_joined[static_cast<std::size_t>(i * 16 + j)] == Approx(std::exp(xs(i, j))));
        CHECK(got_joined[static_cast<std::size_t>(i * 16 + 8 + j)] == -xs(i, j));
      }
    }
  }
}

TEST_CASE("the same tiles wanted on other devices are sent there, not gathered", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {2, 4}, {"a", "b"});
  const auto host = random_host(shape{16, 3}, 33);
  const tensor x = tensor::from(host);
  spmd::mark_sharding(x, m, {spmd::dim_spec{"a", "b"}, spmd::none});
  const tensor y = x - 1.0f;
  spmd::mark_sharding(y, m, {spmd::dim_spec{"b", "a"}, spmd::none}); // the 8 row tiles in another device order
  const auto program = spmd::device_program({y});
  CHECK(collectives_in(program) == 1);
  CHECK(count(program, xlite::op::collective_permute) == 1);
  std::vector<float> got;
  // Devices 0 and 7 keep their tile; each other device sends its 2 x 3 tile once.
  CHECK(bytes_sent_during([&] { got = elements(y); }) == std::vector<std::int64_t>{0, 24, 24, 24, 24, 24, 24, 0});
  for (std::int64_t i = 0; i < host.size(); ++i) CHECK(got[static_cast<std::size_t>(i)] == host.data()[i] - 1.0f);
}

TEST_CASE("an annotation carried back does not cost a collective the forward rule would not", "[spmd]") {
  use_spmd_on_eight_devices();
  SECTION("a partial operand that another op needs whole is all-reduced once") {
    const spmd::mesh m(all_devices(), {8}, {"d"});
    const tensor x = tensor::from(random_host(shape{8, 16}, 34)), g = tensor::from(random_host(shape{8, 3}, 35));
    spmd::mark_sharding(x, m, {"d", spmd::none});
    spmd::mark_sharding(g, m, {"d", spmd::none});
    const tensor dw = xlite::lazy::matmul(xlite::lazy::transpose(x), g); // a partial sum, two users
    const tensor positive = xlite::lazy::relu(dw);
    spmd::mark_sharding(positive, m, {"d", spmd::none});
    const auto program = spmd::device_program({positive, xlite::lazy::sum(dw)});
    CHECK(collectives_in(program) == 1);
    CHECK(count(program, xlite::op::all_reduce) == 1);
  }
  SECTION("on a tie, the operand laid out as the annotation wins") {
    const spmd::mesh m(all_devices(), {8}, {"d"});
    const auto ys = random_host(shape{16, 8}, 36), xs = random_host(shape{16, 8}, 37);
    const tensor y = tensor::from(ys), x = tensor::from(xs);
    spmd::mark_sharding(y, m, {spmd::none, "d"});
    const tensor u = y + xlite::lazy::exp(x); // exp(x) is computed on row tiles
    spmd::mark_sharding(u, m, {"d", spmd::none});
    const auto program = spmd::device_program({u});
    CHECK(collectives_in(program) == 1); // y's tiles move to the rows once
    CHECK(count(program, xlite::op::all_to_all) == 1);
    const auto got = elements(u);
    for (std::int64_t i = 0; i < ys.size(); ++i) {
      CHECK(got[static_cast<std::size_t>(i)] == Approx(ys.data()[i] + std::exp(xs.data()[i])).epsilon(1e-6));
    }
  }
  SECTION("an operand already laid out for the annotation keeps its tiles") {
    const spmd::mesh m(all_devices(), {2, 4}, {"a", "b"});
    const auto bs = random_host(shape{4}, 38), cs = random_host(shape{16, 4}, 39);
    const tensor b = tensor::from(bs), c = tensor::from(cs);
    const tensor u = xlite::lazy::exp(b) + c; // exp(b) on b's 4 tiles, c cut locally
    spmd::mark_sharding(u, m, {"a", "b"});
    CHECK(collectives_in(spmd::device_program({u})) == 0);
    const auto got = elements(u);
    for (std::int64_t i = 0; i < 16; ++i) {
      for (std::int64_t j = 0; j < 4; ++j) {
        CHECK(got[static_cast<std::size_t>(i * 4 + j)] == Approx(std::exp(bs(j)) + cs(i, j)).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("all_to_all and collective_permute reshards on a 2-D mesh, with replicas", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {2, 4}, {"a", "b"});
  const auto host = random_host(shape{8, 6, 8}, 40);
  SECTION("tiles along 'b' move from dimension 0 to 2 within each of the two groups") {
    const tensor x = tensor::from(host);
    spmd::mark_sharding(x, m, {"b", "a", spmd::none});
    const tensor y = x * 3.0f;
    spmd::mark_sharding(y, m, {spmd::none, "a", "b"});
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 1);
    CHECK(count(program, xlite::op::all_to_all) == 1);
    const auto got = elements(y);
    for (std::int64_t i = 0; i < host.size(); ++i) CHECK(got[static_cast<std::size_t>(i)] == host.data()[i] * 3.0f);
  }
  SECTION("tiles replicated over 'a' go to the devices of a reversed mesh") {
    std::vector<std::int64_t> reversed = all_devices();
    std::ranges::reverse(reversed);
    const spmd::mesh r(reversed, {2, 4}, {"a", "b"});
    const tensor x = tensor::from(host);
    spmd::mark_sharding(x, m, {"b", spmd::none, spmd::none}); // each row tile on 2 devices
    const tensor y = x + 1.0f;
    spmd::mark_sharding(y, r, {"b", spmd::none, spmd::none});
    const auto program = spmd::device_program({y});
    CHECK(collectives_in(program) == 1);
    CHECK(count(program, xlite::op::collective_permute) == 1);
    std::vector<float> got;
    // No device holds the tile the reversed mesh gives it: each sends its 2 x 6 x 8 tile once.
    CHECK(bytes_sent_during([&] { got = elements(y); }) == std::vector<std::int64_t>(8, 384));
    for (std::int64_t i = 0; i < host.size(); ++i) CHECK(got[static_cast<std::size_t>(i)] == host.data()[i] + 1.0f);
  }
}

TEST_CASE("a convolutional layer runs on the batch's shards: its weight gradient is all-reduced", "[spmd]") {
  use_spmd_on_eight_devices();
  const spmd::mesh m(all_devices(), {8}, {"data"});
  const auto images = random_host(shape{8, 2, 6, 6}, 41), kernels = random_host(shape{3, 2, 3, 3}, 42),
             biases = random_host(shape{3}, 43);
  // A step of SGD on a convolution, a max pool and a linear layer over each image's features.
  const auto step = [](const tensor& x, const tensor& w, const tensor& b, const tensor& v) {
    const tensor features = xlite::lazy::max_pool2d(xlite::lazy::relu(xlite::lazy::conv2d(x, w, b, 1, 1)), {2, 2});
    const tensor scores = xlite::lazy::matmul(xlite::lazy::reshape(features, shape{8, 3, 9}), v); // (8, 3, 2)
    const tensor loss = xlite::lazy::sum(scores * scores);
    const auto grads = xlite::grad(loss, {w, b, v});
    return std::vector<tensor>{w - grads[0] * 0.01f, b - grads[1] * 0.01f, v - grads[2] * 0.01f};
  };
  const auto vs = random_host(shape{9, 2}, 44);
  const auto whole = step(tensor::from(images), tensor::from(kernels), tensor::from(biases), tensor::from(vs));
  const tensor x = tensor::from(images), w = tensor::from(kernels), b = tensor::from(biases), v = tensor::from(vs);
  spmd::mark_sharding(x, m, {"data", spmd::none, spmd::none, spmd::none});
  const auto updated = step(x, w, b, v);
  const auto program = spmd::device_program(updated);
  // Data parallel: no gather; one all-reduce per parameter's gradient.
  CHECK(count(program, xlite::op::all_gather) == 0);
  CHECK(count(program, xlite::op::all_reduce) == 3);
  CHECK(collectives_in(program) == 3);
  for (std::size_t k = 0; k < updated.size(); ++k) {
    const auto got = elements(updated[k]), expected = elements(whole[k]);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-4));
  }
}
