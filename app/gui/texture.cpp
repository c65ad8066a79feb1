// OpenGL texture upload for heatmaps (GL 1.1 entry points, valid in a 3.3 core context).
#include "app/gui/texture.h"

#include <GL/gl.h>

#include <algorithm>

namespace kvs {
namespace {
bool g_gl_enabled = false;
}  // namespace

void set_gl_textures_enabled(bool enabled) { g_gl_enabled = enabled; }

Texture::~Texture() {
  if (id_ && g_gl_enabled) glDeleteTextures(1, &id_);
}

void Texture::upload(const uint32_t* rgba, int w, int h) {
  w_ = w;
  h_ = h;
  if (!g_gl_enabled) return;
  if (!id_) glGenTextures(1, &id_);
  glBindTexture(GL_TEXTURE_2D, id_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
}

std::vector<uint32_t> colorize(const std::vector<float>& scaled, const std::vector<uint32_t>& table) {
  std::vector<uint32_t> out(scaled.size());  // [h, w] RGBA
  for (size_t i = 0; i < scaled.size(); ++i) {
    const int k = std::clamp((int)(scaled[i] * 255.0f + 0.5f), 0, 255);
    out[i] = table[k];
  }
  return out;
}

}  // namespace kvs
