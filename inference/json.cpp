// Strict recursive-descent JSON parser with depth and size limits.
#include "inference/json.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "inference/errors.h"
#include "inference/mapped_file.h"
#include "inference/utf8.h"

namespace kvs {

class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  Json document() {
    if (s_.size() > Json::kMaxBytes) fail("document larger than 2 GiB");
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected content after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw input_error(source_, "invalid JSON at line " + std::to_string(line) + ", column " +
                                   std::to_string(col) + " (" + reason + ")");
  }

  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail("invalid literal");
    pos_ += word.size();
  }

  Json value(int depth) {
    if (depth > Json::kMaxDepth) fail("nesting deeper than " + std::to_string(Json::kMaxDepth));
    Json v;
    const char c = peek();
    if (c == '{') {
      v.type_ = Json::Type::Object;
      ++pos_;
      skip_ws();
      if (peek() == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        skip_ws();
        if (peek() != '"') fail("expected a string key");
        v.keys_.push_back(string());
        skip_ws();
        expect(':');
        skip_ws();
        v.items_.push_back(value(depth + 1));
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type_ = Json::Type::Array;
      ++pos_;
      skip_ws();
      if (peek() == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        skip_ws();
        v.items_.push_back(value(depth + 1));
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type_ = Json::Type::String;
      v.text_ = string();
      return v;
    }
    if (c == 't' || c == 'f') {
      v.type_ = Json::Type::Bool;
      literal(c == 't' ? "true" : "false");
      v.number_ = c == 't' ? 1.0 : 0.0;
      return v;
    }
    if (c == 'n') {
      literal("null");
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.type_ = Json::Type::Number;
      v.number_ = number();
      return v;
    }
    fail(pos_ >= s_.size() ? "unexpected end of input" : "unexpected character");
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  double number() {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (digit(peek())) {
      while (digit(peek())) ++pos_;
    } else {
      fail("invalid number");
    }
    if (peek() == '.') {
      ++pos_;
      if (!digit(peek())) fail("invalid number");
      while (digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digit(peek())) fail("invalid number");
      while (digit(peek())) ++pos_;
    }
    double d = 0.0;
    const auto r = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (r.ec == std::errc::result_out_of_range) fail("number out of range");
    return d;
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (digit(c))
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        fail("invalid \\u escape");
    }
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      switch (s_[pos_++]) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
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
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {  // high surrogate: a low one must follow
            if (s_.substr(pos_, 2) != "\\u") fail("unpaired surrogate");
            pos_ += 2;
            const unsigned lo = hex4();
            if (lo < 0xdc00 || lo >= 0xe000) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            fail("unpaired surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("invalid escape");
      }
    }
  }

  std::string_view s_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

Json Json::parse(std::string_view text, const std::string& source) {
  return JsonParser(text, source).document();
}

Json Json::parse_file(const std::string& path) {
  // Checked before opening: opening a FIFO would block.
  if (const PathKind kind = path_kind(path); kind == PathKind::Folder || kind == PathKind::Other)
    throw input_error(path, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(path, "cannot open");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse(buf.str(), path);
}

const Json* Json::find(std::string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (std::size_t i = keys_.size(); i-- > 0;) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

std::string Json::get_string(std::string_view key, const std::string& fallback) const {
  const Json* v = find(key);
  return v && v->is_string() ? v->text_ : fallback;
}

double Json::get_number(std::string_view key, double fallback) const {
  const Json* v = find(key);
  return v && v->is_number() ? v->number_ : fallback;
}

bool Json::get_bool(std::string_view key, bool fallback) const {
  const Json* v = find(key);
  return v && v->is_bool() ? v->as_bool() : fallback;
}

}  // namespace kvs
