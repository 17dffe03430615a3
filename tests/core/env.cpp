#include <xlite/core/env.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
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
  for (const char *bad : {"12x", "x", "0", "65", "-3", " 5", "99999999999999999999"}) {
    INFO("value " << bad);
    ::setenv("XLITE_TEST_VARIABLE", bad, 1);
    CHECK_THROWS_AS(xlite::env_integer("XLITE_TEST_VARIABLE", 1, 64), xlite::config_error);
    CHECK_THROWS_WITH(xlite::env_integer("XLITE_TEST_VARIABLE", 1, 64),
                      Contains("XLITE_TEST_VARIABLE='" + std::string(bad) + "'") && Contains("[1, 64]"));
  }
  ::unsetenv("XLITE_TEST_VARIABLE");
  CHECK_FALSE(xlite::env_integer("XLITE_TEST_VARIABLE", 1, 64));
}
