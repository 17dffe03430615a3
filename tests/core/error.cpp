#include <xlite/core/error.hpp>
#include <xlite/core/shape.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

TEST_CASE("every xlite exception is an xlite::error and a std::runtime_error", "[error]") {
  static_assert(std::is_base_of_v<std::runtime_error, xlite::error>);
  static_assert(std::is_base_of_v<xlite::error, xlite::shape_error>);
  static_assert(std::is_base_of_v<xlite::error, xlite::dtype_error>);
  static_assert(std::is_base_of_v<xlite::error, xlite::index_error>);
  static_assert(std::is_base_of_v<xlite::error, xlite::value_error>);
  static_assert(std::is_base_of_v<xlite::error, xlite::config_error>);
  CHECK_THROWS_AS(throw xlite::shape_error("x"), xlite::error);
}

TEST_CASE("detail::message and detail::concat concatenate anything printable", "[error]") {
  CHECK(xlite::detail::message("add: ", 3, " vs ", 4.5, '!') == "add: 3 vs 4.5!");
  CHECK(xlite::detail::message() == "");
  const std::string name = "all_reduce";
  CHECK(xlite::detail::concat(name, '[', std::int64_t{-2}, "] ", 0.25f, ' ', true) == "all_reduce[-2] 0.25 1");
  CHECK(xlite::detail::concat() == "");
}

TEST_CASE("detail::message prints each part by its own type", "[error]") {
  char buffer[16] = "in a buffer"; // a char array that is not a literal prints up to its end
  const char* pointer = "by pointer";
  const std::string_view view = std::string_view("a view, cut").substr(0, 6);
  const xlite::shape s{2, 0};
  CHECK(xlite::detail::message(buffer, ", ", pointer, ", ", view) == "in a buffer, by pointer, a view");
  CHECK(xlite::detail::message(s, ' ', std::uint8_t{65}, ' ', std::numeric_limits<std::int64_t>::min(), ' ', 1.5) ==
        "(2, 0) A -9223372036854775808 1.5");
  CHECK(xlite::detail::message(std::string("a temporary"), std::size_t{7}) == "a temporary7");
}
