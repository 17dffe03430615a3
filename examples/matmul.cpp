// Matrix products: a two-layer MLP's forward pass on random data, in fp32 and with the
// TPU's bf16 numerics (bf16 products, float accumulation), each layer one GEMM with its
// bias and activation fused into the GEMM's output. It prints which GEMM path ran, the
// rate, and how far bf16 lands from fp32; it fails (exit 1) if the fused result differs
// from the same computation done in two passes.

#include <xlite/xlite.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>

namespace {

xlite::tensor<float> random_tensor(const xlite::shape& s, float scale, std::mt19937& rng) {
  xlite::tensor<float> t(s);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& x : t) x = normal(rng);
  return t;
}

} // namespace

int main() {
  std::mt19937 rng(42);
  const std::int64_t batch = 512, features = 784, hidden = 1024, classes = 10;
  const auto x = random_tensor({batch, features}, 1.0f, rng);
  const auto w1 = random_tensor({features, hidden}, 1.0f / std::sqrt(float(features)), rng);
  const auto b1 = random_tensor({hidden}, 0.1f, rng);
  const auto w2 = random_tensor({hidden, classes}, 1.0f / std::sqrt(float(hidden)), rng);
  const auto b2 = random_tensor({classes}, 0.1f, rng);

  // fp32: each layer is one GEMM; relu(. + b1) and (. + b2) run on each finished block of C.
  const auto start = std::chrono::steady_clock::now();
  const xlite::tensor<float> h = xlite::relu(xlite::matmul(x, w1) + b1);
  const xlite::tensor<float> logits = xlite::matmul(h, w2) + b2;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops = 2.0 * batch * (features * hidden + hidden * classes);
  std::cout << "fp32 GEMM path: " << xlite::kernels::gemm_path(xlite::kernels::gemm_precision::fp32) << ", "
            << flops / seconds / 1e9 << " GFLOP/s for the forward pass (first call, cold)\n";
  const auto counts = xlite::expr::deferred_evaluations();
  std::cout << "matmuls fused with their epilogue: " << counts.fused << ", computed into a temporary first: "
            << counts.materialized << '\n';

  // The same in two passes: the fused epilogue must give the same bits.
  const xlite::tensor<float> product = xlite::matmul(x, w1);
  const xlite::tensor<float> h_two_passes = xlite::relu(product + b1);
  const bool same = std::memcmp(h.data(), h_two_passes.data(), sizeof(float) * static_cast<std::size_t>(h.size())) == 0;
  std::cout << "fused epilogue equals two passes bit for bit: " << (same ? "yes" : "NO") << '\n';

  // bf16: weights and activations stored as bfloat16, products in bf16, sums in float.
  const xlite::tensor<xlite::bfloat16> x16 = xlite::cast<xlite::bfloat16>(x);
  const xlite::tensor<xlite::bfloat16> w1_16 = xlite::cast<xlite::bfloat16>(w1);
  const xlite::tensor<xlite::bfloat16> w2_16 = xlite::cast<xlite::bfloat16>(w2);
  const xlite::tensor<float> h16 = xlite::relu(xlite::matmul<float>(x16, w1_16) + b1);
  const xlite::tensor<xlite::bfloat16> h16_stored = xlite::cast<xlite::bfloat16>(h16);
  const xlite::tensor<float> logits16 = xlite::matmul<float>(h16_stored, w2_16) + b2;
  std::cout << "bf16 GEMM path: " << xlite::kernels::gemm_path(xlite::kernels::gemm_precision::bf16) << '\n';
  const float largest = xlite::max(xlite::abs(logits)).data()[0];
  const float deviation = xlite::max(xlite::abs(logits16 - logits)).data()[0];
  std::cout << "largest |logit| " << largest << ", largest bf16 - fp32 difference " << deviation << " ("
            << 100.0f * deviation / largest << "% of it; bf16 keeps 8 significant bits)\n";
  std::cout << "first row of logits: " << xlite::tensor<float>(xlite::matmul(h, w2) + b2)(0, 0) << " ... "
            << logits(0, classes - 1) << '\n';
  return same && deviation < 0.05f * largest ? 0 : 1;
}
