// The state every view shares: the open trace (and a second one for Compare), the current step
// and selected (layer, head) and runs, the timeline's playback, the status line, and the workers
// that load data in the background.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "analysis/trace_snapshot.h"
#include "app/gui/settings.h"
#include "app/gui/worker.h"

namespace kvs {

class AppState {
 public:
  explicit AppState(bool headless);

  // ---- documents (replaced as a whole when a load finishes; never half-updated)
  std::shared_ptr<TraceReader> reader;
  std::shared_ptr<const TraceSnapshot> trace;
  std::shared_ptr<const StepSnapshot> step_data;  // may lag `step` while it loads
  int unreadable_step = -1;        // the step whose read failed (a damaged trace), or -1
  std::string unreadable_message;  // why
  std::shared_ptr<TraceReader> other_reader;      // Compare's second trace
  std::shared_ptr<const TraceSnapshot> other_trace;
  int generation = 0;  // increments whenever `trace` changes; views drop their caches then

  // ---- selection, shared by all views
  int step = 0;
  int layer = 0;
  int head = 0;         // query head
  int run_a = 0;        // index into trace->runs
  int run_b = 1;
  bool per_head_lanes = false;  // lanes show the selected (layer, KV head) instead of the aggregate

  // ---- timeline playback
  bool playing = false;
  float speed = 8.0f;   // steps per second
  // Play / pause (the button and Space). Play at the last step starts again from step 0: a trace
  // opens at its last step, where Play did nothing.
  void toggle_play();

  // ---- status line and errors (errors also open a modal in interactive mode)
  std::string status;
  bool status_error = false;
  std::string pending_modal;   // shown once by the shell
  std::string last_open_error; // of the most recent open (screenshot mode exits 2 on it)
  std::string first_error;     // headless: the first error reported (a script's job failed: exit 2)

  const bool headless;
  Worker io;      // trace reads
  Worker engine;  // recording, simulation, analyses
  RecentList recent_traces{"recent_traces"};
  RecentList recent_models{"recent_models"};

  // Opens a trace in the background (synchronously when headless); on failure the open trace
  // stays and the error is reported. for_compare loads it as Compare's second trace.
  void open_trace(const std::string& path, bool for_compare = false);
  // Moves to decode step s (clamped) and loads its data.
  void set_step(int s);
  void select_head(int layer, int head);
  // Per frame: runs posted results and advances playback by dt seconds.
  void tick(double dt);
  // Re-reads the open trace (after runs were appended to it), keeping the selection. A non-empty
  // `status_after` is the status line once it is back (instead of "Opened ..."): what the job
  // that appended the runs has to say, its caveats included, outlives the reload.
  void reload(const std::string& status_after = "");

  // Policy caveats of runs made in this session, "run name: caveat" as policy_caveats gives them
  // (settings that reduce a policy to something else on this prompt), for the open trace: the
  // views show them beside the runs they concern. A new run of the same name replaces its note.
  void note_caveats(const std::vector<std::string>& caveats);
  // The caveat of run `run_name` of the open trace ("" when none): a note given for the spec's
  // run name also concerns its live runs ("<name>_forced", "<name>_free", ..._rerotated).
  std::string run_caveat(const std::string& run_name) const;

  void info(const std::string& message);
  void error(const std::string& message);

  int n_steps() const { return trace ? trace->n_steps() : 0; }
  int kv_head() const;
  bool step_ready() const { return step_data && step_data->step == step; }
  // The selected step could not be read: views show why instead of another step's data.
  bool step_unreadable() const { return unreadable_step == step && trace && unreadable_step >= 0; }

 private:
  void select_strongest_sink_head();
  void install(std::shared_ptr<TraceReader> r, std::shared_ptr<const TraceSnapshot> t, bool for_compare);
  void clamp_selection();
  double play_accum_ = 0.0;
  std::string status_after_reload_;  // replaces "Opened ..." when the reloaded trace installs
  struct RunNote {
    std::string trace_path, run, text;  // `run` as the spec names it; text without the name
  };
  std::vector<RunNote> run_notes_;
};

}  // namespace kvs
