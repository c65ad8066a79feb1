// Config folder, layout file locations and recent-file lists.
#include "app/gui/settings.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "analysis/atomic_file.h"

namespace kvs {

std::string config_dir() {
  std::filesystem::path dir;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) dir = std::filesystem::path(xdg) / "kvscope";
  else if (const char* home = std::getenv("HOME"); home && *home) dir = std::filesystem::path(home) / ".config" / "kvscope";
  else return "";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return ec ? "" : dir.string();
}

std::string layout_ini_path() {
  const std::string dir = config_dir();
  return dir.empty() ? "" : dir + "/imgui.ini";
}

std::string assets_dir() {
  if (const char* env = std::getenv("KVSCOPE_ASSETS"); env && *env) return env;
#ifdef KVSCOPE_ASSETS
  return KVSCOPE_ASSETS;
#else
  return "assets";
#endif
}

RecentList::RecentList(std::string name) {
  const std::string dir = config_dir();
  if (dir.empty()) return;
  file_ = dir + "/" + name + ".txt";
  std::ifstream in(file_);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) items_.push_back(line);
}

void RecentList::add(const std::string& path) {
  items_.erase(std::remove(items_.begin(), items_.end(), path), items_.end());
  items_.insert(items_.begin(), path);
  if (items_.size() > 10) items_.resize(10);
  if (file_.empty()) return;
  std::string text;
  for (const std::string& item : items_) text += item + '\n';
  try {
    write_file_atomically(file_, text);  // whole or not at all: a crash never halves the list
  } catch (const std::exception&) {
    // A list that cannot be saved keeps working for this session.
  }
}

}  // namespace kvs
