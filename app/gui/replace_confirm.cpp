// The replace-file question (ReplaceConfirm).
#include "app/gui/replace_confirm.h"

#include <imgui.h>

#include <filesystem>

namespace kvs {

bool ReplaceConfirm::clear_to_write(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return true;
  path_ = path;
  open_ = true;
  return false;
}

bool ReplaceConfirm::draw() {
  if (open_) {
    ImGui::OpenPopup("Replace file?");
    open_ = false;
  }
  bool replace = false;
  const ImVec2 center = ImGui::GetMainViewport()->GetCenter();
  ImGui::SetNextWindowPos(center, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal("Replace file?", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::Text("%s exists.", path_.c_str());
    ImGui::TextUnformatted("Replace it? What it holds is lost.");
    if (ImGui::Button("Replace")) {
      replace = true;
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  return replace;
}

}  // namespace kvs
