// `kvscope compare A.h5 B.h5`: a recording against a copy of itself (identical rows), against the
// same story with its rows stored in float16 (apart by the rounding, every row within 1e-3, and
// not all within a tighter --tol), as JSON; a shorter recording of the same prompt (its steps
// compared); a trace of another prompt (its tokens part in it);
// bad input: one path, a file that is not a trace, traces of different prompt lengths — one line,
// exit code 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"

namespace kvs::cli_test {
namespace {

class CliCompare : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = dir_.file("a.h5");
    ASSERT_EQ(record_stories(a_, "Once upon a time", 12).code, 0);
  }
  TempDir dir_;
  std::string a_;
};

TEST_F(CliCompare, ACopyIsIdentical) {
  const std::string b = dir_.file("b.h5");
  std::filesystem::copy_file(a_, b);
  const CliResult r = run_kvscope({"compare", a_, b});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A            " + a_ + ": stories260K on cpu (fp32), 5-token prompt, 12 steps\n"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens       the same 17\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode rows  12 steps compared: identical (480 rows)\n"), std::string::npos) << r.out;
}

TEST_F(CliCompare, Float16RowsAreApartByTheirRounding) {
  const std::string b = dir_.file("b.h5");
  ASSERT_EQ(run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps", "12",
                         "--decode-dtype", "float16", "--out", b, "--quiet", "--threads", "1"})
                .code,
            0);
  const CliResult r = run_kvscope({"compare", a_, b});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("decode rows  12 steps compared: largest difference "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("100.00% of 480 rows within 0.001\n"), std::string::npos) << r.out;
  const CliResult tight = run_kvscope({"compare", a_, b, "--tol", "1e-7"});
  ASSERT_EQ(tight.code, 0) << tight.err;
  EXPECT_EQ(tight.out.find("100.00% of 480 rows"), std::string::npos) << tight.out;
  const CliResult json = run_kvscope({"compare", a_, b, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(count_lines(json.out), 1);
  EXPECT_NE(json.out.find("\"tokens_differ_at\":null"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"steps_compared\":12"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"rows\":480"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"device_dtype_a\":\"fp32\""), std::string::npos) << json.out;
  // The rows' storage is said: both ran on the CPU in fp32, and B's rows were rounded after.
  EXPECT_NE(json.out.find("\"decode_dtype_b\":\"float16\""), std::string::npos) << json.out;
  EXPECT_NE(r.out.find("12 steps, rows stored in float16\n"), std::string::npos) << r.out;
  // float16 keeps 11 bits: a probability moves by at most 2^-12 of itself.
  const std::size_t at = json.out.find("\"largest_difference\":");
  ASSERT_NE(at, std::string::npos);
  const double largest = std::stod(json.out.substr(at + 21));
  EXPECT_GT(largest, 0.0);
  EXPECT_LE(largest, 2.5e-4);
}

// A shorter recording of the same prompt: its tokens are the longer one's first, and its steps
// compare.
TEST_F(CliCompare, AShorterRecordingComparesItsSteps) {
  const std::string b = dir_.file("b.h5");
  ASSERT_EQ(record_stories(b, "Once upon a time", 4).code, 0);
  const CliResult r = run_kvscope({"compare", a_, b});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokens       the first 9 the same (of 17 and 9)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode rows  4 steps compared: identical (160 rows)\n"), std::string::npos) << r.out;
}

// A prompt of the same length whose last token differs: no decode step sees the same tokens in
// both.
TEST_F(CliCompare, AnotherPromptPartsBeforeTheFirstStep) {
  const std::string b = dir_.file("b.h5");
  ASSERT_EQ(record_stories(b, "Once upon a day", 12).code, 0);
  const CliResult r = run_kvscope({"compare", a_, b});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokens       first differ at position 4 (of 17 and 17)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode rows  no step with the same tokens up to its query in both\n"), std::string::npos)
      << r.out;
  // Nothing compared is no difference to give, not a difference of 0.
  const CliResult json = run_kvscope({"compare", a_, b, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_NE(json.out.find("\"steps_compared\":0,\"largest_difference\":null,\"worst\":null"), std::string::npos)
      << json.out;
}

TEST_F(CliCompare, BadInputIsOneLineAndExitTwo) {
  EXPECT_TRUE(is_input_error(run_kvscope({"compare", a_}), "compare", "expects two trace paths"));
  const std::string text = dir_.file("notes.txt");
  write_bytes(text, "not a trace\n");
  EXPECT_TRUE(is_input_error(run_kvscope({"compare", a_, text}), text, "HDF5"));
  const std::string longer = dir_.file("longer.h5");
  ASSERT_EQ(record_stories(longer, "Once upon a time there", 4).code, 0);
  EXPECT_TRUE(is_input_error(run_kvscope({"compare", a_, longer}), longer,
                             "not comparable with " + a_ + ": the prompts differ in length (5 and 6 tokens)"));
  EXPECT_TRUE(is_input_error(run_kvscope({"compare", a_, a_, "--tol", "2"}), "--tol", ""));
}

}  // namespace
}  // namespace kvs::cli_test
