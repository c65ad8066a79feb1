// Scripted interaction for tests and screenshots (--script): commands separated by ';'.
//   step N | step+N | step-N    move the timeline        select L H   select (layer, head)
//   layer L | head H            select one of them       runs A B     runs shown/compared
//   lanes head|all              lanes per selected head or aggregated over heads
//   compare PATH                open a second trace in Compare
// Other verbs go to the views (e.g. "log on" for the attention map, "stat entropy", "tau 0.5",
// "filters 3"); an unknown verb is an InputError naming --script.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/gui/app_state.h"

namespace kvs {

class View;

struct ScriptCommand {
  std::string verb;
  std::string arg;  // the rest of the command, trimmed
};

std::vector<ScriptCommand> parse_script(const std::string& script);
void apply_script_command(AppState& app, std::vector<std::unique_ptr<View>>& views, const ScriptCommand& c);

}  // namespace kvs
