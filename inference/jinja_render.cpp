// Rendering the Jinja subset's tree: scopes as Jinja keeps them (a for loop's and a macro's names
// stay inside them; namespace() objects carry values out), expressions with Python's semantics,
// loops with their loop variable, and the limits that keep a hostile template from running away.
#include "inference/jinja_render.h"

#include <cmath>

#include "inference/jinja_builtins.h"
#include "inference/jinja_parse.h"

namespace kvs::jinja {
namespace {

constexpr std::size_t kMaxOutput = 1 << 20;
constexpr long kMaxIterations = 1000000;
constexpr int kMaxMacroDepth = 64;

struct BreakLoop {};
struct ContinueLoop {};

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

// Error `e` with `line` in front where it names none yet.
[[noreturn]] void rethrow_at(const Error& e, int line) {
  const std::string what = e.what();
  if (what.rfind("line ", 0) == 0) throw e;
  throw Error("line " + std::to_string(line) + ": " + what);
}

int64_t to_int(const Value& v) { return v.is(Value::Kind::Bool) ? v.b : v.i; }

// Python's "format" % args for %s, %d, %i, %r and %%: one value, or a tuple of them.
std::string percent_format(const std::string& format, const Value& args) {
  const List one{args};
  const List& values = args.is(Value::Kind::List) && args.tuple ? *args.list : one;
  std::string out;
  std::size_t next = 0;
  for (std::size_t k = 0; k < format.size(); ++k) {
    if (format[k] != '%') {
      out += format[k];
      continue;
    }
    if (k + 1 >= format.size()) fail("incomplete format");
    const char c = format[++k];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (c != 's' && c != 'd' && c != 'i' && c != 'r') fail(std::string("format %") + c + " is not supported");
    if (next >= values.size()) fail("not enough arguments for format string");
    const Value& v = values[next++];
    if ((c == 'd' || c == 'i') && !v.is_number()) fail("%d format: a number is required, not " + type_name(v));
    out += c == 'r' ? repr(v) : (c == 'd' || c == 'i') ? std::to_string(static_cast<int64_t>(v.as_double())) : str(v);
  }
  if (next < values.size()) fail("not all arguments converted during string formatting");
  return out;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "+") {
    if (a.is(Value::Kind::String) && b.is(Value::Kind::String)) return Value::string(a.s + b.s);
    if (a.is(Value::Kind::List) && b.is(Value::Kind::List)) {
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(items));
    }
  }
  if (op == "*") {
    const Value* seq = a.is(Value::Kind::String) || a.is(Value::Kind::List) ? &a : &b;
    const Value* times = seq == &a ? &b : &a;
    if ((seq->is(Value::Kind::String) || seq->is(Value::Kind::List)) &&
        (times->is(Value::Kind::Int) || times->is(Value::Kind::Bool))) {
      const int64_t n = to_int(*times);
      if (n > 100000) fail("a repetition of more than 100000");
      if (seq->is(Value::Kind::String)) {
        std::string out;
        for (int64_t k = 0; k < n; ++k) out += seq->s;
        return Value::string(out);
      }
      List out;
      for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq->list->begin(), seq->list->end());
      return Value::make_list(std::move(out));
    }
  }
  if (op == "%" && a.is(Value::Kind::String)) return Value::string(percent_format(a.s, b));
  if (!a.is_number() || !b.is_number())
    fail("unsupported operand types for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  const bool ints = !a.is(Value::Kind::Float) && !b.is(Value::Kind::Float);
  const double x = a.as_double(), y = b.as_double();
  if ((op == "/" || op == "//" || op == "%") && y == 0.0) fail("division by zero");
  if (op == "/") return Value::number(x / y);
  if (ints) {  // Python's integers are unbounded; these are 64-bit, and say so where they overflow
    const int64_t i = to_int(a), j = to_int(b);
    int64_t r = 0;
    const auto checked = [&](bool overflowed) {
      if (overflowed) fail("integer overflow in " + op + " (64-bit integers here)");
      return Value::integer(r);
    };
    if (op == "+") return checked(__builtin_add_overflow(i, j, &r));
    if (op == "-") return checked(__builtin_sub_overflow(i, j, &r));
    if (op == "*") return checked(__builtin_mul_overflow(i, j, &r));
    if (op == "//" || op == "%") {
      if (j == -1) return op == "%" ? Value::integer(0) : checked(__builtin_sub_overflow(int64_t{0}, i, &r));
      const int64_t q = i / j, m = i % j;
      const bool floor = m != 0 && ((m < 0) != (j < 0));  // Python rounds the quotient down
      return Value::integer(op == "//" ? q - floor : m + (floor ? j : 0));
    }
    if (op == "**" && j >= 0) {
      if (i == 0 || i == 1) return Value::integer(j == 0 ? 1 : i);
      if (i == -1) return Value::integer(j % 2 ? -1 : 1);
      r = 1;  // |i| >= 2: past 63 factors it has overflowed
      for (int64_t k = 0; k < j; ++k)
        if (__builtin_mul_overflow(r, i, &r)) fail("integer overflow in ** (64-bit integers here)");
      return Value::integer(r);
    }
  }
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "//") return Value::number(std::floor(x / y));
  if (op == "%") return Value::number(x - y * std::floor(x / y));
  if (op == "**") return Value::number(std::pow(x, y));
  fail("unknown operator " + op);
}

// Python's slice of n items: the indices it visits.
std::vector<std::size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step) {
  const int64_t st = step.is(Value::Kind::None) || step.is(Value::Kind::Undefined) ? 1 : to_int(step);
  if (st == 0) fail("slice step cannot be zero");
  const auto bound = [&](const Value& v, int64_t fallback) {
    if (v.is(Value::Kind::None) || v.is(Value::Kind::Undefined)) return fallback;
    int64_t k = to_int(v);
    if (k < 0) k += n;
    return st > 0 ? std::clamp<int64_t>(k, 0, n) : std::clamp<int64_t>(k, -1, n - 1);
  };
  const int64_t b = bound(start, st > 0 ? 0 : n - 1), e = bound(stop, st > 0 ? n : -1);
  std::vector<std::size_t> out;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) out.push_back(static_cast<std::size_t>(k));
  return out;
}

class Renderer {
 public:
  explicit Renderer(const Dict& context) : globals_(global_functions()) { frames_.push_back(context); }

  void run(const Body& body, std::string& out) {
    for (const auto& node : body) {
      try {
        exec(*node, out);
      } catch (const Error& e) {
        rethrow_at(e, node->line);
      }
      if (out.size() > kMaxOutput) fail("line " + std::to_string(node->line) + ": the output passed 1 MB");
    }
  }

 private:
  Value lookup(const std::string& name) const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f)
      for (const auto& [k, v] : *f)
        if (k == name) return v;
    for (const auto& [k, v] : globals_)
      if (k == name) return v;
    return Value::undefined(name);
  }

  void assign(const std::string& name, Value v) {
    Dict& f = frames_.back();
    for (auto& [k, x] : f) {
      if (k == name) {
        x = std::move(v);
        return;
      }
    }
    f.emplace_back(name, std::move(v));
  }

  void assign_targets(const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) return assign(targets[0], v);
    const std::vector<Value> items = iterate(v);
    if (items.size() != targets.size())
      fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()));
    for (std::size_t k = 0; k < targets.size(); ++k) assign(targets[k], items[k]);
  }

  void count_iteration() {
    if (++iterations_ > kMaxIterations) fail("more than a million loop iterations");
  }

  void exec(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::Text: out += n.text; return;
      case Node::Kind::Output: out += str(eval(*n.expr)); return;
      case Node::Kind::If:
        for (std::size_t k = 0; k < n.conditions.size(); ++k) {
          if (eval(*n.conditions[k]).truthy()) return run(n.bodies[k], out);
        }
        if (n.bodies.size() > n.conditions.size()) run(n.bodies.back(), out);
        return;
      case Node::Kind::For: return exec_for(n, out);
      case Node::Kind::Set: {
        const Value v = eval(*n.expr);
        if (!n.target_expr) return assign_targets(n.targets, v);
        Value ns = eval(*n.target_expr->args[0]);
        if (!ns.is(Value::Kind::Namespace)) fail("cannot assign attribute on a " + type_name(ns) + " (only namespace())");
        if (Value* slot = ns.find(n.target_expr->name)) *slot = v;
        else ns.dict->emplace_back(n.target_expr->name, v);
        return;
      }
      case Node::Kind::SetBlock: {
        std::string text;
        run(n.bodies[0], text);
        return assign(n.targets[0], Value::string(text));
      }
      case Node::Kind::Macro: return assign(n.text, macro(n));
      case Node::Kind::FilterBlock: {
        std::string text;
        run(n.bodies[0], text);
        filter_input_ = Value::string(text);
        out += str(eval(*n.expr));
        return;
      }
      case Node::Kind::Break: throw BreakLoop{};
      case Node::Kind::Continue: throw ContinueLoop{};
      case Node::Kind::Generation: return run(n.bodies[0], out);
    }
  }

  void exec_for(const Node& n, std::string& out) {
    std::vector<Value> items = iterate(eval(*n.expr));
    frames_.emplace_back();
    if (n.cond) {  // the loop's filter: loop.index counts only the items it keeps
      std::vector<Value> kept;
      for (const Value& item : items) {
        count_iteration();
        assign_targets(n.targets, item);
        if (eval(*n.cond).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < length; ++k) {
      count_iteration();
      frames_.back().clear();
      assign_targets(n.targets, items[k]);
      Dict loop = {{"index", Value::integer(k + 1)},
                   {"index0", Value::integer(k)},
                   {"revindex", Value::integer(length - k)},
                   {"revindex0", Value::integer(length - k - 1)},
                   {"first", Value::boolean(k == 0)},
                   {"last", Value::boolean(k == length - 1)},
                   {"length", Value::integer(length)},
                   {"previtem", k > 0 ? items[k - 1] : Value::undefined("previtem")},
                   {"nextitem", k + 1 < length ? items[k + 1] : Value::undefined("nextitem")},
                   {"cycle", Value::function([k](std::vector<Value>& a, Kwargs&) {
                      if (a.empty()) fail("loop.cycle needs an argument");
                      return a[static_cast<std::size_t>(k) % a.size()];
                    })}};
      assign("loop", Value::make_dict(std::move(loop)));
      try {
        run(n.bodies[0], out);
      } catch (const ContinueLoop&) {
      } catch (const BreakLoop&) {
        break;
      }
    }
    frames_.pop_back();
    if (length == 0 && n.bodies.size() > 1) run(n.bodies[1], out);
  }

  // A macro as a function: its parameters bound (positional, then by name, else their defaults),
  // its body rendered in a scope of its own beside the template's top-level names.
  Value macro(const Node& n) {
    const Node* node = &n;
    return Value::function([this, node](std::vector<Value>& args, Kwargs& kwargs) {
      if (args.size() > node->targets.size()) fail("macro '" + node->text + "' takes " + std::to_string(node->targets.size()) + " arguments");
      if (++macro_depth_ > kMaxMacroDepth) fail("macro calls nested more than 64 deep");
      std::vector<Dict> saved = std::move(frames_);
      frames_ = {saved.front(), Dict{}};
      std::string text;
      try {
        for (std::size_t k = 0; k < node->targets.size(); ++k) {
          Value v = k < args.size() ? args[k] : Value::undefined(node->targets[k]);
          for (const auto& [key, x] : kwargs)
            if (key == node->targets[k]) v = x;
          if (v.is(Value::Kind::Undefined) && node->defaults[k]) v = eval(*node->defaults[k]);
          assign(node->targets[k], v);
        }
        run(node->bodies[0], text);
      } catch (...) {
        frames_ = std::move(saved);
        --macro_depth_;
        throw;
      }
      frames_ = std::move(saved);
      --macro_depth_;
      return Value::string(text);
    });
  }

  std::vector<Value> eval_args(const Expr& e, std::size_t from, Kwargs& kwargs) {
    std::vector<Value> args;
    for (std::size_t k = from; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
    for (const auto& [key, x] : e.kwargs) kwargs.emplace_back(key, eval(*x));
    return args;
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::Attr: return attribute(eval(*e.args[0]), e.name);
      case Expr::Kind::Item: return item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::Slice: {
        const Value target = eval(*e.args[0]);
        const auto part = [&](int k) { return e.args[k] ? eval(*e.args[k]) : Value::none(); };
        const Value start = part(1), stop = part(2), step = part(3);
        if (target.is(Value::Kind::String)) {
          const std::vector<char32_t> cps = code_points(target.s);
          std::vector<char32_t> out;
          for (const std::size_t k : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step)) out.push_back(cps[k]);
          return Value::string(utf8(out));
        }
        if (!target.is(Value::Kind::List)) fail("'" + type_name(target) + "' object cannot be sliced");
        List out;
        for (const std::size_t k : slice_indices(static_cast<int64_t>(target.list->size()), start, stop, step))
          out.push_back((*target.list)[k]);
        return Value::make_list(std::move(out));
      }
      case Expr::Kind::Call: {
        const Value f = eval(*e.args[0]);
        Kwargs kwargs;
        std::vector<Value> args = eval_args(e, 1, kwargs);
        if (f.is(Value::Kind::Undefined)) fail("'" + (f.s.empty() ? std::string("undefined") : f.s) + "' is undefined");
        if (!f.is(Value::Kind::Function)) fail("'" + type_name(f) + "' object is not callable");
        return (*f.fn)(args, kwargs);
      }
      case Expr::Kind::Filter: {
        const Value v = e.args[0] ? eval(*e.args[0]) : filter_input_;
        Kwargs kwargs;
        std::vector<Value> args = eval_args(e, 1, kwargs);
        return apply_filter(e.name, v, args, kwargs);
      }
      case Expr::Kind::Test: {
        const Value v = eval(*e.args[0]);
        Kwargs kwargs;
        std::vector<Value> args = eval_args(e, 1, kwargs);
        return Value::boolean(apply_test(e.name, v, args) != e.negated);
      }
      case Expr::Kind::Not: return Value::boolean(!eval(*e.args[0]).truthy());
      case Expr::Kind::Negate: {
        const Value v = eval(*e.args[0]);
        if (v.is(Value::Kind::Float)) return Value::number(-v.f);
        if (v.is(Value::Kind::Int) || v.is(Value::Kind::Bool)) {
          int64_t r = 0;
          if (__builtin_sub_overflow(int64_t{0}, to_int(v), &r)) fail("integer overflow in - (64-bit integers here)");
          return Value::integer(r);
        }
        fail("bad operand type for unary -: '" + type_name(v) + "'");
      }
      case Expr::Kind::Binary: return binary(e);
      case Expr::Kind::Cond:
        if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined();
      case Expr::Kind::List: case Expr::Kind::Tuple: {
        List items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return e.kind == Expr::Kind::Tuple ? Value::make_tuple(std::move(items)) : Value::make_list(std::move(items));
      }
      case Expr::Kind::Dict: {
        Dict d;
        for (std::size_t k = 0; k < e.keys.size(); ++k) {
          d.emplace_back(dict_key(eval(*e.keys[k])), eval(*e.args[k]));
        }
        return Value::make_dict(std::move(d));
      }
    }
    return Value::undefined();
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0]);
    if (op == "and") return a.truthy() ? eval(*e.args[1]) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1]);
    const Value b = eval(*e.args[1]);
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "<") return Value::boolean(compare(a, b) < 0);
    if (op == "<=") return Value::boolean(compare(a, b) <= 0);
    if (op == ">") return Value::boolean(compare(a, b) > 0);
    if (op == ">=") return Value::boolean(compare(a, b) >= 0);
    if (op == "in") return Value::boolean(contains(b, a));
    if (op == "not in") return Value::boolean(!contains(b, a));
    if (op == "~") return Value::string(str(a) + str(b));
    if (a.is(Value::Kind::Undefined) || b.is(Value::Kind::Undefined))
      fail("'" + (a.is(Value::Kind::Undefined) ? a.s : b.s) + "' is undefined");
    return arithmetic(op, a, b);
  }

  // obj[key]: a list's or string's item (negative from the end; undefined past it), a dict's
  // entry (else its method of that name, as Jinja falls back to attributes).
  static Value item(const Value& obj, const Value& key) {
    if (obj.is(Value::Kind::Undefined)) fail("'" + (obj.s.empty() ? std::string("undefined") : obj.s) + "' is undefined");
    if ((obj.is(Value::Kind::List) || obj.is(Value::Kind::String)) && (key.is(Value::Kind::Int) || key.is(Value::Kind::Bool))) {
      const std::vector<char32_t> cps = obj.is(Value::Kind::String) ? code_points(obj.s) : std::vector<char32_t>{};
      const auto n = static_cast<int64_t>(obj.is(Value::Kind::List) ? obj.list->size() : cps.size());
      int64_t k = to_int(key);
      if (k < 0) k += n;
      if (k < 0 || k >= n) return Value::undefined();
      return obj.is(Value::Kind::List) ? (*obj.list)[static_cast<std::size_t>(k)]
                                       : Value::string(utf8(cps, static_cast<std::size_t>(k), static_cast<std::size_t>(k) + 1));
    }
    if (obj.is(Value::Kind::Dict) || obj.is(Value::Kind::Namespace)) {
      if (const Value* v = obj.find(dict_key(key))) return *v;
    }
    return key.is(Value::Kind::String) ? attribute(obj, key.s) : Value::undefined();
  }

  Dict globals_;
  std::vector<Dict> frames_;  // [0]: the template's top level; then a frame per loop or macro call
  Value filter_input_;        // a filter block's rendered body
  long iterations_ = 0;
  int macro_depth_ = 0;
};

}  // namespace

std::string render(const std::string& source, const Dict& context) {
  const Body body = parse_template(source);
  std::string out;
  Renderer(context).run(body, out);
  return out;
}

}  // namespace kvs::jinja
