// Interop with xtensor (expr/xtensor.hpp): xtensor containers and contiguous views as leaves
// (xlite::adapt), tensors as xtensor views (xlite::as_xtensor), assignment into containers
// and views (xlite::assign), printing; and the errors for what the fused loop cannot read
// in place.

#include "../thrown.hpp"

#include <xlite/expr.hpp>
#include <xlite/expr/xtensor.hpp>

#include <catch2/catch.hpp>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xfixed.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <array>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

using xlite::shape;
using xlite::tensor;
using xlite_test::message_of;

namespace {

// A 3 x 4 matrix whose element (i, j) is 10 i + j: any element read from the wrong place
// shows.
xt::xarray<float> numbered_matrix() {
  xt::xarray<float> m = xt::zeros<float>({3, 4});
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 4; ++j) m(i, j) = static_cast<float>(10 * i + j);
  }
  return m;
}

// xtensor's == of two containers (inside CHECK, Catch's decomposition would take the operands).
template <class A, class B>
bool same_elements(const A& a, const B& b) {
  return a == b;
}

// Whether `part` lies within the object `whole`: an expression that holds its shape itself.
template <class Whole, class Part>
bool holds(const Whole& whole, const Part& part) {
  const auto* begin = reinterpret_cast<const unsigned char*>(&whole);
  const auto* at = reinterpret_cast<const unsigned char*>(&part);
  return std::less_equal<const unsigned char*>{}(begin, at) &&
         std::less<const unsigned char*>{}(at, begin + sizeof(Whole));
}

template <class T>
std::string printed(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

} // namespace

TEST_CASE("xtensor: containers and adaptors are leaves read in place", "[xtensor]") {
  const xt::xarray<float> m = numbered_matrix();
  const xt::xtensor<float, 1> v = {1.0f, 2.0f, 3.0f, 4.0f};
  const tensor<float> got = xlite::adapt(m) * 2.0f + xlite::adapt(v); // (3, 4) + (4,)
  REQUIRE(got.shape() == shape{3, 4});
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) CHECK(got(i, j) == static_cast<float>(2 * (10 * i + j) + j + 1));
  }
  std::vector<double> buffer = {1.5, 2.5, 3.5};
  const auto adaptor = xt::adapt(buffer.data(), buffer.size(), xt::no_ownership(), std::vector<std::size_t>{3});
  CHECK(xlite::eval(xlite::adapt(adaptor) - 1.0) == tensor<double>{0.5, 1.5, 2.5});
}

TEST_CASE("xtensor: nodes refer to a named leaf's shape, as to a tensor's, and copy a temporary leaf's", "[xtensor]") {
  using xlite::expr::shape_of;
  const xt::xarray<float> m = numbered_matrix();
  const auto x = xlite::adapt(m);
  auto y = xlite::adapt(m); // not const: the same reference
  const auto named = x * 2.0f + y;
  CHECK(&shape_of(named) == &shape_of(x));
  CHECK(&shape_of(-y) == &shape_of(y));
  const auto temporary = xlite::adapt(m) * 2.0f;
  CHECK(holds(temporary, shape_of(temporary)));
  CHECK(shape_of(temporary) == shape{3, 4});
  const xt::xtensor<float, 1> v = {1.0f, 2.0f, 3.0f, 4.0f};
  const auto row = xlite::adapt(v);
  const auto broadcast = x + row; // (3, 4) + (4,): a shape of its own
  CHECK(shape_of(broadcast) == shape{3, 4});
  CHECK(holds(broadcast, shape_of(broadcast)));
  const tensor<float> got_named = named, got_temporary = temporary, got_broadcast = broadcast;
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) {
      const auto mij = static_cast<float>(10 * i + j);
      CHECK(got_named(i, j) == 3 * mij);
      CHECK(got_temporary(i, j) == 2 * mij);
      CHECK(got_broadcast(i, j) == mij + static_cast<float>(j + 1));
    }
  }
}

TEST_CASE("xtensor: contiguous views are leaves from their first element, not their container's", "[xtensor]") {
  const xt::xarray<float> m = numbered_matrix();
  // A row (an integer index, then all), rows (a range of step 1, then all), and an element
  // (rank 0): each starts past the container's first element.
  CHECK(xlite::eval(xlite::adapt(xt::view(m, 1)) + 0.5f) == tensor<float>{10.5f, 11.5f, 12.5f, 13.5f});
  CHECK(xlite::eval(xlite::adapt(xt::view(m, xt::range(1, 3), xt::all())) * 1.0f) ==
        tensor<float>{{10, 11, 12, 13}, {20, 21, 22, 23}});
  const tensor<float> element = xlite::adapt(xt::view(m, 2, 3)) * 1.0f;
  CHECK(element.shape() == shape{});
  CHECK(element() == 23.0f);
}

TEST_CASE("xtensor: what the loop cannot read in place is a value_error naming the function", "[xtensor][errors]") {
  const xt::xarray<float> m = numbered_matrix();
  const xt::xarray<float, xt::layout_type::column_major> column_major = m;
  const std::string column_major_message = message_of<xlite::value_error>([&] { (void)xlite::adapt(column_major); });
  CHECK_THAT(column_major_message, Catch::Contains("adapt") && Catch::Contains("not contiguous in row-major order") &&
                                       Catch::Contains("(3, 4)"));
  // A column, every other row, and the transpose: strided views.
  CHECK_THROWS_AS(xlite::adapt(xt::view(m, xt::all(), 1)), xlite::value_error);
  CHECK_THROWS_AS(xlite::adapt(xt::view(m, xt::range(0, 3, 2), xt::all())), xlite::value_error);
  CHECK_THROWS_AS(xlite::adapt(xt::transpose(m)), xlite::value_error);
  xt::xarray<float, xt::layout_type::column_major> column_major_destination = m;
  CHECK_THROWS_AS(xlite::assign(column_major_destination, xlite::adapt(m) * 2.0f), xlite::value_error);
}

TEST_CASE("xtensor: as_xtensor views a tensor's memory, both ways", "[xtensor]") {
  tensor<float> t{{1, 2, 3}, {4, 5, 6}};
  auto view = xlite::as_xtensor(t);
  REQUIRE(view.dimension() == 2);
  CHECK(view.shape()[0] == 2);
  CHECK(view.shape()[1] == 3);
  CHECK(view.data() == t.data());
  view(1, 2) = 60.0f; // through the view into the tensor
  CHECK(t(1, 2) == 60.0f);
  t(0, 0) = 10.0f; // and back
  CHECK(view(0, 0) == 10.0f);
  const tensor<float>& read_only = t;
  CHECK(xlite::as_xtensor(read_only).data() == t.data());
  const bool same = xt::sum(xlite::as_xtensor(read_only))() == 10.0f + 2 + 3 + 4 + 5 + 60;
  CHECK(same);
}

TEST_CASE("xtensor: assign resizes containers and writes views in place", "[xtensor]") {
  const tensor<float> a{1, 2, 3, 4};
  xt::xarray<float> resized = {0.0f};
  xlite::assign(resized, xlite::adapt(xlite::as_xtensor(a)) * 3.0f);
  const xt::xarray<float> tripled = {3.0f, 6.0f, 9.0f, 12.0f};
  CHECK(same_elements(resized, tripled));

  // A row of a matrix: the other rows keep their values.
  xt::xarray<float> m = numbered_matrix();
  auto row = xt::view(m, 1);
  xlite::assign(row, xlite::adapt(xlite::as_xtensor(a)) + 100.0f);
  xt::xarray<float> expected = numbered_matrix();
  xt::view(expected, 1) = xt::xarray<float>{101.0f, 102.0f, 103.0f, 104.0f};
  CHECK(same_elements(m, expected));
  // A view of another shape cannot be resized: a shape_error naming both shapes, and the
  // matrix untouched.
  auto rows = xt::view(m, xt::range(0, 2), xt::all());
  const std::string message =
      message_of<xlite::shape_error>([&] { xlite::assign(rows, xlite::adapt(xlite::as_xtensor(a)) * 2.0f); });
  CHECK_THAT(message, Catch::Contains("assign") && Catch::Contains("(4,)") && Catch::Contains("(2, 4)"));
  CHECK(same_elements(m, expected));
  // Containers that cannot take another shape: another fixed rank, a fixed shape.
  xt::xtensor<float, 1> vector = {1.0f, 2.0f, 3.0f};
  CHECK_THROWS_AS(xlite::assign(vector, xlite::adapt(m) * 2.0f), xlite::shape_error); // (3, 4)
  xlite::assign(vector, xlite::adapt(xlite::as_xtensor(a)) * 2.0f);                   // the same rank: resized
  CHECK(vector.size() == 4);
  CHECK(vector(3) == 8.0f);
  xt::xtensor_fixed<float, xt::xshape<3>> fixed = {1.0f, 2.0f, 3.0f};
  CHECK_THROWS_AS(xlite::assign(fixed, xlite::adapt(xlite::as_xtensor(a)) * 2.0f), xlite::shape_error); // (4,)
  CHECK_THROWS_AS(xlite::assign(fixed, xlite::adapt(m) * 2.0f), xlite::shape_error);                    // rank 2
  CHECK(fixed(2) == 3.0f);

  // A view that an operand overlaps in part, the rows above it: a loop straight into the view
  // would read the second of them after writing it (rows of 64 floats, several batches).
  xt::xarray<float> wide = xt::zeros<float>({3, 64});
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 64; ++j) wide(i, j) = static_cast<float>(100 * i + j);
  }
  auto bottom = xt::view(wide, xt::range(1, 3), xt::all());
  xlite::assign(bottom, xlite::adapt(xt::view(wide, xt::range(0, 2), xt::all())) + 0.5f);
  for (std::size_t j = 0; j < 64; ++j) {
    INFO("column " << j);
    CHECK(wide(0, j) == static_cast<float>(j));
    CHECK(wide(1, j) == static_cast<float>(j) + 0.5f);
    CHECK(wide(2, j) == static_cast<float>(100 + j) + 0.5f);
  }
}

TEST_CASE("xtensor: assign into an adaptor of memory it does not own keeps its number of elements",
          "[xtensor][errors]") {
  const tensor<float> a{1, 2, 3, 4, 5, 6};
  std::array<float, 6> memory{};
  // Another shape of the same number of elements: taken, as xtensor's own assignment takes it.
  auto matrix = xt::adapt(memory.data(), memory.size(), xt::no_ownership(), std::vector<std::size_t>{2, 3});
  xlite::assign(matrix, xlite::adapt(xlite::as_xtensor(a)) * 2.0f);
  CHECK(matrix.shape() == std::vector<std::size_t>{6});
  CHECK(memory[5] == 12.0f);
  // Another number of elements: a shape_error naming both shapes, and the adaptor's shape and
  // memory as they were (xtensor's resize would throw a std::runtime_error after taking the
  // new shape), whatever the adaptor's shape type.
  const tensor<float> b{1, 2, 3, 4};
  const std::string message =
      message_of<xlite::shape_error>([&] { xlite::assign(matrix, xlite::adapt(xlite::as_xtensor(b)) + 1.0f); });
  CHECK_THAT(message, Catch::Contains("assign") && Catch::Contains("(4,)") && Catch::Contains("(6,)"));
  CHECK(matrix.shape() == std::vector<std::size_t>{6});
  CHECK(memory[5] == 12.0f);
  auto vector = xt::adapt(memory.data(), memory.size(), xt::no_ownership(), std::array<std::size_t, 1>{6});
  CHECK_THROWS_AS(xlite::assign(vector, xlite::adapt(xlite::as_xtensor(b)) + 1.0f), xlite::shape_error);
  CHECK(vector.shape()[0] == 6);
  CHECK(memory[0] == 2.0f);
  // An empty expression into an empty adaptor, and a rank-0 one into an adaptor of one element.
  auto empty = xt::adapt(memory.data(), 0, xt::no_ownership(), std::vector<std::size_t>{0, 3});
  xlite::assign(empty, xlite::adapt(xt::xarray<float>::from_shape({3, 0})) * 2.0f);
  CHECK(empty.shape() == std::vector<std::size_t>{3, 0});
  auto one = xt::adapt(memory.data(), 1, xt::no_ownership(), std::vector<std::size_t>{1});
  const tensor<float> total = xlite::sum(xlite::adapt(xlite::as_xtensor(b))); // rank 0: 10
  xlite::assign(one, total + 0.5f);
  CHECK(one.dimension() == 0);
  CHECK(memory[0] == 10.5f);
}

TEST_CASE("xtensor: tensors print as xtensor prints", "[xtensor]") {
  const tensor<float> t{{1.5f, 2, 3}, {4, 5, 6}};
  const xt::xarray<float> same = {{1.5f, 2, 3}, {4, 5, 6}};
  CHECK(printed(t) == printed(same));
  CHECK(printed(tensor<int>(shape{}, 7)) == printed(xt::xarray<int>(7)));
  CHECK(printed(tensor<float>(shape{0, 2})) == printed(xt::xarray<float>::from_shape({0, 2})));
}
