// Policy specs ("name:key=value,...") and the registry that builds every policy by CLI name.
#include "analysis/policy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "analysis/policy_adakv.h"
#include "analysis/policy_duoattention.h"
#include "analysis/policy_full.h"
#include "analysis/policy_h2o.h"
#include "analysis/policy_kvzip.h"
#include "analysis/policy_omnikv.h"
#include "analysis/policy_pyramidkv.h"
#include "analysis/policy_snapkv.h"
#include "analysis/policy_streamingllm.h"
#include "analysis/policy_strided.h"
#include "analysis/policy_tova.h"
#include "analysis/policy_window.h"
#include "inference/errors.h"
#include "inference/json.h"

namespace kvs {
namespace {

using Factory = std::unique_ptr<Policy> (*)(const PolicySpec&, const ModelShape&);
struct Entry {
  const char* name;
  Factory make;
};
constexpr Entry kRegistry[] = {
    {"full", make_full_policy},         {"window", make_window_policy},
    {"streamingllm", make_streamingllm_policy}, {"strided", make_strided_policy},
    {"h2o", make_h2o_policy},           {"tova", make_tova_policy},
    {"snapkv", make_snapkv_policy},     {"pyramidkv", make_pyramidkv_policy},
    {"adakv", make_adakv_policy},       {"kvzip", make_kvzip_policy},
    {"duoattention", make_duoattention_policy}, {"omnikv", make_omnikv_policy},
};

// A parameter value as part of an HDF5 link name: an integer as written canonically, else the
// last path component, with characters other than letters, digits, '.' and '-' replaced by '-'.
std::string name_part(const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long number = std::strtol(value.c_str(), &end, 10);
  if (!value.empty() && *end == '\0' && errno == 0) return std::to_string(number);  // "+4" and "04" name as "4"
  std::string v = value;
  while (v.size() > 1 && v.back() == '/') v.pop_back();
  const size_t slash = v.find_last_of('/');
  if (slash != std::string::npos && slash + 1 < v.size()) v = v.substr(slash + 1);
  for (char& c : v)
    if (!std::isalnum((unsigned char)c) && c != '.' && c != '-') c = '-';
  return v;
}

}  // namespace

std::string PolicySpec::run_name() const {
  std::string out = name;
  for (const auto& [k, v] : params) out += "_" + k + name_part(v);
  if (name != "full") out += "_b" + std::to_string(budget);
  return out;
}

namespace {

// The "key=value,..." after the name's colon into spec.params; budget=N into spec.budget.
template <class Fail>
void parse_params(const std::string& rest, PolicySpec& spec, const Fail& fail) {
  if (rest.empty()) throw fail("no parameters after ':'");
  std::string last_key;
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t comma = rest.find(',', start);
    const std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      // "filters=2,8,18": an item without '=' continues the previous value.
      if (last_key.empty() || item.empty()) throw fail("expected key=value, got '" + item + "'");
      spec.params[last_key] += "," + item;
    } else {
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      if (key.empty()) throw fail("empty parameter name in '" + item + "'");
      if (value.empty()) throw fail("empty value for '" + key + "'");
      if (spec.params.count(key))
        throw fail("parameter '" + key + "' given twice");
      spec.params[key] = value;
      last_key = key;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto b = spec.params.find("budget");
  if (b != spec.params.end()) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(b->second.c_str(), &end, 10);
    if (b->second.empty() || *end != '\0') throw fail("budget must be an integer (got '" + b->second + "')");
    if (errno == ERANGE || v < 1 || v > (1L << 30))
      throw fail("budget " + b->second + " is outside [1, " + std::to_string(1L << 30) + "]");
    spec.budget = (int)v;
    spec.params.erase(b);
    if (spec.name == "omnikv" && spec.params.count("frac"))
      throw fail("give budget or frac (a fraction of the prompt), not both");
  }
}

}  // namespace

PolicySpec parse_policy_spec(const std::string& text, int budget) {
  PolicySpec spec;
  spec.budget = budget;
  const size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  auto fail = [&](const std::string& problem) { return input_error("--policy " + text, problem); };
  if (spec.name.empty()) throw fail("missing policy name");
  if (colon != std::string::npos) parse_params(text.substr(colon + 1), spec, fail);
  if (spec.name == "full") spec.budget = 0;  // holds everything: a budget given beside it is not its
  // OmniKV's filter layers are a set: filters=4,2 is filters=2,4's run, and named as it is.
  if (auto f = spec.params.find("filters"); spec.name == "omnikv" && f != spec.params.end()) {
    std::vector<long> layers;
    for (size_t start = 0; start <= f->second.size();) {
      const size_t comma = std::min(f->second.find(',', start), f->second.size());
      const std::string item = f->second.substr(start, comma - start);
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0') return spec;  // not a list of layers: the policy says what is wrong
      layers.push_back(v);
      start = comma + 1;
    }
    std::sort(layers.begin(), layers.end());
    std::string sorted;
    for (long v : layers) {
      if (!sorted.empty()) sorted += ',';
      sorted += std::to_string(v);
    }
    f->second = sorted;
  }
  return spec;
}

std::unique_ptr<Policy> make_policy(const PolicySpec& spec, const ModelShape& shape) {
  for (const Entry& e : kRegistry) {
    if (spec.name != e.name) continue;
    if (spec.name != "full" && spec.budget <= 0)
      throw input_error("--policy " + spec.name, "budget must be positive (got " + std::to_string(spec.budget) + ")");
    return e.make(spec, shape);
  }
  std::string known;
  for (const Entry& e : kRegistry) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw input_error("--policy " + spec.name, "unknown policy (known: " + known + ")");
}

std::vector<std::string> policy_names() {
  std::vector<std::string> out;
  for (const Entry& e : kRegistry) out.push_back(e.name);
  return out;
}

std::string resolved_params_text(const PolicySpec& spec, const ModelShape& shape) {
  const Json params = Json::parse(make_policy(spec, shape)->params_json(), spec.name + " parameters");
  auto text = [](const Json& v) {
    if (v.is_string()) return v.as_string();
    if (v.is_bool()) return std::string(v.as_bool() ? "true" : "false");
    char number[32];
    std::snprintf(number, sizeof number, "%g", v.as_number());
    return std::string(number);
  };
  std::string kv;
  for (std::size_t i = 0; i < params.keys().size(); ++i) {
    const Json& v = params.items()[i];
    std::string value;
    if (v.is_array()) {
      for (const Json& item : v.items()) {
        if (!value.empty()) value += ',';
        value += text(item);
      }
    } else {
      value = text(v);
    }
    if (value.empty()) continue;  // resolved later (e.g. where DuoAttention's gates come from)
    try {  // left out: what the run derives (OmniKV's k, DuoAttention's count of retrieval heads)
      make_policy(PolicySpec{spec.name, {{params.keys()[i], value}}, spec.budget}, shape);
    } catch (const InputError&) {
      continue;
    }
    if (!kv.empty()) kv += ',';
    kv.append(params.keys()[i]).append("=").append(value);
  }
  return kv;
}

}  // namespace kvs
