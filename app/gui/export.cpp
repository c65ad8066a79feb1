// CSV writing and framebuffer-to-PNG capture (stb_image_write is implemented here).
#include "app/gui/export.h"

#include <GL/gl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include "analysis/atomic_file.h"
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

void write_row(std::ostringstream& out, const std::vector<std::string>& row) {
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
  std::ostringstream out;
  write_row(out, table.header);
  for (const auto& row : table.rows) write_row(out, row);
  write_file_atomically(path, out.str());
}

void check_png_output(const std::string& path) {
  static const char kSignature[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  const std::string target = output_target(path);
  std::ifstream f(target, std::ios::binary);
  if (!f) return;  // nothing there (or unreadable: writing says why)
  char head[8] = {};
  f.read(head, sizeof head);
  if (f.gcount() == 0) return;  // an empty file holds nothing to lose
  if (f.gcount() != sizeof head || !std::equal(head, head + 8, kSignature))
    throw input_error(path, "exists and is not a PNG image; not replacing it (remove it or choose another name)");
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
  check_png_output(path);
  std::string png;
  auto append = [](void* to, void* data, int size) { static_cast<std::string*>(to)->append((const char*)data, size); };
  if (!stbi_write_png_to_func(append, &png, w, h, 4, flipped.data(), w * 4))
    throw input_error(path, "cannot encode the PNG image");
  write_file_atomically(path, png);
}

}  // namespace kvs
