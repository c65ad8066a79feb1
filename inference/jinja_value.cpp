// Values of the Jinja subset: truth, equality, order, and Python's str/repr/json.dumps of them.
#include "inference/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kvs::jinja {

Value Value::make_list(List items) {
  Value v;
  v.kind = Kind::List;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::make_tuple(List items) {
  Value v = make_list(std::move(items));
  v.tuple = true;
  return v;
}

Value Value::make_dict(Dict items) {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}

Value Value::make_namespace(Dict items) {
  Value v = make_dict(std::move(items));
  v.kind = Kind::Namespace;
  return v;
}

Value Value::function(Function f) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0.0;
    case Kind::String: return !s.empty();
    case Kind::List: return !list->empty();
    case Kind::Dict: return !dict->empty();
    case Kind::Namespace: case Kind::Function: return true;
  }
  return false;
}

const Value* Value::find(const std::string& key) const {
  if (!dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

Value* Value::find(const std::string& key) {
  return const_cast<Value*>(static_cast<const Value&>(*this).find(key));
}

namespace {

// Python's repr of a float: the shortest digits that read back, "1.0" for integral values,
// exponent form below 1e-4 and from 1e16.
std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  const double a = std::fabs(x);
  const bool sci = a != 0.0 && (a < 1e-4 || a >= 1e16);
  const auto r = std::to_chars(buf, buf + sizeof buf, x, sci ? std::chars_format::scientific : std::chars_format::fixed);
  std::string out(buf, r.ptr);
  if (sci) {  // "1e+16" as Python writes it: at least two exponent digits
    const std::size_t e = out.find('e');
    std::string mant = out.substr(0, e), exp = out.substr(e + 1);
    const char sign = exp[0] == '-' ? '-' : '+';
    if (exp[0] == '-' || exp[0] == '+') exp = exp.substr(1);
    if (exp.size() < 2) exp = "0" + exp;
    return mant + "e" + sign + exp;
  }
  if (out.find('.') == std::string::npos) out += ".0";
  return out;
}

std::string string_repr(const std::string& s) {
  // Python prefers single quotes, double ones when the text holds a single quote and no double one.
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (const char32_t c : code_points(s)) {
    if (c == static_cast<char32_t>(q) || c == U'\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c == U'\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  return out + q;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char32_t c : code_points(s)) {
    switch (c) {
      case U'"': out += "\\\""; break;
      case U'\\': out += "\\\\"; break;
      case U'\n': out += "\\n"; break;
      case U'\r': out += "\\r"; break;
      case U'\t': out += "\\t"; break;
      case U'\b': out += "\\b"; break;
      case U'\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          append_utf8(out, c);
        }
    }
  }
  return out + "\"";
}

void json_into(std::string& out, const Value& v, int indent, int depth) {
  const auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<std::size_t>(indent) * d, ' ');
  };
  switch (v.kind) {
    case Value::Kind::Undefined: case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.b ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.i); return;
    case Value::Kind::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
      else out += float_repr(v.f);
      return;
    case Value::Kind::String: out += json_string(v.s); return;
    case Value::Kind::List: {
      if (v.list->empty()) { out += "[]"; return; }
      out += '[';
      for (std::size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_into(out, (*v.list)[k], indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict: case Value::Kind::Namespace: {
      if (v.dict->empty()) { out += "{}"; return; }
      out += '{';
      for (std::size_t k = 0; k < v.dict->size(); ++k) {
        if (k > 0) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        out += json_string(str(key_value((*v.dict)[k].first)));  // json.dumps writes number keys as text
        out += ": ";
        json_into(out, (*v.dict)[k].second, indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    case Value::Kind::Function: throw Error("Object of type function is not JSON serializable");
  }
}

}  // namespace

std::string dict_key(const Value& key) {
  const auto marked = [](char kind, const std::string& text) {
    std::string out(1, '\x01');
    out += kind;
    out += text;
    return out;
  };
  switch (key.kind) {
    case Value::Kind::String: return key.s.empty() || key.s[0] != '\x01' ? key.s : marked('s', key.s);
    case Value::Kind::Bool: return marked('i', key.b ? "1" : "0");
    case Value::Kind::Int: return marked('i', std::to_string(key.i));
    case Value::Kind::Float:
      if (std::floor(key.f) == key.f && std::fabs(key.f) < 9e15) return marked('i', std::to_string(static_cast<int64_t>(key.f)));
      return marked('f', float_repr(key.f));
    case Value::Kind::None: return marked('n', "");
    default: throw Error("unhashable type: '" + type_name(key) + "'");
  }
}

Value key_value(const std::string& key) {
  if (key.size() < 2 || key[0] != '\x01') return Value::string(key);
  if (key[1] == 's') return Value::string(key.substr(2));
  if (key[1] == 'i') return Value::integer(std::stoll(key.substr(2)));
  if (key[1] == 'f') return Value::number(std::stod(key.substr(2)));
  return Value::none();
}

std::string str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::String: return v.s;
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.b ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.i);
    case Value::Kind::Float: return float_repr(v.f);
    case Value::Kind::String: return string_repr(v.s);
    case Value::Kind::List: {
      std::string out = v.tuple ? "(" : "[";
      for (std::size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      if (v.tuple) return out + (v.list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      for (std::size_t k = 0; k < v.dict->size(); ++k)
        out += (k ? ", " : "") + repr(key_value((*v.dict)[k].first)) + ": " + repr((*v.dict)[k].second);
      return out + "}";
    }
    case Value::Kind::Namespace: return "<Namespace>";
    case Value::Kind::Function: return "<function>";
  }
  return "";
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_into(out, v, indent, 0);
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::Float && b.kind != Value::Kind::Float)
      return (a.kind == Value::Kind::Bool ? a.b : a.i) == (b.kind == Value::Kind::Bool ? b.b : b.i);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::Undefined: case Value::Kind::None: return true;
    case Value::Kind::String: return a.s == b.s;
    case Value::Kind::List:
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (std::size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Kind::Dict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, x] : *a.dict) {
        const Value* y = b.find(k);
        if (y == nullptr || !equal(x, *y)) return false;
      }
      return true;
    default: return a.dict == b.dict && a.fn == b.fn;  // the same object
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is(Value::Kind::String) && b.is(Value::Kind::String)) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  if (a.is(Value::Kind::List) && b.is(Value::Kind::List)) {
    for (std::size_t k = 0; k < a.list->size() && k < b.list->size(); ++k)
      if (const int c = compare((*a.list)[k], (*b.list)[k]); c != 0) return c;
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  throw Error("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Function: return "function";
  }
  return "";
}

bool is_python_space(char32_t c) {
  return c == U' ' || (c >= U'\t' && c <= U'\r') || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string strip_space(const std::string& s, bool left, bool right) {
  const std::vector<char32_t> cps = code_points(s);
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && is_python_space(cps[b])) ++b;
  if (right)
    while (e > b && is_python_space(cps[e - 1])) --e;
  return utf8(cps, b, e);
}

}  // namespace kvs::jinja
