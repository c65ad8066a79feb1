// Where the app keeps its state between runs (~/.config/kvscope or $XDG_CONFIG_HOME/kvscope):
// the window layout (imgui.ini) and the recent traces and models.
#pragma once
#include <string>
#include <vector>

namespace kvs {

std::string config_dir();                 // created on demand; "" when no home folder
std::string layout_ini_path();            // config_dir()/imgui.ini
std::string assets_dir();                 // $KVSCOPE_ASSETS or the build-time assets folder

// A most-recent-first list of paths kept in config_dir()/<name>.txt (at most 10).
class RecentList {
 public:
  explicit RecentList(std::string name);
  const std::vector<std::string>& items() const { return items_; }
  void add(const std::string& path);  // moves to the front and saves
 private:
  std::string file_;
  std::vector<std::string> items_;
};

}  // namespace kvs
