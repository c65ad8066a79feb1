// kvscope: the desktop app (no subcommand, or `gui`) and the headless command line.
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/usage.h"
#include "inference/errors.h"
#include "inference/host_memory.h"
#include "inference/thread_team.h"
#ifdef KVSCOPE_GUI
#include "app/gui/gui.h"
#include "app/gui/text_size.h"
#endif

namespace {

int run_gui_command(const std::vector<std::string>& args) {
#ifdef KVSCOPE_GUI
  kvs::Args a(args, {"--screenshot", "--view", "--step", "--size", "--script", "--model", "--text-size"}, {});
  kvs::GuiOptions o;
  if (a.positional().size() > 1) throw kvs::input_error("gui", "expects at most one trace file");
  if (!a.positional().empty()) o.trace_path = a.positional()[0];
  o.screenshot_path = a.str("--screenshot");
  o.view = a.str("--view");
  if (a.has("--view") && !a.has("--screenshot"))  // the app itself shows every view
    throw kvs::input_error("--view", "chooses what --screenshot renders; the app shows every view (View menu)");
  o.step = a.integer("--step", -1, 0, 1 << 30);  // -1: where the app opens
  o.script = a.str("--script");
  o.model_path = a.str("--model");
  if (a.has("--text-size")) o.text_size = kvs::parse_text_size("--text-size", a.str("--text-size"));
  if (a.has("--size")) {
    const std::string s = a.str("--size");
    int w = 0, h = 0;
    char x = 0;
    if (std::sscanf(s.c_str(), "%d%c%d", &w, &x, &h) != 3 || x != 'x' || w < 64 || h < 64 || w > 8192 || h > 8192)
      throw kvs::input_error("--size", "expected WxH between 64x64 and 8192x8192, got '" + s + "'");
    o.width = w;
    o.height = h;
  }
  return kvs::run_gui(o);
#else
  std::fprintf(stderr, "kvscope: this build has no desktop app (libimgui-dev/libglfw3-dev were not found)\n");
  return 2;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT when it loads, before main. Its default
  // (workers spinning ~3 ms before sleeping) collapses throughput 4-6x whenever the machine is
  // busy (measured on 2 cores). Sleeping at once costs a wake-up per parallel region instead: a
  // 1,751-token SmolLM2 record switched context 9,900 times. A spin of 3,000 rounds (tens of
  // microseconds) bridges back-to-back regions (1,400 switches; 5.8-6.2 s -> 4.9-5.3 s) and cost
  // nothing measurable beside a busy core, where 30,000 took 1.6x as long. Re-execute once with
  // these unless the user chose a policy.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    if (!std::getenv("GOMP_SPINCOUNT")) setenv("GOMP_SPINCOUNT", "3000", 1);
    execv("/proc/self/exe", argv);  // returns only on failure; then run as we are
  }
  // Past a file-size limit (ulimit -f) a write raises SIGXFSZ, whose default action kills the
  // process with no message and leaves the temporary trace behind. Ignored, the write fails with
  // EFBIG and the writer reports it as one line, as a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  // This thread's OpenMP team, before any large allocation (inference/thread_team.h): under a
  // tight memory limit libgomp would otherwise end the process at the first parallel region.
  kvs::start_thread_team();
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string cmd = args.empty() ? "gui" : args[0];
  std::vector<std::string> rest = args.empty() ? args : std::vector<std::string>(args.begin() + 1, args.end());
  try {
    // `kvscope COMMAND --help`: that command's flags, before it parses (and refuses) them.
    auto is_help = [](const std::string& a) { return a == "--help" || a == "-h"; };
    if (const char* help = kvs::command_help(cmd); help && std::any_of(rest.begin(), rest.end(), is_help)) {
      std::fputs(help, stdout);
      return 0;
    }
    if (cmd == "gui") return run_gui_command(rest);
    if (cmd == "record") return kvs::cmd_record(rest);
    if (cmd == "info") return kvs::cmd_info(rest);
    if (cmd == "simulate") return kvs::cmd_simulate(rest);
    if (cmd == "layers") return kvs::cmd_layers(rest);
    if (cmd == "heads") return kvs::cmd_heads(rest);
    if (cmd == "rerun") return kvs::cmd_rerun(rest);
    if (cmd == "compare") return kvs::cmd_compare(rest);
    if (cmd == "tokenize") return kvs::cmd_tokenize(rest);
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      if (rest.empty() || rest[0] == "help") {
        std::fputs(kvs::usage_summary(), stdout);
        return 0;
      }
      const char* help = kvs::command_help(rest[0]);
      if (!help) throw kvs::input_error(rest[0], "no such command (kvscope help lists them)");
      std::fputs(help, stdout);
      return 0;
    }
    if (cmd == "--version") {
      std::printf("kvscope %s\n", KVSCOPE_VERSION);
      return 0;
    }
    if (cmd.rfind("--", 0) == 0 || (cmd.size() > 3 && cmd.substr(cmd.size() - 3) == ".h5"))
      return run_gui_command(args);  // `kvscope trace.h5` / `kvscope --screenshot ...`
    std::fprintf(stderr, "kvscope: unknown command '%s'\n%s", cmd.c_str(), kvs::usage_summary());
    return 2;
  } catch (const kvs::InputError& e) {
    std::fprintf(stderr, "kvscope: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    if (kvs::out_of_host_memory(e)) {  // what the checks before large allocations did not foresee
      std::fprintf(stderr, "kvscope: %s\n", kvs::error_text(e).c_str());
      return 2;
    }
    std::fprintf(stderr, "kvscope: internal error: %s\n", e.what());
    return 1;
  }
}
