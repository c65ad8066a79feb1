// The interface of one view of the app (one file per view in app/views), and the list of them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/gui/app_state.h"
#include "app/gui/export.h"

namespace kvs {

class View {
 public:
  virtual ~View() = default;
  virtual const char* id() const = 0;     // used by --view and scripts: "lanes"
  virtual const char* title() const = 0;  // window title: "Eviction lanes"
  // Draws the view's contents inside its (already begun) ImGui window.
  virtual void draw(AppState& app) = 0;
  // The data the view shows, for "Export CSV".
  virtual CsvTable csv(const AppState& app) const = 0;
  // Scripted interaction aimed at this view ("log on", "stat entropy", ...); false = not handled.
  virtual bool command(AppState& app, const std::string& verb, const std::string& arg) { return false; }
};

// All views, in menu order: run, timeline, lanes, attention, heads, layers, metrics, compare.
std::vector<std::unique_ptr<View>> make_views(const std::string& model_path);

std::unique_ptr<View> make_run_view(const std::string& model_path);
std::unique_ptr<View> make_timeline_view();
std::unique_ptr<View> make_lanes_view();
std::unique_ptr<View> make_attention_view();
std::unique_ptr<View> make_heads_view();
std::unique_ptr<View> make_layers_view();
std::unique_ptr<View> make_metrics_view();
std::unique_ptr<View> make_compare_view();

}  // namespace kvs
