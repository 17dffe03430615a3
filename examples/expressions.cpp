// Fused expressions: each assignment below is one pass over memory, in SIMD batches of the
// widest instruction set this program was compiled for and the CPU runs, on all cores.

#include <xlite/expr.hpp>
#include <xlite/expr/xtensor.hpp> // xtensor interop and printing

#include <xtensor/xarray.hpp>

#include <chrono>
#include <iostream>

int main() {
  // y = relu(x * w + b): broadcasting a row of weights and a scalar bias over a matrix.
  const xlite::tensor<float> x{{-1, 2, 3}, {4, -5, 6}};
  const xlite::tensor<float> w{0.5f, 1.0f, 2.0f};
  const xlite::tensor<float> y = xlite::relu(x * w + 0.25f);
  std::cout << "relu(x * w + 0.25) =\n" << y << "\n\n";

  // Reductions fuse their input: sum(x * x, {1}) never builds x * x.
  std::cout << "sum(x * x, {1}) = " << xlite::sum(x * x, {1}) << '\n';
  std::cout << "mean(x, {0}, keepdims) = " << xlite::mean(x, {0}, xlite::keepdims) << '\n';
  std::cout << "argmax(x, {1}) = " << xlite::argmax(x, {1}) << "\n\n";

  // The expression's type is its graph, readable at compile time.
  using graph = decltype(xlite::exp(-x * x) * w + xlite::tanh(x));
  static_assert(xlite::expr::node_count_v<graph> == 10);
  std::cout << "exp(-x * x) * w + tanh(x) has type-level signature\n  " << xlite::expr::signature<graph>() << "\n\n";

  // xtensor containers take part without copies, both ways.
  const xt::xarray<float> z = {{1, 1, 1}, {2, 2, 2}};
  xt::xarray<float> out;
  xlite::assign(out, xlite::adapt(z) * y - 1.0f);
  std::cout << "an xtensor result of adapt(z) * y - 1 =\n" << out << "\n\n";

  // Mistakes are exceptions that name the op and the shapes.
  try {
    const xlite::tensor<float> bad = x + xlite::tensor<float>{1, 2};
  } catch (const xlite::shape_error &e) {
    std::cout << "error: " << e.what() << "\n\n";
  }

  // A large one: a * x + y on 2^24 floats, timed against the bytes it must move.
  const std::int64_t n = 1 << 24;
  const xlite::tensor<float> big_x(xlite::shape{n}, 1.5f), big_y(xlite::shape{n}, 2.0f);
  xlite::tensor<float> z_big(xlite::shape{n});
  const auto start = std::chrono::steady_clock::now();
  z_big = 3.0f * big_x + big_y;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "z = 3 * x + y on 2^24 floats: " << 12.0 * static_cast<double>(n) / seconds / 1e9 << " GB/s on the "
            << xlite::active_isa() << " path, z[0] = " << z_big(0) << '\n';
  return z_big(0) == 6.5f ? 0 : 1;
}
