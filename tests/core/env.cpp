#include <xlite/core/env.hpp>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

using Catch::Matchers::Contains;

TEST_CASE("env_string: unset and empty read as absent", "[env]") {
  ::unsetenv("XLITE_TEST_VARIABLE");
  CHECK_FALSE(xlite::env_string("XLITE_TEST_VARIABLE"));
  ::setenv("XLITE_TEST_VARIABLE", "", 1);
  CHECK_FALSE(xlite::env_string("XLITE_TEST_VARIABLE"));
  ::setenv("XLITE_TEST_VARIABLE", "abc", 1);
  CHECK(xlite::env_string("XLITE_TEST_VARIABLE") == "abc");
  ::unsetenv("XLITE_TEST_VARIABLE");
}

TEST_CASE("env_integer: parses in range, names the variable when malformed", "[env]") {
  ::setenv("XLITE_TEST_VARIABLE", "12", 1);
  CHECK(xlite::env_integer("XLITE_TEST_VARIABLE", 1, 64) == 12);
  for (const char* bad : {"12x", "x", "0", "65", "-3", " 5", "5 ", "+5", "-", "--5", "0x10", "99999999999999999999"}) {
    INFO("value " << bad);
    ::setenv("XLITE_TEST_VARIABLE", bad, 1);
    CHECK_THROWS_AS(xlite::env_integer("XLITE_TEST_VARIABLE", 1, 64), xlite::config_error);
    CHECK_THROWS_WITH(xlite::env_integer("XLITE_TEST_VARIABLE", 1, 64),
                      Contains("XLITE_TEST_VARIABLE='" + std::string(bad) + "'") && Contains("[1, 64]"));
  }
  ::unsetenv("XLITE_TEST_VARIABLE");
  CHECK_FALSE(xlite::env_integer("XLITE_TEST_VARIABLE", 1, 64));
}

TEST_CASE("env_integer: negative values and the ends of int64", "[env]") {
  constexpr std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t highest = std::numeric_limits<std::int64_t>::max();
  ::setenv("XLITE_TEST_VARIABLE", "-3", 1);
  CHECK(xlite::env_integer("XLITE_TEST_VARIABLE", -10, 10) == -3);
  ::setenv("XLITE_TEST_VARIABLE", "-0", 1);
  CHECK(xlite::env_integer("XLITE_TEST_VARIABLE", -10, 10) == 0);
  ::setenv("XLITE_TEST_VARIABLE", "007", 1);
  CHECK(xlite::env_integer("XLITE_TEST_VARIABLE", -10, 10) == 7);
  errno = EDOM; // the caller's errno survives a parse
  CHECK(xlite::env_integer("XLITE_TEST_VARIABLE", -10, 10) == 7);
  CHECK(errno == EDOM);
  ::setenv("XLITE_TEST_VARIABLE", "-9223372036854775808", 1);
  CHECK(xlite::env_integer("XLITE_TEST_VARIABLE", lowest, highest) == lowest);
  ::setenv("XLITE_TEST_VARIABLE", "9223372036854775807", 1);
  CHECK(xlite::env_integer("XLITE_TEST_VARIABLE", lowest, highest) == highest);
  for (const char* bad : {"9223372036854775808", "-9223372036854775809"}) { // one past each end
    INFO("value " << bad);
    ::setenv("XLITE_TEST_VARIABLE", bad, 1);
    CHECK_THROWS_AS(xlite::env_integer("XLITE_TEST_VARIABLE", lowest, highest), xlite::config_error);
  }
  ::unsetenv("XLITE_TEST_VARIABLE");
}
