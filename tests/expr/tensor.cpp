#include <xlite/expr.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using Catch::Matchers::Contains;
using xlite::shape;
using xlite::tensor;

TEST_CASE("tensor: construction from a shape, a fill value and nested lists", "[tensor]") {
  const tensor<float> zeros(shape{2, 3});
  CHECK(zeros.shape() == shape{2, 3});
  CHECK(zeros.size() == 6);
  for (const float v : zeros) CHECK(v == 0.0f);

  const tensor<std::int32_t> sevens(shape{4}, 7);
  CHECK(std::vector<std::int32_t>(sevens.begin(), sevens.end()) == std::vector<std::int32_t>{7, 7, 7, 7});

  const tensor<double> m{{1, 2, 3}, {4, 5, 6}};
  CHECK(m.shape() == shape{2, 3});
  CHECK(m(1, 2) == 6);
  CHECK(m(0, 1) == 2);

  const tensor<float> cube{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}};
  CHECK(cube.shape() == shape{2, 2, 2});
  CHECK(cube(1, 0, 1) == 6);

  const tensor<float> empty;
  CHECK(empty.shape() == shape{0});
  CHECK(empty.size() == 0);
}

TEST_CASE("tensor: storage is 64-byte aligned", "[tensor]") {
  for (const std::int64_t n : {1, 3, 17, 1000}) {
    const tensor<float> t(shape{n});
    CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  }
}

TEST_CASE("tensor: ragged nested lists and bad indices are errors that say where", "[tensor]") {
  CHECK_THROWS_AS((tensor<float>{{1, 2}, {3}}), xlite::shape_error);
  CHECK_THROWS_WITH((tensor<float>{{1, 2}, {3}}), Contains("ragged") && Contains("axis 1 has 2 elements"));
  const tensor<float> m{{1, 2, 3}, {4, 5, 6}};
  CHECK(m.at(1, 1) == 5);
  CHECK_THROWS_WITH(m.at(2, 0), Contains("index 2 is out of range for axis 0 of size 2"));
  CHECK_THROWS_WITH(m.at(0), Contains("1 indices for a tensor of rank 2"));
}

TEST_CASE("tensor: copies are deep, moves are cheap, == compares shape and values", "[tensor]") {
  tensor<float> a{1, 2, 3};
  tensor<float> b = a;
  b(0) = 10;
  CHECK(a(0) == 1);
  CHECK_FALSE(a == b);
  const float *storage = a.data();
  tensor<float> c = std::move(a);
  CHECK(c.data() == storage);
  CHECK(tensor<float>{1, 2, 3} == c);
  CHECK_FALSE(tensor<float>{1, 2, 3} == tensor<float>{{1, 2, 3}});
}

TEST_CASE("tensor: reshaped keeps the elements and checks the count", "[tensor]") {
  tensor<float> a{1, 2, 3, 4, 5, 6};
  const tensor<float> m = std::move(a).reshaped(shape{2, 3});
  CHECK(m(1, 0) == 4);
  CHECK_THROWS_WITH(tensor<float>(shape{6}).reshaped(shape{4}), Contains("cannot view (6,)"));
}
