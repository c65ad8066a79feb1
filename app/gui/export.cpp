// CSV writing and framebuffer-to-PNG capture (stb_image_write is implemented here).
#include "app/gui/export.h"

#include <GL/gl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include "inference/errors.h"

namespace kvs {
namespace {

std::string quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

void write_row(std::ofstream& out, const std::vector<std::string>& row) {
  for (size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << quote(row[i]);
  out << "\n";
}

}  // namespace

std::string csv_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void write_csv(const std::string& path, const CsvTable& table) {
  std::ofstream out(path);
  if (!out) throw input_error(path, "cannot write CSV file");
  write_row(out, table.header);
  for (const auto& row : table.rows) write_row(out, row);
  if (!out) throw input_error(path, "write failed");
}

void write_framebuffer_png(const std::string& path, int x, int y, int w, int h, int fb_height) {
  if (w <= 0 || h <= 0) throw input_error(path, "nothing to capture (empty region)");
  std::vector<uint8_t> pixels((size_t)w * h * 4);  // [h, w, RGBA], bottom row first as GL reads
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(x, fb_height - y - h, w, h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<uint8_t> flipped(pixels.size());  // [h, w, RGBA], top row first
  for (int r = 0; r < h; ++r)
    std::copy_n(pixels.data() + (size_t)(h - 1 - r) * w * 4, (size_t)w * 4, flipped.data() + (size_t)r * w * 4);
  for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;  // opaque
  if (!stbi_write_png(path.c_str(), w, h, 4, flipped.data(), w * 4))
    throw input_error(path, "cannot write PNG file");
}

}  // namespace kvs
