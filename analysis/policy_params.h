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
  // Policy::caveat text when integer parameters the spec gives were cut to fit the budget: for
  // each (key, value used), the ones given with another value, e.g. "heavy=40 does not fit the
  // budget of 32: the run keeps heavy 32, recent 0". Empty when none was cut.
  std::string budget_cut(const std::vector<std::pair<std::string, int>>& used) const;

 private:
  const PolicySpec& spec_;
};

}  // namespace kvs
