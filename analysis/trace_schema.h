// The trace schema's names and the pieces shared by the writer, the reader and append_runs:
// root attributes <-> TraceMeta, /runs/<name> groups <-> RunData, named float32 arrays.
// Internal to the trace implementation (docs/trace-format.md is the public description).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/trace.h"

namespace kvs::trace_schema {

inline constexpr const char* kFormat = "kvscope-trace";
inline constexpr const char* kTokenIds = "/tokens/ids";
inline constexpr const char* kTokenText = "/tokens/text";
inline constexpr const char* kDecode = "/attention/decode";
inline constexpr const char* kDecodeQueryPos = "/attention/decode_query_pos";
inline constexpr const char* kDecodeLse = "/attention/decode_lse";
inline constexpr const char* kPrefill = "/attention/prefill";
inline constexpr const char* kPrefillColsum = "/attention/prefill_colsum";
inline constexpr const char* kPrefillWindow = "/attention/prefill_window";
inline constexpr const char* kPrefillWindowLse = "/attention/prefill_window_lse";
inline constexpr const char* kPrefillKeyScores = "/attention/prefill_key_scores";
inline constexpr const char* kPrefillPooled = "/attention/prefill_pooled";
inline constexpr const char* kRuns = "/runs";

// Refuses reads larger than a file of this size can hold (deflate expands at most ~1032x),
// so a hostile header cannot make the reader allocate gigabytes.
struct SizeGuard {
  std::string path;
  uint64_t file_size = 0;
  void need(uint64_t elements, uint64_t elem_bytes, const std::string& what) const;
};

// Product of dims; throws InputError(path, ...) on overflow past 2^62.
uint64_t checked_product(const std::vector<uint64_t>& dims, const std::string& path, const std::string& what);

// Root attributes. `complete` is 0 while recording, 1 once committed.
void write_meta(hid_t file, const TraceMeta& meta, bool complete);
// Reads and range-checks the root attributes (format and schema version checked by the caller).
TraceMeta read_meta(hid_t file, const std::string& path);

// Throws InputError(path, "run '<name>': ...") when a run does not fit the trace's shape.
void validate_run(const RunData& run, const TraceMeta& meta, const std::string& path);
// Writes /runs/<name>, replacing an existing group of that name. The run must be valid.
void write_run(hid_t file, const RunData& run, const TraceMeta& meta);
std::vector<std::string> run_names(hid_t file);
// Attributes, metrics and tokens; kept, attention and lse only when with_bulk.
RunData read_run(hid_t file, const std::string& name, bool with_bulk, const TraceMeta& meta,
                 const SizeGuard& guard);
// Steps stored for a run (axis 0 of its kept dataset), checked against the trace's shape.
int run_steps(hid_t file, const std::string& name, const TraceMeta& meta, const SizeGuard& guard);

// Throws std::invalid_argument when the array's dims do not describe its data.
void validate_array(const std::string& path, const NamedArray& array);
// float32 dataset at `path` (replacing one there) with string attributes.
void write_array(hid_t file, const std::string& path, const NamedArray& array,
                 const std::vector<std::pair<std::string, std::string>>& string_attrs);
NamedArray read_array(hid_t file, const std::string& path, const SizeGuard& guard);

// "[3,2,4]" for messages.
std::string dims_text(const std::vector<uint64_t>& dims);
// Wildcard for expect_dims.
inline constexpr uint64_t kAnyDim = ~0ull;
// Checks a dataset's element class and shape (kAnyDim matches any extent) and returns its dims;
// throws InputError(path, "<name> has shape [..], expected [..]") and the like.
std::vector<uint64_t> expect_dims(hid_t file, const std::string& name, H5T_class_t cls,
                                  const std::vector<uint64_t>& expected, const std::string& path);

}  // namespace kvs::trace_schema
