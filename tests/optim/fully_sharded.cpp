// Fully sharded data parallel on 8 virtual devices: Adam training of a two-layer network
// with its parameters, optimizer state and batch sharded over an 'fsdp' axis equals the
// same training on whole values, each device holds 1/8 of the parameters and state and
// needs under half the memory of a replicated step at its peak, and the
// step's program has the collectives FSDP needs: an all-gather per parameter, a
// reduce-scatter per gradient, no all-reduce.

#include <xlite/autodiff.hpp>
#include <xlite/lazy.hpp>
#include <xlite/optim.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "../runtime/eight_devices.hpp"

using Catch::Matchers::Contains;
using xlite::shape;
using xlite::lazy::tensor;
namespace lz = xlite::lazy;
namespace spmd = xlite::spmd;

namespace {

spmd::mesh fsdp_mesh() { return spmd::mesh({0, 1, 2, 3, 4, 5, 6, 7}, {8}, {"fsdp"}); }

xlite::tensor<float> random_host(const shape& s, std::mt19937& gen, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  xlite::tensor<float> host(s);
  for (std::int64_t i = 0; i < s.numel(); ++i) host.data()[i] = dist(gen);
  return host;
}

// A two-layer network with a squared-error loss; the batch (256 rows) outweighs every weight,
// as activations do in FSDP's use.
struct problem {
  std::vector<xlite::tensor<float>> params; // w1 [32, 64], b1 [64], w2 [64, 16], b2 [16]
  xlite::tensor<float> x, target;           // [256, 32], [256, 16]
};

problem make_problem() {
  std::mt19937 gen(20261124);
  problem p;
  for (const shape& s : {shape{32, 64}, shape{64}, shape{64, 16}, shape{16}}) {
    p.params.push_back(random_host(s, gen, 0.2f));
  }
  p.x = random_host(shape{256, 32}, gen);
  p.target = random_host(shape{256, 16}, gen);
  return p;
}

tensor loss_of(const std::vector<tensor>& w, const tensor& x, const tensor& target) {
  const tensor hidden = lz::relu(lz::matmul(x, w[0]) + w[1]);
  const tensor error = lz::matmul(hidden, w[2]) + w[3] - target;
  return lz::mean(error * error);
}

std::vector<tensor> to_device(const std::vector<xlite::tensor<float>>& hosts) {
  std::vector<tensor> out;
  for (const auto& h : hosts) out.push_back(tensor::from(h));
  return out;
}

std::size_t count(const xlite::ir::graph& g, xlite::op code) {
  return static_cast<std::size_t>(
      std::ranges::count_if(g.instructions, [&](const xlite::ir::instruction& ins) { return ins.code == code; }));
}

std::int64_t bytes_of(const std::vector<xlite::tensor<float>>& hosts) {
  std::int64_t bytes = 0;
  for (const auto& h : hosts) bytes += h.size() * static_cast<std::int64_t>(sizeof(float));
  return bytes;
}

} // namespace

TEST_CASE("fully sharded Adam training equals training on whole values, on 1/8 of the memory per device",
          "[spmd][fsdp]") {
  use_eight_devices();
  xlite::runtime::use_spmd();
  const problem p = make_problem();
  constexpr int steps = 3;

  // The most each device's buffers take during a step, beyond what they took before it.
  const auto step_peaks = [](auto&& step) {
    xlite::wait_device_ops(); // memory is counted when the devices are idle
    std::vector<std::int64_t> peaks;
    for (const auto& d : xlite::devices()) {
      xlite::runtime::reset_peak_memory(d);
      peaks.push_back(-xlite::runtime::memory_info(d).bytes_used);
    }
    step();
    xlite::wait_device_ops();
    for (const auto& d : xlite::devices()) {
      peaks[static_cast<std::size_t>(d.ordinal())] += xlite::runtime::memory_info(d).peak_bytes_used;
    }
    return peaks;
  };

  // The reference: every value whole on every device.
  std::vector<tensor> whole = to_device(p.params);
  xlite::optim::adam whole_opt(whole, {.lr = 1e-2});
  std::vector<float> whole_losses;
  std::vector<std::int64_t> whole_peaks;
  for (int s = 0; s < steps; ++s) {
    whole_peaks = step_peaks([&] {
      const tensor loss = loss_of(whole, tensor::from(p.x), tensor::from(p.target));
      whole_opt.step(whole, xlite::grad(loss, whole));
      xlite::mark_step();
      whole_losses.push_back(loss.item<float>());
    });
  }

  xlite::wait_device_ops();
  std::vector<std::int64_t> before;
  for (const auto& d : xlite::devices()) before.push_back(xlite::runtime::memory_info(d).bytes_used);
  const xlite::optim::fully_sharded fsdp(fsdp_mesh());
  std::vector<tensor> params = to_device(p.params);
  fsdp.shard(params); // cut at once: each device keeps its 1/8
  for (const auto& d : xlite::devices()) {
    INFO("device " << d);
    CHECK(xlite::runtime::memory_info(d).bytes_used - before[static_cast<std::size_t>(d.ordinal())] ==
          bytes_of(p.params) / 8);
  }
  xlite::optim::adam opt(params, {.lr = 1e-2});
  fsdp.shard(opt);

  std::vector<std::int64_t> peaks;
  for (int s = 0; s < steps; ++s) {
    peaks = step_peaks([&] {
      const tensor x = tensor::from(p.x), target = tensor::from(p.target);
      fsdp.shard(x);
      fsdp.shard(target);
      const tensor loss = loss_of(params, x, target);
      opt.step(params, xlite::grad(loss, params));
      if (s == 0) {
        std::vector<tensor> outputs = params;
        for (const auto& [name, t] : opt.state().tensors) outputs.push_back(t);
        const auto program = spmd::device_program(outputs);
        CHECK(count(program, xlite::op::all_gather) == params.size());     // each weight, for the forward pass
        CHECK(count(program, xlite::op::reduce_scatter) == params.size()); // each gradient, into its tiles
        CHECK(count(program, xlite::op::all_reduce) == 0);
      }
      xlite::mark_step();
      CHECK(loss.item<float>() == Approx(whole_losses[static_cast<std::size_t>(s)]).epsilon(1e-5));
    });
  }
  for (std::size_t d = 0; d < peaks.size(); ++d) {
    INFO("device cpu:" << d << ": peak " << peaks[d] << " bytes sharded, " << whole_peaks[d] << " whole");
    CHECK(peaks[d] * 2 < whole_peaks[d]); // 2.8 times less here: activations of 32 rows, not 256
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    CHECK(*spmd::sharding_of(params[i]) ==
          spmd::to_sharding(fsdp.mesh(), fsdp.spec(1 + (i % 2 == 0)), params[i].shape()));
    const auto got = params[i].to_host<float>(), expected = whole[i].to_host<float>();
    for (std::int64_t k = 0; k < got.size(); ++k) CHECK(got.data()[k] == Approx(expected.data()[k]).margin(1e-5));
  }
  // Each device holds its 1/8 of the parameters and of Adam's two moments, nothing else.
  for (const auto& d : xlite::devices()) {
    INFO("device " << d);
    CHECK(xlite::runtime::memory_info(d).bytes_used - before[static_cast<std::size_t>(d.ordinal())] ==
          3 * bytes_of(p.params) / 8);
  }
  CHECK_THAT(xlite::metrics::report(), Contains("Memory: cpu:7") && Contains("PeakBytesUsed"));
}

TEST_CASE("fully_sharded needs the mesh axis it shards over", "[spmd][fsdp]") {
  use_eight_devices();
  REQUIRE_THROWS_WITH(xlite::optim::fully_sharded(spmd::mesh({0, 1, 2, 3, 4, 5, 6, 7}, {8}, {"data"})),
                      Contains("no axis \"fsdp\""));
  CHECK(xlite::optim::fully_sharded(fsdp_mesh()).spec(0).size() == 0);
}
