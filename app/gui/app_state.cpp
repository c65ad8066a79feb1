// Shared app state: background loading of traces and decode steps, selection and playback.
#include "app/gui/app_state.h"

#include <algorithm>
#include <filesystem>

#include "inference/errors.h"
#include "inference/host_memory.h"

namespace kvs {

AppState::AppState(bool headless_mode) : headless(headless_mode) {
  auto report = [this](const std::string& m) { error(m); };
  io.set_error_handler(report);
  engine.set_error_handler(report);
}

int AppState::kv_head() const {
  if (!trace) return 0;
  const int group = std::max(trace->meta.shape.group(), 1);
  return head / group;
}

void AppState::info(const std::string& message) {
  status = message;
  status_error = false;
}

void AppState::error(const std::string& message) {
  status = message;
  status_error = true;
  if (!headless) pending_modal = message;
  else if (first_error.empty()) first_error = message;
}

void AppState::open_trace(const std::string& path, bool for_compare) {
  auto job = [this, path, for_compare](JobContext& ctx) {
    try {
      auto r = std::make_shared<TraceReader>(path);
      ctx.progress(0.5f);
      std::shared_ptr<const TraceSnapshot> t = load_trace_snapshot(*r);
      io.post([this, r, t, for_compare] { install(r, t, for_compare); });
    } catch (const std::exception& e) {
      const std::string message = error_text(e);
      io.post([this, message] {
        status_after_reload_.clear();
        last_open_error = message;
        error(message);
      });
    }
  };
  last_open_error.clear();
  io.submit(for_compare ? "open-compare" : "open", "Opening " + path, job);
  if (headless) {
    io.wait_idle();
    io.drain();
  }
}

void AppState::reload(const std::string& status_after) {
  if (!trace) return;
  status_after_reload_ = status_after;
  open_trace(trace->path, false);
}

void AppState::note_caveats(const std::vector<std::string>& caveats) {
  if (!trace) return;
  for (const std::string& c : caveats) {
    const size_t colon = c.find(": ");
    if (colon == std::string::npos || colon == 0) continue;  // not about one run
    RunNote note{trace->path, c.substr(0, colon), c.substr(colon + 2)};
    std::erase_if(run_notes_, [&](const RunNote& n) { return n.trace_path == note.trace_path && n.run == note.run; });
    run_notes_.push_back(std::move(note));
  }
}

std::string AppState::run_caveat(const std::string& run_name) const {
  if (!trace) return "";
  for (const RunNote& n : run_notes_) {
    if (n.trace_path != trace->path) continue;
    if (run_name == n.run) return n.text;
    // Live runs are named "<spec run name>_<mode>" (and "_rerotated" after that).
    for (const char* mode : {"_forced", "_free"}) {
      const std::string live = n.run + mode;
      if (run_name == live || run_name == live + "_rerotated") return n.text;
    }
  }
  return "";
}

void AppState::install(std::shared_ptr<TraceReader> r, std::shared_ptr<const TraceSnapshot> t,
                       bool for_compare) {
  last_open_error.clear();
  if (for_compare) {
    other_reader = std::move(r);
    other_trace = std::move(t);
    info("Compare: opened " + other_trace->path);
    ++generation;
    return;
  }
  const bool same_file = trace && trace->path == t->path;
  reader = std::move(r);
  trace = std::move(t);
  step_data.reset();
  ++generation;
  if (!same_file) {
    step = std::max(trace->n_steps() - 1, 0);
    run_a = 0;
    run_b = 1;
    select_strongest_sink_head();
    if (!headless) recent_traces.add(std::filesystem::absolute(trace->path).string());
  }
  clamp_selection();
  if (same_file && !status_after_reload_.empty()) {
    info(status_after_reload_);
    status_after_reload_.clear();
    set_step(step);
    return;
  }
  status_after_reload_.clear();
  info("Opened " + trace->path + " (" + std::to_string(trace->total_len()) + " tokens, " +
       std::to_string(trace->n_steps()) + " steps, " + std::to_string(trace->runs.size()) + " runs)" +
       (trace->meta.capture_note.empty() ? "" : "; " + trace->meta.capture_note) +
       (trace->n_steps() == 0 ? "; no decode steps: nothing to evict" : ""));
  set_step(step);
}

// A new trace opens on the head whose decode rows put the most mass on the first tokens (its
// /heads/sink_mass), where an attention sink shows at once; layer 0 head 0 rarely has one.
void AppState::select_strongest_sink_head() {
  for (const NamedArray& a : trace->head_stats) {
    const ModelShape& s = trace->meta.shape;
    if (a.name != "sink_mass" || a.dims.size() != 2 || (int)a.dims[0] != s.n_layers || (int)a.dims[1] != s.n_heads ||
        a.data.empty())
      continue;
    const size_t best = std::max_element(a.data.begin(), a.data.end()) - a.data.begin();
    layer = (int)(best / s.n_heads);
    head = (int)(best % s.n_heads);
  }
}

void AppState::clamp_selection() {
  if (!trace) return;
  const ModelShape& s = trace->meta.shape;
  layer = std::clamp(layer, 0, std::max(s.n_layers - 1, 0));
  head = std::clamp(head, 0, std::max(s.n_heads - 1, 0));
  const int runs = (int)trace->runs.size();
  run_a = std::clamp(run_a, 0, std::max(runs - 1, 0));
  run_b = std::clamp(run_b, 0, std::max(runs - 1, 0));
}

void AppState::set_step(int s) {
  if (!trace) return;
  step = std::clamp(s, 0, std::max(trace->n_steps() - 1, 0));
  if (trace->n_steps() == 0 || step_ready()) return;
  auto r = reader;
  auto t = trace;
  const int wanted = step;
  auto job = [this, r, t, wanted](JobContext&) {
    try {
      std::shared_ptr<const StepSnapshot> d = load_step_snapshot(*r, *t, wanted);
      io.post([this, t, d] {
        if (trace != t) return;
        step_data = d;
        if (unreadable_step == d->step) unreadable_step = -1;
      });
    } catch (const std::exception& e) {
      const std::string message = error_text(e);
      io.post([this, t, wanted, message] {
        if (trace == t) unreadable_step = wanted, unreadable_message = message;
        error(message);
      });
    }
  };
  io.submit("step", "Reading step " + std::to_string(wanted), job);
  if (headless) {
    io.wait_idle();
    io.drain();
  }
}

void AppState::select_head(int l, int h) {
  layer = l;
  head = h;
  clamp_selection();
}

void AppState::toggle_play() {
  if (!playing && trace && step >= trace->n_steps() - 1) set_step(0);
  playing = !playing;
  play_accum_ = 0.0;  // a fresh start: no fraction of a step left from before
}

void AppState::tick(double dt) {
  io.drain();
  engine.drain();
  if (!playing || !trace || trace->n_steps() == 0) {
    play_accum_ = 0.0;
    return;
  }
  play_accum_ += dt * speed;
  const int advance = (int)play_accum_;
  if (advance <= 0) return;
  play_accum_ -= advance;
  if (step + advance >= trace->n_steps()) {
    set_step(trace->n_steps() - 1);
    playing = false;
  } else {
    set_step(step + advance);
  }
}

}  // namespace kvs
