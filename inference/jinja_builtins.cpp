// Built-in filters, tests, methods and global functions of the Jinja subset, with Python's and
// Jinja 3's semantics for the arguments chat templates pass them.
#include "inference/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>

namespace kvs::jinja {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

// Positional argument k, else keyword `name`, else `fallback`.
Value arg(const std::vector<Value>& args, const Kwargs& kwargs, std::size_t k, const char* name,
          Value fallback = Value::none()) {
  if (k < args.size()) return args[k];
  for (const auto& [key, v] : kwargs)
    if (key == name) return v;
  return fallback;
}

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail("integer overflow in sum (64-bit integers here)");
  return r;
}

const std::string& as_string(const Value& v, const char* what) {
  if (!v.is(Value::Kind::String)) fail(std::string(what) + " expects a string, got " + type_name(v));
  return v.s;
}

int64_t as_int(const Value& v, const char* what) {
  if (v.is(Value::Kind::Int)) return v.i;
  if (v.is(Value::Kind::Bool)) return v.b;
  fail(std::string(what) + " expects an integer, got " + type_name(v));
}

std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Python's str.strip/lstrip/rstrip: white space, or the characters of `chars`.
std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  if (!chars.is(Value::Kind::String)) return strip_space(s, left, right);
  const std::vector<char32_t> cps = code_points(s), set = code_points(chars.s);
  const auto strip_it = [&](char32_t c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return utf8(cps, b, e);
}

// Python's str.split(sep, maxsplit): on runs of white space (empties dropped) where sep is None.
std::vector<std::string> split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep.is(Value::Kind::String)) {
    const std::vector<char32_t> cps = code_points(s);
    std::size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && is_python_space(cps[k])) ++k;
      if (k == cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::size_t e = cps.size();
        while (e > k && is_python_space(cps[e - 1])) --e;
        out.push_back(utf8(cps, k, e));
        break;
      }
      std::size_t e = k;
      while (e < cps.size() && !is_python_space(cps[e])) ++e;
      out.push_back(utf8(cps, k, e));
      k = e;
    }
    return out;
  }
  if (sep.s.empty()) fail("split: empty separator");
  std::size_t from = 0;
  for (;;) {
    const std::size_t at = s.find(sep.s, from);
    if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) break;
    out.push_back(s.substr(from, at - from));
    from = at + sep.s.size();
  }
  out.push_back(s.substr(from));
  return out;
}

std::vector<std::string> rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  if (!sep.is(Value::Kind::String) || maxsplit < 0) return split(s, sep, maxsplit);
  if (sep.s.empty()) fail("rsplit: empty separator");
  std::vector<std::string> out;
  std::size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    const std::size_t at = end >= sep.s.size() ? s.rfind(sep.s, end - sep.s.size()) : std::string::npos;
    if (at == std::string::npos) break;
    out.push_back(s.substr(at + sep.s.size(), end - at - sep.s.size()));
    end = at;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

Value strings(const std::vector<std::string>& parts) {
  List items;
  for (const std::string& p : parts) items.push_back(Value::string(p));
  return Value::make_list(std::move(items));
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {  // Python inserts `to` around every character
    std::string out = to;
    for (const char32_t c : code_points(s)) out += utf8({c}) + to;
    return out;
  }
  std::string out;
  std::size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const std::size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out += s.substr(pos, at - pos) + to;
    pos = at + from.size();
  }
  return out + s.substr(pos);
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c));
    c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    start = !letter;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = lower_ascii(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

bool starts_or_ends(const std::string& s, const Value& with, bool start) {
  const auto one = [&](const std::string& p) {
    return p.size() <= s.size() && (start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (with.is(Value::Kind::List)) {
    for (const Value& p : *with.list)
      if (one(as_string(p, start ? "startswith" : "endswith"))) return true;
    return false;
  }
  return one(as_string(with, start ? "startswith" : "endswith"));
}

// Python's str.format without format specs: {} in turn, {0}, {name}, {{ and }}.
std::string format_fields(const std::string& s, const std::vector<Value>& args, const Kwargs& kwargs) {
  std::string out;
  std::size_t next = 0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if ((s[k] == '{' || s[k] == '}') && k + 1 < s.size() && s[k + 1] == s[k]) {
      out += s[k++];
      continue;
    }
    if (s[k] != '{') {
      out += s[k];
      continue;
    }
    const std::size_t close = s.find('}', k);
    if (close == std::string::npos) fail("format: a '{' is not closed");
    const std::string field = s.substr(k + 1, close - k - 1);
    if (field.find_first_of(":!") != std::string::npos) fail("format: format specs are not supported");
    Value v;
    if (field.empty()) {
      v = arg(args, kwargs, next++, "");
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      v = arg(args, kwargs, static_cast<std::size_t>(std::stoul(field)), "");
    } else {
      v = arg({}, kwargs, 0, field.c_str(), Value::undefined(field));
      if (v.is(Value::Kind::Undefined)) fail("format: no argument '" + field + "'");
    }
    out += str(v);
    k = close;
  }
  return out;
}

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.s;
  const auto bind = [](Function f) { return Value::function(std::move(f)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind([s, left, right](std::vector<Value>& a, Kwargs& k) {
      return Value::string(strip(s, arg(a, k, 0, "chars"), left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return bind([s, right](std::vector<Value>& a, Kwargs& k) {
      const Value sep = arg(a, k, 0, "sep");
      const int64_t max = as_int(arg(a, k, 1, "maxsplit", Value::integer(-1)), "split");
      return strings(right ? rsplit(s, sep, max) : split(s, sep, max));
    });
  }
  if (name == "splitlines")
    return bind([s](std::vector<Value>&, Kwargs&) {
      std::vector<std::string> lines;
      std::size_t from = 0;
      while (from < s.size()) {
        const std::size_t at = s.find('\n', from);
        if (at == std::string::npos) {
          lines.push_back(s.substr(from));
          break;
        }
        lines.push_back(s.substr(from, at - from));
        from = at + 1;
      }
      return strings(lines);
    });
  if (name == "startswith" || name == "endswith") {
    const bool start = name == "startswith";
    return bind([s, start](std::vector<Value>& a, Kwargs& k) {
      return Value::boolean(starts_or_ends(s, arg(a, k, 0, "prefix"), start));
    });
  }
  if (name == "replace")
    return bind([s](std::vector<Value>& a, Kwargs& k) {
      return Value::string(replace_all(s, as_string(arg(a, k, 0, "old"), "replace"), as_string(arg(a, k, 1, "new"), "replace"),
                                       as_int(arg(a, k, 2, "count", Value::integer(-1)), "replace")));
    });
  if (name == "upper") return bind([s](std::vector<Value>&, Kwargs&) { return Value::string(upper_ascii(s)); });
  if (name == "lower") return bind([s](std::vector<Value>&, Kwargs&) { return Value::string(lower_ascii(s)); });
  if (name == "title") return bind([s](std::vector<Value>&, Kwargs&) { return Value::string(title_case(s)); });
  if (name == "capitalize") return bind([s](std::vector<Value>&, Kwargs&) { return Value::string(capitalize(s)); });
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    return bind([s, name](std::vector<Value>& a, Kwargs& k) {
      const std::string& sub = as_string(arg(a, k, 0, "sub"), name.c_str());
      if (name == "count") {
        int64_t n = 0;
        for (std::size_t at = s.find(sub); at != std::string::npos && !sub.empty(); at = s.find(sub, at + sub.size())) ++n;
        return Value::integer(sub.empty() ? static_cast<int64_t>(code_points(s).size()) + 1 : n);
      }
      const std::size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
      if (at == std::string::npos && name == "index") fail("substring not found");
      return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(code_points(s.substr(0, at)).size()));
    });
  }
  if (name == "format")
    return bind([s](std::vector<Value>& a, Kwargs& k) { return Value::string(format_fields(s, a, k)); });
  if (name == "join")
    return bind([s](std::vector<Value>& a, Kwargs& k) {
      std::string out;
      bool first = true;
      for (const Value& v : iterate(arg(a, k, 0, "iterable"))) {
        out += (first ? "" : s) + as_string(v, "join");
        first = false;
      }
      return Value::string(out);
    });
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum" || name == "isupper" ||
      name == "islower") {
    return bind([s, name](std::vector<Value>&, Kwargs&) {
      if (s.empty()) return Value::boolean(false);
      bool all = true, cased = false;
      for (const char32_t c : code_points(s)) {
        const bool ascii = c < 0x80;
        const int ch = ascii ? static_cast<int>(c) : 0;
        if (name == "isdigit") all = all && ascii && std::isdigit(ch);
        else if (name == "isspace") all = all && is_python_space(c);
        else if (name == "isalpha") all = all && ascii && std::isalpha(ch);
        else if (name == "isalnum") all = all && ascii && std::isalnum(ch);
        else if (name == "isupper") { all = all && !(ascii && std::islower(ch)); cased = cased || (ascii && std::isupper(ch)); }
        else { all = all && !(ascii && std::isupper(ch)); cased = cased || (ascii && std::islower(ch)); }
      }
      return Value::boolean(all && (name != "isupper" && name != "islower" ? true : cased));
    });
  }
  return Value::undefined(name);
}

Value list_method(const Value& obj, const std::string& name) {
  const Value list = obj;
  if (name == "index" || name == "count") {
    return Value::function([list, name](std::vector<Value>& a, Kwargs& k) {
      const Value x = arg(a, k, 0, "value");
      int64_t n = 0;
      for (std::size_t i = 0; i < list.list->size(); ++i) {
        if (!equal((*list.list)[i], x)) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") fail(repr(x) + " is not in list");
      return Value::integer(n);
    });
  }
  return Value::undefined(name);
}

Value dict_method(const Value& obj, const std::string& name) {
  const Value dict = obj;
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function([dict, name](std::vector<Value>&, Kwargs&) {
      List out;
      for (const auto& [k, v] : *dict.dict) {
        if (name == "items") out.push_back(Value::make_tuple({key_value(k), v}));
        else out.push_back(name == "keys" ? key_value(k) : v);
      }
      return Value::make_list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function([dict](std::vector<Value>& a, Kwargs& k) {
      const Value* v = dict.find(dict_key(arg(a, k, 0, "key")));
      return v ? *v : arg(a, k, 1, "default");
    });
  }
  const Value* v = obj.find(name);
  return v ? *v : Value::undefined(name);
}

// The attribute `attribute` of v ("a.b" walks dicts), for map, selectattr, sort, join.
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  std::size_t from = 0;
  for (;;) {
    const std::size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot - from);
    cur = attribute(cur, part);
    if (dot == std::string::npos) return cur;
    from = dot + 1;
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// select/reject (attr: selectattr/rejectattr): the items for which the test (truth where none) is `keep`.
Value select(const Value& v, std::vector<Value>& args, bool by_attr, bool keep) {
  if (!v.truthy()) return Value::make_list();  // as Jinja: nothing selected from None or nothing
  std::size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (args.empty()) fail("selectattr needs an attribute");
    attr = as_string(args[k++], "selectattr");
  }
  std::string test;
  if (k < args.size()) test = as_string(args[k++], "select");
  std::vector<Value> test_args(args.begin() + static_cast<std::ptrdiff_t>(k), args.end());
  List out;
  for (const Value& item : iterate(v)) {
    const Value x = by_attr ? attribute_path(item, attr) : item;
    const bool pass = test.empty() ? x.truthy() : apply_test(test, x, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value sorted(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  List items = iterate(v);
  const bool reverse = arg(args, kwargs, 0, "reverse", Value::boolean(false)).truthy();
  const bool case_sensitive = arg(args, kwargs, 1, "case_sensitive", Value::boolean(false)).truthy();
  const Value attr = arg(args, kwargs, 2, "attribute");
  const auto key = [&](const Value& x) {
    Value k = attr.is(Value::Kind::String) ? attribute_path(x, attr.s) : x;
    if (!case_sensitive && k.is(Value::Kind::String)) k.s = lower_ascii(k.s);
    return k;
  };
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& a, const Value& b) { return reverse ? compare(key(b), key(a)) < 0 : compare(key(a), key(b)) < 0; });
  return Value::make_list(std::move(items));
}

std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  const std::string pad = width.is(Value::Kind::String) ? width.s : std::string(static_cast<std::size_t>(as_int(width, "indent")), ' ');
  std::string out;
  std::size_t from = 0;
  bool first_line = true;
  for (;;) {
    const std::size_t at = s.find('\n', from);
    const std::string line = s.substr(from, at == std::string::npos ? std::string::npos : at - from);
    const bool pad_it = first_line ? first : (blank || !line.empty());
    out += (pad_it ? pad : "") + line;
    if (at == std::string::npos) break;
    out += '\n';
    from = at + 1;
    first_line = false;
  }
  return out;
}

}  // namespace

std::string strftime_now(const std::string& format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string buf(format.size() * 4 + 64, '\0');
  const std::size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
  return buf.substr(0, n);
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return *v.list;
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : *v.dict) keys.push_back(key_value(k));
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      for (const char32_t c : code_points(v.s)) chars.push_back(Value::string(utf8({c})));
      return chars;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  if (container.is(Value::Kind::String)) return container.s.find(as_string(item, "'in <string>'")) != std::string::npos;
  if (container.is(Value::Kind::Dict) || container.is(Value::Kind::Namespace))
    return container.find(dict_key(item)) != nullptr;
  if (container.is(Value::Kind::List)) {
    for (const Value& x : *container.list)
      if (equal(x, item)) return true;
    return false;
  }
  if (container.is(Value::Kind::Undefined)) return false;
  fail("argument of type '" + type_name(container) + "' is not iterable");
}

Value attribute(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Value::Kind::Dict: return dict_method(obj, name);
    case Value::Kind::Namespace: {
      const Value* v = obj.find(name);
      return v ? *v : Value::undefined(name);
    }
    case Value::Kind::String: return string_method(obj, name);
    case Value::Kind::List: return list_method(obj, name);
    case Value::Kind::Undefined:
      fail("'" + (obj.s.empty() ? std::string("undefined") : obj.s) + "' is undefined (reading ." + name + ")");
    default: return Value::undefined(name);
  }
}

Value apply_filter(const std::string& name, const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  if (name == "trim") return Value::string(strip(as_string(v, "trim"), arg(args, kwargs, 0, "chars"), true, true));
  if (name == "length" || name == "count") {
    if (v.is(Value::Kind::String)) return Value::integer(static_cast<int64_t>(code_points(v.s).size()));
    if (v.is(Value::Kind::Dict) || v.is(Value::Kind::Namespace)) return Value::integer(static_cast<int64_t>(v.dict->size()));
    return Value::integer(static_cast<int64_t>(iterate(v).size()));
  }
  if (name == "tojson") {
    const Value ind = arg(args, kwargs, 0, "indent");
    return Value::string(to_json(v, ind.is(Value::Kind::None) ? -1 : static_cast<int>(as_int(ind, "tojson"))));
  }
  if (name == "string") return Value::string(str(v));
  if (name == "upper") return Value::string(upper_ascii(as_string(v, "upper")));
  if (name == "lower") return Value::string(lower_ascii(as_string(v, "lower")));
  if (name == "title") return Value::string(title_case(as_string(v, "title")));
  if (name == "capitalize") return Value::string(capitalize(as_string(v, "capitalize")));
  if (name == "safe" || (name == "list" && v.is(Value::Kind::List))) return v;
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "escape" || name == "e" || name == "forceescape") return Value::string(html_escape(str(v)));
  if (name == "first" || name == "last") {
    const std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "default" || name == "d") {
    const bool boolean = arg(args, kwargs, 1, "boolean", Value::boolean(false)).truthy();
    const bool use_default = v.is(Value::Kind::Undefined) || (boolean && !v.truthy());
    return use_default ? arg(args, kwargs, 0, "default_value", Value::string("")) : v;
  }
  if (name == "join") {
    const std::string sep = str(arg(args, kwargs, 0, "d", Value::string("")));
    const Value attr = arg(args, kwargs, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      out += (first ? "" : sep) + str(attr.is(Value::Kind::String) ? attribute_path(item, attr.s) : item);
      first = false;
    }
    return Value::string(out);
  }
  if (name == "replace")
    return Value::string(replace_all(str(v), str(arg(args, kwargs, 0, "old")), str(arg(args, kwargs, 1, "new")),
                                     as_int(arg(args, kwargs, 2, "count", Value::integer(-1)), "replace")));
  if (name == "items") {
    if (v.is(Value::Kind::Undefined)) return Value::make_list();
    if (!v.is(Value::Kind::Dict)) fail("items expects a dict, got " + type_name(v));
    return dict_method(v, "items").fn->operator()(args, kwargs);
  }
  if (name == "map") {
    List out;
    if (!v.truthy()) return Value::make_list();  // as Jinja: None maps to nothing
    const Value attr = arg({}, kwargs, 0, "attribute");
    if (attr.is(Value::Kind::String)) {
      const Value fallback = arg({}, kwargs, 0, "default", Value::undefined());
      for (const Value& item : iterate(v)) {
        const Value x = attribute_path(item, attr.s);
        out.push_back(x.is(Value::Kind::Undefined) && !fallback.is(Value::Kind::Undefined) ? fallback : x);
      }
      return Value::make_list(std::move(out));
    }
    if (args.empty()) fail("map needs a filter name or attribute=");
    const std::string filter = as_string(args[0], "map");
    std::vector<Value> rest(args.begin() + 1, args.end());
    Kwargs none;
    for (const Value& item : iterate(v)) out.push_back(apply_filter(filter, item, rest, none));
    return Value::make_list(std::move(out));
  }
  if (name == "select" || name == "reject") return select(v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(v, args, true, name == "selectattr");
  if (name == "reverse") {
    if (v.is(Value::Kind::String)) {
      std::vector<char32_t> cps = code_points(v.s);
      std::reverse(cps.begin(), cps.end());
      return Value::string(utf8(cps));
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(v))
      if (std::none_of(out.begin(), out.end(), [&](const Value& x) { return equal(x, item); })) out.push_back(item);
    return Value::make_list(std::move(out));
  }
  if (name == "sort") return sorted(v, args, kwargs);
  if (name == "dictsort") {  // (key, value) pairs by key (by="value": by value)
    if (!v.is(Value::Kind::Dict)) fail("dictsort expects a dict, got " + type_name(v));
    const bool case_sensitive = arg(args, kwargs, 0, "case_sensitive", Value::boolean(false)).truthy();
    const bool by_value = str(arg(args, kwargs, 1, "by", Value::string("key"))) == "value";
    const bool reverse = arg(args, kwargs, 2, "reverse", Value::boolean(false)).truthy();
    List pairs;
    for (const auto& [k, x] : *v.dict) pairs.push_back(Value::make_tuple({key_value(k), x}));
    const auto key = [&](const Value& pair) {
      Value x = (*pair.list)[by_value ? 1 : 0];
      if (!case_sensitive && x.is(Value::Kind::String)) x.s = lower_ascii(x.s);
      return x;
    };
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      return reverse ? compare(key(b), key(a)) < 0 : compare(key(a), key(b)) < 0;
    });
    return Value::make_list(std::move(pairs));
  }
  if (name == "int") {
    if (v.is(Value::Kind::Int)) return v;
    if (v.is(Value::Kind::Bool)) return Value::integer(v.b);
    if (v.is(Value::Kind::Float)) return Value::integer(static_cast<int64_t>(v.f));
    if (v.is(Value::Kind::String)) {
      try {
        std::size_t used = 0;
        const std::string t = strip_space(v.s);
        const long long x = std::stoll(t, &used);
        if (used == t.size()) return Value::integer(x);
      } catch (const std::exception&) {
      }
    }
    return arg(args, kwargs, 0, "default", Value::integer(0));
  }
  if (name == "float") {
    if (v.is_number()) return Value::number(v.as_double());
    try {
      return Value::number(std::stod(as_string(v, "float")));
    } catch (const std::exception&) {
      return arg(args, kwargs, 0, "default", Value::number(0.0));
    }
  }
  if (name == "abs") {
    if (v.is(Value::Kind::Float)) return Value::number(std::fabs(v.f));
    const int64_t x = as_int(v, "abs");
    if (x == INT64_MIN) fail("integer overflow in abs (64-bit integers here)");
    return Value::integer(x < 0 ? -x : x);
  }
  if (name == "round") {
    const int64_t digits = as_int(arg(args, kwargs, 0, "precision", Value::integer(0)), "round");
    const double scale = std::pow(10.0, static_cast<double>(digits));
    return Value::number(std::round(v.as_double() * scale) / scale);
  }
  if (name == "indent")
    return Value::string(indent(str(v), arg(args, kwargs, 0, "width", Value::integer(4)),
                                arg(args, kwargs, 1, "first", Value::boolean(false)).truthy(),
                                arg(args, kwargs, 2, "blank", Value::boolean(false)).truthy()));
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(split(str(v), Value::none(), -1).size()));
  if (name == "sum" || name == "min" || name == "max") {
    const std::vector<Value> items = iterate(v);
    if (name == "sum") {
      Value total = arg(args, kwargs, 1, "start", Value::integer(0));
      for (const Value& x : items) {
        if (!x.is_number() || !total.is_number()) fail("sum of " + type_name(x));
        total = total.is(Value::Kind::Float) || x.is(Value::Kind::Float) ? Value::number(total.as_double() + x.as_double())
                                                                           : Value::integer(add_checked(as_int(total, "sum"), as_int(x, "sum")));
      }
      return total;
    }
    if (items.empty()) return Value::undefined(name);
    Value best = items[0];
    for (const Value& x : items)
      if (name == "min" ? compare(x, best) < 0 : compare(x, best) > 0) best = x;
    return best;
  }
  if (name == "attr") return attribute(v, as_string(arg(args, kwargs, 0, "name"), "attr"));
  if (name == "format") {
    std::string out;
    const std::string& f = as_string(v, "format");
    std::size_t next = 0;
    for (std::size_t k = 0; k < f.size(); ++k) {
      if (f[k] != '%' || k + 1 >= f.size()) {
        out += f[k];
      } else if (f[k + 1] == '%') {
        out += '%';
        ++k;
      } else if (f[k + 1] == 's' || f[k + 1] == 'd') {
        if (next >= args.size()) fail("format: not enough arguments");
        out += str(args[next++]);
        ++k;
      } else {
        fail(std::string("format: %") + f[k + 1] + " is not supported");
      }
    }
    return Value::string(out);
  }
  fail("unknown filter '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, std::vector<Value>& args) {
  const auto other = [&]() -> const Value& {
    if (args.empty()) fail("the test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return !v.is(Value::Kind::Undefined);
  if (name == "undefined") return v.is(Value::Kind::Undefined);
  if (name == "none") return v.is(Value::Kind::None);
  if (name == "string") return v.is(Value::Kind::String);
  if (name == "mapping") return v.is(Value::Kind::Dict);
  if (name == "sequence") return v.is(Value::Kind::List) || v.is(Value::Kind::String) || v.is(Value::Kind::Dict);
  if (name == "iterable") return v.is(Value::Kind::List) || v.is(Value::Kind::String) || v.is(Value::Kind::Dict);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(Value::Kind::Int);
  if (name == "float") return v.is(Value::Kind::Float);
  if (name == "boolean") return v.is(Value::Kind::Bool);
  if (name == "true") return v.is(Value::Kind::Bool) && v.b;
  if (name == "false") return v.is(Value::Kind::Bool) && !v.b;
  if (name == "callable") return v.is(Value::Kind::Function);
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equal(v, other());
  if (name == "ne" || name == "!=") return !equal(v, other());
  if (name == "gt" || name == ">") return compare(v, other()) > 0;
  if (name == "ge" || name == ">=") return compare(v, other()) >= 0;
  if (name == "lt" || name == "<") return compare(v, other()) < 0;
  if (name == "le" || name == "<=") return compare(v, other()) <= 0;
  if (name == "in") return contains(other(), v);
  if (name == "odd") return as_int(v, "odd") % 2 != 0;
  if (name == "even") return as_int(v, "even") % 2 == 0;
  if (name == "divisibleby") return as_int(v, "divisibleby") % as_int(other(), "divisibleby") == 0;
  if (name == "lower") return v.is(Value::Kind::String) && lower_ascii(v.s) == v.s;
  if (name == "upper") return v.is(Value::Kind::String) && upper_ascii(v.s) == v.s;
  fail("unknown test '" + name + "'");
}

Dict global_functions() {
  Dict g;
  g.emplace_back("range", Value::function([](std::vector<Value>& a, Kwargs&) {
    if (a.empty() || a.size() > 3) fail("range expects 1 to 3 arguments");
    const int64_t start = a.size() == 1 ? 0 : as_int(a[0], "range");
    const int64_t stop = as_int(a.size() == 1 ? a[0] : a[1], "range");
    const int64_t step = a.size() == 3 ? as_int(a[2], "range") : 1;
    if (step == 0) fail("range: step must not be zero");
    int64_t span = 0;
    if (__builtin_sub_overflow(stop, start, &span) || span / step > 100000) fail("range: more than 100000 items");
    List out;
    for (int64_t x = start; step > 0 ? x < stop : x > stop; x += step) out.push_back(Value::integer(x));
    return Value::make_list(std::move(out));
  }));
  const auto from_args = [](std::vector<Value>& a, Kwargs& k) {
    Dict d;
    if (!a.empty()) {
      if (!a[0].is(Value::Kind::Dict)) fail("expected a dict, got " + type_name(a[0]));
      d = *a[0].dict;
    }
    for (const auto& given : k) {
      auto it = std::find_if(d.begin(), d.end(), [&](const auto& e) { return e.first == given.first; });
      if (it != d.end()) it->second = given.second;
      else d.push_back(given);
    }
    return d;
  };
  g.emplace_back("namespace", Value::function([from_args](std::vector<Value>& a, Kwargs& k) {
    return Value::make_namespace(from_args(a, k));
  }));
  g.emplace_back("dict", Value::function([from_args](std::vector<Value>& a, Kwargs& k) {
    return Value::make_dict(from_args(a, k));
  }));
  g.emplace_back("raise_exception", Value::function([](std::vector<Value>& a, Kwargs&) -> Value {
    fail("the template raised: " + (a.empty() ? std::string() : str(a[0])));
  }));
  g.emplace_back("strftime_now", Value::function([](std::vector<Value>& a, Kwargs&) {
    if (a.empty()) fail("strftime_now expects a format");
    return Value::string(strftime_now(as_string(a[0], "strftime_now")));
  }));
  return g;
}

}  // namespace kvs::jinja
