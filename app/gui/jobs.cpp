// Simulation of policies on the open trace, in the background (KVzip's repeat-pass scores first
// when a kvzip policy needs them and the trace has none).
#include "app/gui/jobs.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "analysis/policy.h"
#include "analysis/policy_omnikv.h"
#include "analysis/run_progress.h"
#include "analysis/simulator.h"
#include "app/cli/policy_setup.h"
#include "inference/errors.h"
#include "inference/host_memory.h"

namespace kvs {

namespace {

// KVzip's repeat-pass scores for the trace's prompt, on the trace's model, or on `model_path`
// when that is gone; the job's progress runs to 0.8 over the scoring's steps.
std::vector<float> kvzip_scores(const TraceReader& reader, const std::string& model_path, JobContext& ctx) {
  const TraceMeta& m = reader.meta();
  const bool own = !m.model_path.empty() && std::filesystem::exists(m.model_path);
  const std::string path = own ? m.model_path : model_path;
  if (path.empty() || !std::filesystem::exists(path))
    throw input_error("kvzip", "needs the trace's model for its repeat-pass scores ('" + m.model_path +
                                   "' is not there): choose one of the same shape in the Run view");
  RunProgress progress;
  progress.on_step = [&ctx](int step, int total) { ctx.progress(0.8f * (step + 1) / std::max(total, 1)); };
  progress.cancelled = [&ctx] { return ctx.cancelled(); };
  return kvzip_scores_for_trace(path, own ? m.tokenizer_path : "", reader, 0, progress);
}

}  // namespace

std::string caveat_text(const std::vector<std::string>& caveats) {
  std::string text;
  for (const std::string& c : caveats) text += ". Note: " + c;
  return text;
}

void submit_simulation(AppState& app, const std::vector<std::string>& specs, int budget,
                       std::function<void()> on_done, const std::string& model_path) {
  if (!app.trace) {
    app.error("Simulate: open a trace first");
    return;
  }
  if (specs.empty()) {
    app.error("Simulate: choose at least one policy");
    return;
  }
  const std::string path = app.trace->path;
  const ModelShape shape = app.trace->meta.shape;
  auto job = [&app, specs, path, shape, budget, on_done, model_path](JobContext& ctx) {
    try {
      std::vector<RunData> runs;
      std::vector<std::string> caveats;
      {
        TraceReader reader(path);
        std::vector<std::unique_ptr<Policy>> owned;
        std::vector<Policy*> policies;
        for (const std::string& s : specs) {
          PolicySpec spec = parse_policy_spec(s, budget);
          resolve_omnikv_spec(spec, reader);  // as `kvscope simulate` does
          choose_duo_gates(spec, reader, "");
          owned.push_back(make_policy(spec, shape));
          policies.push_back(owned.back().get());
        }
        SimulateOptions options;
        DuoGates gates = trace_duo_gates(reader);  // for gates=estimated
        options.alpha = std::move(gates.alpha);
        options.alpha_source = std::move(gates.source);
        const bool needs_scores =
            std::any_of(owned.begin(), owned.end(), [](const auto& p) { return p->needs_key_scores(); });
        if (needs_scores && !reader.has_array("/attention/prefill_key_scores"))
          options.key_scores = kvzip_scores(reader, model_path, ctx);
        // The replay fills the bar from where KVzip's scoring left it (0.8 when it ran) to 0.9.
        const float from = options.key_scores.empty() ? 0.0f : 0.8f;
        options.on_step = [&ctx, from](int step, int total) {
          ctx.progress(from + (0.9f - from) * static_cast<float>(step + 1) / static_cast<float>(std::max(total, 1)));
        };
        runs = simulate(reader, policies, options);
        caveats = policy_caveats(owned, reader.meta().prompt_len);
      }
      if (ctx.cancelled()) return;
      ctx.progress(0.9f);
      append_runs(path, runs);
      app.engine.post([&app, n = runs.size(), path, on_done, caveats] {
        // The caveats stay on the status line after the reload and beside their runs.
        app.note_caveats(caveats);
        app.reload("Simulated " + std::to_string(n) + " policies into " + path + caveat_text(caveats));
        if (on_done) on_done();
      });
    } catch (const RunCancelled&) {
      app.engine.post([&app] { app.info("Simulation cancelled; nothing appended"); });
    } catch (const std::exception& e) {
      const std::string message = error_text(e);
      app.engine.post([&app, message] { app.error(message); });
    }
  };
  app.engine.submit("engine", "Simulating " + std::to_string(specs.size()) + " policies", job);
  if (app.headless) {
    app.engine.wait_idle();
    app.engine.drain();
  }
}

}  // namespace kvs
