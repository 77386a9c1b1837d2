// JSON (RFC 8259) for safetensors headers and index files (io/safetensors.hpp).
//
//   json::parse(text, what, max_depth)   one value, strictly: the text is untrusted input
//   json::quote(s, what)                 s as a JSON string literal (s must be UTF-8)
//   json::dump(value)                    a value as compact JSON text
//
// The reader refuses whatever RFC 8259 does not allow (a byte-order mark, a control character
// or a byte that is not UTF-8 in a string, a lone surrogate escape, a leading zero, text after
// the value) and two things it allows that a safetensors reader must not accept silently: an
// object holding a key twice, and nesting deeper than `max_depth` (which also bounds the
// recursion). Objects keep their members in document order. A number keeps its text as
// written, so an integer of any size is exact: as_uint64/as_int64 give it when it fits.
// Every error is an sd::Error naming `what` and the byte offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "../core/error.hpp"

namespace solder::io::json {

struct Member;

struct Value {
  struct Number {
    std::string text;  // as written
  };
  using Array = std::vector<Value>;
  using Object = std::vector<Member>;  // in document order

  std::variant<std::monostate, bool, Number, std::string, Array, Object> data;  // monostate: null

  std::string_view type_name() const;
  bool is_number() const;
  std::string const* string() const;
  Array const* array() const;
  Object const* object() const;
  // An object's member (nullptr when absent or not an object). Linear: callers look up a few
  // fields of small objects, or index the members themselves.
  Value const* find(std::string_view key) const;
  // A number written as an integer (no fraction, no exponent) that fits.
  std::optional<std::uint64_t> as_uint64() const;
  std::optional<std::int64_t> as_int64() const;

 private:
  struct Integer {
    bool negative;
    std::uint64_t magnitude;
  };
  std::optional<Integer> integer() const;
};

struct Member {
  std::string key;
  Value value;
};

// (Defined once Member is complete: an Object's destructor needs it.)
inline std::string_view Value::type_name() const {
  constexpr std::string_view names[] = {"null", "boolean", "number", "string", "array", "object"};
  return names[data.index()];
}
inline bool Value::is_number() const { return std::holds_alternative<Number>(data); }
inline std::string const* Value::string() const { return std::get_if<std::string>(&data); }
inline Value::Array const* Value::array() const { return std::get_if<Array>(&data); }
inline Value::Object const* Value::object() const { return std::get_if<Object>(&data); }

inline Value const* Value::find(std::string_view key) const {
  if (auto const* members = object())
    for (auto const& m : *members)
      if (m.key == key) return &m.value;
  return nullptr;
}

inline std::optional<std::uint64_t> Value::as_uint64() const {
  auto const n = integer();
  if (!n || n->negative) return std::nullopt;  // "-0" too, as the reference reader
  return n->magnitude;
}
inline std::optional<std::int64_t> Value::as_int64() const {
  auto const n = integer();
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (!n || n->magnitude > max + n->negative) return std::nullopt;
  if (!n->negative) return static_cast<std::int64_t>(n->magnitude);
  return n->magnitude == 0 ? 0 : -static_cast<std::int64_t>(n->magnitude - 1) - 1;
}

inline std::optional<Value::Integer> Value::integer() const {
  auto const* number = std::get_if<Number>(&data);
  if (!number) return std::nullopt;
  std::string_view digits = number->text;
  bool const negative = digits.starts_with('-');
  if (negative) digits.remove_prefix(1);
  std::uint64_t magnitude = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;  // a fraction or an exponent
    auto const d = static_cast<unsigned>(c - '0');
    if (magnitude > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
    magnitude = magnitude * 10 + d;
  }
  return Integer{negative, magnitude};
}

namespace detail {

// The length of the UTF-8 sequence starting at s[i], or 0 when it is not one (RFC 3629:
// no overlong form, no surrogate, nothing above U+10FFFF, no truncated sequence).
inline std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) -> unsigned { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  unsigned const lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong below
    if (lead == 0xED) high = 0x9F;  // surrogates above
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong below
    if (lead == 0xF4) high = 0x8F;  // beyond U+10FFFF above
  } else {
    return 0;
  }
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  return length;
}

inline void append_utf8(std::string& out, std::uint32_t code) {
  auto put = [&](std::uint32_t b) { out += static_cast<char>(b); };
  if (code < 0x80) {
    put(code);
  } else if (code < 0x800) {
    put(0xC0 | code >> 6), put(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    put(0xE0 | code >> 12), put(0x80 | (code >> 6 & 0x3F)), put(0x80 | (code & 0x3F));
  } else {
    put(0xF0 | code >> 18), put(0x80 | (code >> 12 & 0x3F)), put(0x80 | (code >> 6 & 0x3F)), put(0x80 | (code & 0x3F));
  }
}

inline std::string hex_byte(unsigned char b) {
  constexpr char digits[] = "0123456789abcdef";
  return {'0', 'x', digits[b >> 4], digits[b & 0xF]};
}

// Recursive descent; a container is entered only within the depth limit.
class Parser {
 public:
  Parser(std::string_view text, std::string const& what, int max_depth)
      : text_(text), what_(what), max_depth_(max_depth) {}

  Value document() {
    Value v = value(0);
    skip_whitespace();
    if (pos_ != text_.size()) unexpected("the end of the text after the value");
    return v;
  }

 private:
  std::string_view text_;
  std::string const& what_;
  int max_depth_;
  std::size_t pos_ = 0;

  [[noreturn]] void error(std::string_view why) const {
    solder::detail::fail(what_, ": not valid JSON at byte ", pos_, ": ", why);
  }
  [[noreturn]] void unexpected(std::string_view expected) const {
    std::string found = "the end of the text";
    if (pos_ < text_.size()) {
      auto const c = static_cast<unsigned char>(text_[pos_]);
      found = c > 0x20 && c < 0x7F ? std::string{'\'', static_cast<char>(c), '\''} : "byte " + hex_byte(c);
    }
    solder::detail::fail(what_, ": not valid JSON at byte ", pos_, ": expected ", expected, ", found ", found);
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool take(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void skip_whitespace() {
    while (pos_ < text_.size() && std::string_view(" \t\n\r").find(text_[pos_]) != std::string_view::npos) ++pos_;
  }
  bool take_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  // `depth`: the containers around the value.
  Value value(int depth) {
    skip_whitespace();
    char const c = peek();
    if (c == '{' || c == '[') {
      solder::detail::check(depth < max_depth_, what_, ": JSON nested deeper than ", max_depth_,
                            " levels (at byte ", pos_, ")");
      ++pos_;
      if (c == '{') return {object(depth + 1)};
      return {array(depth + 1)};
    }
    if (c == '"') return {string()};
    if (c == '-' || (c >= '0' && c <= '9')) return {number()};
    if (take_word("true")) return {true};
    if (take_word("false")) return {false};
    if (take_word("null")) return {};
    unexpected("a value");
  }

  Value::Object object(int depth) {
    Value::Object members;
    std::set<std::string> keys;
    skip_whitespace();
    if (take('}')) return members;
    do {
      skip_whitespace();
      if (peek() != '"') unexpected("a string (an object's key)");
      std::size_t const key_at = pos_;
      std::string key = string();
      solder::detail::check(keys.insert(key).second, what_, ": duplicate key '", key, "' (at byte ", key_at, ")");
      skip_whitespace();
      if (!take(':')) unexpected("':'");
      Value v = value(depth);
      members.push_back({std::move(key), std::move(v)});
      skip_whitespace();
    } while (take(','));
    if (!take('}')) unexpected("',' or '}'");
    return members;
  }

  Value::Array array(int depth) {
    Value::Array elements;
    skip_whitespace();
    if (take(']')) return elements;
    do {
      elements.push_back(value(depth));
      skip_whitespace();
    } while (take(','));
    if (!take(']')) unexpected("',' or ']'");
    return elements;
  }

  std::string string() {
    ++pos_;  // the opening quote
    std::string s;
    for (;;) {
      if (pos_ == text_.size()) unexpected("'\"' (the string's end)");
      auto const c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') break;
      if (c < 0x20) error("a control character in a string (" + hex_byte(c) + "), which must be escaped");
      if (c == '\\') {
        escape(s);
        continue;
      }
      std::size_t const n = utf8_length(text_, pos_);
      if (n == 0) error("a string holds bytes that are not UTF-8 (" + hex_byte(c) + ")");
      s.append(text_.substr(pos_, n));
      pos_ += n;
    }
    ++pos_;
    return s;
  }

  void escape(std::string& s) {
    ++pos_;  // the backslash
    char const c = peek();
    switch (c) {
      case '"': case '\\': case '/': s += c; break;
      case 'b': s += '\b'; break;
      case 'f': s += '\f'; break;
      case 'n': s += '\n'; break;
      case 'r': s += '\r'; break;
      case 't': s += '\t'; break;
      case 'u': break;
      default: unexpected("an escape: one of \" \\ / b f n r t u after '\\'");
    }
    ++pos_;
    if (c != 'u') return;
    std::uint32_t code = hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) error("a \\u escape of a low surrogate without a high one before it");
    if (code >= 0xD800 && code <= 0xDBFF) {  // a high surrogate: the low one must follow
      if (!take_word("\\u")) unexpected("a \\u escape of a low surrogate after the high one");
      std::uint32_t const low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) error("a \\u escape of a high surrogate not followed by a low one");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(s, code);
  }

  std::uint32_t hex4() {
    std::uint32_t code = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      char const c = peek();
      std::uint32_t digit;
      if (c >= '0' && c <= '9') digit = static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<std::uint32_t>(c - 'A' + 10);
      else unexpected("a hexadecimal digit (four after \\u)");
      code = code << 4 | digit;
    }
    return code;
  }

  bool digits() {
    std::size_t const start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }
  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, kept as written.
  Value::Number number() {
    std::size_t const start = pos_;
    take('-');
    if (!take('0') && !digits()) unexpected("a digit");
    if (take('.') && !digits()) unexpected("a digit after '.'");
    if (take('e') || take('E')) {
      if (!take('+')) take('-');
      if (!digits()) unexpected("a digit in the exponent");
    }
    return {std::string(text_.substr(start, pos_ - start))};
  }
};

}  // namespace detail

// Parses `text`: one value, with nothing after it but whitespace. Errors name `what`.
inline Value parse(std::string_view text, std::string const& what, int max_depth) {
  return detail::Parser(text, what, max_depth).document();
}

// `s` as a JSON string literal, escaped as the reference writer (serde_json) does: '"', '\'
// and control characters, the named ones as \b \f \n \r \t, the others as \u00XX. A string that
// is not UTF-8 is an sd::Error naming `what`.
inline std::string quote(std::string_view s, std::string_view what) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    auto const c = static_cast<unsigned char>(s[i]);
    std::size_t const n = detail::utf8_length(s, i);
    solder::detail::check(n > 0, what, " is not valid UTF-8 (byte ", i, " is ", detail::hex_byte(c), ")");
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += "\\u00" + detail::hex_byte(c).substr(2);
        else out.append(s.substr(i, n));
    }
    i += n;
  }
  return out + '"';
}

// Compact JSON text: no whitespace, numbers as written, members in their order.
inline std::string dump(Value const& v) {
  if (auto const* b = std::get_if<bool>(&v.data)) return *b ? "true" : "false";
  if (auto const* n = std::get_if<Value::Number>(&v.data)) return n->text;
  if (auto const* s = v.string()) return quote(*s, "a JSON string");
  std::string out;
  if (auto const* elements = v.array()) {
    for (auto const& e : *elements) out += (out.empty() ? "" : ",") + dump(e);
    return "[" + out + "]";
  }
  if (auto const* members = v.object()) {
    for (auto const& m : *members) out += (out.empty() ? "" : ",") + quote(m.key, "a JSON key") + ":" + dump(m.value);
    return "{" + out + "}";
  }
  return "null";
}

}  // namespace solder::io::json
