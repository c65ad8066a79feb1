// Minimal command-line flag parser for the kvscope subcommands: "--name value", "--switch",
// positional arguments and the flags a command allows more than once; every mistake is an
// InputError naming the flag.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvs {

// `s` as a whole integer in [min_value, max_value]; InputError naming `name` otherwise.
int parse_integer(const std::string& name, const std::string& s, int min_value, int max_value);

class Args {
 public:
  // value_flags take a value; switch_flags do not. Anything else starting with "--" is an error,
  // and so is a flag given twice: a value flag unless it is one of `repeatable` (a second value
  // would silently replace the first), a switch always (a typo or a script's mistake).
  Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
       const std::set<std::string>& switch_flags, const std::set<std::string>& repeatable = {});

  bool has(const std::string& flag) const;
  std::string str(const std::string& flag, const std::string& fallback = "") const;
  std::vector<std::string> all(const std::string& flag) const;  // every occurrence, in order
  std::string required(const std::string& flag) const;
  int integer(const std::string& flag, int fallback, int min_value, int max_value) const;
  double number(const std::string& flag, double fallback, double min_value, double max_value) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace kvs
