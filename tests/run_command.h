// Test support: runs a shell command and returns what it printed (stdout and stderr), with
// "(exit status N)" appended when it fails — for the tests that cross-check with Python.
#pragma once
#include <cstdio>
#include <string>

namespace kvs::test {

inline std::string run_command(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = ::pclose(p);
  if (status != 0) out += "(exit status " + std::to_string(status) + ")";
  return out;
}

}  // namespace kvs::test
