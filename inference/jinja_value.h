// Values of KVScope's Jinja subset (chat templates, inference/jinja_render.h): Python's None,
// bool, int, float, str, list and dict (insertion-ordered, string keys), Jinja's undefined,
// namespace() objects and callables; Python's str(), repr() and json.dumps of them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "inference/utf8.h"

namespace kvs::jinja {

// A template that cannot be rendered: its line and why ("line 3: 'foo' is undefined").
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Value;
using List = std::vector<Value>;
// In insertion order, as Python's dict; keys as dict_key() writes them.
using Dict = std::vector<std::pair<std::string, Value>>;
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Value(std::vector<Value>& args, Kwargs& kwargs)>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;                   // String; for Undefined, the name that was looked up
  std::shared_ptr<List> list;      // List
  bool tuple = false;              // List: a Python tuple (written "(a, b)"; never equal to a list)
  std::shared_ptr<Dict> dict;      // Dict and Namespace (a namespace's attributes)
  std::shared_ptr<Function> fn;    // Function

  static Value undefined(std::string name = "") { Value v; v.s = std::move(name); return v; }
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::String; v.s = std::move(x); return v; }
  static Value make_list(List items = {});
  static Value make_tuple(List items);
  static Value make_dict(Dict items = {});
  static Value make_namespace(Dict items = {});
  static Value function(Function f);

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(kind == Kind::Bool ? b : i); }
  bool truthy() const;
  // A dict's (or namespace's) entry, nullptr when absent.
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
};

// A dict key as a Dict holds it: a string as it is, a number (True as 1, an integral float as its
// integer, as Python hashes them) or None marked by a leading \x01 (a text key that starts with
// \x01 marked too, as text).
std::string dict_key(const Value& key);
// The key a Dict entry was made with.
Value key_value(const std::string& key);

// Python's str() (None -> "None", True -> "True", lists and dicts as their repr; undefined -> "").
std::string str(const Value& v);
// Python's repr() ('quoted' strings, escapes as Python writes them).
std::string repr(const Value& v);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=...) as transformers' tojson calls it:
// indent < 0 for none (", " and ": "), else items on their own lines (",", ": ").
std::string to_json(const Value& v, int indent = -1);
// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's <, as -1, 0, 1 (numbers with numbers, strings with strings, lists item by item).
int compare(const Value& a, const Value& b);
// The type's name as Python says it ("str", "int", "NoneType", "list", "dict", ...).
std::string type_name(const Value& v);

// Python's str.isspace() of one code point (Python indexes, slices, strips and measures strings by
// code point: inference/utf8.h).
bool is_python_space(char32_t c);
// Python's str.strip() (left and right), lstrip() or rstrip() without arguments: Jinja's trim.
std::string strip_space(const std::string& s, bool left = true, bool right = true);

}  // namespace kvs::jinja
