// Parsing a Jinja template (the subset chat templates use) into a tree, with the white-space
// handling transformers renders chat templates with: trim_blocks (the newline after a block or
// comment tag dropped), lstrip_blocks (spaces and tabs before a block or comment tag on its own
// line dropped), and '-' / '+' inside tags.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inference/jinja_value.h"

namespace kvs::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    Attr,      // a.name: args[0], name
    Item,      // a[b]: args[0], args[1]
    Slice,     // a[b:c:d]: args[0..3] (null where omitted)
    Call,      // f(args..., kw=...): args[0] the callee, then the positional arguments; kwargs
    Filter,    // a | name(args...): args[0] the value (null in a filter block), then the arguments
    Test,      // a is [not] name(args...): args[0] the value, then the arguments; negated
    Not,       // not args[0]
    Negate,    // -args[0]
    Binary,    // args[0] op args[1]: name is the operator ("+", "==", "and", "in", "not in", ...)
    Cond,      // args[1] if args[0] else args[2] (args[2] null: undefined)
    List,      // [args...]
    Tuple,     // (args...)
    Dict,      // {keys[i]: args[i]}
  };
  Kind kind = Kind::Literal;
  int line = 1;
  Value value;                 // Literal
  std::string name;            // Name, Attr, Filter, Test, Binary
  std::vector<ExprPtr> args;   // see above
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call, Filter, Test keyword arguments
  std::vector<ExprPtr> keys;   // Dict
  bool negated = false;        // Test
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    Text,        // text
    Output,      // {{ expr }}
    If,          // conditions[i] -> bodies[i]; bodies.back() is else's when it has one more
    For,         // for targets in expr [if cond]: bodies[0], else bodies[1]
    Set,         // set targets = expr, or set expr(an Attr of a namespace) = value: target_expr
    SetBlock,    // set targets[0] %}bodies[0]{% endset
    Macro,       // macro name(params = defaults) bodies[0]
    FilterBlock, // filter expr(a Filter chain on null) bodies[0]
    Break,
    Continue,
    Generation,  // transformers' {% generation %}bodies[0]{% endgeneration %}
  };
  Kind kind = Kind::Text;
  int line = 1;
  std::string text;                  // Text; Macro: its name
  ExprPtr expr;                      // Output, For (iterable), Set (value), FilterBlock
  ExprPtr cond;                      // For's filter
  ExprPtr target_expr;               // Set of a namespace attribute
  std::vector<std::string> targets;  // For, Set, SetBlock; Macro: parameter names
  std::vector<ExprPtr> defaults;     // Macro: a default per parameter (null where none)
  std::vector<ExprPtr> conditions;   // If
  std::vector<Body> bodies;
};

// The template's tree; throws Error ("line N: ...") where it is not valid Jinja or uses what the
// subset does not have (include, extends, import, call blocks, recursive loops, raw blocks).
Body parse_template(const std::string& source);

}  // namespace kvs::jinja
