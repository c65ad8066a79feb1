// Jinja template text -> tree: the tags and their white-space control, the expression grammar
// (Jinja's precedence: if-else < or < and < not < comparisons < + - < ~ < * / // % < ** < unary,
// filters and tests binding to the operand before them), and the statements chat templates use.
#include "inference/jinja_parse.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

namespace kvs::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& message) {
  throw Error("line " + std::to_string(line) + ": " + message);
}

// Nesting deeper than this (expressions in expressions, blocks in blocks) is refused rather than
// parsed by recursion as deep as a hostile template asks.
constexpr int kMaxNesting = 100;

// Counts one level of nesting for its lifetime; throws past kMaxNesting.
class Nesting {
 public:
  Nesting(int& depth, int line) : depth_(depth) {
    if (++depth_ > kMaxNesting) {
      --depth_;
      fail(line, "nested more than " + std::to_string(kMaxNesting) + " deep");
    }
  }
  ~Nesting() { --depth_; }
  Nesting(const Nesting&) = delete;
  Nesting& operator=(const Nesting&) = delete;

 private:
  int& depth_;
};

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool all_space(const std::string& s) {
  if (s.empty()) return false;
  for (const char32_t c : code_points(s))
    if (!is_python_space(c)) return false;
  return true;
}

// ---- the template's pieces: text, {{ expression }}, {% statement %}

struct Piece {
  enum class Kind { Text, Expr, Stmt } kind;
  std::string content;
  int line;
};

int lines_in(const std::string& s, std::size_t begin, std::size_t end) {
  int n = 0;
  for (std::size_t k = begin; k < end && k < s.size(); ++k) n += s[k] == '\n';
  return n;
}

// Where the tag opened at `from` closes (`close`: "}}", "%}" or "#}"), skipping quoted strings.
std::size_t tag_end(const std::string& src, std::size_t from, const char* close, int line) {
  char quote = 0;
  for (std::size_t k = from; k + 1 < src.size(); ++k) {
    const char c = src[k];
    if (quote) {
      if (c == '\\') ++k;
      else if (c == quote) quote = 0;
    } else if ((c == '\'' || c == '"') && close[0] != '#') {
      quote = c;
    } else if (c == close[0] && src[k + 1] == close[1]) {
      return k;
    }
  }
  fail(line, std::string("a tag is not closed (no '") + close + "')");
}

std::vector<Piece> split_pieces(std::string src) {
  // As Jinja reads a source: line breaks as \n, one at the very end dropped.
  std::string norm;
  for (std::size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      norm += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      norm += src[k];
    }
  }
  if (!norm.empty() && norm.back() == '\n') norm.pop_back();
  src = std::move(norm);

  std::vector<Piece> out;
  std::size_t pos = 0;
  int line = 1;
  bool line_starting = true;
  while (pos < src.size()) {
    std::size_t at = pos;
    while (at + 1 < src.size() && !(src[at] == '{' && (src[at + 1] == '{' || src[at + 1] == '%' || src[at + 1] == '#')))
      ++at;
    if (at + 1 >= src.size()) {
      out.push_back({Piece::Kind::Text, src.substr(pos), line});
      break;
    }
    const char kind = src[at + 1];  // '{', '%' or '#'
    const char control = at + 2 < src.size() ? src[at + 2] : 0;
    std::string text = src.substr(pos, at - pos);
    const int text_line = line;
    line += lines_in(src, pos, at);
    if (control == '-') {
      text = strip_space(text, false, true);
    } else if (control != '+' && kind != '{') {  // lstrip_blocks
      const std::size_t l_pos = text.rfind('\n') + 1;  // 0 when none
      if ((l_pos > 0 || line_starting) && all_space(text.substr(l_pos))) text.resize(l_pos);
    }
    if (!text.empty()) out.push_back({Piece::Kind::Text, text, text_line});

    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const std::size_t inner = at + 2 + (control == '-' || control == '+');
    const std::size_t end = tag_end(src, inner, close, line);
    const char end_control = end > inner ? src[end - 1] : 0;
    std::string content = src.substr(inner, end - inner - (end_control == '-' || end_control == '+'));
    const int tag_line = line;
    line += lines_in(src, at, end + 2);
    pos = end + 2;
    if (end_control == '-') {
      while (pos < src.size() && space(src[pos])) line += src[pos++] == '\n';
    } else if (end_control != '+' && kind != '{' && pos < src.size() && src[pos] == '\n') {  // trim_blocks
      ++pos;
      ++line;
    }
    line_starting = pos > 0 && src[pos - 1] == '\n';
    if (kind == '{') out.push_back({Piece::Kind::Expr, content, tag_line});
    if (kind == '%') out.push_back({Piece::Kind::Stmt, content, tag_line});
  }
  return out;
}

// ---- expressions

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End } kind;
  std::string text;
  int line;
};

std::vector<Token> tokenize(const std::string& s, int line) {
  static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ".", ",", ":", "|"};
  std::vector<Token> out;
  std::size_t k = 0;
  while (k < s.size()) {
    const char c = s[k];
    if (space(c)) {
      line += c == '\n';
      ++k;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t e = k;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      out.push_back({Token::Kind::Name, s.substr(k, e - k), line});
      k = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t e = k;
      bool is_float = false;
      while (e < s.size() && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      if (e + 1 < s.size() && s[e] == '.' && std::isdigit(static_cast<unsigned char>(s[e + 1]))) {
        is_float = true;
        for (++e; e < s.size() && std::isdigit(static_cast<unsigned char>(s[e])); ++e) {}
      }
      if (e < s.size() && (s[e] == 'e' || s[e] == 'E')) {
        std::size_t x = e + 1;
        if (x < s.size() && (s[x] == '+' || s[x] == '-')) ++x;
        if (x < s.size() && std::isdigit(static_cast<unsigned char>(s[x]))) {
          is_float = true;
          for (e = x; e < s.size() && std::isdigit(static_cast<unsigned char>(s[e])); ++e) {}
        }
      }
      std::string digits;
      for (std::size_t d = k; d < e; ++d)
        if (s[d] != '_') digits += s[d];
      out.push_back({is_float ? Token::Kind::Float : Token::Kind::Int, digits, line});
      k = e;
    } else if (c == '\'' || c == '"') {
      std::string value;
      std::size_t e = k + 1;
      for (; e < s.size() && s[e] != c; ++e) {
        if (s[e] != '\\' || e + 1 >= s.size()) {
          line += s[e] == '\n';
          value += s[e];
          continue;
        }
        const char x = s[++e];
        switch (x) {
          case 'n': value += '\n'; break;
          case 't': value += '\t'; break;
          case 'r': value += '\r'; break;
          case '0': value += '\0'; break;
          case 'a': value += '\a'; break;
          case 'b': value += '\b'; break;
          case 'f': value += '\f'; break;
          case 'v': value += '\v'; break;
          case '\\': case '\'': case '"': value += x; break;
          case '\n': break;  // a continued line
          case 'x': case 'u': case 'U': {
            const std::size_t n = x == 'x' ? 2 : x == 'u' ? 4 : 8;
            if (e + n >= s.size()) fail(line, "a string's \\" + std::string(1, x) + " escape is cut short");
            const char32_t cp = static_cast<char32_t>(std::strtoul(s.substr(e + 1, n).c_str(), nullptr, 16));
            value += utf8({cp});
            e += n;
            break;
          }
          default: value += '\\'; value += x;  // as Python keeps unknown escapes
        }
      }
      if (e >= s.size()) fail(line, "a string is not closed");
      out.push_back({Token::Kind::String, value, line});
      k = e + 1;
    } else {
      bool found = false;
      for (const char* op : kOps) {
        const std::size_t n = std::char_traits<char>::length(op);
        if (s.compare(k, n, op) == 0) {
          out.push_back({Token::Kind::Op, op, line});
          k += n;
          found = true;
          break;
        }
      }
      if (!found) fail(line, std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Token::Kind::End, "", line});
  return out;
}

class ExprParser {
 public:
  ExprParser(const std::string& source, int line) : tokens_(tokenize(source, line)) {}

  const Token& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::End; }
  bool is_op(const char* op, std::size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::Op && peek(ahead).text == op;
  }
  bool is_name(const char* name, std::size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::Name && peek(ahead).text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    ++pos_;
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(peek().line, std::string("expected '") + op + "', got " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().kind != Token::Kind::Name) fail(peek().line, "expected a name, got " + describe(peek()));
    return tokens_[pos_++].text;
  }
  void expect_end() {
    if (!at_end()) fail(peek().line, "unexpected " + describe(peek()));
  }
  int line() const { return peek().line; }

  ExprPtr expression(bool with_condition = true) {
    const Nesting nesting(depth_, line());
    ExprPtr e = or_expr();
    while (with_condition && is_name("if")) {
      const int l = line();
      ++pos_;
      ExprPtr cond = or_expr();
      ExprPtr otherwise = skip_name("else") ? expression() : nullptr;
      auto c = node(Expr::Kind::Cond, l);
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  // expression {, expression}: a tuple where there is a comma (for's iterable, set's value)
  ExprPtr tuple(bool with_condition = true) {
    const int l = line();
    ExprPtr first = expression(with_condition);
    if (!is_op(",")) return first;
    auto t = node(Expr::Kind::Tuple, l);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (at_end() || is_name("if")) break;
      t->args.push_back(expression(with_condition));
    }
    return t;
  }

  // Items separated by commas (a trailing one allowed) up to and including `close`; `item` reads one.
  template <class Item>
  void separated(const char* close, Item item) {
    for (bool first = true; !skip_op(close); first = false) {
      if (!first) {
        expect_op(",");
        if (skip_op(close)) return;
      }
      item();
    }
  }

  // Call arguments after '(' up to and including ')'.
  void call_args(Expr& e) {
    separated(")", [&] {
      if (is_op("*") || is_op("**")) fail(line(), "*args and **kwargs are not supported");
      if (peek().kind == Token::Kind::Name && is_op("=", 1)) {
        const std::string key = expect_name();
        ++pos_;
        e.kwargs.emplace_back(key, expression());
      } else {
        if (!e.kwargs.empty()) fail(line(), "a positional argument follows a keyword argument");
        e.args.push_back(expression());
      }
    });
  }

 private:
  static std::string describe(const Token& t) {
    return t.kind == Token::Kind::End ? "end of the tag" : "'" + t.text + "'";
  }
  static ExprPtr node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }
  static ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = node(Expr::Kind::Binary, line);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // The left-associative levels, loosest first: or, and, (not and the comparisons, whose
  // operands are level 3), + -, ~, * / // %, ** (then the unary operators).
  ExprPtr level(std::size_t k) {
    static const std::vector<std::vector<const char*>> kLevels = {
        {"or"}, {"and"}, {}, {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
    if (k == 2) return not_expr();
    if (k == kLevels.size()) return unary(true);
    ExprPtr e = level(k + 1);
    for (;;) {
      const char* op = nullptr;
      for (const char* o : kLevels[k])
        if (k < 2 ? is_name(o) : is_op(o)) op = o;
      if (op == nullptr) return e;
      const int l = line();
      ++pos_;
      e = binary(op, std::move(e), level(k + 1), l);
    }
  }
  ExprPtr or_expr() { return level(0); }
  ExprPtr not_expr() {
    if (is_name("not")) {
      const int l = line();
      const Nesting nesting(depth_, l);
      ++pos_;
      auto e = node(Expr::Kind::Not, l);
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = level(3);
    for (;;) {
      const int l = line();
      std::string op;
      for (const char* o : {"==", "!=", "<", "<=", ">", ">="})
        if (is_op(o)) op = o;
      if (!op.empty()) {
        ++pos_;
      } else if (is_name("in")) {
        op = "in";
        ++pos_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else {
        return e;
      }
      e = binary(op, std::move(e), level(3), l);
    }
  }
  ExprPtr unary(bool with_filter) {
    const int l = line();
    const Nesting nesting(depth_, l);
    ExprPtr e;
    if (skip_op("-")) {
      e = node(Expr::Kind::Negate, l);
      e->args.push_back(unary(false));
    } else if (skip_op("+")) {
      e = unary(false);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    return with_filter ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& t = peek();
    const int l = t.line;
    if (t.kind == Token::Kind::Name) {
      ++pos_;
      auto e = node(Expr::Kind::Literal, l);
      if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = t.text;
      }
      return e;
    }
    if (t.kind == Token::Kind::String) {
      std::string s;
      while (peek().kind == Token::Kind::String) s += tokens_[pos_++].text;  // "a" "b" is "ab"
      auto e = node(Expr::Kind::Literal, l);
      e->value = Value::string(s);
      return e;
    }
    if (t.kind == Token::Kind::Int || t.kind == Token::Kind::Float) {
      ++pos_;
      auto e = node(Expr::Kind::Literal, l);
      if (t.kind == Token::Kind::Int) {
        errno = 0;
        e->value = Value::integer(std::strtoll(t.text.c_str(), nullptr, 10));
        if (errno == ERANGE) fail(l, "the integer " + t.text + " does not fit 64 bits");
      } else {
        e->value = Value::number(std::strtod(t.text.c_str(), nullptr));
      }
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return node(Expr::Kind::Tuple, l);
      ExprPtr e = expression();
      if (is_op(",")) {
        auto tup = node(Expr::Kind::Tuple, l);
        tup->args.push_back(std::move(e));
        while (skip_op(",")) {
          if (is_op(")")) break;
          tup->args.push_back(expression());
        }
        e = std::move(tup);
      }
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = node(Expr::Kind::List, l);
      separated("]", [&] { e->args.push_back(expression()); });
      return e;
    }
    if (skip_op("{")) {
      auto e = node(Expr::Kind::Dict, l);
      separated("}", [&] {
        e->keys.push_back(expression());
        expect_op(":");
        e->args.push_back(expression());
      });
      return e;
    }
    fail(l, "unexpected " + describe(t));
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      const int l = line();
      if (skip_op(".")) {
        auto a = node(Expr::Kind::Attr, l);
        if (peek().kind == Token::Kind::Int) {  // a.0: the item
          a->kind = Expr::Kind::Item;
          a->args.push_back(std::move(e));
          auto index = node(Expr::Kind::Literal, l);
          index->value = Value::integer(std::strtoll(tokens_[pos_++].text.c_str(), nullptr, 10));
          a->args.push_back(std::move(index));
        } else {
          a->name = expect_name();
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (skip_op("[")) {
        e = subscript(std::move(e), l);
      } else if (skip_op("(")) {
        e = call(std::move(e), l);
      } else {
        return e;
      }
    }
  }

  // callee(arguments) after '('.
  ExprPtr call(ExprPtr callee, int l) {
    auto c = node(Expr::Kind::Call, l);
    c->args.push_back(std::move(callee));
    call_args(*c);
    return c;
  }

  ExprPtr subscript(ExprPtr target, int l) {
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (is_op(":")) {
        if (++colons > 2) fail(line(), "a slice has at most two ':'");
        ++pos_;
      } else if (is_op("]")) {
        ++pos_;
        break;
      } else {
        if (parts[colons]) fail(line(), "expected ':' or ']'");
        parts[colons] = expression();
      }
    }
    auto e = node(colons == 0 ? Expr::Kind::Item : Expr::Kind::Slice, l);
    e->args.push_back(std::move(target));
    if (colons == 0) {
      if (!parts[0]) fail(l, "an empty subscript");
      e->args.push_back(std::move(parts[0]));
    } else {
      for (ExprPtr& p : parts) e->args.push_back(std::move(p));
    }
    return e;
  }

  ExprPtr filters(ExprPtr e) {
    for (;;) {
      const int l = line();
      if (skip_op("|")) {
        e = filter(std::move(e), l);
      } else if (is_name("is")) {
        ++pos_;
        auto t = node(Expr::Kind::Test, l);
        t->negated = skip_name("not");
        t->name = expect_name();
        t->args.push_back(std::move(e));
        if (skip_op("(")) {
          call_args(*t);
        } else if ((peek().kind == Token::Kind::String || peek().kind == Token::Kind::Int ||
                    peek().kind == Token::Kind::Float || is_op("[") || is_op("{") ||
                    peek().kind == Token::Kind::Name) &&
                   !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("in") &&
                   !is_name("not")) {
          if (is_name("is")) fail(line(), "tests cannot be chained with is");
          t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (skip_op("(")) {
        e = call(std::move(e), l);
      } else {
        return e;
      }
    }
  }

 public:
  // name(args) after '|': the filter applied to `value` (null in a filter block).
  ExprPtr filter(ExprPtr value, int l) {
    auto f = node(Expr::Kind::Filter, l);
    f->name = expect_name();
    while (skip_op(".")) f->name += "." + expect_name();
    f->args.push_back(std::move(value));
    if (skip_op("(")) call_args(*f);
    return f;
  }

 private:
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;  // expressions being read inside one another
};

// ---- statements

class Parser {
 public:
  explicit Parser(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}

  Body parse() {
    std::string end;
    Body b = body({}, end);
    return b;
  }

 private:
  // Nodes up to a statement whose keyword is in `ends` (its keyword in `ended`, its parser left
  // positioned after the keyword in `ended_parser`), or to the end where `ends` is empty.
  Body body(const std::vector<std::string>& ends, std::string& ended) {
    const Nesting nesting(depth_, pos_ < pieces_.size() ? pieces_[pos_].line : 1);
    Body out;
    while (pos_ < pieces_.size()) {
      const Piece& p = pieces_[pos_++];
      if (p.kind == Piece::Kind::Text) {
        auto n = make(Node::Kind::Text, p.line);
        n->text = p.content;
        out.push_back(std::move(n));
        continue;
      }
      if (p.kind == Piece::Kind::Expr) {
        ExprParser e(p.content, p.line);
        auto n = make(Node::Kind::Output, p.line);
        n->expr = e.expression();
        e.expect_end();
        out.push_back(std::move(n));
        continue;
      }
      current_ = std::make_unique<ExprParser>(p.content, p.line);
      const std::string keyword = current_->expect_name();
      for (const std::string& e : ends) {
        if (keyword == e) {
          ended = keyword;
          return out;
        }
      }
      out.push_back(statement(keyword, p.line));
    }
    if (!ends.empty()) fail(pieces_.empty() ? 1 : pieces_.back().line, "missing {% " + ends.back() + " %}");
    return out;
  }

  static std::unique_ptr<Node> make(Node::Kind k, int line) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }

  std::unique_ptr<Node> statement(const std::string& keyword, int line) {
    ExprParser& e = *current_;
    std::string ended;
    if (keyword == "if") {
      auto n = make(Node::Kind::If, line);
      n->conditions.push_back(e.expression());
      e.expect_end();
      for (;;) {
        n->bodies.push_back(body({"elif", "else", "endif"}, ended));
        if (ended == "endif") break;
        ExprParser& tag = *current_;
        if (ended == "elif") {
          n->conditions.push_back(tag.expression());
          tag.expect_end();
        } else {
          tag.expect_end();
          n->bodies.push_back(body({"endif"}, ended));
          break;
        }
      }
      current_->expect_end();
      return n;
    }
    if (keyword == "for") {
      auto n = make(Node::Kind::For, line);
      const bool parens = e.skip_op("(");
      n->targets.push_back(e.expect_name());
      while (e.skip_op(",")) n->targets.push_back(e.expect_name());
      if (parens) e.expect_op(")");
      if (!e.skip_name("in")) fail(e.line(), "expected 'in' in a for loop");
      n->expr = e.tuple(false);
      if (e.skip_name("if")) n->cond = e.expression(false);
      if (e.is_name("recursive")) fail(line, "recursive loops are not supported");
      e.expect_end();
      ++loops_;
      n->bodies.push_back(body({"else", "endfor"}, ended));
      --loops_;
      if (ended == "else") {
        current_->expect_end();
        n->bodies.push_back(body({"endfor"}, ended));
      }
      current_->expect_end();
      return n;
    }
    if (keyword == "set") {
      std::string first = e.expect_name();
      if (e.is_op(".")) {  // set ns.attr = value
        auto n = make(Node::Kind::Set, line);
        auto target = std::make_unique<Expr>();
        target->kind = Expr::Kind::Attr;
        target->line = line;
        auto ns = std::make_unique<Expr>();
        ns->kind = Expr::Kind::Name;
        ns->name = first;
        ns->line = line;
        e.expect_op(".");
        target->name = e.expect_name();
        target->args.push_back(std::move(ns));
        n->target_expr = std::move(target);
        e.expect_op("=");
        n->expr = e.tuple();
        e.expect_end();
        return n;
      }
      std::vector<std::string> targets{first};
      while (e.skip_op(",")) targets.push_back(e.expect_name());
      if (e.skip_op("=")) {
        auto n = make(Node::Kind::Set, line);
        n->targets = std::move(targets);
        n->expr = e.tuple();
        e.expect_end();
        return n;
      }
      if (targets.size() != 1) fail(line, "a set block assigns one name");
      auto n = make(Node::Kind::SetBlock, line);
      n->targets = std::move(targets);
      if (e.is_op("|")) fail(line, "filters on a set block are not supported");
      e.expect_end();
      n->bodies.push_back(body({"endset"}, ended));
      current_->expect_end();
      return n;
    }
    if (keyword == "macro") {
      auto n = make(Node::Kind::Macro, line);
      n->text = e.expect_name();
      e.expect_op("(");
      e.separated(")", [&] {
        n->targets.push_back(e.expect_name());
        n->defaults.push_back(e.skip_op("=") ? e.expression() : nullptr);
      });
      e.expect_end();
      const int loops = std::exchange(loops_, 0);  // a macro's body is in no loop of the caller's
      n->bodies.push_back(body({"endmacro"}, ended));
      loops_ = loops;
      current_->expect_end();
      return n;
    }
    if (keyword == "filter") {
      auto n = make(Node::Kind::FilterBlock, line);
      n->expr = e.filter(nullptr, line);
      while (e.skip_op("|")) n->expr = e.filter(std::move(n->expr), line);
      e.expect_end();
      n->bodies.push_back(body({"endfilter"}, ended));
      current_->expect_end();
      return n;
    }
    if (keyword == "generation") {
      auto n = make(Node::Kind::Generation, line);
      e.expect_end();
      n->bodies.push_back(body({"endgeneration"}, ended));
      current_->expect_end();
      return n;
    }
    if (keyword == "break" || keyword == "continue") {
      if (loops_ == 0) fail(line, "{% " + keyword + " %} outside a loop");
      e.expect_end();
      return make(keyword == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    if (keyword == "raw" || keyword == "call" || keyword == "include" || keyword == "extends" || keyword == "import" ||
        keyword == "from" || keyword == "block" || keyword == "with" || keyword == "autoescape")
      fail(line, "{% " + keyword + " %} is not supported");
    fail(line, "unknown tag '" + keyword + "'");
  }

  std::vector<Piece> pieces_;
  std::size_t pos_ = 0;
  int depth_ = 0;  // blocks being read inside one another
  int loops_ = 0;  // for loops around the statement being read
  std::unique_ptr<ExprParser> current_;  // the statement tag being read
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(split_pieces(source)).parse(); }

}  // namespace kvs::jinja
