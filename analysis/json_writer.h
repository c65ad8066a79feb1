// Small JSON writer: one flat object of numbers, strings, booleans and their arrays, built in
// insertion order. Used for run parameters stored in traces and for the CLI's --json output.
#pragma once
#include <string>
#include <vector>

namespace kvs {

// `text` as a quoted JSON string literal; bytes that are not UTF-8 become the characters "\xNN".
std::string json_quote(const std::string& text);

class JsonObject {
 public:
  JsonObject& add(const std::string& key, int v);
  JsonObject& add(const std::string& key, double v);  // non-finite values become null
  JsonObject& add(const std::string& key, const std::string& v);
  JsonObject& add(const std::string& key, const char* v) { return add(key, std::string(v)); }
  JsonObject& add_bool(const std::string& key, bool v);
  JsonObject& add_null(const std::string& key);
  JsonObject& add(const std::string& key, const std::vector<int>& v);
  JsonObject& add(const std::string& key, const std::vector<double>& v);
  JsonObject& add(const std::string& key, const std::vector<std::string>& v);
  JsonObject& add(const std::string& key, const std::vector<bool>& v);
  JsonObject& add_raw(const std::string& key, const std::string& json);  // an already-encoded value
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  // "key":[item(v[0]),item(v[1]),...]
  template <class T, class Item>
  JsonObject& array(const std::string& k, const std::vector<T>& v, Item item);
  std::string body_;
};

}  // namespace kvs
