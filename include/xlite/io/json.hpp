#pragma once

// Just enough JSON for file headers (safetensors'): a writer of string literals and a
// strict reader of objects, arrays, strings and unsigned integers. The reader is the
// caller's grammar: the header's reader walks it in the shape it expects, so nothing is
// built that is not asked for, nesting is bounded by the caller, and any other token is
// an io_error naming `context` and the byte where it is. Untrusted bytes are its input
// (the fuzz tests feed it random files): every step checks before it reads.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "xlite/core/error.hpp"

namespace xlite::io::detail {

// `text` as a JSON string literal, quotes included.
inline std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[byte >> 4];
      out += hex[byte & 15];
    } else {
      out += c;
    }
  }
  return out + '"';
}

class json_reader {
public:
  json_reader(std::string_view text, std::string context) : text_(text), context_(std::move(context)) {}

  // Reads `{ "key": value, ... }`, calling on_member(key) with the reader at each value;
  // on_member must read the value.
  template <class OnMember>
  void object(OnMember&& on_member) {
    expect('{');
    if (consume('}')) return;
    do {
      const std::string key = string();
      expect(':');
      on_member(key);
    } while (consume(','));
    expect('}');
  }

  // Reads `[ value, ... ]`, calling on_element() with the reader at each value.
  template <class OnElement>
  void array(OnElement&& on_element) {
    expect('[');
    if (consume(']')) return;
    do {
      on_element();
    } while (consume(','));
    expect(']');
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_ == text_.size()) fail("the text ends inside a string");
      const char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ == text_.size()) fail("the text ends inside a string");
      switch (const char escaped = text_[at_++]) {
      case '"':
      case '\\':
      case '/':
        out += escaped;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u':
        append_utf8(out, code_point());
        break;
      default:
        fail("an unknown escape in a string");
      }
    }
  }

  // A non-negative integer that fits in int64 (sizes and offsets).
  std::int64_t integer() {
    skip_space();
    if (at_ == text_.size() || text_[at_] < '0' || text_[at_] > '9') fail("expected a non-negative integer");
    if (text_[at_] == '0' && at_ + 1 < text_.size() && text_[at_ + 1] >= '0' && text_[at_ + 1] <= '9') {
      fail("a number with a leading zero");
    }
    std::int64_t value = 0;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      const int digit = text_[at_++] - '0';
      if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("an integer too large");
      value = value * 10 + digit;
    }
    if (at_ < text_.size() && (text_[at_] == '.' || text_[at_] == 'e' || text_[at_] == 'E')) {
      fail("expected an integer, not a fraction");
    }
    return value;
  }

  // Only white space may follow.
  void end() {
    skip_space();
    if (at_ != text_.size()) fail("unexpected text after the end");
  }

  [[noreturn]] void fail(std::string_view problem) const {
    throw io_error(xlite::detail::message(context_, ": ", problem, " at byte ", at_));
  }

private:
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (at_ == text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) fail(xlite::detail::message("expected '", c, "'"));
  }

  unsigned hex4() {
    if (text_.size() - at_ < 4) fail("the text ends inside a \\u escape");
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[at_++];
      const unsigned digit = c >= '0' && c <= '9'   ? static_cast<unsigned>(c - '0')
                             : c >= 'a' && c <= 'f' ? static_cast<unsigned>(c - 'a' + 10)
                             : c >= 'A' && c <= 'F' ? static_cast<unsigned>(c - 'A' + 10)
                                                    : 16;
      if (digit == 16) fail("a bad hex digit in a \\u escape");
      value = value * 16 + digit;
    }
    return value;
  }

  // The code point of a \u escape (its "\u" read), joining a surrogate pair.
  char32_t code_point() {
    const unsigned first = hex4();
    if (first >= 0xDC00 && first <= 0xDFFF) fail("a lone low surrogate in a \\u escape");
    if (first < 0xD800 || first > 0xDBFF) return first;
    if (text_.size() - at_ < 2 || text_[at_] != '\\' || text_[at_ + 1] != 'u') fail("a lone high surrogate");
    at_ += 2;
    const unsigned second = hex4();
    if (second < 0xDC00 || second > 0xDFFF) fail("a high surrogate without its low half");
    return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
  }

  static void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }

  std::string_view text_;
  std::string context_;
  std::size_t at_ = 0;
};

} // namespace xlite::io::detail
