// What the Fashion-MNIST MLP's matmuls (examples/fashion_mnist_models.hpp: 784-256-128-10,
// batch 128) cost on a TPU-like 128x128 matrix unit, in each dataflow and timing; then one
// layer computed with the array's numerics and checked cell by cell, and the same layer on
// TPU v1's memory. docs/tpu.md explains the model.

#include <xlite/tpu.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>

namespace tpu = xlite::tpu;

namespace {

constexpr std::int64_t batch = 128;
constexpr tpu::gemm_shape forward_layers[] = {{batch, 784, 256}, {batch, 256, 128}, {batch, 128, 10}};

template <class Dataflow>
void print_costs(const char* name) {
  const tpu::systolic_array<128, 128, Dataflow> mxu;
  for (const tpu::timing mode : {tpu::timing::scalesim, tpu::timing::pipelined}) {
    std::int64_t cycles = 0, macs = 0;
    double mapping = 0;
    for (const tpu::gemm_shape& layer : forward_layers) {
      const tpu::gemm_report r = mxu.cost(layer, mode);
      cycles += r.total_cycles;
      macs += r.macs;
      mapping += r.mapping_efficiency / std::size(forward_layers);
    }
    std::printf("  %-18s %-9s %8lld cycles  utilization %5.1f%%  mapping %5.1f%%\n", name, tpu::name(mode),
                static_cast<long long>(cycles), 100.0 * static_cast<double>(macs) / (cycles * 128.0 * 128.0),
                100.0 * mapping);
  }
}

} // namespace

int main() {
  std::printf("The MLP's forward pass (3 matmuls, batch %lld) on a 128x128 array:\n", static_cast<long long>(batch));
  print_costs<tpu::dataflow::output_stationary>("output-stationary");
  print_costs<tpu::dataflow::weight_stationary>("weight-stationary");
  print_costs<tpu::dataflow::input_stationary>("input-stationary");

  // The last layer for real: bf16 products, fp32 sums in the weight-stationary order.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  tpu::matrix<float> h(batch, 128), w(128, 10);
  for (std::int64_t i = 0; i < batch * 128; ++i) h.data()[i] = normal(rng);
  for (std::int64_t i = 0; i < 128 * 10; ++i) w.data()[i] = normal(rng);
  const tpu::systolic_array<128, 128, tpu::dataflow::weight_stationary> mxu;
  const auto [logits, report] = mxu.gemm(h, w);
  std::printf("\nThe last layer, computed: logits(0, 0) = %.6f\n  %s\n", logits(0, 0),
              (std::ostringstream() << report).str().c_str());
  // Every cell stepped: the same cycles and the same bits.
  const tpu::simulation<float> cells = mxu.simulate(h, w);
  const bool same = cells.out == logits && cells.cycles == report.compute_cycles;
  std::printf("  cell by cell: %lld cycles, %s\n", static_cast<long long>(cells.cycles),
              same ? "the same cycles and bits" : "DIFFERENT");

  // The first layer on TPU v1's 256x256 array and memory: its 30 GB/s link is the limit.
  const tpu::systolic_array<256, 256, tpu::dataflow::weight_stationary> v1(tpu::memory_config::tpu_v1());
  const tpu::gemm_report first = v1.cost(forward_layers[0]);
  std::printf("\nThe first layer on TPU v1: %lld cycles (%lld stalled on off-chip traffic), %.2f us, %.1f GFLOP/s\n",
              static_cast<long long>(first.total_cycles), static_cast<long long>(first.stall_cycles),
              first.seconds * 1e6, first.flops_per_second / 1e9);
  return same ? 0 : 1;
}
