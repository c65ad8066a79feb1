// Reader and writer of DuoAttention pattern folders in the published layout.
#include "analysis/duo_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "inference/errors.h"
#include "inference/json.h"

namespace kvs {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw input_error(path, "cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Integer member `key` of config.json; -1 when absent or null (as in the published files).
int int_member(const Json& config, const std::string& key, const std::string& what) {
  const Json* v = config.find(key);
  if (!v || v->is_null()) return -1;
  if (!v->is_number() || v->as_number() != std::floor(v->as_number()) || std::fabs(v->as_number()) > 1e9)
    throw input_error(what, "member '" + key + "' is not an integer");
  return static_cast<int>(v->as_number());
}

}  // namespace

DuoPattern parse_duo_tsv(const std::string& text, const std::string& what) {
  DuoPattern p;
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? text.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (start < text.size()) throw input_error(what, "empty line " + std::to_string(line_no));
      break;
    }
    int cols = 0;
    size_t f0 = 0;
    while (true) {
      size_t tab = line.find('\t', f0);
      std::string field = line.substr(f0, tab == std::string::npos ? std::string::npos : tab - f0);
      char* end = nullptr;
      const double v = std::strtod(field.c_str(), &end);
      if (field.empty() || *end != '\0' || !std::isfinite(v))
        throw input_error(what, "line " + std::to_string(line_no) + ": '" + field + "' is not a number");
      p.alpha.push_back((float)std::clamp(v, 0.0, 1.0));
      ++cols;
      if (tab == std::string::npos) break;
      f0 = tab + 1;
    }
    if (p.n_layers == 0) p.n_kv_heads = cols;
    else if (cols != p.n_kv_heads)
      throw input_error(what, "line " + std::to_string(line_no) + " has " + std::to_string(cols) +
                                  " values, line 1 has " + std::to_string(p.n_kv_heads));
    ++p.n_layers;
  }
  if (p.n_layers == 0) throw input_error(what, "no gate values");
  return p;
}

DuoPattern read_duo_pattern(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw input_error(dir, "not a DuoAttention pattern folder");
  const std::string tsv = (fs::path(dir) / "full_attention_heads.tsv").string();
  if (!fs::exists(tsv)) throw input_error(dir, "has no full_attention_heads.tsv");
  DuoPattern p = parse_duo_tsv(read_text(tsv), tsv);
  const std::string cfg = (fs::path(dir) / "config.json").string();
  if (fs::exists(cfg)) {
    const Json config = Json::parse_file(cfg);
    if (!config.is_object()) throw input_error(cfg, "is not a JSON object");
    p.sink_size = int_member(config, "sink_size", cfg);
    p.recent_size = int_member(config, "recent_size", cfg);
  }
  return p;
}

void write_duo_pattern(const std::string& dir, const DuoPattern& pattern, const std::string& extra_json) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw input_error(dir, "cannot create folder (" + ec.message() + ")");
  const std::string tsv = (fs::path(dir) / "full_attention_heads.tsv").string();
  std::FILE* f = std::fopen(tsv.c_str(), "wb");
  if (!f) throw input_error(tsv, "cannot write");
  for (int l = 0; l < pattern.n_layers; ++l) {
    for (int g = 0; g < pattern.n_kv_heads; ++g)
      std::fprintf(f, "%s%.18e", g ? "\t" : "", (double)pattern.alpha[(size_t)l * pattern.n_kv_heads + g]);
    std::fputc('\n', f);
  }
  const bool ok = std::fclose(f) == 0;
  if (!ok) throw input_error(tsv, "write failed");
  auto num = [](int v) { return v < 0 ? std::string("null") : std::to_string(v); };
  std::string json = "{\"sink_size\": " + num(pattern.sink_size) + ", \"recent_size\": " + num(pattern.recent_size);
  if (!extra_json.empty()) json += ", " + extra_json;
  json += "}";
  const std::string cfg = (fs::path(dir) / "config.json").string();
  std::ofstream c(cfg, std::ios::binary);
  if (!(c << json)) throw input_error(cfg, "cannot write");
}

void check_duo_shape(const DuoPattern& pattern, int n_layers, int n_kv_heads, const std::string& what) {
  if (pattern.n_layers != n_layers || pattern.n_kv_heads != n_kv_heads)
    throw input_error(what, "gates are " + std::to_string(pattern.n_layers) + " layers x " +
                                std::to_string(pattern.n_kv_heads) + " KV heads, the model has " +
                                std::to_string(n_layers) + " x " + std::to_string(n_kv_heads));
}

}  // namespace kvs
