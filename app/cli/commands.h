// The kvscope subcommands. Each takes the arguments after its name and returns the exit code;
// bad input surfaces as InputError, which main() prints as one line and turns into exit code 2.
#pragma once
#include <string>
#include <vector>

namespace kvs {

using ArgList = std::vector<std::string>;

int cmd_record(const ArgList& args);
int cmd_info(const ArgList& args);
int cmd_simulate(const ArgList& args);
int cmd_layers(const ArgList& args);
int cmd_heads(const ArgList& args);
int cmd_rerun(const ArgList& args);
int cmd_compare(const ArgList& args);
int cmd_tokenize(const ArgList& args);

}  // namespace kvs
