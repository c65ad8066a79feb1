// A compact strict JSON parser (RFC 8259) for model folders: config.json, tokenizer.json,
// safetensors headers. Limits nesting depth and input size; errors name the source and position.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kvs {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  static constexpr int kMaxDepth = 256;
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 31;

  // Parses a whole document; throws InputError("<source>: invalid JSON at line L, column C
  // (<reason>)") on any syntax error, trailing content, excess depth or size.
  static Json parse(std::string_view text, const std::string& source);
  // Reads and parses a file; throws InputError naming the file when it cannot be read.
  static Json parse_file(const std::string& path);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  bool as_bool() const { return number_ != 0.0; }                 // Bool
  double as_number() const { return number_; }                    // Number
  const std::string& as_string() const { return text_; }          // String
  const std::vector<Json>& items() const { return items_; }       // Array elements / Object values
  const std::vector<std::string>& keys() const { return keys_; }  // Object keys, in file order
  std::size_t size() const { return items_.size(); }

  // Object member `key` (the last one when repeated), nullptr when absent or not an object.
  const Json* find(std::string_view key) const;
  // Typed member lookups with a fallback for absent / null / wrongly typed members.
  std::string get_string(std::string_view key, const std::string& fallback) const;
  double get_number(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;

 private:
  friend class JsonParser;
  Type type_ = Type::Null;
  double number_ = 0.0;
  std::string text_;
  std::vector<Json> items_;
  std::vector<std::string> keys_;
};

}  // namespace kvs
