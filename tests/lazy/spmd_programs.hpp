#pragma once

// The SPMD property test's programs: random programs (element-wise, matmul chains, batched and
// broadcasting matmuls, reductions, transposes, reshapes, slices, concats) over random shapes, uneven ones included,
// with random partition specs on the meshes of the issue (1x8, 8x1, 2x4, 4x2, 2x2x2, hybrid), half of them with a
// random sharding asked of the result too (so partial results are reduce-scattered, all-reduced, moved by all_to_all or
// gathered to fit it): the sharded run equals the run on whole values, bitwise for programs of correctly rounded ops in
// an unchanged order, and within a tolerance (float sums of up to a few dozen terms, or a transcendental function's
// last bit: 1e-5 relative, 1e-6 absolute) otherwise. Run by tests/lazy/spmd_property.cpp on 8 devices of one process
// and by tests/mpi/spmd.cpp on 8 devices spread over processes, which run the same programs from the same seed.

#include <xlite/lazy.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace xlite_test {

using xlite::shape;
using xlite::lazy::tensor;
namespace lz = xlite::lazy;
namespace spmd = xlite::spmd;

struct named_mesh {
  std::string name;
  spmd::mesh m;
};

inline std::vector<named_mesh> meshes() {
  std::vector<std::int64_t> ids{0, 1, 2, 3, 4, 5, 6, 7};
  return {{"1x8", spmd::mesh(ids, {1, 8}, {"a", "b"})},
          {"8x1", spmd::mesh(ids, {8, 1}, {"a", "b"})},
          {"2x4", spmd::mesh(ids, {2, 4}, {"a", "b"})},
          {"4x2", spmd::mesh(ids, {4, 2}, {"a", "b"})},
          {"2x2x2", spmd::mesh(ids, {2, 2, 2}, {"a", "b", "c"})},
          {"hybrid 2x2 ici, 2x1 dcn", spmd::hybrid_mesh({2, 2}, {2, 1}, {"a", "b"})}};
}

// A random spec for a tensor of `rank` dimensions: each dimension replicated, on one unused
// mesh axis, or now and then on two (a tuple).
inline spmd::partition_spec random_spec(std::size_t rank, const spmd::mesh& m, std::mt19937& gen, std::string& text) {
  std::vector<std::string> unused;
  for (const auto& axis : m.shape()) unused.push_back(axis.name);
  std::ranges::shuffle(unused, gen);
  std::vector<spmd::dim_spec> dims;
  text += "(";
  for (std::size_t d = 0; d < rank; ++d) {
    const int choice = std::uniform_int_distribution<int>(0, 5)(gen);
    if (choice < 2 || unused.empty()) {
      dims.emplace_back(spmd::none);
      text += "None";
    } else if (choice == 5 && unused.size() >= 2) {
      dims.emplace_back(std::vector<spmd::axis_ref>{unused[0], unused[1]});
      text += "(" + unused[0] + "," + unused[1] + ")";
      unused.erase(unused.begin(), unused.begin() + 2);
    } else {
      dims.emplace_back(unused.back());
      text += unused.back();
      unused.pop_back();
    }
    text += d + 1 < rank ? "," : ")";
  }
  if (rank == 0) text += ")";
  return spmd::partition_spec(std::move(dims));
}

inline xlite::tensor<float> random_host(const shape& s, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  xlite::tensor<float> host(s);
  for (std::int64_t i = 0; i < s.numel(); ++i) host.data()[i] = dist(gen);
  return host;
}

struct program {
  std::string name;
  bool exact; // correctly rounded ops, and no reduction order changes with the sharding
  std::vector<shape> inputs;
  std::function<tensor(const std::vector<tensor>&)> run;
};

inline program random_program(std::mt19937& gen) {
  const auto size = [&] { return std::uniform_int_distribution<std::int64_t>(1, 13)(gen); };
  const std::int64_t m = size(), n = size(), k = size(), h = size();
  switch (std::uniform_int_distribution<int>(0, 13)(gen)) {
  case 0:
    return {"relu(x * y + b) - abs(x) / (y * y + 1)", true, {shape{m, n}, shape{m, n}, shape{n}}, [](const auto& in) {
              return lz::relu(in[0] * in[1] + in[2]) - lz::abs(in[0]) / (in[1] * in[1] + 1.0f);
            }};
  case 6:
    // Bitwise: a kernel computes every element on SIMD batches (a shard's end, the whole
    // tensor's middle, in a padded one), and tanh and sigmoid compute each lane alone.
    return {"tanh(x) * sigmoid(y)", true, {shape{m, n}, shape{n}}, [](const auto& in) {
              return lz::tanh(in[0]) * lz::sigmoid(in[1]);
            }};
  case 1:
    return {"relu(x @ w1 + b1) @ w2", false, {shape{m, k}, shape{k, h}, shape{h}, shape{h, n}}, [](const auto& in) {
              return lz::matmul(lz::relu(lz::matmul(in[0], in[1]) + in[2]), in[3]);
            }};
  case 2: {
    const std::int64_t axis = std::uniform_int_distribution<std::int64_t>(0, 1)(gen);
    const bool keep = std::uniform_int_distribution<int>(0, 1)(gen) == 1;
    return {"sum(x * y, " + std::to_string(axis) + ") + amax(x, " + std::to_string(axis) + ")",
            false,
            {shape{m, n}, shape{m, n}},
            [=](const auto& in) { return lz::sum(in[0] * in[1], {axis}, keep) + lz::amax(in[0], {axis}, keep); }};
  }
  case 3:
    return {"transpose(x) * z + mean(z)", false, {shape{m, n}, shape{n, m}}, [](const auto& in) {
              return lz::transpose(in[0]) * in[1] + lz::mean(in[1]);
            }};
  case 4:
    return {"sum(reshape(x) * 2)", false, {shape{m, n, k}}, [=](const auto& in) {
              return lz::sum(lz::reshape(in[0], shape{m * n * k}) * 2.0f);
            }};
  case 7: {
    const std::int64_t axis = std::uniform_int_distribution<std::int64_t>(0, 1)(gen);
    return {"mean(x * y, " + std::to_string(axis) + ")", false, {shape{m, n}, shape{m, n}}, [=](const auto& in) {
              return lz::mean(in[0] * in[1], {axis});
            }};
  }
  case 8:
    // The partial product has three users: an optimizer's use of a gradient.
    return {"g = transpose(x) @ y; g * 0.5 + g * g - g", false, {shape{k, m}, shape{k, n}}, [](const auto& in) {
              const tensor g = lz::matmul(lz::transpose(in[0]), in[1]);
              return g * 0.5f + g * g - g;
            }};
  case 9:
    return {"reshape(x, [m*n, k]) * y (merge)", true, {shape{m, n, k}, shape{k}}, [=](const auto& in) {
              return lz::reshape(in[0], shape{m * n, k}) * in[1];
            }};
  case 10:
    return {"reshape(x, [m, n, k]) - 1 (split)", true, {shape{m * n, k}}, [=](const auto& in) {
              return lz::reshape(in[0], shape{m, n, k}) - 1.0f;
            }};
  case 11: {
    const std::int64_t axis = std::uniform_int_distribution<std::int64_t>(0, 1)(gen);
    return {"concat([x, y], " + std::to_string(axis) + ") * 2",
            true,
            {shape{m, n}, axis == 0 ? shape{k, n} : shape{m, k}},
            [=](const auto& in) {
              return lz::concat({in[0], in[1]}, axis) * 2.0f;
            }};
  }
  case 12: {
    const std::int64_t start = std::uniform_int_distribution<std::int64_t>(0, m - 1)(gen);
    const std::int64_t step = std::uniform_int_distribution<std::int64_t>(1, 2)(gen);
    return {"x[" + std::to_string(start) + ":" + std::to_string(m) + ":" + std::to_string(step) + ", :] - y",
            true,
            {shape{m, n}, shape{n}},
            [=](const auto& in) { return lz::slice(in[0], 0, start, m, step) - in[1]; }};
  }
  case 13:
    switch (std::uniform_int_distribution<int>(0, 2)(gen)) {
    case 0:
      return {"x @ transpose(y) (batched)", false, {shape{h, m, k}, shape{h, n, k}}, [](const auto& in) {
                return lz::matmul(in[0], lz::transpose(in[1]));
              }};
    case 1:
      return {"relu(x @ w) (w broadcast over the batch)", false, {shape{h, m, k}, shape{k, n}}, [](const auto& in) {
                return lz::relu(lz::matmul(in[0], in[1]));
              }};
    default:
      break;
    }
    return {"x @ y (batched) * 2", false, {shape{h, m, k}, shape{h, k, n}}, [](const auto& in) {
              return lz::matmul(in[0], in[1]) * 2.0f;
            }};
  default:
    return {"sum(x @ w)", false, {shape{m, k}, shape{k, n}}, [](const auto& in) {
              return lz::sum(lz::matmul(in[0], in[1]));
            }};
  }
}

// `trials_per_mesh` random programs on random shardings of every mesh, each checked
// against the same program on whole values.
inline void check_random_programs(std::uint32_t seed, int trials_per_mesh) {
  std::mt19937 gen(seed);
  for (const named_mesh& mesh : meshes()) {
    for (int trial = 0; trial < trials_per_mesh; ++trial) {
      const program p = random_program(gen);
      std::vector<xlite::tensor<float>> hosts;
      for (const shape& s : p.inputs) hosts.push_back(random_host(s, gen));
      std::vector<tensor> whole, sharded;
      std::string specs;
      for (std::size_t i = 0; i < hosts.size(); ++i) {
        whole.push_back(tensor::from(hosts[i]));
        sharded.push_back(tensor::from(hosts[i]));
        specs += (i ? " " : "");
        spmd::mark_sharding(sharded.back(), mesh.m, random_spec(hosts[i].shape().rank(), mesh.m, gen, specs));
      }
      const tensor result = p.run(sharded);
      if (std::uniform_int_distribution<int>(0, 1)(gen) == 1) {
        specs += " -> ";
        spmd::mark_sharding(result, mesh.m, random_spec(result.shape().rank(), mesh.m, gen, specs));
      }
      std::ostringstream shapes;
      for (const shape& s : p.inputs) shapes << s << ' ';
      INFO("mesh " << mesh.name << ", program " << p.name << ", shapes " << shapes.str() << ", specs " << specs);
      const auto expected = p.run(whole).to_host<float>();
      xlite::mark_step(); // the result stays laid out as the partitioner left it, maybe partial
      const auto got = result.to_host<float>();
      REQUIRE(got.shape() == expected.shape());
      for (std::int64_t i = 0; i < got.size(); ++i) {
        if (p.exact) {
          REQUIRE(got.data()[i] == expected.data()[i]);
        } else {
          REQUIRE(got.data()[i] == Approx(expected.data()[i]).epsilon(1e-5).margin(1e-6));
        }
      }
    }
  }
}

} // namespace xlite_test
