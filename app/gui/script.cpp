// Parsing and applying --script commands.
#include "app/gui/script.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "app/views/view.h"
#include "inference/errors.h"

namespace kvs {
namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\n");
  return s.substr(a, b - a + 1);
}

}  // namespace

std::vector<ScriptCommand> parse_script(const std::string& script) {
  std::vector<ScriptCommand> out;
  std::stringstream ss(script);
  for (std::string part; std::getline(ss, part, ';');) {
    part = trim(part);
    if (part.empty()) continue;
    ScriptCommand c;
    if (part.rfind("step+", 0) == 0 || part.rfind("step-", 0) == 0) {
      c.verb = "step";
      c.arg = trim(part.substr(4));
    } else {
      const size_t sp = part.find_first_of(" \t");
      c.verb = part.substr(0, sp);
      c.arg = sp == std::string::npos ? "" : trim(part.substr(sp));
    }
    out.push_back(c);
  }
  return out;
}

InputError script_error(const std::string& verb, const std::string& arg, const std::string& problem) {
  return input_error("--script", "'" + verb + (arg.empty() ? "" : " " + arg) + "'" + (problem[0] == ':' ? "" : " ") + problem);
}

namespace {

// `text`, one of the integers of the command "verb arg", within lo..hi.
int command_int(const std::string& verb, const std::string& arg, const std::string& text, int lo, int hi) {
  long v = 0;
  try {
    size_t used = 0;
    v = std::stol(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    throw script_error(verb, arg, "expects an integer, not '" + text + "'");
  }
  if (v < lo || v > hi)
    throw script_error(verb, arg, ": " + text + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return (int)v;
}

// The n words of the command "verb arg" (integers to be), or an InputError saying how many it
// expects.
std::vector<std::string> command_words(const std::string& verb, const std::string& arg, int n) {
  static const char* const kCount[] = {"no", "one", "two", "three", "four", "five"};
  std::istringstream in(arg);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if ((int)words.size() != n)
    throw script_error(verb, arg, "expects " + (n <= 5 ? std::string(kCount[n]) : std::to_string(n)) + " integers");
  return words;
}

}  // namespace

int script_int(const std::string& verb, const std::string& arg, int lo, int hi) {
  return command_int(verb, arg, arg, lo, hi);
}

std::pair<int, int> script_int_pair(const std::string& verb, const std::string& arg, int lo_a, int hi_a, int lo_b,
                                    int hi_b) {
  const std::vector<std::string> w = command_words(verb, arg, 2);
  return {command_int(verb, arg, w[0], lo_a, hi_a), command_int(verb, arg, w[1], lo_b, hi_b)};
}

std::vector<int> script_ints(const std::string& verb, const std::string& arg, int n, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& w : command_words(verb, arg, n)) out.push_back(command_int(verb, arg, w, lo, hi));
  return out;
}

float script_number(const std::string& verb, const std::string& arg, float lo, float hi) {
  float v = 0.0f;
  try {
    size_t used = 0;
    v = std::stof(arg, &used);
    if (used != arg.size() || !std::isfinite(v)) throw std::invalid_argument(arg);
  } catch (const std::exception&) {
    throw script_error(verb, arg, "expects a number, not '" + arg + "'");
  }
  if (v < lo || v > hi) {
    char range[64];
    std::snprintf(range, sizeof range, "%g..%g", lo, hi);
    throw script_error(verb, arg, std::string(": ") + arg + " is outside " + range);
  }
  return v;
}

const std::string& script_choice(const std::string& verb, const std::string& arg,
                                 std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* c : choices) {
    if (arg == c) return arg;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw script_error(verb, arg, "expects one of " + list);
}

void apply_step_flag(AppState& app, int step) {
  if (step < 0) return;
  if (!app.trace) throw input_error("--step", "needs a trace to open (kvscope gui TRACE.h5 --step N)");
  const int last = app.trace->n_steps() - 1;
  if (last < 0) throw input_error("--step", std::to_string(step) + ": the trace has no decode steps");
  if (step > last)
    throw input_error("--step", std::to_string(step) + " is outside 0.." + std::to_string(last) + " (the trace has " +
                                    std::to_string(last + 1) + " decode steps)");
  app.set_step(step);
}

const TraceSnapshot& script_trace(const AppState& app, const std::string& verb, const std::string& arg) {
  if (!app.trace) throw script_error(verb, arg, "needs an open trace");
  return *app.trace;
}

void apply_script_command(AppState& app, std::vector<std::unique_ptr<View>>& views, const ScriptCommand& c) {
  // The trace commands below need one open, and check their numbers against it.
  const auto trace = [&]() -> const TraceSnapshot& { return script_trace(app, c.verb, c.arg); };
  if (c.verb == "step") {
    const int last = trace().n_steps() - 1;
    if (last < 0) throw script_error(c.verb, c.arg, "needs decode steps (the trace has none)");
    const bool relative = !c.arg.empty() && (c.arg[0] == '+' || c.arg[0] == '-');
    const int to = relative ? app.step + script_int(c.verb, c.arg, -(1 << 30), 1 << 30) : script_int(c.verb, c.arg, 0, last);
    if (to < 0 || to > last) throw script_error(c.verb, c.arg, "moves to step " + std::to_string(to) + ", outside 0.." + std::to_string(last));
    app.set_step(to);
  } else if (c.verb == "select") {
    const ModelShape& m = trace().meta.shape;
    const auto [layer, head] = script_int_pair(c.verb, c.arg, 0, m.n_layers - 1, 0, m.n_heads - 1);
    app.select_head(layer, head);
  } else if (c.verb == "runs") {
    const TraceSnapshot& t = trace();
    if (t.runs.empty()) throw script_error(c.verb, c.arg, "needs runs (the trace has none)");
    const int n = (int)t.runs.size() - 1;
    std::tie(app.run_a, app.run_b) = script_int_pair(c.verb, c.arg, 0, n, 0, n);
  } else if (c.verb == "layer") {
    app.select_head(script_int(c.verb, c.arg, 0, trace().meta.shape.n_layers - 1), app.head);
  } else if (c.verb == "head") {
    app.select_head(app.layer, script_int(c.verb, c.arg, 0, trace().meta.shape.n_heads - 1));
  } else if (c.verb == "lanes") {
    app.per_head_lanes = script_choice(c.verb, c.arg, {"head", "all"}) == "head";
  } else if (c.verb == "compare") {
    app.open_trace(c.arg, true);
    if (!app.last_open_error.empty()) throw InputError(app.last_open_error);
  } else {
    // `mode` belongs to two views (Compare: runs|traces, Run: forced|free): a value neither takes
    // is a bad value, not an unknown command.
    if (c.verb == "mode") script_choice(c.verb, c.arg, {"runs", "traces", "forced", "free"});
    for (auto& v : views)
      if (v->command(app, c.verb, c.arg)) return;
    throw script_error(c.verb, c.arg, "is not a command (docs/gui.md lists them)");
  }
}

}  // namespace kvs
