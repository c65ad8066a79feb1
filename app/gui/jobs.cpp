// Simulation of policies on the open trace, in the background.
#include "app/gui/jobs.h"

#include <memory>

#include "analysis/policy.h"
#include "analysis/policy_omnikv.h"
#include "analysis/simulator.h"

namespace kvs {

void submit_simulation(AppState& app, const std::vector<std::string>& specs, int budget,
                       std::function<void()> on_done) {
  if (!app.trace) return;
  if (specs.empty()) {
    app.error("Simulate: choose at least one policy");
    return;
  }
  const std::string path = app.trace->path;
  const ModelShape shape = app.trace->meta.shape;
  auto job = [&app, specs, path, shape, budget, on_done](JobContext& ctx) {
    try {
      std::vector<RunData> runs;
      {
        TraceReader reader(path);
        std::vector<std::unique_ptr<Policy>> owned;
        std::vector<Policy*> policies;
        for (const std::string& s : specs) {
          PolicySpec spec = parse_policy_spec(s, budget);
          choose_omnikv_filters(spec, reader);  // as `kvscope simulate` does
          owned.push_back(make_policy(spec, shape));
          policies.push_back(owned.back().get());
        }
        runs = simulate(reader, policies, SimulateOptions{});
      }
      if (ctx.cancelled()) return;
      ctx.progress(0.9f);
      append_runs(path, runs);
      app.engine.post([&app, n = runs.size(), path, on_done] {
        app.info("Simulated " + std::to_string(n) + " policies into " + path);
        app.reload();
        if (on_done) on_done();
      });
    } catch (const std::exception& e) {
      const std::string message = e.what();
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
