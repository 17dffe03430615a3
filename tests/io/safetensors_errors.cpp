// load() on malformed safetensors files: each problem is an io_error that names the file
// and says what is wrong, and nothing is returned.

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "io_check.hpp"
#include "xlite/io/safetensors.hpp"

using xlite_test::little_endian;
using xlite_test::scratch_directory;
using xlite_test::write_bytes;

namespace {

// A file of the given header text (its length in front) and data bytes.
std::string file_of(const std::string& header, const std::string& data) {
  return little_endian(header.size(), 8) + header + data;
}

std::string f32(const std::string& shape, const std::string& offsets) {
  return R"({"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}

} // namespace

TEST_CASE("safetensors: every kind of malformed file is reported with what is wrong", "[io][safetensors]") {
  scratch_directory dir;
  const std::string eight(8, '\0');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "the file has 0 bytes, fewer than the 8 of the header's length"},
      {std::string("\x10\x00\x00", 3), "the file has 3 bytes, fewer than the 8 of the header's length"},
      {little_endian(200'000'000, 8) + "{}", "the header's length, 200000000 bytes, is over the format's limit"},
      {little_endian(64, 8) + "{}", "the header's length, 64 bytes, runs past the end of the file (10 bytes)"},
      {file_of("[]", ""), "the header must start with '{'"},
      {file_of("{", ""), "the header: expected '\"' at byte 1"},
      {file_of(R"({"a":)" + f32("[2]", "[0,8]"), eight), "expected '}' at byte"},
      {file_of(R"({"a":)" + f32("[2]", "[0,8]") + "}x", eight), "unexpected text after the end"},
      {file_of(R"({"a":{"dtype":"I16","shape":[1],"data_offsets":[0,2]}})", "12"),
       "tensor 'a' has dtype 'I16', which xlite does not hold"},
      {file_of(R"({"a":{"dtype":"F32","shape":[2]}})", ""), "tensor 'a' needs a dtype, a shape and two data_offsets"},
      {file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", "1234"),
       "tensor 'a' has an unknown field 'extra'"},
      {file_of(R"({"a":{"dtype":"F32","dtype":"F32"}})", ""), "tensor 'a' has two 'dtype'"},
      {file_of(R"({"a":)" + f32("[1,1,1,1,1,1,1,1,1]", "[0,4]") + "}", "1234"),
       "tensor 'a' has more than 8 dimensions"},
      {file_of(R"({"a":)" + f32("[-1]", "[0,4]") + "}", "1234"), "expected a non-negative integer"},
      {file_of(R"({"a":)" + f32("[1.5]", "[0,4]") + "}", "1234"), "expected an integer, not a fraction"},
      {file_of(R"({"a":)" + f32("[99999999999999999999]", "[0,4]") + "}", "1234"), "an integer too large"},
      {file_of(R"({"a":)" + f32("[4294967296,4294967296]", "[0,4]") + "}", "1234"),
       "the dimensions (4294967296, 4294967296) multiply past int64"},
      {file_of(R"({"a":)" + f32("[9223372036854775807,2,0]", "[0,0]") + "}", ""),
       "the dimensions (9223372036854775807, 2, 0) multiply past int64"},
      {file_of(R"({"a":)" + f32("[1000]", "[0,4000]") + "}", "1234"),
       "tensor 'a' of shape (1000,) needs more bytes than the file's data holds (4)"},
      {file_of(R"({"a":)" + f32("[2]", "[0,4]") + "}", eight),
       "tensor 'a' has data_offsets [0, 4], but F32 of shape (2,) takes 8 bytes"},
      {file_of(R"({"a":)" + f32("[1]", "[0,4,8]") + "}", "1234"), "tensor 'a' has more than 2 data_offsets"},
      {file_of(R"({"a":)" + f32("[1]", "[4,8]") + "}", "12345678"),
       "tensor 'a' starts at data byte 4, where 0 was expected (a gap)"},
      {file_of(R"({"a":)" + f32("[2]", "[0,8]") + R"(,"b":)" + f32("[1]", "[4,8]") + "}", eight),
       "starts at data byte 4, where 8 was expected (it overlaps the tensor before)"},
      {file_of(R"({"a":)" + f32("[1]", "[0,4]") + "}", "12345"),
       "the tensors take 4 bytes of data, but the file holds 5 after the header"},
      {file_of(R"({"a":)" + f32("[1]", "[0,4]") + R"(,"a":)" + f32("[1]", "[4,8]") + "}", eight),
       "the key 'a' appears twice"},
      {file_of(R"({"__metadata__":{"k":1}})", ""), "expected '\"'"},
      {file_of(R"({"a\u00":)" + f32("[1]", "[0,4]") + "}", "1234"), "a bad hex digit in a \\u escape"},
      {file_of(R"({"\udc00":)" + f32("[1]", "[0,4]") + "}", "1234"), "a lone low surrogate"},
      {file_of("{\"a\x01\":" + f32("[1]", "[0,4]") + "}", "1234"), "a control character inside a string"},
      {file_of(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\x01\x00\x02", 3)),
       "tensor 'm' is BOOL but its element 2 is 2, not 0 or 1"},
  };
  const auto path = dir / "bad.safetensors";
  for (const auto& [bytes, problem] : cases) {
    INFO("expected: " << problem);
    write_bytes(path, bytes);
    CHECK_THROWS_AS(xlite::load(path), xlite::io_error);
    CHECK_THROWS_WITH(xlite::load(path), Catch::Matchers::StartsWith("load('" + path.string() + "'): ") &&
                                             Catch::Matchers::Contains(problem));
  }
  const auto missing = dir / "missing.safetensors";
  CHECK_THROWS_MATCHES(xlite::load(missing), xlite::io_error,
                       Catch::Matchers::Message("load('" + missing.string() + "'): cannot open the file"));
}
