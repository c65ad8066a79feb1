// JSON writer for run parameters and machine-readable CLI output.
#include "analysis/json_writer.h"

#include <cmath>
#include <cstdio>

#include "inference/bpe_merge.h"

namespace kvs {

std::string json_quote(const std::string& text) {
  // JSON text is UTF-8: bytes that are not (a file name, a prompt) are written as "\xNN".
  const std::string s = escape_invalid_utf8(text);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if ((unsigned char)c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", (unsigned)c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

static std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void JsonObject::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += json_quote(k) + ":";
}

JsonObject& JsonObject::add(const std::string& k, int v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}

JsonObject& JsonObject::add(const std::string& k, double v) {
  key(k);
  body_ += number(v);
  return *this;
}

JsonObject& JsonObject::add(const std::string& k, const std::string& v) {
  key(k);
  body_ += json_quote(v);
  return *this;
}

JsonObject& JsonObject::add_bool(const std::string& k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::add_null(const std::string& k) {
  key(k);
  body_ += "null";
  return *this;
}

template <class T, class Item>
JsonObject& JsonObject::array(const std::string& k, const std::vector<T>& v, Item item) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) body_ += ',';
    body_ += item(v[i]);
  }
  body_ += "]";
  return *this;
}

JsonObject& JsonObject::add(const std::string& k, const std::vector<int>& v) {
  return array(k, v, [](int x) { return std::to_string(x); });
}

JsonObject& JsonObject::add(const std::string& k, const std::vector<double>& v) {
  return array(k, v, [](double x) { return number(x); });
}

JsonObject& JsonObject::add(const std::string& k, const std::vector<std::string>& v) {
  return array(k, v, [](const std::string& x) { return json_quote(x); });
}

JsonObject& JsonObject::add(const std::string& k, const std::vector<bool>& v) {
  return array(k, v, [](bool x) { return std::string(x ? "true" : "false"); });
}

JsonObject& JsonObject::add_raw(const std::string& k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

}  // namespace kvs
