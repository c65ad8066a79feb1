// The benchmarks' command lines, held to kvscope's rule for bad input: a count is a whole integer
// in its range, and a benchmark's main runs inside run_main, which prints a bad input as one line
// naming it ("bench_x: steps: expected an integer, got 'abc'") and exits with code 2.
#pragma once
#include <cstdio>
#include <exception>
#include <string>

#include "app/cli/args.h"
#include "inference/errors.h"

namespace bench {

// Positional argument i (argv[i]) as a whole integer in [lo, hi] (kvs::parse_integer, as kvscope
// reads its flags), or `fallback` when there are fewer.
inline int count_arg(int argc, char** argv, int i, const std::string& name, int fallback, int lo, int hi) {
  return i < argc ? kvs::parse_integer(name, argv[i], lo, hi) : fallback;
}

// InputError when argv holds more than n arguments (`usage` says which).
inline void at_most(int argc, char** argv, int n, const std::string& usage) {
  if (argc - 1 > n) throw kvs::input_error(argv[n + 1], "unexpected (usage: " + usage + ")");
}

// body()'s exit code; a bad input (InputError) is one line on stderr and code 2, any other
// failure one line and code 1.
template <class F>
int run_main(const char* program, F&& body) {
  try {
    return body();
  } catch (const kvs::InputError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace bench
