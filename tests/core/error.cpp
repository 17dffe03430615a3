#include <xlite/core/error.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
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
