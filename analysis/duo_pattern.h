// DuoAttention pattern folders (POLICIES.md §8.1): full_attention_heads.tsv (one line per layer,
// one tab-separated '%.18e' gate per KV head) and a single-line config.json.
#pragma once
#include <string>
#include <vector>

namespace kvs {

struct DuoPattern {
  int n_layers = 0;
  int n_kv_heads = 0;
  std::vector<float> alpha;  // [L, Hkv] gates clipped to [0, 1]
  int sink_size = -1;        // config.json "sink_size" (training value), -1 when absent/null
  int recent_size = -1;      // config.json "recent_size", -1 when absent/null
};

// Parses the TSV text; `what` names the file in errors. Throws InputError for a non-number, a
// ragged table or an empty file.
DuoPattern parse_duo_tsv(const std::string& text, const std::string& what);

// Reads DIR/full_attention_heads.tsv and, when present, DIR/config.json.
DuoPattern read_duo_pattern(const std::string& dir);

// Writes DIR/config.json (one line: sink_size, recent_size and `alpha_source`, the member that
// marks a pattern KVScope wrote), then DIR/full_attention_heads.tsv ('%.18e', tabs, '\n'), each
// under a temporary name renamed into place. Creates DIR. Throws InputError, after
// check_duo_pattern_output's checks or when a file cannot be written.
void write_duo_pattern(const std::string& dir, const DuoPattern& pattern, const std::string& alpha_source);

// Throws InputError unless write_duo_pattern may write into DIR without losing anything: DIR is
// absent or a folder, and what it holds of config.json and full_attention_heads.tsv (regular
// files, or links to them) is a pattern KVScope wrote: a config.json with "alpha_source", gates
// that parse. A model's config.json, or a published pattern, is refused.
void check_duo_pattern_output(const std::string& dir);

// Throws InputError unless the pattern is [n_layers, n_kv_heads].
void check_duo_shape(const DuoPattern& pattern, int n_layers, int n_kv_heads, const std::string& what);

}  // namespace kvs
