// Typed access to a policy's key=value parameters (rejecting unknown keys with one-line errors).
#pragma once
#include <string>
#include <vector>

#include "analysis/json_writer.h"
#include "analysis/policy.h"
#include "inference/errors.h"

namespace kvs {

class ParamReader {
 public:
  // Throws InputError("--policy NAME: unknown parameter 'foo' (known: a, b)") for a key not in
  // `known`.
  ParamReader(const PolicySpec& spec, std::vector<std::string> known);
  bool has(const std::string& key) const;
  int get_int(const std::string& key, int fallback) const;
  double get_double(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // Comma-separated integers, e.g. "2,8,18".
  std::vector<int> get_int_list(const std::string& key) const;
  // InputError "--policy NAME: <problem>".
  InputError error(const std::string& problem) const;

 private:
  const PolicySpec& spec_;
};


}  // namespace kvs
