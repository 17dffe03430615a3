#include <xlite/core/dtype.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <sstream>

using xlite::dtype;

namespace {

// torch.promote_types, copied from PyTorch's table (c10/core/ScalarType.cpp) for the dtypes
// xlite has, written out rather than derived so that it checks the rules independently.
// The two int16 entries of PyTorch's table (uint8 with int8) are int32 here: xlite has no int16.
constexpr dtype b = dtype::boolean, u1 = dtype::u8, i1 = dtype::i8, i4 = dtype::i32, i8 = dtype::i64, f2 = dtype::f16,
                bf = dtype::bf16, f4 = dtype::f32, f8 = dtype::f64;
constexpr std::array<std::array<dtype, 9>, 9> pytorch_table{{
    //       b   u1  i1  i4  i8  f2  bf  f4  f8
    /* b  */ {b, u1, i1, i4, i8, f2, bf, f4, f8},
    /* u1 */ {u1, u1, i4, i4, i8, f2, bf, f4, f8},
    /* i1 */ {i1, i4, i1, i4, i8, f2, bf, f4, f8},
    /* i4 */ {i4, i4, i4, i4, i8, f2, bf, f4, f8},
    /* i8 */ {i8, i8, i8, i8, i8, f2, bf, f4, f8},
    /* f2 */ {f2, f2, f2, f2, f2, f2, f4, f4, f8},
    /* bf */ {bf, bf, bf, bf, bf, f4, bf, f4, f8},
    /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f8},
    /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8},
}};

} // namespace

TEST_CASE("promote_types matches PyTorch's promotion table for every pair", "[dtype]") {
  for (std::size_t row = 0; row < xlite::all_dtypes.size(); ++row) {
    for (std::size_t col = 0; col < xlite::all_dtypes.size(); ++col) {
      const dtype a = xlite::all_dtypes[row];
      const dtype c = xlite::all_dtypes[col];
      INFO(a << " with " << c);
      CHECK(xlite::promote_types(a, c) == pytorch_table[row][col]);
    }
  }
}

TEST_CASE("promote_types is usable at compile time", "[dtype]") {
  static_assert(xlite::promote_types(dtype::f16, dtype::bf16) == dtype::f32);
  static_assert(xlite::promote_types(dtype::u8, dtype::i8) == dtype::i32);
  static_assert(xlite::promote_types(dtype::i64, dtype::bf16) == dtype::bf16);
  SUCCEED();
}

TEST_CASE("a scalar changes the result dtype only when its category is higher", "[dtype]") {
  using xlite::dtype_category;
  using xlite::promote_with_scalar;
  // The cases below are what torch.result_type(tensor, python_number) returns.
  CHECK(promote_with_scalar(dtype::u8, dtype_category::integral) == dtype::u8);         // uint8 + 300
  CHECK(promote_with_scalar(dtype::i32, dtype_category::floating_point) == dtype::f32); // int32 + 2.5
  CHECK(promote_with_scalar(dtype::f16, dtype_category::floating_point) == dtype::f16); // float16 + 2.5
  CHECK(promote_with_scalar(dtype::f64, dtype_category::integral) == dtype::f64);       // float64 + 1
  CHECK(promote_with_scalar(dtype::boolean, dtype_category::integral) == dtype::i64);   // bool + 1
  CHECK(promote_with_scalar(dtype::boolean, dtype_category::floating_point) == dtype::f32);
  CHECK(promote_with_scalar(dtype::i8, dtype_category::boolean) == dtype::i8); // int8 + True
  CHECK(xlite::scalar_category_v<bool> == dtype_category::boolean);
  CHECK(xlite::scalar_category_v<int> == dtype_category::integral);
  CHECK(xlite::scalar_category_v<double> == dtype_category::floating_point);
}

TEST_CASE("dtype traits: names, sizes, categories", "[dtype]") {
  CHECK(xlite::name(dtype::bf16) == "bfloat16");
  CHECK(xlite::name(dtype::boolean) == "bool");
  CHECK(xlite::size_of(dtype::bf16) == 2);
  CHECK(xlite::size_of(dtype::i64) == 8);
  CHECK(xlite::size_of(dtype::boolean) == 1);
  CHECK(xlite::is_floating_point(dtype::f16));
  CHECK_FALSE(xlite::is_floating_point(dtype::i32));
  CHECK(xlite::is_integral(dtype::u8));
  CHECK_FALSE(xlite::is_integral(dtype::boolean));
  CHECK_FALSE(xlite::is_signed(dtype::u8));
  CHECK(xlite::is_signed(dtype::i8));
  std::ostringstream out;
  out << dtype::f32;
  CHECK(out.str() == "float32");
}

TEST_CASE("dtype_of maps C++ element types to dtypes", "[dtype]") {
  static_assert(xlite::dtype_of_v<float> == dtype::f32);
  static_assert(xlite::dtype_of_v<const double> == dtype::f64);
  static_assert(xlite::dtype_of_v<std::int64_t> == dtype::i64);
  static_assert(xlite::dtype_of_v<std::uint8_t> == dtype::u8);
  static_assert(xlite::dtype_of_v<bool> == dtype::boolean);
  static_assert(xlite::element_type<std::int32_t>);
  static_assert(!xlite::element_type<std::string>);
  for (const dtype t : xlite::all_dtypes) CHECK(xlite::size_of(t) >= 1);
}
