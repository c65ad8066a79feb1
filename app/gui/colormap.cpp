// Colormap tables: matplotlib's viridis and magma (CC0, by Stefan van der Walt and Nathaniel
// Smith), sampled at 256 points as matplotlib 3.11 does (cmap(i / 255)), stored as RRGGBB hex.
#include "app/gui/colormap.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

namespace kvs {
namespace {

constexpr std::string_view kViridisHex =
    "44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769"
    "48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a"
    "472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85"
    "4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b"
    "3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d"
    "33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e"
    "2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e"
    "26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d"
    "21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88"
    "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81"
    "28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74"
    "3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863"
    "5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d"
    "84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32"
    "addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a"
    "d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725";
constexpr std::string_view kMagmaHex =
    "00000401000501010601010802010902020b02020d03030f03031204041405041606051806051a07061c08071e090720"
    "0a08220b09240c09260d0a290e0b2b100b2d110c2f120d31130d34140e36150e38160f3b180f3d19103f1a10421c1044"
    "1d11471e114920114b21114e22115024125325125527125829115a2a115c2c115f2d11612f1163311165331067341069"
    "36106b38106c390f6e3b0f703d0f713f0f72400f74420f75440f764510774710784910784a10794c117a4e117b4f127b"
    "51127c52137c54137d56147d57157e59157e5a167e5c167f5d177f5f187f601880621980641a80651a80671b80681c81"
    "6a1c816b1d816d1d816e1e81701f81721f817320817521817621817822817922827b23827c23827e2482802582812581"
    "8326818426818627818827818928818b29818c29818e2a81902a81912b81932b80942c80962c80982d80992d809b2e7f"
    "9c2e7f9e2f7fa02f7fa1307ea3307ea5317ea6317da8327daa337dab337cad347cae347bb0357bb2357bb3367ab5367a"
    "b73779b83779ba3878bc3978bd3977bf3a77c03a76c23b75c43c75c53c74c73d73c83e73ca3e72cc3f71cd4071cf4070"
    "d0416fd2426fd3436ed5446dd6456cd8456cd9466bdb476adc4869de4968df4a68e04c67e24d66e34e65e44f64e55064"
    "e75263e85362e95462ea5661eb5760ec5860ed5a5fee5b5eef5d5ef05f5ef1605df2625df2645cf3655cf4675cf4695c"
    "f56b5cf66c5cf66e5cf7705cf7725cf8745cf8765cf9785df9795df97b5dfa7d5efa7f5efa815ffb835ffb8560fb8761"
    "fc8961fc8a62fc8c63fc8e64fc9065fd9266fd9467fd9668fd9869fd9a6afd9b6bfe9d6cfe9f6dfea16efea36ffea571"
    "fea772fea973feaa74feac76feae77feb078feb27afeb47bfeb67cfeb77efeb97ffebb81febd82febf84fec185fec287"
    "fec488fec68afec88cfeca8dfecc8ffecd90fecf92fed194fed395fed597fed799fed89afdda9cfddc9efddea0fde0a1"
    "fde2a3fde3a5fde5a7fde7a9fde9aafdebacfcecaefceeb0fcf0b2fcf2b4fcf4b6fcf6b8fcf7b9fcf9bbfcfbbdfcfdbf";

std::vector<uint32_t> parse(std::string_view hex) {
  std::vector<uint32_t> table(256);  // [256] RGBA
  auto byte = [&](size_t at) { return (uint32_t)std::stoul(std::string(hex.substr(at, 2)), nullptr, 16); };
  for (size_t i = 0; i < 256; ++i)
    table[i] = byte(6 * i) | (byte(6 * i + 2) << 8) | (byte(6 * i + 4) << 16) | 0xFF000000u;
  return table;
}

}  // namespace

const std::vector<uint32_t>& colormap_table(Colormap map) {
  static const std::vector<uint32_t> viridis = parse(kViridisHex);
  static const std::vector<uint32_t> magma = parse(kMagmaHex);
  return map == Colormap::kMagma ? magma : viridis;
}

uint32_t colormap_color(Colormap map, float t) {
  const int i = (int)std::lround(std::clamp(t, 0.0f, 1.0f) * 255.0f);
  return colormap_table(map)[i];
}

void scale_values(const float* v, size_t n, bool log_scale, float vmax, float floor, float* out) {
  if (vmax <= 0.0f) {
    vmax = 0.0f;
    for (size_t i = 0; i < n; ++i) vmax = std::max(vmax, v[i]);
  }
  if (vmax <= 0.0f) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  if (!log_scale) {
    for (size_t i = 0; i < n; ++i) out[i] = std::clamp(v[i] / vmax, 0.0f, 1.0f);
    return;
  }
  const float lo = std::log10(floor);  // < 0
  for (size_t i = 0; i < n; ++i) {
    const float r = v[i] / vmax;
    out[i] = r <= floor ? 0.0f : std::clamp(1.0f - std::log10(r) / lo, 0.0f, 1.0f);
  }
}

float log_floor(const float* v, size_t n) {
  std::vector<float> positive;  // [values > 0]
  float vmax = 0.0f;
  for (size_t i = 0; i < n; ++i)
    if (v[i] > 0.0f) {
      positive.push_back(v[i]);
      vmax = std::max(vmax, v[i]);
    }
  if (positive.empty()) return 1e-4f;
  const auto p5 = positive.begin() + positive.size() / 20;
  std::nth_element(positive.begin(), p5, positive.end());
  return std::clamp(*p5 / vmax, 1e-8f, 1e-4f);
}

}  // namespace kvs
