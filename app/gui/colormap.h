// Perceptual colormaps (viridis, magma) as 256-entry RGBA tables, and scaling of values to [0, 1]
// for display (linear or logarithmic).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvs {

enum class Colormap { kViridis = 0, kMagma = 1 };

// 256 packed RGBA colours (R in the low byte, as ImGui's IM_COL32 and GL_RGBA/UNSIGNED_BYTE).
const std::vector<uint32_t>& colormap_table(Colormap map);
uint32_t colormap_color(Colormap map, float t);  // t in [0, 1], clamped

// Maps values to [0, 1]: linear = v / vmax; log = log10(v / vmax) over [log10(floor), 0].
// vmax <= 0 -> the maximum of the values.
void scale_values(const float* v, size_t n, bool log_scale, float vmax, float floor, float* out);
// A log scale's floor for these values: the 5th percentile of the positive ones over the largest,
// kept within [1e-8, 1e-4] (at least four decades). A sink head putting all but 1e-6 of its mass on
// one key showed a flat map under a fixed 1e-4.
float log_floor(const float* v, size_t n);

}  // namespace kvs
