// Flag parsing for the kvscope command line.
#include "app/cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "inference/errors.h"

namespace kvs {

namespace {

// "0.000001" -> "1e-06", "100.000000" -> "100": a bound as a reader would write it.
std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
           const std::set<std::string>& switch_flags, const std::set<std::string>& repeatable) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string name = a, value;
      bool inline_value = false;
      if (auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
      if (value_flags.count(name)) {
        if (!inline_value) {
          if (i + 1 >= argv.size()) throw input_error(name, "expects a value");
          // "--prompt --steps 3": the value was left out, and the next flag is not it.
          const std::string& next = argv[i + 1];
          const std::string next_name = next.substr(0, next.find('='));
          if (value_flags.count(next_name) || switch_flags.count(next_name))
            throw input_error(name, "expects a value, got the flag " + next_name + " (for a value that starts with "
                                    "--, write " + name + "=VALUE)");
          value = argv[++i];
        }
        if (values_.count(name) && !repeatable.count(name)) {
          const std::string& first = values_[name].back();
          const bool show = first.size() + value.size() <= 200 && (first + value).find('\n') == std::string::npos;
          throw input_error(name, "given twice" + (show ? " ('" + first + "', then '" + value + "')" : std::string()));
        }
        values_[name].push_back(value);
      } else if (switch_flags.count(name)) {
        if (inline_value) throw input_error(name, "takes no value");
        if (values_.count(name)) throw input_error(name, "given twice");
        values_[name].push_back("1");
      } else {
        throw input_error(name, "unknown option");
      }
    } else {
      positional_.push_back(a);
    }
  }
}

bool Args::has(const std::string& flag) const { return values_.count(flag) > 0; }

std::string Args::str(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::all(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::required(const std::string& flag) const {
  if (!has(flag)) throw input_error(flag, "is required");
  return str(flag);
}

int parse_integer(const std::string& name, const std::string& s, int min_value, int max_value) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE)
    throw input_error(name, "expected an integer, got '" + s + "'");
  if (v < min_value || v > max_value)
    throw input_error(name, std::to_string(v) + " is outside [" + std::to_string(min_value) + ", " +
                                std::to_string(max_value) + "]");
  return static_cast<int>(v);
}

int Args::integer(const std::string& flag, int fallback, int min_value, int max_value) const {
  return has(flag) ? parse_integer(flag, str(flag), min_value, max_value) : fallback;
}

double Args::number(const std::string& flag, double fallback, double min_value, double max_value) const {
  if (!has(flag)) return fallback;
  const std::string s = str(flag);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v))
    throw input_error(flag, "expected a number, got '" + s + "'");
  if (v < min_value || v > max_value)
    throw input_error(flag, s + " is outside [" + shortest(min_value) + ", " + shortest(max_value) + "]");
  return v;
}

}  // namespace kvs
