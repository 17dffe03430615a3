// A tour of what xlite has so far: the machine it runs on, dtypes and how they promote,
// shapes and broadcasting, errors that say what went wrong, and the thread pool.
// Run it with XLITE_ISA=portable to see the ISA cap at work.

#include <xlite/xlite.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <vector>

int main() {
  std::cout << "xlite " << XLITE_VERSION_MAJOR << '.' << XLITE_VERSION_MINOR << '.' << XLITE_VERSION_PATCH << "\n\n";

  const xlite::cpu_features &cpu = xlite::detected_cpu_features();
  std::cout << "CPU: avx2=" << cpu.avx2 << " fma=" << cpu.fma << " avx512f=" << cpu.avx512f
            << " avx512bw=" << cpu.avx512bw << " avx512vl=" << cpu.avx512vl << " avx512dq=" << cpu.avx512dq
            << " avx512_bf16=" << cpu.avx512_bf16 << " amx_tile=" << cpu.amx_tile << " amx_bf16=" << cpu.amx_bf16
            << "\nkernel path: " << xlite::active_isa() << " (best on this machine: " << xlite::detected_isa()
            << ", cap: " << xlite::max_isa() << ")\n\n";

  std::cout << "dtype promotion (PyTorch's rules):\n" << std::setw(10) << "";
  for (const xlite::dtype b : xlite::all_dtypes) std::cout << std::setw(9) << xlite::name(b);
  std::cout << '\n';
  for (const xlite::dtype a : xlite::all_dtypes) {
    std::cout << std::setw(10) << xlite::name(a);
    for (const xlite::dtype b : xlite::all_dtypes) std::cout << std::setw(9) << xlite::name(xlite::promote_types(a, b));
    std::cout << '\n';
  }

  const xlite::shape image{8, 1, 6, 1};
  const xlite::shape filter{7, 1, 5};
  std::cout << "\nbroadcast " << image << " with " << filter << " -> " << xlite::broadcast_shapes(image, filter, "mul")
            << '\n';
  try {
    xlite::broadcast_shapes(xlite::shape{2, 3}, xlite::shape{4}, "add");
  } catch (const xlite::error &e) {
    std::cout << "error: " << e.what() << '\n';
  }

  // A chunked sum: the chunks are fixed by the grain, not by the thread count, so the
  // result is bitwise the same on any pool.
  std::vector<float> values(1 << 20);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i));
  const std::int64_t grain = 1 << 14;
  auto chunked_sum = [&](xlite::thread_pool &pool) {
    std::vector<float> partial(values.size() / grain);
    pool.parallel_for(static_cast<std::int64_t>(values.size()), grain, [&](std::int64_t begin, std::int64_t end) {
      float s = 0;
      for (std::int64_t i = begin; i < end; ++i) s += values[static_cast<std::size_t>(i)];
      partial[static_cast<std::size_t>(begin / grain)] = s;
    });
    float total = 0;
    for (const float p : partial) total += p;
    return total;
  };
  xlite::thread_pool one(1);
  const float expected = chunked_sum(one);
  std::cout << "\nsum of sin(i), i < 2^20: " << std::setprecision(9) << expected << " on 1 thread, "
            << chunked_sum(xlite::default_thread_pool()) << " on " << xlite::default_thread_pool().num_threads()
            << " threads\n";
  return chunked_sum(xlite::default_thread_pool()) == expected ? 0 : 1;
}
