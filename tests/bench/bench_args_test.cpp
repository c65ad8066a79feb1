// The benchmarks' command lines (bench/bench_args.h): counts read strictly (kvs::parse_integer, as
// kvscope's flags), extra arguments refused, and a bad input printed as one line naming it with
// exit code 2.
#include "bench/bench_args.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

// The InputError message f throws, or "" when it throws none.
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const kvs::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(BenchArgs, CountsAreWholeIntegersInRange) {
  EXPECT_EQ(kvs::parse_integer("steps", "12", 1, 100), 12);
  EXPECT_EQ(kvs::parse_integer("steps", "100", 1, 100), 100);
  EXPECT_EQ(input_error_of([] { kvs::parse_integer("steps", "12x", 1, 100); }),
            "steps: expected an integer, got '12x'");
  EXPECT_EQ(input_error_of([] { kvs::parse_integer("steps", "", 1, 100); }), "steps: expected an integer, got ''");
  EXPECT_EQ(input_error_of([] { kvs::parse_integer("steps", "0", 1, 100); }), "steps: 0 is outside [1, 100]");
  EXPECT_EQ(input_error_of([] { kvs::parse_integer("steps", "99999999999999999999", 1, 100); }),
            "steps: expected an integer, got '99999999999999999999'");
}

TEST(BenchArgs, PositionalCountsFallBackAndExtraArgumentsAreRefused) {
  char prog[] = "bench_x", a1[] = "7", a2[] = "more";
  char* argv[] = {prog, a1, a2, nullptr};
  EXPECT_EQ(bench::count_arg(2, argv, 1, "rounds", 20, 1, 100), 7);
  EXPECT_EQ(bench::count_arg(1, argv, 1, "rounds", 20, 1, 100), 20);  // absent: the default
  EXPECT_EQ(input_error_of([&] { bench::at_most(3, argv, 2, "bench_x [rounds] [path]"); }), "");
  EXPECT_EQ(input_error_of([&] { bench::at_most(3, argv, 1, "bench_x [rounds]"); }),
            "more: unexpected (usage: bench_x [rounds])");
}

TEST(BenchArgs, RunMainPrintsABadInputAsOneLineAndExitsWithTwo) {
  EXPECT_EQ(bench::run_main("bench_x", [] { return 0; }), 0);
  testing::internal::CaptureStderr();
  EXPECT_EQ(bench::run_main("bench_x", []() -> int { throw kvs::input_error("--steps", "0 is outside [1, 9]"); }), 2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "bench_x: --steps: 0 is outside [1, 9]\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(bench::run_main("bench_x", []() -> int { throw std::runtime_error("out of memory"); }), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "bench_x: out of memory\n");
}
