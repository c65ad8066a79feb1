// Loading the in-memory part of a trace for the app, and one decode step on demand.
#include "analysis/trace_snapshot.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "inference/tokenizer.h"

namespace kvs {

const std::vector<std::string>& head_stat_names() {
  static const std::vector<std::string> names = {"alpha", "sink_mass", "locality", "entropy",
                                                 "retrieval_score"};
  return names;
}

const RunData* TraceSnapshot::run(const std::string& name) const {
  for (const RunData& r : runs)
    if (r.name == name) return &r;
  return nullptr;
}

int TraceSnapshot::q_pos(int step) const {
  if (step >= 0 && step < (int)query_pos.size()) return query_pos[step];
  return meta.prompt_len + step;
}

std::shared_ptr<TraceSnapshot> load_trace_snapshot(const TraceReader& reader) {
  auto snap = std::make_shared<TraceSnapshot>();
  snap->path = reader.path();
  snap->meta = reader.meta();
  snap->token_ids = reader.token_ids();
  snap->token_texts = reader.token_texts();
  snap->query_pos = reader.decode_query_pos();
  for (const std::string& name : head_stat_names()) {
    const std::string path = "/heads/" + name;
    if (!reader.has_array(path)) continue;
    NamedArray a = reader.read_array(path);
    a.name = name;
    if (a.dims.size() != 2) continue;
    snap->head_stats.push_back(std::move(a));
    // e.g. "estimated without training (...) on model.gguf", written by `kvscope heads --model`
    snap->head_stat_sources.push_back(reader.has_attr(path, "source") ? reader.read_string_attr(path, "source") : "");
  }
  if (reader.has_array("/layers/similarity")) {
    snap->similarity = reader.read_array("/layers/similarity");
    if (snap->similarity.dims.size() != 2) snap->similarity = NamedArray{};
  }
  for (const std::string& name : reader.run_names()) snap->runs.push_back(reader.read_run(name, false));
  const int P = snap->meta.prompt_len;
  if (P >= 0 && (size_t)P <= snap->token_texts.size())
    snap->generated_text = joined_text(std::span(snap->token_texts).subspan(P));
  return snap;
}

std::string joined_text(std::span<const std::string> token_texts) {
  const auto hex = [](char c) { return std::isxdigit((unsigned char)c) != 0; };
  std::string bytes;  // the tokens' bytes, "\xNN" of bytes >= 0x80 turned back into the byte
  for (const std::string& text : token_texts) {
    const std::string t = running_text(text);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '\\' && i + 3 < t.size() && t[i + 1] == 'x' && hex(t[i + 2]) && hex(t[i + 3])) {
        const int b = std::stoi(t.substr(i + 2, 2), nullptr, 16);
        if (b >= 0x80) {
          bytes += (char)b;
          i += 3;
          continue;
        }
      }
      bytes += t[i];
    }
  }
  return token_text_of_bytes(bytes);
}

std::string running_text(const std::string& token_text) {
  const auto hex = [](char c) { return std::isxdigit((unsigned char)c) != 0; };
  if (token_text.size() != 4 || token_text.compare(0, 2, "\\x") != 0 || !hex(token_text[2]) || !hex(token_text[3]))
    return token_text;
  const int b = std::stoi(token_text.substr(2), nullptr, 16);
  return (b > 0 && b < 0x20) || b == 0x7f ? std::string(1, (char)b) : token_text;
}

std::string token_label(const std::string& token_text) {
  std::string out;
  for (char c : running_text(token_text)) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if ((unsigned char)c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", (unsigned char)c);
      out += buf;
    } else out += c;
  }
  return out;
}

std::shared_ptr<StepSnapshot> load_step_snapshot(const TraceReader& reader, const TraceSnapshot& snap,
                                                 int step) {
  auto s = std::make_shared<StepSnapshot>();
  s->step = step;
  s->q_pos = snap.q_pos(step);
  std::vector<float> lse;  // [L, H]
  if (step >= 0 && step < snap.n_steps()) reader.read_decode_step(step, s->rows, lse);
  s->kept.resize(snap.runs.size());
  s->kept_prev.resize(snap.runs.size());
  for (size_t r = 0; r < snap.runs.size(); ++r) {
    if (step < 0 || step >= snap.n_steps()) continue;
    reader.read_run_kept_step(snap.runs[r].name, step, s->kept[r]);
    if (step > 0) reader.read_run_kept_step(snap.runs[r].name, step - 1, s->kept_prev[r]);
  }
  return s;
}

std::vector<float> per_step_series(const NamedArray& metric) {
  if (metric.dims.empty() || metric.data.empty()) return {};
  const size_t n = metric.dims[0];
  const size_t inner = metric.data.size() / std::max<size_t>(n, 1);  // product of the other dims
  std::vector<float> out(n, 0.0f);  // [n_steps]
  for (size_t s = 0; s < n; ++s) {
    double sum = 0.0;
    for (size_t i = 0; i < inner; ++i) sum += metric.data[s * inner + i];
    out[s] = inner ? (float)(sum / (double)inner) : 0.0f;
  }
  return out;
}

}  // namespace kvs
