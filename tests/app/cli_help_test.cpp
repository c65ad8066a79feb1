// `kvscope help`, `kvscope help COMMAND` and `kvscope COMMAND --help`: every command has its
// help, every flag a help text names is one the command accepts, and an unknown command is a
// one-line error.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "cli_util.h"

namespace kvs::cli_test {
namespace {

const char* const kCommands[] = {"gui",   "record", "info",    "simulate", "layers",
                                 "heads", "rerun",  "compare", "tokenize"};

std::set<std::string> flags_in(const std::string& text) {
  std::set<std::string> flags;
  const std::regex flag("--[a-z][a-z0-9-]*");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag); it != std::sregex_iterator(); ++it)
    flags.insert(it->str());
  return flags;
}

TEST(CliHelp, SummaryNamesEveryCommand) {
  const CliResult r = run_kvscope({"help"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* c : kCommands) {
    const std::string shown = std::string(c) == "gui" ? "kvscope [gui" : std::string("kvscope ") + c;
    EXPECT_NE(r.out.find(shown), std::string::npos) << c;
  }
  EXPECT_EQ(run_kvscope({"--help"}).out, r.out);
}

TEST(CliHelp, EachCommandHasItsFlagsAndTheCommandAcceptsThem) {
  for (const char* c : kCommands) {
    SCOPED_TRACE(c);
    const CliResult help = run_kvscope({"help", c});
    ASSERT_EQ(help.code, 0) << help.err;
    EXPECT_EQ(help.out.rfind("usage: kvscope ", 0), 0u) << help.out;
    const std::set<std::string> flags = flags_in(help.out);
    EXPECT_GE(flags.size(), 2u) << help.out;
    if (std::string(c) == "gui") continue;  // the app would open a window: its flags are tested in gui_*_test
    const CliResult same = run_kvscope({c, "--help"});
    EXPECT_EQ(same.code, 0) << same.err;
    EXPECT_EQ(same.out, help.out);
    // All of them at once: the command fails for other reasons (no model, no trace), never for
    // an unknown flag.
    std::vector<std::string> args{c};
    for (const std::string& f : flags) args.insert(args.end(), {f, "x"});
    const CliResult r = run_kvscope(args);
    EXPECT_EQ(r.err.find("unknown option"), std::string::npos) << r.err;
    const CliResult bogus = run_kvscope({c, "--no-such-flag", "x"});
    EXPECT_EQ(bogus.code, 2);
    EXPECT_NE(bogus.err.find("--no-such-flag: unknown option"), std::string::npos) << bogus.err;
  }
}

TEST(CliHelp, UnknownCommandIsOneLine) {
  const CliResult r = run_kvscope({"help", "frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kvscope: frobnicate: no such command (kvscope help lists them)\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace kvs::cli_test
