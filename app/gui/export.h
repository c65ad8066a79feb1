// Exporting what a view shows: its data as CSV, its pixels as PNG. Both are written under a
// temporary name and renamed into place, and replace only regular files (through a link: its target).
#pragma once
#include <string>
#include <vector>

namespace kvs {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }
};

// Writes RFC 4180 CSV; throws InputError when the file cannot be written.
void write_csv(const std::string& path, const CsvTable& table);
std::string csv_number(double v);

// Throws InputError unless `path` may receive a PNG without losing anything: nothing there, an
// empty file, or a regular file (or a link to one) that holds a PNG image (its signature).
void check_png_output(const std::string& path);

// Reads the current framebuffer region (x, y from the top-left, in framebuffer pixels) and
// writes it as PNG; throws InputError after check_png_output's checks or when the file cannot be
// written.
void write_framebuffer_png(const std::string& path, int x, int y, int w, int h, int fb_height);

}  // namespace kvs
