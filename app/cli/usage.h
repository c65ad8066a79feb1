// The CLI's help texts: the synopsis of every command (`kvscope help`), and each command's flags
// with their defaults (`kvscope help COMMAND`, `kvscope COMMAND --help`).
#pragma once
#include <string>

namespace kvs {

// Every command on one or two lines.
const char* usage_summary();
// One command's synopsis and flags; nullptr for a name that is not a command.
const char* command_help(const std::string& command);

}  // namespace kvs
