// Every lazy op against the static layer (bitwise: both run the same kernels) or a naive
// double-precision loop, on random shapes with broadcasting, sizes that are no multiple of
// the SIMD width, and empty tensors; on the SIMD path and on the scalar one.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "xlite/expr.hpp"
#include "xlite/lazy.hpp"

#include "random_inputs.hpp"

using namespace xlite;

namespace {

using namespace random_inputs;

// Shape b: a with some dimensions set to 1 and some leading ones dropped.
shape broadcast_partner(const shape& a) {
  std::vector<std::int64_t> dims(a.begin(), a.end());
  for (auto& d : dims) {
    if (rng()() % 3 == 0) d = 1;
  }
  const std::size_t drop = dims.empty() ? 0 : rng()() % (dims.size() + 1);
  return shape(std::vector<std::int64_t>(dims.begin() + static_cast<std::ptrdiff_t>(drop), dims.end()));
}

template <class T>
bool same_bits(const xlite::tensor<T>& a, const xlite::tensor<T>& b) {
  if (a.shape() != b.shape()) return false;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    const T x = a.data()[i], y = b.data()[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x) && std::isnan(y)) continue;
    }
    if (std::memcmp(&x, &y, sizeof(T)) != 0) return false;
  }
  return true;
}

// Runs `body` on the SIMD path and, with the ISA capped, on the scalar one.
template <class F>
void on_every_path(F body) {
  SECTION("simd path") { body(); }
  SECTION("scalar path") {
    scoped_max_isa cap(isa::portable);
    body();
  }
}

using lazy_unary = std::function<lazy::tensor(const lazy::tensor&)>;
using host_unary = std::function<xlite::tensor<float>(const xlite::tensor<float>&)>;

} // namespace

TEST_CASE("unary element-wise ops equal the static layer bitwise", "[lazy][ops]") {
  on_every_path([] {
    const std::vector<std::tuple<const char*, lazy_unary, host_unary>> ops = {
#define XLITE_PAIR(f) {#f, [](const lazy::tensor& x) { return lazy::f(x); }, [](const xlite::tensor<float>& x) { return xlite::tensor<float>(xlite::f(x)); }}
        XLITE_PAIR(abs),   XLITE_PAIR(exp),  XLITE_PAIR(log),     XLITE_PAIR(log1p), XLITE_PAIR(sqrt),
        XLITE_PAIR(rsqrt), XLITE_PAIR(tanh), XLITE_PAIR(sigmoid), XLITE_PAIR(relu),  XLITE_PAIR(gelu),
        XLITE_PAIR(sin),   XLITE_PAIR(cos),  XLITE_PAIR(floor),   XLITE_PAIR(ceil),  XLITE_PAIR(round),
#undef XLITE_PAIR
        {"neg", [](const lazy::tensor& x) { return -x; },
         [](const xlite::tensor<float>& x) { return xlite::tensor<float>(-x); }},
    };
    for (const auto& [name, lazy_op, host_op] : ops) {
      for (std::size_t rank = 0; rank <= 4; ++rank) {
        const auto host = random_tensor<float>(random_shape(rank, rank == 1 ? 3000 : 23), -4, 4);
        INFO(name << " on " << host.shape());
        CHECK(same_bits(lazy_op(lazy::tensor::from(host)).to_host<float>(), host_op(host)));
      }
    }
  });
}

// sin's range reduction is chosen for a whole batch (xsimd), so the lanes past a tensor's
// end decide bits of the lanes before it: both layers must compute that padding alike. Here
// the padding's 1e6 / (1 + 0) takes the last batch to the exact reduction, which gives
// other bits than the values' own (5 to 50) for a few percent of them; a kernel that left
// its padding at zero, or computed it otherwise, fails this for some length. A cast gives
// zeros there in both (x < 0.5 is true on the padding's zeros: cast, 1e6 again).
TEST_CASE("a tensor's last batch computes its padding as the static layer's does", "[lazy][ops]") {
  on_every_path([] {
    for (std::int64_t n = 1; n <= 64; ++n) {
      const auto host = random_tensor<float>(shape{n}, 1, 3);
      const auto x = lazy::tensor::from(host);
      INFO(n << " elements");
      CHECK(same_bits(lazy::sin(1e6f / (x * x * 2e4f + 1.0f)).to_host<float>(),
                      xlite::tensor<float>(xlite::sin(1e6f / (host * host * 2e4f + 1.0f)))));
      CHECK(same_bits(lazy::sin(lazy::cast(x < 0.5f, dtype::f32) * 1e6f + x * 20.0f).to_host<float>(),
                      xlite::tensor<float>(xlite::sin(xlite::cast<float>(host < 0.5f) * 1e6f + host * 20.0f))));
    }
  });
}

TEST_CASE("binary and ternary ops broadcast as the static layer does", "[lazy][ops]") {
  on_every_path([] {
    for (int trial = 0; trial < 8; ++trial) {
      const shape sa = random_shape(static_cast<std::size_t>(trial % 5), 37);
      const auto a = random_tensor<float>(sa, -4, 4), b = random_tensor<float>(broadcast_partner(sa), -4, 4);
      const auto c = random_tensor<float>(broadcast_partner(sa), 0.5, 3);
      const auto la = lazy::tensor::from(a), lb = lazy::tensor::from(b), lc = lazy::tensor::from(c);
      INFO(sa << " with " << b.shape() << " and " << c.shape());
      CHECK(same_bits((la + lb).to_host<float>(), xlite::tensor<float>(a + b)));
      CHECK(same_bits((la - lb).to_host<float>(), xlite::tensor<float>(a - b)));
      CHECK(same_bits((la * lb).to_host<float>(), xlite::tensor<float>(a * b)));
      CHECK(same_bits((la / lc).to_host<float>(), xlite::tensor<float>(a / c)));
      CHECK(same_bits(lazy::minimum(la, lb).to_host<float>(), xlite::tensor<float>(xlite::min(a, b))));
      CHECK(same_bits(lazy::maximum(la, lb).to_host<float>(), xlite::tensor<float>(xlite::max(a, b))));
      CHECK(same_bits(lazy::fma(la, lb, lc).to_host<float>(), xlite::tensor<float>(xlite::fma(a, b, c))));
      CHECK(same_bits(lazy::clamp(la, -lc, lc).to_host<float>(), xlite::tensor<float>(xlite::clamp(a, -c, c))));
      // Against a number the static layer takes shorter forms (maximum_with_number,
      // minimum_with_number), the lazy one the general ones; a * 0 is +0 or -0, so that
      // ties of signed zeros occur.
      CHECK(same_bits(lazy::max(la * 0.0f, 0.0f).to_host<float>(), xlite::tensor<float>(xlite::max(a * 0.0f, 0.0f))));
      CHECK(same_bits(lazy::max(-0.0f, la * 0.0f).to_host<float>(), xlite::tensor<float>(xlite::max(-0.0f, a * 0.0f))));
      CHECK(same_bits(lazy::min(la * 0.0f, -0.0f).to_host<float>(), xlite::tensor<float>(xlite::min(a * 0.0f, -0.0f))));
      CHECK(same_bits(lazy::min(0.0f, la * 0.0f).to_host<float>(), xlite::tensor<float>(xlite::min(0.0f, a * 0.0f))));
      CHECK(same_bits(lazy::max(la, 0.5f).to_host<float>(), xlite::tensor<float>(xlite::max(a, 0.5f))));
      CHECK(
          same_bits(lazy::clamp(la, -1.0f, 1.0f).to_host<float>(), xlite::tensor<float>(xlite::clamp(a, -1.0f, 1.0f))));
      CHECK(same_bits(lazy::where(la < lb, la, lc).to_host<float>(), xlite::tensor<float>(xlite::where(a < b, a, c))));
      CHECK(same_bits((la >= lb && !(la == lc)).to_host<bool>(),
                      xlite::tensor<bool>(xlite::logical_and(a >= b, xlite::logical_not(xlite::equal(a, c))))));
      CHECK(same_bits((la * 2.5f - 1.0f).to_host<float>(), xlite::tensor<float>(a * 2.5f - 1.0f)));
      // pow's SIMD and scalar forms differ in the last bits, but both layers compute every
      // element on batches (the static one ends each row in a masked one, the lazy one each
      // chunk in a padded one), and pow computes each lane alone.
      CHECK(same_bits(lazy::pow(lc, lb).to_host<float>(), xlite::tensor<float>(xlite::pow(c, b))));
    }
  });
}

TEST_CASE("mixed dtypes promote as PyTorch does, and narrow dtypes round after each op", "[lazy][ops]") {
  const xlite::tensor<std::int32_t> i({1, -2, 3, 7});
  const xlite::tensor<float> f({0.5f, 0.25f, -1.0f, 2.0f});
  const auto li = lazy::tensor::from(i), lf = lazy::tensor::from(f);
  const auto sum = li + lf;
  CHECK(sum.type() == dtype::f32);
  CHECK(same_bits(sum.to_host<float>(), xlite::tensor<float>({1.5f, -1.75f, 2.0f, 9.0f})));
  CHECK((li / 2).type() == dtype::f32); // true division
  CHECK((li * 2.5).type() == dtype::f32);
  CHECK((li * 3).type() == dtype::i32);
  CHECK(same_bits((li * 3).to_host<std::int32_t>(), xlite::tensor<std::int32_t>({3, -6, 9, 21})));

  // uint8 wraps as it does in PyTorch.
  const auto bytes = lazy::tensor::from(xlite::tensor<std::uint8_t>({250, 3}));
  CHECK(same_bits((bytes + 10).to_host<std::uint8_t>(), xlite::tensor<std::uint8_t>({4, 13})));

  // bf16 * bf16 + bf16 rounds the product to bf16 before the add, as op-by-op evaluation
  // does: 1.0234375^2 + 1.0234375 is 2.0625 so, and 2.078125 rounded once.
  const auto x = lazy::cast<bfloat16>(lazy::tensor::from(xlite::tensor<float>({1.0234375f})));
  const auto y = x * x + x;
  CHECK(y.to_host<bfloat16>().data()[0] == bfloat16(2.0625f));
  CHECK(lazy::cast<float>(y).item<float>() == 2.0625f);
}

TEST_CASE("casts between every pair of dtypes convert each element", "[lazy][ops]") {
  // Inside a kernel a cast may widen (bool to float64): its result must not overwrite the
  // operand's lanes before they are read.
  const std::vector<double> values{0, 1, 5, 2, 0, 3, 1, 4, 2, 5, 1, 0, 3};
  for (const dtype from : all_dtypes) {
    for (const dtype to : all_dtypes) {
      const lazy::tensor x = visit_dtype(from, [&](auto tag) {
        using T = typename decltype(tag)::type;
        xlite::tensor<T> host(shape{static_cast<std::int64_t>(values.size())});
        for (std::size_t i = 0; i < values.size(); ++i) host.data()[i] = static_cast<T>(values[i]);
        return lazy::tensor::from(host);
      });
      visit_dtype(to, [&](auto tag) {
        using U = typename decltype(tag)::type;
        const auto converted = lazy::cast(x, to).to_host<U>();
        INFO(name(from) << " to " << name(to));
        for (std::size_t i = 0; i < values.size(); ++i) {
          const U expected = from == dtype::boolean ? static_cast<U>(values[i] != 0) : static_cast<U>(values[i]);
          CHECK(converted.data()[i] == expected);
        }
      });
    }
  }
}

TEST_CASE("reductions equal a double-precision loop", "[lazy][ops]") {
  on_every_path([] {
    for (int trial = 0; trial < 12; ++trial) {
      const std::size_t rank = 1 + static_cast<std::size_t>(trial % 4);
      const auto host = random_tensor<float>(random_shape(rank, trial == 0 ? 70000 : 19), -4, 4);
      const auto axis = static_cast<std::int64_t>(rng()() % rank);
      const auto x = lazy::tensor::from(host);
      // The reference: for each output, the reduced elements in row-major order.
      const shape& s = host.shape();
      std::int64_t inner = 1;
      for (std::size_t a = static_cast<std::size_t>(axis) + 1; a < rank; ++a) inner *= s[a];
      const std::int64_t n = s[static_cast<std::size_t>(axis)], outer = host.size() / (n * inner);
      const auto sums = lazy::sum(x, {axis}).to_host<float>();
      const auto means = lazy::mean(x, {axis}, true).to_host<float>();
      const auto maxima = lazy::amax(x, {axis}).to_host<float>();
      const auto arg = lazy::argmax(x, axis).to_host<std::int64_t>();
      INFO(s << " over axis " << axis);
      for (std::int64_t o = 0; o < outer; ++o) {
        for (std::int64_t j = 0; j < inner; ++j) {
          double total = 0, best = -INFINITY;
          std::int64_t best_at = 0;
          for (std::int64_t r = 0; r < n; ++r) {
            const double v = host.data()[(o * n + r) * inner + j];
            total += v;
            if (v > best) {
              best = v;
              best_at = r;
            }
          }
          const std::int64_t out = o * inner + j;
          CHECK(sums.data()[out] == Approx(total).margin(1e-4 * std::sqrt(double(n))));
          CHECK(means.data()[out] == Approx(total / double(n)).margin(1e-5));
          CHECK(maxima.data()[out] == static_cast<float>(best));
          CHECK(arg.data()[out] == best_at);
        }
      }
    }
    // A reduction with its operand fused in gives the bits of the same reduction over the
    // operand stored first.
    const auto a = lazy::tensor::from(random_tensor<float>(shape{5, 3001}, -4, 4));
    const auto b = lazy::tensor::from(random_tensor<float>(shape{3001}, -4, 4));
    const auto stored = lazy::tensor::from((a * b).to_host<float>());
    CHECK(same_bits(lazy::sum(a * b, {1}).to_host<float>(), lazy::sum(stored, {1}).to_host<float>()));
    CHECK(same_bits(lazy::amax(lazy::exp(a) - b, {-1}).to_host<float>(),
                    lazy::amax(lazy::tensor::from((lazy::exp(a) - b).to_host<float>()), {-1}).to_host<float>()));
    CHECK(same_bits(lazy::sum(a * b).to_host<float>(), lazy::sum(stored).to_host<float>()));
    // Everything at once, integers widen, empty sums are 0.
    const auto ints = lazy::tensor::from(xlite::tensor<std::int32_t>({{1, 2}, {3, 4}}));
    CHECK(lazy::sum(ints).type() == dtype::i64);
    CHECK(lazy::sum(ints).item<std::int64_t>() == 10);
    CHECK(lazy::prod(ints).item<std::int64_t>() == 24);
    CHECK(lazy::amin(ints).item<int>() == 1);
    CHECK(lazy::sum(lazy::zeros(shape{0, 3}), {0}).to_host<float>().size() == 3);
  });
}

TEST_CASE("layout ops move elements as their definitions say", "[lazy][ops]") {
  const auto host = random_tensor<float>(shape{3, 4, 5}, -4, 4);
  const auto x = lazy::tensor::from(host);
  const auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) { return host.data()[(i * 4 + j) * 5 + k]; };

  const auto p = lazy::permute(x, {2, 0, 1}).to_host<float>();
  REQUIRE(p.shape() == shape{5, 3, 4});
  const auto s = lazy::slice(x, 2, 1, -1, 2).to_host<float>(); // [:, :, 1:4:2]
  REQUIRE(s.shape() == shape{3, 4, 2});
  const auto r = lazy::reshape(x, {-1, 10}).to_host<float>();
  REQUIRE(r.shape() == shape{6, 10});
  const auto c = lazy::concat({x, x * 2.0f}, 1).to_host<float>();
  REQUIRE(c.shape() == shape{3, 8, 5});
  const auto b = lazy::broadcast_to(lazy::slice(x, 0, 0, 1), shape{2, 3, 4, 5}).to_host<float>();
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) {
      for (std::int64_t k = 0; k < 5; ++k) {
        CHECK(p.data()[(k * 3 + i) * 4 + j] == at(i, j, k));
        if (k < 2) CHECK(s.data()[(i * 4 + j) * 2 + k] == at(i, j, 1 + 2 * k));
        CHECK(r.data()[(i * 4 + j) * 5 + k] == at(i, j, k));
        CHECK(c.data()[(i * 8 + j) * 5 + k] == at(i, j, k));
        CHECK(c.data()[(i * 8 + j + 4) * 5 + k] == 2 * at(i, j, k));
        CHECK(b.data()[((1 * 3 + i) * 4 + j) * 5 + k] == at(0, j, k));
      }
    }
  }
  CHECK(lazy::transpose(x).shape() == shape{3, 5, 4});
  CHECK_THROWS_AS(lazy::reshape(x, {7, -1}), shape_error);
  CHECK_THROWS_AS(lazy::permute(x, {0, 0, 1}), index_error);
}

TEST_CASE("batched matmul with broadcast batches equals a double loop", "[lazy][ops]") {
  for (const auto& [sa, sb] : std::vector<std::pair<shape, shape>>{
           {{7, 5}, {5, 3}}, {{2, 1, 33, 17}, {3, 17, 9}}, {{4, 6, 8}, {8, 2}}, {{0, 4}, {4, 3}}}) {
    const auto a = random_tensor<float>(sa, -4, 4), b = random_tensor<float>(sb, -4, 4);
    const auto product = lazy::matmul(lazy::tensor::from(a), lazy::tensor::from(b)).to_host<float>();
    const std::int64_t m = sa[sa.rank() - 2], k = sa[sa.rank() - 1], n = sb[sb.rank() - 1];
    const std::int64_t batches = product.size() / std::max<std::int64_t>(m * n, 1);
    const std::int64_t a_batches = a.size() / std::max<std::int64_t>(m * k, 1), b_batches = b.size() / (k * n);
    INFO(sa << " x " << sb);
    for (std::int64_t p = 0; p < batches; ++p) {
      // Batch p of the result reads batch p of a (broadcast when a has fewer) and of b.
      const std::int64_t pb = p % b_batches, pa = sa.rank() == 2 ? 0 : (p / (batches / a_batches)) % a_batches;
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (std::int64_t q = 0; q < k; ++q) ref += double(a.data()[(pa * m + i) * k + q]) * b.data()[(pb * k + q) * n + j];
          CHECK(product.data()[(p * m + i) * n + j] == Approx(ref).margin(1e-4));
        }
      }
    }
  }
  // softmax rows sum to one; log_softmax is its log.
  const auto logits = lazy::tensor::from(random_tensor<float>(shape{4, 10}, -30, 30));
  const auto rows = lazy::sum(lazy::softmax(logits), {1}).to_host<float>();
  for (std::int64_t i = 0; i < 4; ++i) CHECK(rows.data()[i] == Approx(1.0f).epsilon(1e-6));
  const auto diff = lazy::amax(lazy::abs(lazy::exp(lazy::log_softmax(logits)) - lazy::softmax(logits)));
  CHECK(diff.item<float>() < 1e-6f);
}

TEST_CASE("matmul reads a transposed operand in place, with the transposed product's values", "[lazy][ops]") {
  // a^T (stored (.., k, m)) times b or b^T (stored (.., n, k)): the transpose becomes the
  // matmul's flag, no permute runs, and the values are the double loop's. float and bfloat16
  // take the GEMM, int32 the plain loop.
  const std::int64_t m = 19, k = 37, n = 11;
  for (const dtype type : {dtype::f32, dtype::bf16, dtype::i32}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const shape sa = ta ? shape{3, k, m} : shape{3, m, k}, sb = tb ? shape{n, k} : shape{k, n};
        const auto a = random_tensor<float>(sa, -4, 4), b = random_tensor<float>(sb, -4, 4);
        const auto la = lazy::cast(lazy::tensor::from(a), type), lb = lazy::cast(lazy::tensor::from(b), type);
        const auto product = lazy::matmul(ta ? lazy::transpose(la) : la, tb ? lazy::transpose(lb) : lb);
        const ir::node_ptr outputs[] = {product.node()};
        const ir::graph g = ir::capture(outputs).program;
        CHECK(std::ranges::none_of(g.instructions, [](const ir::instruction& i) { return i.code == op::permute; }));
        const auto got = lazy::cast(product, dtype::f64).to_host<double>();
        // The operands as the product reads them (bf16 and int32 round or truncate a and b).
        const auto ra = lazy::cast(la, dtype::f64).to_host<double>(), rb = lazy::cast(lb, dtype::f64).to_host<double>();
        INFO(name(type) << (ta ? " a^T" : " a") << (tb ? " b^T" : " b"));
        for (std::int64_t p = 0; p < 3; ++p) {
          for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
              double ref = 0, magnitude = 0;
              for (std::int64_t q = 0; q < k; ++q) {
                const double x = ra.data()[p * m * k + (ta ? q * m + i : i * k + q)];
                const double y = rb.data()[tb ? j * k + q : q * n + j];
                ref += x * y;
                magnitude += std::abs(x * y);
              }
              // float sums of k terms (bf16 results rounded once more); int32 exact.
              const double bound = type == dtype::i32 ? 0 : type == dtype::bf16 ? 0x1p-8 * magnitude : 1e-5 * magnitude;
              CHECK(std::abs(got.data()[(p * m + i) * n + j] - ref) <= bound);
            }
          }
        }
      }
    }
  }
}

// Products and sums of signed integers wrap modulo 2^N, as torch.matmul's do (and as the
// element-wise ops do), rather than overflowing, which C++ leaves undefined.
TEST_CASE("an integer matmul wraps where its products and sums overflow", "[lazy][ops]") {
  // b is a column (k, 1) of the given values.
  const auto times_column = []<class T>(const tensor<T>& a, std::type_identity_t<std::initializer_list<T>> column) {
    tensor<T> b(shape{static_cast<std::int64_t>(column.size()), 1});
    std::copy(column.begin(), column.end(), b.data());
    return lazy::matmul(lazy::tensor::from(a), lazy::tensor::from(b)).template to_host<T>();
  };
  const std::int32_t big32 = std::int32_t{1} << 30;
  const auto c32 = times_column(tensor<std::int32_t>{{big32, big32, 3}, {-big32, -big32, -big32}}, {2, 2, 1});
  CHECK(c32(0, 0) == 3);      // 2^32 + 3
  CHECK(c32(1, 0) == -big32); // -2^32 - 2^30

  const std::int64_t big64 = std::int64_t{1} << 62;
  CHECK(times_column(tensor<std::int64_t>{{big64, big64, 7}}, {2, 2, 1})(0, 0) == 7); // 2^64 + 7
  // int8 accumulates in int32 and is narrowed modulo 2^8, as torch's.
  CHECK(times_column(tensor<std::int8_t>{{100, 100}}, {2, 1})(0, 0) == 44); // 300 - 256
}

TEST_CASE("an element-wise epilogue fused into a matmul gives the unfused result bitwise", "[lazy][ops]") {
  // Shapes with many GEMM regions, and threads, and a batch; float and bfloat16.
  for (const auto& [sa, sb] : std::vector<std::pair<shape, shape>>{{{300, 170}, {170, 260}}, {{3, 33, 17}, {17, 9}}}) {
    for (const dtype type : {dtype::f32, dtype::bf16}) {
      const auto a = lazy::cast(lazy::tensor::from(random_tensor<float>(sa, -4, 4)), type);
      const auto b = lazy::cast(lazy::tensor::from(random_tensor<float>(sb, -4, 4)), type);
      const auto bias = lazy::cast(lazy::tensor::from(random_tensor<float>(shape{sb[sb.rank() - 1]}, -4, 4)), type);
      mark_step();
      const auto fused = lazy::cast(lazy::relu(lazy::matmul(a, b) + bias) * 0.5f, dtype::f32).to_host<float>();
      const auto product = lazy::matmul(a, b);
      mark_step(); // the product is data now: the epilogue runs as a kernel of its own
      const auto apart = lazy::cast(lazy::relu(product + bias) * 0.5f, dtype::f32).to_host<float>();
      INFO(sa << " x " << sb << " " << name(type));
      CHECK(same_bits(fused, apart));
    }
  }
}

TEST_CASE("an epilogue never writes over an operand its matmul still reads", "[lazy][ops]") {
  // z = b + matmul(w, b): b dies in the epilogue and has z's dtype and shape, but the GEMM
  // reads it until its last region (float64: row by row; float32: again once m > 3072).
  for (const auto& [type, m, n] : std::vector<std::tuple<dtype, std::int64_t, std::int64_t>>{
           {dtype::f64, 64, 64}, {dtype::f32, 3100, 32}}) {
    const auto x = lazy::cast(lazy::tensor::from(random_tensor<float>(shape{m, n}, -4, 4)), type);
    const auto w = lazy::cast(lazy::tensor::from(random_tensor<float>(shape{m, m}, -0.1, 0.1)), type);
    mark_step();
    const auto b = x * 3.0f;
    // (transposed so that the sum is not an output: outputs never take an input's memory)
    const auto fused = lazy::cast(lazy::transpose(b + lazy::matmul(w, b)), dtype::f64).to_host<double>();
    const auto b_data = x * 3.0f;
    mark_step(); // b is data now: the matmul cannot share memory with the sum
    const auto apart = lazy::cast(lazy::transpose(b_data + lazy::matmul(w, b_data)), dtype::f64).to_host<double>();
    INFO(name(type) << " m " << m);
    CHECK(same_bits(fused, apart));
  }
}

TEST_CASE("a multi-output kernel gives each result bitwise as kernels of their own", "[lazy][ops]") {
  // An optimizer-shaped update: m2 and w2 share their inputs, w2 reads m2, w16 reads w2;
  // far reads a reduction of m2, so it cannot join them. Sizes with several threads' chunks.
  for (const shape& s : {shape{300, 170}, shape{7, 33}, shape{0, 5}}) {
    const auto g = lazy::tensor::from(random_tensor<float>(s, -4, 4));
    const auto m = lazy::tensor::from(random_tensor<float>(s, -4, 4));
    const auto w = lazy::tensor::from(random_tensor<float>(s, -4, 4));
    mark_step();
    const auto update = [&](const lazy::tensor& m2) { return w - lazy::tanh(m2) * 0.01f; };
    const auto m2 = m * 0.9f + g * 0.1f;
    const auto w2 = update(m2);
    const auto w16 = lazy::cast(w2, dtype::bf16);
    const auto far = g * lazy::sum(m2);
    mark_step(); // one graph
    const auto m2_apart = m * 0.9f + g * 0.1f;
    mark_step(); // each from the data of the step before
    const auto w2_apart = update(m2_apart);
    const auto far_apart = g * lazy::sum(m2_apart);
    mark_step();
    const auto w16_apart = lazy::cast(w2_apart, dtype::bf16);
    INFO(s);
    CHECK(same_bits(m2.to_host<float>(), m2_apart.to_host<float>()));
    CHECK(same_bits(w2.to_host<float>(), w2_apart.to_host<float>()));
    CHECK(same_bits(far.to_host<float>(), far_apart.to_host<float>()));
    CHECK(same_bits(lazy::cast(w16, dtype::f32).to_host<float>(), lazy::cast(w16_apart, dtype::f32).to_host<float>()));
  }
}

TEST_CASE("factories make their values on the device", "[lazy][ops]") {
  CHECK(same_bits(lazy::arange(0, 5).to_host<std::int64_t>(), xlite::tensor<std::int64_t>({0, 1, 2, 3, 4})));
  CHECK(same_bits(lazy::arange(1.0f, 2.0f, 0.25f).to_host<float>(), xlite::tensor<float>({1, 1.25f, 1.5f, 1.75f})));
  CHECK(lazy::sum(lazy::ones(shape{3, 4})).item<float>() == 12);
  CHECK(lazy::sum(lazy::full(shape{2, 2}, 2.5f)).item<float>() == 10);
  CHECK(lazy::zeros(shape{2}, dtype::i32).to_host<std::int32_t>().data()[1] == 0);
  CHECK_THROWS_AS(lazy::arange(0, 5, 0), value_error);
  // An iota fused into a kernel with a larger result counts along its own axis.
  const auto grid = (lazy::arange(0, 4) + lazy::zeros(shape{3, 4}, dtype::i64)).to_host<std::int64_t>();
  const auto column = (lazy::reshape(lazy::arange(0, 3), shape{3, 1}) + lazy::zeros(shape{3, 4}, dtype::i64))
                          .to_host<std::int64_t>();
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) {
      CHECK(grid(i, j) == j);
      CHECK(column(i, j) == i);
    }
  }
}
