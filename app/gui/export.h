// Exporting what a view shows: its data as CSV, its pixels as PNG.
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

// Reads the current framebuffer region (x, y from the top-left, in framebuffer pixels) and
// writes it as PNG; throws InputError when the file cannot be written.
void write_framebuffer_png(const std::string& path, int x, int y, int w, int h, int fb_height);

}  // namespace kvs
