// Parameter parsing for policies and the JSON writer of their resolved parameters.
#include "analysis/policy_params.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "inference/errors.h"

namespace kvs {

ParamReader::ParamReader(const PolicySpec& spec, std::vector<std::string> known) : spec_(spec) {
  for (const auto& [k, v] : spec.params) {
    bool ok = false;
    for (const auto& n : known) ok = ok || n == k;
    if (ok) continue;
    std::string list;
    for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
    throw error("unknown parameter '" + k + "' (known: " + (list.empty() ? "none" : list) + ")");
  }
}

InputError ParamReader::error(const std::string& problem) const {
  return input_error("--policy " + spec_.name, problem);
}

std::string ParamReader::budget_cut(const std::vector<std::pair<std::string, int>>& used) const {
  std::string cut, kept;
  for (const auto& [key, value] : used) {
    kept += (kept.empty() ? "" : ", ") + key + " " + std::to_string(value);
    if (has(key) && get_int(key, value) != value) cut += (cut.empty() ? "" : ", ") + key + "=" + std::to_string(get_int(key, value));
  }
  if (cut.empty()) return {};
  return cut + " does not fit the budget of " + std::to_string(spec_.budget) + ": the run keeps " + kept;
}

bool ParamReader::has(const std::string& key) const { return spec_.params.count(key) > 0; }

int ParamReader::get_int(const std::string& key, int fallback) const {
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return fallback;
  const char* s = it->second.c_str();
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0 || v < -1000000000L || v > 1000000000L)
    throw error("parameter '" + key + "' must be an integer (got '" + it->second + "')");
  return (int)v;
}

double ParamReader::get_double(const std::string& key, double fallback) const {
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return fallback;
  const char* s = it->second.c_str();
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (it->second.empty() || *end != '\0' || !std::isfinite(v))
    throw error("parameter '" + key + "' must be a number (got '" + it->second + "')");
  return v;
}

std::string ParamReader::get_string(const std::string& key, const std::string& fallback) const {
  auto it = spec_.params.find(key);
  return it == spec_.params.end() ? fallback : it->second;
}

std::vector<int> ParamReader::get_int_list(const std::string& key) const {
  std::vector<int> out;
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return out;
  const std::string& text = it->second;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0')
      throw error("parameter '" + key + "' must be a comma-separated list of integers (got '" + text + "')");
    out.push_back((int)v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace kvs
