// Helpers of the tests that run the app itself under Xvfb: the kvscope binary, a fixture that runs
// `kvscope gui ...` (one Xvfb server for a batch) in a scratch folder holding the synthetic test
// trace, the PNGs it writes read back with stb_image, and where two of them differ. The fixture
// skips when the app or xvfb-run is not available.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#ifdef KVSCOPE_GUI
#include <stb/stb_image.h>
#endif

#include "tests/app/gui_test_trace.h"
#include "tests/test_paths.h"

namespace kvs::gui_test {

inline std::string binary() { return test::kvscope_binary(); }

inline bool have_xvfb() { return std::system("command -v xvfb-run >/dev/null 2>&1") == 0; }

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> rgb;  // [h, w, 3]
  const unsigned char* at(int x, int y) const { return &rgb[((size_t)y * w + x) * 3]; }
};

// The PNG at `path` as RGB (empty when it cannot be read).
inline Image load_png(const std::string& path) {
  Image img;
#ifdef KVSCOPE_GUI
  int n = 0;
  unsigned char* data = stbi_load(path.c_str(), &img.w, &img.h, &n, 3);
  if (data) {
    img.rgb.assign(data, data + (size_t)img.w * img.h * 3);
    stbi_image_free(data);
  }
#endif
  return img;
}

inline double luminance_stddev(const Image& img) {
  double sum = 0, sq = 0;
  const size_t n = (size_t)img.w * img.h;
  for (size_t i = 0; i < n; ++i) {
    const double y = 0.299 * img.rgb[3 * i] + 0.587 * img.rgb[3 * i + 1] + 0.114 * img.rgb[3 * i + 2];
    sum += y;
    sq += y * y;
  }
  const double mean = sum / (double)n;
  return std::sqrt(std::max(0.0, sq / (double)n - mean * mean));
}

struct Point {
  int x = 0, y = 0;
};

// The smallest rectangle holding every pixel for which keep(x, y) holds (empty: x1 < x0).
struct Box {
  int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1;
  bool empty() const { return x1 < x0; }
  Point center() const { return {(x0 + x1) / 2, (y0 + y1) / 2}; }
  int width() const { return x1 - x0 + 1; }
  int height() const { return y1 - y0 + 1; }
};

template <class Keep>
Box box_of(const Image& img, Keep keep) {
  Box b;
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x)
      if (keep(x, y)) b.x0 = std::min(b.x0, x), b.y0 = std::min(b.y0, y), b.x1 = std::max(b.x1, x), b.y1 = std::max(b.y1, y);
  return b;
}

inline bool same_pixel(const Image& a, const Image& b, int x, int y) {
  return std::equal(a.at(x, y), a.at(x, y) + 3, b.at(x, y));
}

// Where two pictures of one size differ.
inline Box diff_box(const Image& a, const Image& b) {
  return box_of(a, [&](int x, int y) { return !same_pixel(a, b, x, y); });
}

// The stretches of row y between x0 and x1 (exclusive) whose pixels are unlike `bg`, as [first,
// last] columns, left to right: the controls on a row of a panel.
inline std::vector<std::pair<int, int>> row_runs(const Image& img, int y, int x0, int x1, const unsigned char* bg) {
  std::vector<std::pair<int, int>> runs;
  int start = -1;
  for (int x = x0; x < x1; ++x) {
    const bool other = !std::equal(bg, bg + 3, img.at(x, y));
    if (other && start < 0) start = x;
    if (!other && start >= 0) runs.push_back({start, x - 1}), start = -1;
  }
  if (start >= 0) runs.push_back({start, x1 - 1});
  return runs;
}

// A point as the script's mouse commands take it: "X Y".
inline std::string at(Point p) { return std::to_string(p.x) + " " + std::to_string(p.y); }

inline size_t differing_pixels(const Image& a, const Image& b) {
  size_t d = 0;
  for (size_t i = 0; i + 2 < a.rgb.size() && i + 2 < b.rgb.size(); i += 3)
    d += a.rgb[i] != b.rgb[i] || a.rgb[i + 1] != b.rgb[i + 1] || a.rgb[i + 2] != b.rgb[i + 2];
  return d;
}

// Runs the app on the synthetic trace (trace_) in a folder of its own, removed afterwards.
class ScreenshotFixture : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef KVSCOPE_GUI
    GTEST_SKIP() << "built without the desktop app";
#endif
    if (!have_xvfb()) GTEST_SKIP() << "xvfb-run not installed";
    if (!std::filesystem::exists(binary())) GTEST_SKIP() << "kvscope binary not built: " << binary();
    dir_ = std::filesystem::temp_directory_path() / ("kvscope_gui_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    trace_ = (dir_ / "synthetic.h5").string();
    write_gui_test_trace(trace_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Runs `kvscope gui <args>` under Xvfb; returns its exit code (-1 when it did not run), its
  // stderr in err_.
  int gui(const std::string& args) {
    const std::vector<int> codes = gui_batch({args});
    return codes.empty() ? -1 : codes[0];
  }

  // Runs several `kvscope gui <args>` under one Xvfb server (one start-up for all); returns
  // their exit codes in order, as each program reported it (not xvfb-run's own status, which a
  // hiccup in its clean-up of /tmp can turn into 5). Their stderr, together, in err_.
  std::vector<int> gui_batch(const std::vector<std::string>& arg_lists) {
    const std::string script = (dir_ / "batch.sh").string(), codes = (dir_ / "codes.txt").string();
    const std::string err = (dir_ / "stderr.txt").string();
    {
      std::ofstream sh(script);
      sh << "rm -f \"" << codes << "\" \"" << err << "\"\n";
      for (const std::string& args : arg_lists)
        sh << "\"" << binary() << "\" gui " << args << " >/dev/null 2>>\"" << err << "\"; echo $? >> \"" << codes
           << "\"\n";
    }
    const std::string cmd = "xvfb-run -a -s \"-screen 0 1600x1000x24\" env HOME=" + dir_.string() + " sh \"" + script + "\"";
    const int xvfb_status = std::system(cmd.c_str());
    std::vector<int> out;
    std::ifstream in(codes);
    for (int rc; in >> rc;) out.push_back(rc);
    if (out.size() != arg_lists.size()) ADD_FAILURE() << "xvfb-run ran " << out.size() << " of " << arg_lists.size()
                                                     << " programs (its status " << xvfb_status << ")";
    std::ifstream e(err);
    err_.assign(std::istreambuf_iterator<char>(e), {});
    return out;
  }

  // `kvscope gui TRACE --view VIEW --size SIZE --screenshot NAME.png --script SCRIPT` for each
  // (name, script), under one Xvfb; all must exit 0. TRACE is traces[i] for the i-th script when
  // given (scripts that change their trace, each on a copy of its own), else trace_.
  std::vector<Image> shots(const std::string& view, const std::string& size,
                           const std::vector<std::pair<std::string, std::string>>& named_scripts,
                           const std::vector<std::string>& traces = {}) {
    std::vector<std::string> runs;
    for (size_t i = 0; i < named_scripts.size(); ++i) {
      const auto& [name, script] = named_scripts[i];
      runs.push_back("\"" + (i < traces.size() ? traces[i] : trace_) + "\" --view " + view + " --size " + size +
                     " --screenshot \"" + png(name) + "\"" + (script.empty() ? "" : " --script \"" + script + "\""));
    }
    std::vector<Image> out;
    if (gui_batch(runs) != std::vector<int>(runs.size(), 0)) {
      ADD_FAILURE() << err_;
      return out;
    }
    for (const auto& [name, script] : named_scripts) out.push_back(load_png(png(name)));
    return out;
  }

  std::string png(const std::string& name) const { return (dir_ / (name + ".png")).string(); }

  // `kvscope gui TRACE --screenshot bad.png ARGS` for each (ARGS, message), under one Xvfb: each
  // exits 2 with the one line "kvscope: <message>", and no PNG is written.
  void expect_refused(const std::vector<std::pair<std::string, std::string>>& cases) {
    std::vector<std::string> runs;
    std::string want;
    for (const auto& [args, message] : cases) {
      runs.push_back("\"" + trace_ + "\" --screenshot \"" + png("bad") + "\" " + args);
      want += "kvscope: " + message + "\n";
    }
    ASSERT_EQ(gui_batch(runs), std::vector<int>(runs.size(), 2)) << err_;
    EXPECT_EQ(err_, want);
    EXPECT_FALSE(std::filesystem::exists(png("bad")));
  }

  std::filesystem::path dir_;
  std::string trace_, err_;
};

}  // namespace kvs::gui_test
