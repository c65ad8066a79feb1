// The "[KVScope][Display]" entry of imgui.ini and a window's rectangle, through ImGui's internal
// settings API (imgui_internal.h: settings handlers are how ImGui lets an app keep its own data in
// the ini).
#include "app/gui/window_memory.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "app/gui/fonts.h"

namespace kvs {
namespace {

void* open_entry(ImGuiContext*, ImGuiSettingsHandler* handler, const char* name) {
  return std::string_view(name) == "Display" ? handler->UserData : nullptr;
}

void read_line(ImGuiContext*, ImGuiSettingsHandler*, void* entry, const char* line) {
  auto* settings = static_cast<DisplaySettings*>(entry);
  int w = 0, h = 0;
  float px = 0;
  if (std::sscanf(line, "Size=%d,%d", &w, &h) == 2 && w > 0 && h > 0) settings->size = {w, h};
  if (std::sscanf(line, "TextSize=%f", &px) == 1 && px >= kMinTextSize && px <= kMaxTextSize) settings->text_size = px;
  if (std::sscanf(line, "LayoutTextSize=%f", &px) == 1 && px >= kMinTextSize && px <= kMaxTextSize)
    settings->layout_text_size = px;
}

void write_all(ImGuiContext*, ImGuiSettingsHandler* handler, ImGuiTextBuffer* out) {
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  if (display.x <= 0 || display.y <= 0) return;  // a minimized window says nothing of the layout
  out->appendf("[%s][Display]\nSize=%d,%d\n", handler->TypeName, (int)display.x, (int)display.y);
  const DisplaySettings& settings = *static_cast<DisplaySettings*>(handler->UserData);
  if (settings.text_size > 0) out->appendf("TextSize=%g\n", settings.text_size);
  if (settings.layout_text_size > 0) out->appendf("LayoutTextSize=%g\n", settings.layout_text_size);
  out->append("\n");
}

}  // namespace

void register_display_settings(DisplaySettings* settings) {
  ImGuiSettingsHandler handler;
  handler.TypeName = "KVScope";
  handler.TypeHash = ImHashStr("KVScope");
  handler.ReadOpenFn = open_entry;
  handler.ReadLineFn = read_line;
  handler.WriteAllFn = write_all;
  handler.UserData = settings;
  ImGui::GetCurrentContext()->SettingsHandlers.push_back(handler);
}

Extent opening_size(Extent wanted, Extent screen) {
  if (screen.w > 0) wanted.w = std::min(wanted.w, screen.w);
  if (screen.h > 0) wanted.h = std::min(wanted.h, screen.h);
  return wanted;
}

std::optional<Rect> window_rect(const char* title) {
  if (const ImGuiWindow* w = ImGui::FindWindowByName(title)) return Rect{w->Pos.x, w->Pos.y, w->Size.x, w->Size.y};
  const ImGuiWindowSettings* s = ImGui::FindWindowSettings(ImHashStr(title));
  if (s && s->Size.x > 0 && s->Size.y > 0)
    return Rect{(float)s->Pos.x, (float)s->Pos.y, (float)s->Size.x, (float)s->Size.y};
  return std::nullopt;
}

}  // namespace kvs
