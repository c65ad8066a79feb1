// The app shell: GLFW window + OpenGL 3.3 core + ImGui, menus, status bar, dialogs, keyboard
// shortcuts, drag and drop, layout persistence, exports, and headless screenshots.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <imgui_internal.h>  // MarkIniSettingsDirty
#include <imgui_stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "analysis/atomic_file.h"
#include "app/gui/app_state.h"
#include "app/gui/export.h"
#include "app/gui/fonts.h"
#include "app/gui/gui.h"
#include "app/gui/layout.h"
#include "app/gui/replace_confirm.h"
#include "app/gui/script.h"
#include "app/gui/script_input.h"
#include "app/gui/settings.h"
#include "app/gui/text_size.h"
#include "app/gui/texture.h"
#include "app/gui/widgets.h"
#include "app/gui/window_memory.h"
#include "app/views/view.h"
#include "inference/errors.h"

namespace kvs {
namespace {

std::vector<std::string> g_dropped;  // paths dropped on the window, handled next frame

constexpr double kScreenshotFrame = 1.0 / 60.0;  // seconds between a screenshot's frames

void on_drop(GLFWwindow*, int count, const char** paths) {
  for (int i = 0; i < count; ++i) g_dropped.emplace_back(paths[i]);
}

void on_glfw_error(int code, const char* description) {
  std::fprintf(stderr, "kvscope: GLFW error %d: %s\n", code, description);
}

const std::string kIdleStatus = "Drop a trace here or use File > Open (F1: help)";

const char* kHelp =
    "Keyboard\n"
    "  Left / Right    previous / next decode step\n"
    "  Space           play / pause\n"
    "  Home / End      first / last step\n"
    "  Ctrl+O          open a trace\n"
    "  Ctrl+= / Ctrl+- larger / smaller text; Ctrl+0: the monitor's size\n"
    "  F1              this help\n"
    "\nMouse\n"
    "  Head grid: click a cell to select that (layer, head) in every view\n"
    "  Attention map: wheel zooms, drag pans, double-click resets\n"
    "  Lanes: hover a cell for the token, its position and scores\n"
    "  Drop a .h5 trace on the window to open it\n"
    "\nFiles\n"
    "  File > Export writes the chosen view as PNG and its data as CSV\n"
    "\nLayout\n"
    "  The views follow the window when it is resized\n"
    "  View > Tile all views: the default layout, every view shown\n"
    "  View > Alone with the timeline: one view below the timeline\n"
    "  Double-click a view's title bar: that view alone; again: back\n"
    "  The window layout is saved in ~/.config/kvscope/imgui.ini\n";

class Shell {
 public:
  // display: the window and text sizes the loaded layout was saved at and the text size chosen;
  // text_size: the size the fonts were set up at; monitor_text_size: the monitor's (text_size.h).
  Shell(AppState& app, std::vector<std::unique_ptr<View>>& views, GLFWwindow* window, DisplaySettings& display,
        float text_size, float monitor_text_size)
      : app_(app),
        views_(views),
        window_(window),
        headless_(app.headless),
        saved_display_(display.size),
        saved_text_size_(display.layout_text_size),
        display_(display),
        text_size_(text_size),
        monitor_text_size_(monitor_text_size),
        visible_(views.size(), true),
        fractions_(views.size()),
        placed_(views.size()) {
    display_.layout_text_size = text_size;
  }

  // single_view: id of the one view filling the window ("" = all views, each where the layout
  // puts it).
  void frame(double dt, const std::string& single_view) {
    app_.tick(dt);
    handle_drops();
    apply_text_size();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (headless_) {
      ImGuiIO& io = ImGui::GetIO();
      // A screenshot's frames are 1/60 s apart on ImGui's clock as on the app's: whether two
      // scripted clicks make a double-click (0.3 s) depends on the frames between them, not on
      // how fast this machine draws.
      io.DeltaTime = (float)dt;
      input_.feed(io);  // the script's mouse and keys: off the window and up unless a command moved them
    }
    ImGui::NewFrame();
    handle_keys();
    const ImGuiIO& io = ImGui::GetIO();
    const float bar = ImGui::GetFrameHeight();
    Rect work{0, 0, io.DisplaySize.x, io.DisplaySize.y};
    if (single_view.empty()) {
      work = work_area(io.DisplaySize.x, io.DisplaySize.y, bar);
      draw_menu(work);
      draw_status(Rect{0, io.DisplaySize.y - bar - 8, io.DisplaySize.x, bar + 8});
      if (!opened_ && can_lay_out(work)) open_layout(work);
      apply_layout_request(work);
    }
    rects_.assign(views_.size(), Rect{});
    for (size_t i = 0; i < views_.size(); ++i) {
      View& v = *views_[i];
      if (!single_view.empty() ? single_view != v.id() : !visible_[i]) continue;
      if (!single_view.empty()) place_window(work);
      else if (can_lay_out(work)) lay_out(i, work);  // a minimized window leaves the layout as it is
      bool open = true;
      if (ImGui::Begin(v.title(), single_view.empty() ? &open : nullptr, ImGuiWindowFlags_NoCollapse)) {
        v.draw(app_);
      }
      const ImVec2 p = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
      rects_[i] = Rect{p.x, p.y, s.x, s.y};
      // A double-click on a view's title bar shows it alone with the timeline, and a second one
      // brings back the layout from before.
      if (single_view.empty() && std::string(v.id()) != "timeline" && ImGui::IsMouseDoubleClicked(0) &&
          ImGui::IsWindowHovered() && ImGui::GetIO().MousePos.y < p.y + ImGui::GetFrameHeight())
        layout_request_ = {LayoutRequest::Toggle, v.id()};
      ImGui::End();
      if (!open) visible_[i] = false;
      // Moved or resized by the user: the layout keeps the window where they left it.
      if (single_view.empty() && can_lay_out(work) && placed_[i] != rects_[i]) {
        fractions_[i] = to_fractions(rects_[i], work);
        placed_[i] = rects_[i];
      }
    }
    draw_dialogs();
    ImGui::Render();
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window_, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    export_pending_png(fb_h);
  }

  // Headless: draws frames until the views' background work has settled (at least 4, at most
  // 40); the last one stays in the back buffer for the screenshot. Four: a view may lay itself
  // out on its first frame (the Run view measures its settings there), and the tooltip of what
  // the mouse then hovers is hidden for a frame while it sizes itself.
  void settle(const std::string& single_view) {
    for (int f = 0; f < 40; ++f) {
      frame(kScreenshotFrame, single_view);
      const bool busy = app_.io.busy() || app_.engine.busy();
      app_.io.wait_idle();
      app_.engine.wait_idle();
      if (f >= 3 && !busy) break;
      glfwSwapBuffers(window_);
    }
  }

  // Headless: one of the script's commands. `hover` places the mouse for the frames after it.
  // The other mouse and keyboard commands are played on frames of their own, as a hand would:
  // first the commands before them take effect (the frames settle), then one frame for each of
  // the command's states (script_input.h); the mouse stays where the last one left it.
  void run_script_command(const ScriptCommand& c, const std::string& single_view) {
    if (c.verb == "resize") {  // as a user or the window manager would: the layout follows
      const Extent size = script_size(c);
      settle(single_view);  // the commands before take effect at the size before
      glfwSetWindowSize(window_, size.w, size.h);
      settle(single_view);
      return;
    }
    if (shell_command(c)) return;
    if (is_key_command(c)) {
      play(single_view, key_command_frames(c), [&](const KeyFrame& f) { input_.set_keys(f); });
      return;
    }
    if (!is_mouse_command(c)) {
      apply_script_command(app_, views_, c);
      return;
    }
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window_, &fb_w, &fb_h);
    const std::vector<MouseFrame> frames = mouse_command_frames(c, fb_w, fb_h);
    if (c.verb == "hover") {
      input_.set(frames.back());
      return;
    }
    play(single_view, frames, [&](const MouseFrame& f) { input_.set(f); });
  }

  // The script's `tile` and `alone VIEW` (View's layouts) and `text-size PX`, applied at the next
  // frame; false for any other command.
  bool shell_command(const ScriptCommand& c) {
    if (c.verb == "text-size") {
      text_size_asked_ = script_number(c.verb, c.arg, kMinTextSize, kMaxTextSize);
      return true;
    }
    if (c.verb == "tile") {
      if (!c.arg.empty()) throw script_error(c.verb, c.arg, "takes no value");
      layout_request_ = {LayoutRequest::Tile, ""};
      return true;
    }
    if (c.verb != "alone") return false;
    std::string ids;
    for (const auto& v : views_) {
      const std::string id = v->id();
      if (id == "timeline") continue;
      if (id == c.arg) {
        layout_request_ = {LayoutRequest::Alone, id};
        return true;
      }
      ids += (ids.empty() ? "" : ", ") + id;
    }
    throw script_error(c.verb, c.arg, "expects a view other than the timeline: " + ids);
  }

 private:
  // `resize WxH`'s size, as --size takes it.
  static Extent script_size(const ScriptCommand& c) {
    Extent e;
    char x = 0, rest = 0;
    if (std::sscanf(c.arg.c_str(), "%d%c%d%c", &e.w, &x, &e.h, &rest) != 3 || x != 'x' || e.w < 64 || e.h < 64 ||
        e.w > 8192 || e.h > 8192)
      throw script_error(c.verb, c.arg, "expects WxH between 64x64 and 8192x8192");
    return e;
  }

  // Settles the frames, then draws one frame per state, set(f) before each.
  template <class Frame, class Set>
  void play(const std::string& single_view, const std::vector<Frame>& frames, Set set) {
    settle(single_view);
    for (const Frame& f : frames) {
      set(f);
      frame(kScreenshotFrame, single_view);
      glfwSwapBuffers(window_);
    }
  }

  static void place_window(const Rect& r) {
    ImGui::SetNextWindowPos(ImVec2(r.x, r.y), ImGuiCond_Always);
    ImGui::SetNextWindowSize(ImVec2(r.w, r.h), ImGuiCond_Always);
  }

  // The first frame with room for the views: each view's share of `work` from where the loaded
  // layout put its window (in the window and at the text size it was saved at, refit where the
  // text is now another size), else from the tiled layout (layout.h).
  void open_layout(const Rect& work) {
    opened_ = true;
    std::vector<std::string> ids;
    std::vector<std::optional<Rect>> saved;
    for (const auto& v : views_) {
      ids.push_back(v->id());
      saved.push_back(window_rect(v->title()));
    }
    const float saved_px = saved_text_size_ > 0 ? saved_text_size_ : text_size_;  // unknown: taken as now
    const Rect saved_work = work_area((float)saved_display_.w, (float)saved_display_.h, menu_bar_height(saved_px));
    fractions_ = opening_fractions(ids, saved, visible_, saved_work, saved_px / kDefaultTextSize, work,
                                   text_size_ / kDefaultTextSize);
  }

  // Places view i's window at its share of `work`, when that is not where it already is.
  void lay_out(size_t i, const Rect& work) {
    const Rect target = from_fractions(*fractions_[i], work);
    if (placed_[i] == target) return;
    place_window(target);
    placed_[i] = target;
  }

  void apply_layout_request(const Rect& work) {
    const LayoutRequest r = layout_request_;
    layout_request_ = {};
    if (r.kind == LayoutRequest::Tile) tile_all(work);
    if (r.kind == LayoutRequest::Alone) show_alone(r.view, work);
    if (r.kind != LayoutRequest::Toggle) return;
    if (!before_alone_ || alone_ != r.view) return show_alone(r.view, work);
    visible_ = before_alone_->visible;
    fractions_ = before_alone_->fractions;
    before_alone_.reset();
  }

  // View > Tile all views: every view shown, in the default tiled layout.
  void tile_all(const Rect& work) {
    before_alone_.reset();
    for (size_t i = 0; i < views_.size(); ++i) {
      visible_[i] = true;
      fractions_[i] = to_fractions(tiled_rect(views_[i]->id(), work, ui_px(1)), work);
    }
  }

  // View > Alone with the timeline: view `id` filling the work area below the timeline, the
  // others hidden (View shows them again where they were).
  void show_alone(const std::string& id, const Rect& work) {
    if (!before_alone_) before_alone_ = Arrangement{visible_, fractions_};
    alone_ = id;
    for (size_t i = 0; i < views_.size(); ++i) {
      const std::string vid = views_[i]->id();
      visible_[i] = vid == id || vid == "timeline";
      if (vid == "timeline") fractions_[i] = to_fractions(tiled_rect(vid, work, ui_px(1)), work);
      if (vid == id) fractions_[i] = to_fractions(alone_rect(work, ui_px(1)), work);
    }
  }

  void handle_drops() {
    if (g_dropped.empty()) return;
    const std::string path = g_dropped.front();
    g_dropped.clear();
    app_.open_trace(path, false);
  }

  void handle_keys() {
    ImGuiIO& io = ImGui::GetIO();
    if (ImGui::IsKeyPressed(GLFW_KEY_F1)) show_help_ = !show_help_;
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O)) open_dialog_ = true;
    if (const float px = text_size_shortcut(text_size_, monitor_text_size_)) text_size_asked_ = px;
    if (io.WantTextInput || !app_.trace) return;
    if (ImGui::IsKeyPressed(GLFW_KEY_LEFT)) app_.set_step(app_.step - 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT)) app_.set_step(app_.step + 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_HOME)) app_.set_step(0);
    if (ImGui::IsKeyPressed(GLFW_KEY_END)) app_.set_step(app_.n_steps() - 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false)) app_.toggle_play();
  }

  std::string export_name(const View& v, const char* ext) const {
    return std::string("kvscope-") + v.id() + "-step" + std::to_string(app_.step) + ext;
  }

  // work: the views' area, where View's layouts place them.
  void draw_menu(const Rect& work) {
    if (!ImGui::BeginMainMenuBar()) return;
    if (ImGui::BeginMenu("File")) {
      if (ImGui::MenuItem("Open trace...", "Ctrl+O")) open_dialog_ = true;
      if (ImGui::MenuItem("Save trace as...", nullptr, false, (bool)app_.trace)) save_dialog_ = true;
      if (ImGui::MenuItem("Reload", nullptr, false, (bool)app_.trace)) app_.reload();
      ImGui::Separator();
      if (ImGui::BeginMenu("Export view as PNG")) {
        for (size_t i = 0; i < views_.size(); ++i)
          if (ImGui::MenuItem(views_[i]->title(), nullptr, false, visible_[i])) {
            png_view_ = (int)i;
            png_path_ = export_name(*views_[i], ".png");
          }
        ImGui::EndMenu();
      }
      if (ImGui::BeginMenu("Export view data as CSV")) {
        for (auto& v : views_)
          if (ImGui::MenuItem(v->title())) {
            const std::string path = export_name(*v, ".csv");
            try {
              write_csv(path, v->csv(app_));
              app_.info("Wrote " + path);
            } catch (const std::exception& e) {
              app_.error(e.what());
            }
          }
        ImGui::EndMenu();
      }
      ImGui::Separator();
      if (ImGui::MenuItem("Quit")) glfwSetWindowShouldClose(window_, 1);
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("View")) {
      for (size_t i = 0; i < views_.size(); ++i) {
        bool on = visible_[i];
        if (ImGui::MenuItem(views_[i]->title(), nullptr, &on)) visible_[i] = on;
      }
      ImGui::Separator();
      if (ImGui::MenuItem("Tile all views")) tile_all(work);
      if (ImGui::BeginMenu("Alone with the timeline")) {
        for (const auto& v : views_)
          if (std::string(v->id()) != "timeline" && ImGui::MenuItem(v->title())) show_alone(v->id(), work);
        ImGui::EndMenu();
      }
      ImGui::Separator();
      if (ImGui::BeginMenu("Text size")) {
        if (const float px = text_size_menu(text_size_, monitor_text_size_)) text_size_asked_ = px;
        ImGui::EndMenu();
      }
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Help")) {
      if (ImGui::MenuItem("Shortcuts", "F1")) show_help_ = true;
      ImGui::EndMenu();
    }
    if (app_.trace) {
      // Right-aligned after the menus; without the model's name where the bar is too narrow
      // (at 1024 px "head 8" was cut off). The step as the views write it: "step 31 of 0..31".
      const std::string file = std::filesystem::path(app_.trace->path).filename().string();
      char where[128];
      std::snprintf(where, sizeof where, "step %d of 0..%d  |  layer %d head %d", app_.step, app_.n_steps() - 1,
                    app_.layer, app_.head);
      const float left = ImGui::GetCursorPosX() + 24, right = ImGui::GetWindowWidth() - ImGui::GetStyle().ItemSpacing.x;
      std::string title = file + "  |  " + app_.trace->meta.model + "  |  " + where;
      if (left + ImGui::CalcTextSize(title.c_str()).x > right) title = file + "  |  " + where;
      ImGui::SameLine(std::max(left, right - ImGui::CalcTextSize(title.c_str()).x));
      ImGui::TextDisabled("%s", title.c_str());
    }
    ImGui::EndMainMenuBar();
  }

  // A text size asked for in the frame before: the fonts and style at that size, the renderer's
  // font texture made again, and the choice kept in imgui.ini (none when it is the monitor's, so
  // that another monitor gets its own).
  void apply_text_size() {
    if (text_size_asked_ == 0) return;
    if (text_size_asked_ != text_size_) {
      const float old_scale = text_size_ / kDefaultTextSize, old_bar = bar_height();
      text_size_ = text_size_asked_;
      setup_fonts_and_style(text_size_);
      ImGui_ImplOpenGL3_DestroyFontsTexture();
      ImGui_ImplOpenGL3_CreateFontsTexture();
      fit_timeline_to_text(old_scale, old_bar);
    }
    display_.text_size = text_size_ == monitor_text_size_ ? 0 : text_size_;
    display_.layout_text_size = text_size_;
    ImGui::MarkIniSettingsDirty();
    text_size_asked_ = 0;
  }

  // The menu bar's height at the current text size, between frames.
  float bar_height() const { return menu_bar_height(text_size_); }

  // After a change of text size: the layout follows the timeline's new height (layout.h).
  void fit_timeline_to_text(float old_scale, float old_bar) {
    const ImVec2 d = ImGui::GetIO().DisplaySize;
    const Rect old_work = work_area(d.x, d.y, old_bar), work = work_area(d.x, d.y, bar_height());
    if (!can_lay_out(old_work) || !can_lay_out(work)) return;
    std::vector<std::string> ids;
    for (const auto& v : views_) ids.push_back(v->id());
    follow_text_size(ids, visible_, fractions_, old_work, old_scale, work, text_size_ / kDefaultTextSize);
    if (before_alone_)
      follow_text_size(ids, before_alone_->visible, before_alone_->fractions, old_work, old_scale, work,
                       text_size_ / kDefaultTextSize);
  }

  void draw_status(const Rect& r) {
    ImGui::SetNextWindowPos(ImVec2(r.x, r.y));
    ImGui::SetNextWindowSize(ImVec2(r.w, r.h));
    const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing |
                                   ImGuiWindowFlags_NoBringToFrontOnFocus;
    ImGui::Begin("##status", nullptr, flags);
    for (Worker* w : {&app_.io, &app_.engine}) {
      const std::string label = w->running_label();
      if (label.empty()) continue;
      ImGui::ProgressBar(w->progress(), ImVec2(ui_px(160), 0));
      ImGui::SameLine();
      ImGui::TextUnformatted(label.c_str());
      ImGui::SameLine();
      ImGui::PushID(w);
      if (ImGui::SmallButton("Cancel")) w->cancel_all();
      ImGui::PopID();
      ImGui::SameLine();
    }
    const std::string& text = app_.status.empty() ? kIdleStatus : app_.status;
    // A long message (a simulation's caveats) is cut to the bar, "..." at its end: all of it,
    // wrapped, on hover.
    const std::string shown = elide(text, ImGui::GetContentRegionAvail().x);
    if (app_.status_error) ImGui::TextColored(kErrorTextColor, "%s", shown.c_str());
    else ImGui::TextUnformatted(shown.c_str());
    if (shown != text && ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::PushTextWrapPos(ImGui::GetFontSize() * 50.0f);
      ImGui::TextUnformatted(text.c_str());
      ImGui::PopTextWrapPos();
      ImGui::EndTooltip();
    }
    ImGui::End();
  }

  void draw_dialogs() {
    if (open_dialog_) {
      ImGui::OpenPopup("Open trace");
      open_dialog_ = false;
    }
    if (save_dialog_) {
      ImGui::OpenPopup("Save trace as");
      save_path_ = app_.trace ? app_.trace->path : "";
      save_dialog_ = false;
    }
    if (!app_.pending_modal.empty()) {
      modal_text_ = app_.pending_modal;
      app_.pending_modal.clear();
      ImGui::OpenPopup("Problem");
    }
    const ImVec2 center = ImGui::GetMainViewport()->GetCenter();
    ImGui::SetNextWindowPos(center, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    if (ImGui::BeginPopupModal("Open trace", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
      ImGui::SetNextItemWidth(ui_px(520));
      ImGui::InputText("path", &open_path_);
      if (ImGui::Button("Open") && !open_path_.empty()) {
        app_.open_trace(open_path_, false);
        ImGui::CloseCurrentPopup();
      }
      ImGui::SameLine();
      if (ImGui::Button("Open as second trace (Compare)") && !open_path_.empty()) {
        app_.open_trace(open_path_, true);
        ImGui::CloseCurrentPopup();
      }
      ImGui::SameLine();
      if (ImGui::Button("Close")) ImGui::CloseCurrentPopup();
      if (!app_.recent_traces.items().empty()) ImGui::TextDisabled("Recent");
      for (const std::string& p : app_.recent_traces.items())
        if (ImGui::Selectable(p.c_str())) open_path_ = p;
      ImGui::EndPopup();
    }
    ImGui::SetNextWindowPos(center, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    if (ImGui::BeginPopupModal("Save trace as", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
      ImGui::SetNextItemWidth(ui_px(520));
      ImGui::InputText("path", &save_path_);
      if (ImGui::Button("Save") && app_.trace && !save_path_.empty()) {
        std::error_code ec;
        if (std::filesystem::equivalent(save_path_, app_.trace->path, ec))
          app_.error("Save as: " + save_path_ + " is the open trace itself");
        else if (save_replace_.clear_to_write(save_path_))
          save_copy(app_.trace->path, save_path_);
        ImGui::CloseCurrentPopup();
      }
      ImGui::SameLine();
      if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
      ImGui::EndPopup();
    }
    if (save_replace_.draw() && app_.trace) save_copy(app_.trace->path, save_path_);
    ImGui::SetNextWindowPos(center, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    if (ImGui::BeginPopupModal("Problem", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
      ImGui::TextUnformatted(modal_text_.c_str());
      if (app_.trace) ImGui::TextDisabled("The open trace stays: %s", app_.trace->path.c_str());
      if (ImGui::Button("OK")) ImGui::CloseCurrentPopup();
      ImGui::EndPopup();
    }
    if (show_help_) {
      ImGui::SetNextWindowPos(center, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
      ImGui::SetNextWindowBgAlpha(0.92f);
      if (ImGui::Begin("Help (F1)", &show_help_, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings))
        ImGui::TextUnformatted(kHelp);
      ImGui::End();
    }
  }

  void save_copy(const std::string& from, const std::string& to) {
    app_.io.submit("save", "Saving " + to, [this, from, to](JobContext&) {
      std::string message = "Saved " + to;
      bool ok = true;
      try {
        copy_file_atomically(from, to);  // a regular file (or a link's target) only, replaced whole
      } catch (const InputError& e) {
        message = e.what();
        ok = false;
      }
      app_.io.post([this, message, ok] { ok ? app_.info(message) : app_.error(message); });
    });
  }

  void export_pending_png(int fb_h) {
    if (png_view_ < 0) return;
    const Rect r = rects_[png_view_];
    const ImVec2 scale = ImGui::GetIO().DisplayFramebufferScale;
    try {
      write_framebuffer_png(png_path_, (int)(r.x * scale.x), (int)(r.y * scale.y), (int)(r.w * scale.x),
                            (int)(r.h * scale.y), fb_h);
      app_.info("Wrote " + png_path_);
    } catch (const std::exception& e) {
      app_.error(e.what());
    }
    png_view_ = -1;
  }

  AppState& app_;
  std::vector<std::unique_ptr<View>>& views_;
  GLFWwindow* window_;
  const bool headless_;
  const Extent saved_display_;                  // the window size the loaded layout was saved at
  const float saved_text_size_;                 // the text size it was saved at, px (0: unknown)
  bool opened_ = false;                         // whether the views have their opening layout
  DisplaySettings& display_;                    // what imgui.ini keeps of the display
  float text_size_;                             // the fonts' size, px
  const float monitor_text_size_;               // the monitor's text size (Ctrl+0), px
  float text_size_asked_ = 0;                   // a size asked for, applied before the next frame (0: none)
  std::vector<bool> visible_;                   // [views]
  std::vector<std::optional<Rect>> fractions_;  // [views] each window's share of the work area (layout.h)
  std::vector<std::optional<Rect>> placed_;     // [views] where the shell last placed each window, px
  std::vector<Rect> rects_;                     // [views] window rectangles of the last frame
  // A change of layout for the next frame: the script's `tile` and `alone VIEW`, a double-click
  // on a view's title bar (Toggle: alone, or back to the layout before).
  struct LayoutRequest {
    enum Kind { None, Tile, Alone, Toggle } kind = None;
    std::string view;
  } layout_request_;
  struct Arrangement {
    std::vector<bool> visible;                   // [views]
    std::vector<std::optional<Rect>> fractions;  // [views]
  };
  std::optional<Arrangement> before_alone_;  // the layout before a view was shown alone
  std::string alone_;                        // the view shown alone (while before_alone_ is set)
  bool show_help_ = false, open_dialog_ = false, save_dialog_ = false;
  std::string open_path_, save_path_, modal_text_;
  ReplaceConfirm save_replace_;  // asks before "Save as" replaces an existing file
  int png_view_ = -1;
  std::string png_path_;
  ScriptedInput input_;  // headless: the script's mouse and keyboard commands
};

bool known_view(const std::vector<std::unique_ptr<View>>& views, const std::string& id) {
  if (id.empty() || id == "all") return true;
  return std::any_of(views.begin(), views.end(), [&](const auto& v) { return id == v->id(); });
}

// The primary monitor's work area (the screen less panels and docks); 0 x 0 where GLFW cannot
// tell.
Extent screen_work_area() {
  GLFWmonitor* monitor = glfwGetPrimaryMonitor();
  Extent e;
  if (monitor) glfwGetMonitorWorkarea(monitor, nullptr, nullptr, &e.w, &e.h);
  return e;
}

// Writes ImGui's window layout to `ini` whole (temp + rename); nothing where there is no config
// folder. A layout that cannot be saved is not worth interrupting the user for: the next change
// tries again.
void save_layout(const std::string& ini) {
  ImGui::GetIO().WantSaveIniSettings = false;
  if (ini.empty()) return;
  try {
    write_file_atomically(ini, ImGui::SaveIniSettingsToMemory());
  } catch (const std::exception&) {
  }
}

}  // namespace

int run_gui(const GuiOptions& options) {
  const bool headless = !options.screenshot_path.empty();
  AppState app(headless);
  std::vector<std::unique_ptr<View>> views = make_views(options.model_path);
  std::vector<ScriptCommand> script;
  try {
    if (!known_view(views, options.view)) {
      std::string names;
      for (auto& v : views) names += std::string(names.empty() ? "" : ", ") + v->id();
      throw input_error("--view", "unknown view '" + options.view + "' (one of: all, " + names + ")");
    }
    script = parse_script(options.script);
    if (headless) {  // refused before rendering: the trace shown, or a file that is not a PNG
      std::error_code ec;
      if (!options.trace_path.empty() && std::filesystem::equivalent(options.screenshot_path, options.trace_path, ec))
        throw input_error(options.screenshot_path, "is the trace being shown; not replacing it");
      check_png_output(options.screenshot_path);
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "kvscope: %s\n", e.what());
    return 2;
  }
  if (!options.trace_path.empty()) {
    app.open_trace(options.trace_path, false);
    if (headless && !app.last_open_error.empty()) {
      std::fprintf(stderr, "kvscope: %s\n", app.last_open_error.c_str());
      return 2;
    }
  }
  if (options.step >= 0) {  // checked as the script's `step N` is: a step the trace lacks is an error
    if (!headless) {        // the window opens on the trace, which loads in the background
      app.io.wait_idle();
      app.io.drain();
    }
    try {
      if (app.trace || options.trace_path.empty()) apply_step_flag(app, options.step);  // else the open's error shows
    } catch (const InputError& e) {
      std::fprintf(stderr, "kvscope: %s\n", e.what());
      return 2;
    }
  }

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  // The window layout: the user's and the window size it was saved at (the app opens at that
  // size); without one, the views tiled at the text size of the start. KVScope saves it itself
  // (ImGui would rewrite the file in place, and a crash mid-write would leave half a layout).
  DisplaySettings display;
  register_display_settings(&display);
  const std::string ini = headless ? "" : layout_ini_path();
  io.IniFilename = nullptr;
  if (!ini.empty() && std::filesystem::exists(ini)) ImGui::LoadIniSettingsFromDisk(ini.c_str());

  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) {
    std::fprintf(stderr, "kvscope: cannot open a window (no display? headless: run under xvfb-run)\n");
    ImGui::DestroyContext();
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  if (headless) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
  Extent size{options.width, options.height};
  if (size.w <= 0 || size.h <= 0) size = headless ? kDefaultWindow : opening_size(display.size, screen_work_area());
  GLFWwindow* window = glfwCreateWindow(size.w, size.h, "KVScope", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "kvscope: cannot create an OpenGL 3.3 window\n");
    ImGui::DestroyContext();
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(headless ? 0 : 1);
  glfwSetDropCallback(window, on_drop);

  // The text: as asked, else as chosen before, else as large as the monitor's scale asks (a
  // screenshot: the default, whatever the screen).
  float content_scale = 1;
  if (!headless) glfwGetWindowContentScale(window, &content_scale, nullptr);
  const float monitor_px = monitor_text_size(content_scale);
  const float text_px = options.text_size > 0 ? options.text_size
                        : headless           ? kDefaultTextSize
                        : display.text_size > 0 ? display.text_size
                                                : monitor_px;
  setup_fonts_and_style(text_px);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  set_gl_textures_enabled(true);

  int rc = 0;
  {
    Shell shell(app, views, window, display, text_px, monitor_px);
    if (headless) {
      const std::string single = options.view == "all" ? "" : options.view;
      try {
        for (const ScriptCommand& c : script) shell.run_script_command(c, single);
        shell.settle(single);  // with a hovering mouse, the frames its tooltip needs to show
        // A job a script started failed: exit 2 with its message, as for a command.
        if (!app.first_error.empty()) throw InputError(app.first_error);
        int fb_w = 0, fb_h = 0;
        glfwGetFramebufferSize(window, &fb_w, &fb_h);
        write_framebuffer_png(options.screenshot_path, 0, 0, fb_w, fb_h, fb_h);
      } catch (const InputError& e) {
        std::fprintf(stderr, "kvscope: %s\n", e.what());
        rc = 2;
      }
    } else {
      if (!script.empty()) {  // the trace the commands refer to opens first
        app.io.wait_idle();
        app.io.drain();
      }
      for (const ScriptCommand& c : script) {
        try {
          if (is_mouse_command(c)) throw script_error(c.verb, c.arg, "works in screenshots only: in a window the mouse is yours");
          if (is_key_command(c)) throw script_error(c.verb, c.arg, "works in screenshots only: in a window the keyboard is yours");
          if (c.verb == "resize")
            throw script_error(c.verb, c.arg, "works in screenshots only: a window's size is yours");
          if (!shell.shell_command(c)) apply_script_command(app, views, c);
        } catch (const InputError& e) {
          app.error(e.what());
        }
      }
      auto last = std::chrono::steady_clock::now();
      while (!glfwWindowShouldClose(window)) {
        const bool busy = app.io.busy() || app.engine.busy() || app.playing;
        if (busy) glfwWaitEventsTimeout(1.0 / 60.0);
        else glfwWaitEventsTimeout(0.25);
        const auto now = std::chrono::steady_clock::now();
        const double dt = std::chrono::duration<double>(now - last).count();
        last = now;
        shell.frame(dt, "");
        glfwSwapBuffers(window);
        if (io.WantSaveIniSettings) save_layout(ini);
      }
      save_layout(ini);
    }
  }
  app.io.cancel_all();
  app.engine.cancel_all();
  app.io.wait_idle();
  app.engine.wait_idle();
  views.clear();  // their GL textures go while the context is current
  set_gl_textures_enabled(false);
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}

}  // namespace kvs
