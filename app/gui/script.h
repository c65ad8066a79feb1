// Scripted interaction for tests and screenshots (--script): commands separated by ';'.
//   step N | step+N | step-N    move the timeline        select L H   select (layer, head)
//   layer L | head H            select one of them       runs A B     runs shown/compared
//   lanes head|all              lanes per selected head or aggregated over heads
//   compare PATH                open a second trace in Compare
//   hover X Y | click X Y       screenshots only: the mouse at pixel (X, Y) of the window (the
//   dclick X Y | rclick X Y     PNG's; 0 0 top left) for the frames after; click presses and
//   ctrlclick X Y               releases the left button there (ctrlclick with Ctrl held),
//   wheel X Y N                 dclick twice, rclick the right one; wheel turns N notches (+:
//   drag X1 Y1 X2 Y2            away from the user), drag moves with the left button down;
//   key NAME | type TEXT        a key pressed and released, text typed (script_input.h, shell.cpp)
//   tile | alone VIEW           View's layouts (shell.cpp)  resize WxH  screenshots only: the window
//   text-size PX                View > Text size (shell.cpp)
// Other verbs go to the views (e.g. "log on" for the attention map, "stat entropy", "tau 0.5",
// "filters 3"); an unknown verb, or a value out of range or not among the choices, is an
// InputError naming --script and the command.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/app_state.h"
#include "inference/errors.h"

namespace kvs {

class View;

struct ScriptCommand {
  std::string verb;
  std::string arg;  // the rest of the command, trimmed
};

std::vector<ScriptCommand> parse_script(const std::string& script);
// The --step flag: moves to decode step `step` of the open trace (-1, as when it is absent,
// leaves the trace at its last step). A step the trace does not have, or a step without a
// trace, is an InputError naming the flag, as the script's `step N` refuses it.
void apply_step_flag(AppState& app, int step);
void apply_script_command(AppState& app, std::vector<std::unique_ptr<View>>& views, const ScriptCommand& c);

// Checked arguments of a command "verb arg" (the views' commands use them too); a bad one is an
// InputError "--script: 'verb arg' expects ...".
int script_int(const std::string& verb, const std::string& arg, int lo, int hi);
// The two integers of "verb A B", within lo_a..hi_a and lo_b..hi_b.
std::pair<int, int> script_int_pair(const std::string& verb, const std::string& arg, int lo_a, int hi_a, int lo_b,
                                    int hi_b);
// The n integers of "verb A B ...", each within lo..hi.
std::vector<int> script_ints(const std::string& verb, const std::string& arg, int n, int lo, int hi);
float script_number(const std::string& verb, const std::string& arg, float lo, float hi);
// `arg` when it is one of `choices`.
const std::string& script_choice(const std::string& verb, const std::string& arg, std::initializer_list<const char*> choices);
// The open trace for the command "verb arg", or an InputError saying it needs one.
const TraceSnapshot& script_trace(const AppState& app, const std::string& verb, const std::string& arg);
// An InputError "--script: 'verb arg' <problem>" ("'verb arg': ..." for a problem that starts
// with ':').
InputError script_error(const std::string& verb, const std::string& arg, const std::string& problem);

}  // namespace kvs
