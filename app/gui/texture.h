// An RGBA OpenGL texture for heatmaps (attention maps, overlays), shown with ImGui::Image.
#pragma once
#include <cstdint>
#include <vector>

namespace kvs {

class Texture {
 public:
  Texture() = default;
  ~Texture();
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;

  // Uploads rgba [h, w] (row 0 at the top), nearest-neighbour sampling so cells stay crisp.
  void upload(const uint32_t* rgba, int w, int h);
  void* id() const { return (void*)(uintptr_t)id_; }
  int width() const { return w_; }
  int height() const { return h_; }
  bool valid() const { return w_ > 0 && h_ > 0; }

 private:
  unsigned int id_ = 0;
  int w_ = 0, h_ = 0;
};

// GL uploads happen only once the app has a GL context and enables them; without (the frame
// benchmark builds views with no renderer) upload() records the size and skips the GL calls.
void set_gl_textures_enabled(bool enabled);

// Colours values [h, w] already scaled to [0, 1] with a colormap table of 256 entries.
std::vector<uint32_t> colorize(const std::vector<float>& scaled, const std::vector<uint32_t>& table);

}  // namespace kvs
