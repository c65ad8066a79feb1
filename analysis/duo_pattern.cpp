// Reader and writer of DuoAttention pattern folders in the published layout; the writer replaces
// only a pattern it wrote itself.
#include "analysis/duo_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/atomic_file.h"
#include "analysis/json_writer.h"
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

// True when `cfg` is a config.json that write_duo_pattern wrote: an object with "alpha_source".
bool written_by_kvscope(const std::string& cfg) {
  try {
    const Json config = Json::parse_file(cfg);
    const Json* source = config.is_object() ? config.find("alpha_source") : nullptr;
    return source && source->is_string();
  } catch (const InputError&) {
    return false;
  }
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

void check_duo_pattern_output(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) return require_writable_folder(dir, dir);  // the folder to be created
  if (!fs::is_directory(status)) throw input_error(dir, "exists and is not a folder; not writing a DuoAttention pattern into it");
  const std::string cfg = (fs::path(dir) / "config.json").string();
  const std::string tsv = (fs::path(dir) / "full_attention_heads.tsv").string();
  const std::string cfg_target = output_target(cfg), tsv_target = output_target(tsv);  // devices, FIFOs, links to nothing
  const bool has_cfg = fs::exists(cfg_target, ec), has_tsv = fs::exists(tsv_target, ec);
  const std::string refusal = "is not part of a DuoAttention pattern KVScope wrote; not replacing it (choose another folder)";
  if (has_cfg && !written_by_kvscope(cfg_target)) throw input_error(cfg, refusal);
  if (has_tsv && !has_cfg) throw input_error(tsv, refusal);  // gates without KVScope's config.json beside them
  if (has_tsv) {
    try {
      parse_duo_tsv(read_text(tsv_target), tsv);
    } catch (const InputError&) {
      throw input_error(tsv, refusal);
    }
  }
}

void write_duo_pattern(const std::string& dir, const DuoPattern& pattern, const std::string& alpha_source) {
  namespace fs = std::filesystem;
  check_duo_pattern_output(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw input_error(dir, "cannot create folder (" + ec.message() + ")");
  std::string gates;
  char field[40];
  for (int l = 0; l < pattern.n_layers; ++l) {
    for (int g = 0; g < pattern.n_kv_heads; ++g) {
      std::snprintf(field, sizeof field, "%s%.18e", g ? "\t" : "", (double)pattern.alpha[(size_t)l * pattern.n_kv_heads + g]);
      gates += field;
    }
    gates += '\n';
  }
  JsonObject config;
  auto size = [&](const char* key, int value) { value < 0 ? config.add_null(key) : config.add(key, value); };
  size("sink_size", pattern.sink_size);
  size("recent_size", pattern.recent_size);
  config.add("alpha_source", alpha_source);
  // config.json first: a folder left between the two renames still reads as KVScope's.
  write_file_atomically((fs::path(dir) / "config.json").string(), config.str());
  write_file_atomically((fs::path(dir) / "full_attention_heads.tsv").string(), gates);
}

void check_duo_shape(const DuoPattern& pattern, int n_layers, int n_kv_heads, const std::string& what) {
  if (pattern.n_layers != n_layers || pattern.n_kv_heads != n_kv_heads)
    throw input_error(what, "gates are " + std::to_string(pattern.n_layers) + " layers x " +
                                std::to_string(pattern.n_kv_heads) + " KV heads, the model has " +
                                std::to_string(n_layers) + " x " + std::to_string(n_kv_heads));
}

}  // namespace kvs
