// Assignment (expr/assign.hpp): expressions that read their destination (a = a * 2 + b),
// destinations of another shape, destinations that overlap an operand partly (through
// xtensor adaptors), eval(); and how a * b + c rounds.
//
// The checks are bitwise: the expressions use ops that IEEE rounds once each and no
// product that is then added to, so the naive loop must give the same bits.

#include "reference.hpp"

#include <xlite/expr/xtensor.hpp>

#include <catch2/catch.hpp>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

using xlite::shape;
using xlite::tensor;
using namespace xlite_test;

TEST_CASE("assign: a = a * 2 + b and other assignments that read their destination", "[assign][aliasing]") {
  rng g(15);
  for (const shape& s : {shape{7}, shape{3, 37}, shape{5, 20011}}) { // the last is split over threads
    const tensor<float> original = random_tensor<float>(g, s, -10, 10);
    const tensor<float> b = random_tensor<float>(g, s, -10, 10);
    const tensor<float> row = random_tensor<float>(g, shape{s[s.rank() - 1]}, -10, 10);
    xlite_test::for_each_isa_path([&](xlite::isa) {
      INFO("shape " << s << ", " << path_name());
      tensor<float> a = original;
      const float* storage = a.data();
      a = a * 2.0f + b; // in place: each element is read before it is written
      CHECK(a.data() == storage);
      tensor<float> want(s);
      for (std::int64_t i = 0; i < a.size(); ++i) {
        const float twice = original.data()[i] * 2.0f;
        want.data()[i] = twice + b.data()[i];
      }
      CHECK(bitwise_equal(a, want));

      a = original;
      a = b + a; // the destination as the second operand
      for (std::int64_t i = 0; i < a.size(); ++i) want.data()[i] = b.data()[i] + original.data()[i];
      CHECK(bitwise_equal(a, want));

      a = original;
      a = (a - row) * a / (a + 2.0f); // the destination three times, and a broadcast row
      const auto r = broadcast_index(s, row.shape());
      for (std::int64_t i = 0; i < a.size(); ++i) {
        const float x = original.data()[i];
        want.data()[i] = (x - row.data()[r[static_cast<std::size_t>(i)]]) * x / (x + 2.0f);
      }
      CHECK(bitwise_equal(a, want));

      a = original;
      a = a - xlite::mean(a); // a reduction of the destination, held by the expression
      const float m = xlite::mean(original)();
      for (std::int64_t i = 0; i < a.size(); ++i) want.data()[i] = original.data()[i] - m;
      CHECK(bitwise_equal(a, want));
    });
  }
}

TEST_CASE("assign: assigning to a tensor of another shape, or from a broadcast of itself", "[assign][aliasing]") {
  xlite_test::for_each_isa_path([&](xlite::isa) {
    tensor<float> t(shape{2, 2}, 1.0f);
    const tensor<float> x{1, 2, 3, 4, 5};
    t = x + 1.0f;
    CHECK(t == tensor<float>{2, 3, 4, 5, 6});
    // The destination is an operand of a smaller shape than the result: (1, 3) + (2, 3).
    tensor<float> a{{1, 2, 3}};
    const tensor<float> m{{10, 20, 30}, {40, 50, 60}};
    a = a + m;
    CHECK(a == tensor<float>{{11, 22, 33}, {41, 52, 63}});
    // ... and of a larger one: the result is a column of it.
    tensor<float> b{{1, 2, 3}, {4, 5, 6}};
    b = xlite::sum(b, {1}, xlite::keepdims) + b;
    CHECK(b == tensor<float>{{7, 8, 9}, {19, 20, 21}});
  });
}

TEST_CASE("assign: an xtensor destination resized by the assignment is read before it is resized", "[assign][aliasing]") {
  xt::xarray<float> x = {1.0f, 2.0f, 3.0f};
  tensor<float> column(shape{2, 1});
  column(0, 0) = 10.0f;
  column(1, 0) = 20.0f;
  xlite::assign(x, xlite::adapt(x) + column); // (3) + (2, 1) -> (2, 3): x's memory is reallocated
  const xt::xarray<float> expected = {{11.0f, 12.0f, 13.0f}, {21.0f, 22.0f, 23.0f}};
  const bool same = x == expected;
  CHECK(same);
}

TEST_CASE("assign: a destination that overlaps an operand without being it gets the pre-assignment values",
          "[assign][aliasing]") {
  // Two xtensor adaptors over one buffer, one element apart: the only way two leaves share
  // memory partly. Writing dst[i] = 2 * src[i] in place would read elements already written.
  xlite_test::for_each_isa_path([&](xlite::isa) {
    for (const std::size_t n : {std::size_t{7}, std::size_t{100}, std::size_t{40000}}) {
      std::vector<float> buffer(n + 1);
      for (std::size_t i = 0; i <= n; ++i) buffer[i] = static_cast<float>(i);
      auto src = xt::adapt(buffer.data(), n, xt::no_ownership(), std::vector<std::size_t>{n});
      auto dst = xt::adapt(buffer.data() + 1, n, xt::no_ownership(), std::vector<std::size_t>{n});
      xlite::assign(dst, xlite::adapt(src) * 2.0f);
      bool right = buffer[0] == 0.0f;
      for (std::size_t i = 0; i < n; ++i) right = right && buffer[i + 1] == 2.0f * static_cast<float>(i);
      INFO(n << " elements, " << path_name());
      CHECK(right);
    }
  });
}

TEST_CASE("assign: eval and the converting constructor give the same tensor", "[assign]") {
  const tensor<double> x{1.5, -2.0, 4.0}, y = tensor<double>{1.0, 2.0}.reshaped(shape{2, 1});
  xlite_test::for_each_isa_path([&](xlite::isa) {
    const auto e = x * y - 1.0;
    const tensor<double> constructed = e;
    const auto evaluated = xlite::eval(e);
    static_assert(std::is_same_v<decltype(evaluated), const tensor<double>>);
    CHECK(constructed == tensor<double>{{0.5, -3.0, 3.0}, {2.0, -5.0, 7.0}});
    CHECK(bitwise_equal(evaluated, constructed));
    tensor<double> assigned(shape{2, 3}, 9.0);
    const double* storage = assigned.data();
    assigned = e; // same shape, no overlap: written in place
    CHECK(assigned.data() == storage);
    CHECK(bitwise_equal(assigned, constructed));
  });
}

TEST_CASE("assign: eval of a tensor is a copy, or the temporary itself", "[assign]") {
  const tensor<float> x{{1.0f, 2.0f}, {3.0f, 4.0f}};
  const tensor<float> copy = xlite::eval(x);
  CHECK(copy == x);
  CHECK(copy.data() != x.data());
  tensor<float> temporary{5.0f, 6.0f};
  const float* storage = temporary.data();
  const tensor<float> moved = xlite::eval(std::move(temporary));
  CHECK(moved.data() == storage);
  const auto row_sums = xlite::eval(xlite::sum(x, {1})); // a reduction already returns a tensor
  static_assert(std::is_same_v<decltype(row_sums), const tensor<float>>);
  CHECK(row_sums == tensor<float>{3.0f, 7.0f});
}

// An expression carries its shape by reference to a tensor's where one has it, else as a copy
// of its own (expr/shape_ref.hpp): a broadcast's, a temporary adapted xtensor container's, a
// temporary tensor's held by the expression. Each kind must survive the copies and moves of
// building and returning an expression after the original is gone (the sanitizer build checks
// the reads).
TEST_CASE("assign: an expression returned from where it was built keeps the shapes of its nodes and leaves",
          "[assign]") {
  const tensor<float> m{{1, 2, 3}, {4, 5, 6}};
  const tensor<float> row{10, 20, 30};
  xt::xarray<float> column = xt::xarray<float>::from_shape({2, 1});
  column(0, 0) = 100.0f;
  column(1, 0) = 200.0f;
  const auto broadcast = [&] {
    auto e = (m + row) * 2.0f;       // the sum's shape is a broadcast's, the product's a copy of it
    return e + xlite::adapt(column); // (2, 3) + (2, 1), with the container's shape in its leaf
  };
  const auto over_temporary = [&] {
    auto e = tensor<float>{{1, 2}, {3, 4}, {5, 6}} * 3.0f; // the leaf owns the tensor
    auto copy = e;
    return copy + 1.0f;
  };
  const auto outer = [&] {
    auto e = tensor<float>{1, 2}.reshaped(shape{2, 1}) + row; // (2, 1) + (3): a new shape, (2, 3)
    auto copy = e;
    return copy - 1.0f;
  };
  xlite_test::for_each_isa_path([&](xlite::isa) {
    const auto a = broadcast();
    CHECK(xlite::expr::shape_of(a) == shape{2, 3});
    CHECK(tensor<float>(a) == tensor<float>{{122, 144, 166}, {228, 250, 272}});
    const auto b = over_temporary();
    CHECK(xlite::expr::shape_of(b) == shape{3, 2});
    CHECK(tensor<float>(b) == tensor<float>{{4, 7}, {10, 13}, {16, 19}});
    const auto c = outer();
    CHECK(xlite::expr::shape_of(c) == shape{2, 3});
    CHECK(tensor<float>(c) == tensor<float>{{10, 20, 30}, {11, 21, 31}});
  });
}

// a * b + c is two ops, two roundings, in every program: g++ (-ffp-contract=fast by default)
// must not contract them into one fma where the target has FMA, which would make
// x * x - x * x nonzero. (1 + 2^-12)^2 - (1 + 2^-11) is 0 rounded op by op and 2^-24 fused.
TEST_CASE("assign: a * b + c rounds the product, then the sum, on every path", "[assign]") {
  const float e = std::ldexp(1.0f, -12);
  const tensor<float> a(shape{37}, 1 + e), c(shape{37}, -(1 + 2 * e));
  const tensor<double> x{1.0 / 3, 2.0 / 3, 0.1, 0.7, 1e10 / 3, 1.1, 2.2,     3.3,
                         4.4,     5.5,     6.6, 7.7, 8.8,      9.9, 1.0 / 7, 3.14159};
  xlite_test::for_each_isa_path([&](xlite::isa) {
    INFO(path_name());
    CHECK(tensor<float>(a * a + c) == tensor<float>(shape{37}, 0.0f));
    CHECK(tensor<double>(x * x - x * x) == tensor<double>(shape{16}, 0.0));
  });
}
