// Parsing and applying --script commands.
#include "app/gui/script.h"

#include <sstream>

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

int to_int(const std::string& text, const std::string& command) {
  try {
    size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw input_error("--script", "'" + command + "' expects an integer, got '" + text + "'");
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

void apply_script_command(AppState& app, std::vector<std::unique_ptr<View>>& views, const ScriptCommand& c) {
  const std::string whole = c.verb + (c.arg.empty() ? "" : " " + c.arg);
  if (c.verb == "step") {
    if (!c.arg.empty() && (c.arg[0] == '+' || c.arg[0] == '-')) app.set_step(app.step + to_int(c.arg, whole));
    else app.set_step(to_int(c.arg, whole));
  } else if (c.verb == "select" || c.verb == "runs") {
    std::istringstream in(c.arg);
    std::string a, b, extra;
    if (!(in >> a >> b) || (in >> extra)) throw input_error("--script", "'" + whole + "' expects two integers");
    if (c.verb == "select") {
      app.select_head(to_int(a, whole), to_int(b, whole));
    } else {
      app.run_a = to_int(a, whole);
      app.run_b = to_int(b, whole);
    }
  } else if (c.verb == "layer") {
    app.select_head(to_int(c.arg, whole), app.head);
  } else if (c.verb == "head") {
    app.select_head(app.layer, to_int(c.arg, whole));
  } else if (c.verb == "lanes") {
    if (c.arg != "head" && c.arg != "all") throw input_error("--script", "'" + whole + "' expects head or all");
    app.per_head_lanes = c.arg == "head";
  } else if (c.verb == "compare") {
    app.open_trace(c.arg, true);
    if (!app.last_open_error.empty()) throw InputError(app.last_open_error);
  } else {
    for (auto& v : views)
      if (v->command(app, c.verb, c.arg)) return;
    throw input_error("--script", "unknown command '" + whole + "'");
  }
}

}  // namespace kvs
