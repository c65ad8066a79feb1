// `kvscope info FILE`: describes a model (llama2.c .bin, GGUF, HF folder) or a trace.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "analysis/trace.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/printable.h"
#include "analysis/json_writer.h"
#include "inference/chat_template.h"
#include "inference/errors.h"
#include "inference/kv_store.h"
#include "inference/loader.h"

namespace kvs {

namespace {

// Whether `path` is a regular file with the HDF5 signature; anything else (a FIFO, which would
// block when opened, included) is left to the model loader to report.
bool is_hdf5(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char sig[8] = {};
  f.read(sig, 8);
  return f.gcount() == 8 && std::string(sig, 8) == std::string("\x89HDF\r\n\x1a\n", 8);
}

std::string string_attr(const TraceReader& trace, const std::string& path, const std::string& attr) {
  return trace.has_attr(path, attr) ? trace.read_string_attr(path, attr) : "";
}

// The query heads of a stored [L, H] retrieval score above Wu et al.'s 0.1, best first (at most 8
// named): "11 of 270 query heads above 0.1: 18-6 0.667, 17-3 0.583, ...".
std::string retrieval_heads(const NamedArray& score, const ModelShape& shape) {
  const int n_heads = shape.n_heads;
  if (score.dims != std::vector<uint64_t>{(uint64_t)shape.n_layers, (uint64_t)n_heads})
    return "not shaped [layers, query heads]";
  std::vector<std::pair<float, int>> above;  // (score, layer * H + head)
  for (size_t i = 0; i < score.data.size(); ++i)
    if (score.data[i] > 0.1f) above.push_back({score.data[i], static_cast<int>(i)});
  std::stable_sort(above.begin(), above.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = std::to_string(above.size()) + " of " + std::to_string(score.data.size()) +
                    " query heads above 0.1";
  char item[48];
  for (size_t i = 0; i < above.size() && i < 8; ++i) {
    std::snprintf(item, sizeof item, "%s%d-%d %.3f", i ? ", " : ": ", above[i].second / n_heads,
                  above[i].second % n_heads, above[i].first);
    out += item;
  }
  return out + (above.size() > 8 ? ", ..." : "");
}

int info_trace(const std::string& path, bool json) {
  TraceReader trace(path);
  const TraceMeta& m = trace.meta();
  const auto runs = trace.run_names();
  // What `kvscope heads --model M trace.h5` stored: the gates a plain duoattention run takes.
  const bool has_alpha = trace.has_array("/heads/alpha"), has_retrieval = trace.has_array("/heads/retrieval_score");
  const std::string alpha_source = has_alpha ? string_attr(trace, "/heads/alpha", "source") : "";
  const std::string trials_kept = has_retrieval ? string_attr(trace, "/heads/retrieval_score", "trials_kept") : "";
  if (json) {
    JsonObject o;
    o.add("kind", "trace").add("path", path).add("schema_version", m.schema_version)
        .add("model", m.model).add("model_path", m.model_path).add("arch", m.arch)
        .add("device", m.device).add("device_dtype", m.device_dtype)
        .add("n_layers", m.shape.n_layers).add("n_heads", m.shape.n_heads)
        .add("n_kv_heads", m.shape.n_kv_heads).add("head_dim", m.shape.head_dim)
        .add("prompt_len", m.prompt_len).add("n_steps", m.n_steps)
        .add("decode_dtype", m.decode_dtype).add_bool("has_prefill_map", m.has_prefill_map)
        .add("capture_note", m.capture_note);
    if (has_alpha) o.add("alpha_source", alpha_source);
    if (has_retrieval) o.add("retrieval_trials_kept", trials_kept);
    o.add("runs", runs);
    std::printf("%s\n", o.str().c_str());
    return 0;
  }
  // An external writer may leave the provenance out: said so, not printed as blanks.
  const auto known = [](const std::string& v) { return v.empty() ? std::string("not recorded") : printable(v); };
  std::printf("trace      %s (schema %d, ", printable(path).c_str(), m.schema_version);
  if (m.writer_version.empty()) std::printf("writer not recorded)\n");
  else  // KVScope's version ("0.1.0"), or another writer's name ("hf_record.py 1 (transformers ...)")
    std::printf("written by %s%s, %s)\n", std::isdigit((unsigned char)m.writer_version[0]) ? "kvscope " : "",
                printable(m.writer_version).c_str(), known(m.created).c_str());
  if (m.model.empty() && m.model_path.empty()) {
    std::printf("model      not recorded\n");
  } else {
    std::printf("model      %s", known(m.model).c_str());
    if (!m.arch.empty()) std::printf(" (%s)", printable(m.arch).c_str());
    std::printf(" from %s\n", known(m.model_path).c_str());
  }
  if (!m.device.empty())
    std::printf("engine     %s%s%s\n", printable(m.device).c_str(),
                m.device_dtype.empty() ? ""
                : m.device == "cpu"    ? ", cache in "
                                       : ", weights and cache in ",
                printable(m.device_dtype).c_str());
  std::printf("shape      %d layer%s, %d query heads, %d KV heads, head_dim %d\n", m.shape.n_layers,
              m.shape.n_layers == 1 ? "" : "s", m.shape.n_heads, m.shape.n_kv_heads, m.shape.head_dim);
  std::printf("tokens     %d prompt + %d decode steps = %d\n", m.prompt_len, m.n_steps, m.total_len());
  std::printf("capture    decode rows %s; prefill %s%s%s\n", m.decode_dtype.c_str(),
              m.has_prefill_map ? "full map + reductions"
              : trace.has_prefill_evidence() ? "reductions only"
                                             : "none (no column sums or window rows)",
              m.capture_note.empty() ? "" : " — ", printable(m.capture_note).c_str());
  if (has_alpha)
    std::printf("alpha      stored (%s): a plain duoattention run on this trace takes these gates\n",
                alpha_source.empty() ? "no source given" : printable(alpha_source).c_str());
  if (has_retrieval)
    std::printf("retrieval  stored (%s needle trials kept): %s\n", trials_kept.empty() ? "?" : printable(trials_kept).c_str(),
                retrieval_heads(trace.read_array("/heads/retrieval_score"), m.shape).c_str());
  std::printf("runs       %zu\n", runs.size());
  for (const auto& name : runs) {
    RunData r = trace.read_run(name, false);
    const std::string engine =
        r.device.empty() ? "" : " engine=" + printable(r.device) + "/" + printable(r.device_dtype);
    std::printf("  %-28s policy=%s budget=%d eviction=%s%s%s%s params=%s\n", printable(name).c_str(),
                printable(r.policy).c_str(), r.budget, printable(r.eviction).c_str(), r.mode.empty() ? "" : " mode=",
                printable(r.mode).c_str(), engine.c_str(), printable(r.params_json).c_str());
  }
  return 0;
}

// What --chat writes for the model: "template" (its chat template, rendered), the fixed family it
// falls back to, or "" with the reason in `problem` (no template, or one that cannot be written);
// `before` and `after` are what it puts around the user's message.
struct ChatInfo {
  std::string source, before, after, problem;
};

ChatInfo chat_info(const Model& model, const Tokenizer* tok) {
  ChatInfo info;
  const std::string chat_template = chat_template_for_model(model);
  if (chat_template.empty()) {
    info.problem = "none (a base model)";
    return info;
  }
  if (tok == nullptr) {
    info.problem = "not rendered (no tokenizer)";
    return info;
  }
  const std::string marker = "{message}";
  try {
    const ChatPrompt p = chat_prompt(chat_template, *tok, marker);
    info.source = p.source;
    const std::size_t at = p.text.find(marker);
    info.before = at == std::string::npos ? p.text : p.text.substr(0, at);
    info.after = at == std::string::npos ? "" : p.text.substr(at + marker.size());
  } catch (const InputError& e) {
    info.problem = e.what();
  }
  return info;
}

// Text with its line breaks and tabs as \n and \t, quoted, other control characters as printable() shows them.
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : std::string(1, c);
  std::string quoted(1, '"');
  quoted += printable(out);
  quoted += '"';
  return quoted;
}

int info_model(const std::string& path, const std::string& tokenizer_path, bool json) {
  Model model = load_model(path);
  // The tokenizer found beside the model may be missing or not fit: the weights are still
  // described, with the tokenizer's problem in its place. A --tokenizer given must load.
  std::unique_ptr<Tokenizer> tok;
  std::string tok_problem;
  try {
    tok = load_tokenizer(model, tokenizer_path);
  } catch (const InputError& e) {
    if (!tokenizer_path.empty()) throw;
    tok_problem = e.what();
  }
  const ModelConfig& c = model.config;
  const double params = static_cast<double>(model.parameter_count());
  const Model::MatrixCount matrices = model.matrix_count();
  // K+V bytes of one position in every (layer, KV head), in fp32
  const uint64_t kv_position = KvStore::bytes_for(c.n_layers, c.n_kv_heads, c.head_dim, 1);
  const int local_layers = static_cast<int>(std::count(c.local_layers.begin(), c.local_layers.end(), 1));
  const int nope_layers = static_cast<int>(std::count(c.nope_layers.begin(), c.nope_layers.end(), 1));
  // Where the layers normalise (every layer alike): before each block, after it (OLMo 2) or both
  // (Gemma); and the QK-norm's width, head_dim or a token's heads together (OLMo 2).
  const LayerWeights* layer0 = model.weights.layers.empty() ? nullptr : &model.weights.layers[0];
  const bool pre_norms = layer0 != nullptr && !layer0->attn_norm.empty();
  const bool post_norms = layer0 != nullptr && !layer0->post_attn_norm.empty();
  const char* block_norms = pre_norms && post_norms ? "both" : post_norms ? "after" : "before";
  const int qk_norm_width = layer0 != nullptr ? static_cast<int>(layer0->q_norm.size()) : 0;
  if (json) {
    JsonObject o;
    o.add("kind", "model").add("path", path).add("format", model.format).add("arch", c.arch)
        .add("name", c.name).add("weight_type", model.weight_type).add("dim", c.dim)
        .add("hidden_dim", c.hidden_dim).add("n_layers", c.n_layers).add("n_heads", c.n_heads)
        .add("n_kv_heads", c.n_kv_heads).add("head_dim", c.head_dim).add("vocab_size", c.vocab_size)
        .add("seq_len", c.seq_len).add("sliding_window", c.sliding_window)
        .add("rope_theta", static_cast<double>(c.rope_theta))
        .add("rotary_dim", c.rot_dim())
        .add("rope_scaling", c.rope_scaling.type)
        .add("rope_factor", static_cast<double>(c.rope_scaling.factor))
        .add("rope_attention_factor", static_cast<double>(c.rope_scaling.attention_factor))
        .add("rope_style", c.rope_style == RopeStyle::Interleaved ? "interleaved" : "rotate_half")
        .add_bool("tied_classifier", c.tied_classifier).add_bool("qkv_bias", c.qkv_bias)
        .add_bool("qk_norm", c.qk_norm).add("qk_norm_width", qk_norm_width).add("block_norms", block_norms)
        .add("activation", c.activation == Activation::GeluTanh ? "gelu_tanh" : "silu")
        .add("local_layers", local_layers)
        .add("nope_layers", nope_layers)
        .add("attn_softcap", static_cast<double>(c.attn_softcap))
        .add("final_softcap", static_cast<double>(c.final_softcap))
        .add("parameters", params)
        .add("weight_bytes_per_token", static_cast<double>(model.weight_bytes_per_token()))
        .add("matrices", matrices.matrices)
        .add("matrices_as_stored", matrices.as_stored)
        .add("kv_bytes_per_position", static_cast<double>(kv_position));
    if (tok) o.add("tokenizer", tok->kind()).add("end_ids", text_end_ids(model, *tok));
    else o.add_null("tokenizer").add("tokenizer_problem", tok_problem);
    const ChatInfo chat = chat_info(model, tok.get());
    if (chat.source.empty()) o.add_null("chat").add("chat_problem", chat.problem);
    else o.add("chat", chat.source).add("chat_before", chat.before).add("chat_after", chat.after);
    std::printf("%s\n", o.str().c_str());
    return 0;
  }
  std::printf("model      %s\n", path.c_str());
  std::printf("name       %s (%s, format %s, weights %s)\n", c.name.c_str(), c.arch.c_str(),
              model.format.c_str(), model.weight_type.c_str());
  std::printf("shape      dim %d, ffn %d, %d layer%s, %d query heads, %d KV heads (GQA %d), head_dim %d\n",
              c.dim, c.hidden_dim, c.n_layers, c.n_layers == 1 ? "" : "s", c.n_heads, c.n_kv_heads, c.group(),
              c.head_dim);
  std::string window = c.sliding_window > 0 ? " (sliding window " + std::to_string(c.sliding_window) : "";
  if (local_layers > 0) {
    char base[64];
    std::snprintf(base, sizeof base, "%g", c.rope_local_theta);
    window += " on " + std::to_string(local_layers) + " of " + std::to_string(c.n_layers) +
              " layers, local rope theta " + base;
  }
  if (!window.empty()) window += ")";
  std::string scaling;  // "[, the first R of D dims][, TYPE scaling by F[ over N positions][, attention factor A]]"
  if (c.rot_dim() != c.head_dim)
    scaling = ", the first " + std::to_string(c.rot_dim()) + " of " + std::to_string(c.head_dim) + " dims";
  if (const RopeScaling& r = c.rope_scaling; !r.type.empty()) {
    char text[160];
    std::snprintf(text, sizeof text, ", %s scaling by %g", r.type.c_str(), r.factor);
    scaling += text;
    if (r.type != "linear") scaling += " over " + std::to_string(r.original_max_position) + " positions";
    if (r.attention_factor != 1.0f) {
      std::snprintf(text, sizeof text, ", attention factor %.4g", r.attention_factor);
      scaling += text;
    }
  }
  if (nope_layers > 0)  // SmolLM3's layers without positions
    scaling += ", none on " + std::to_string(nope_layers) + " of " + std::to_string(c.n_layers) + " layers (NoPE)";
  std::printf("vocab      %d; context %d%s; rope theta %g (%s%s); rms eps %g\n", c.vocab_size, c.seq_len,
              window.c_str(), c.rope_theta, c.rope_style == RopeStyle::Interleaved ? "interleaved pairs" : "rotate-half",
              scaling.c_str(), c.rms_eps);
  std::string caps;  // Gemma 2's soft caps
  for (const auto& [what, cap] : {std::pair{"scores", c.attn_softcap}, std::pair{"logits", c.final_softcap}}) {
    char text[64];
    std::snprintf(text, sizeof text, "%s%s soft-capped at %g", caps.empty() ? ", " : " and ", what, cap);
    if (cap > 0.0f) caps += text;
  }
  const char* qk_norm = !c.qk_norm                     ? ""
                        : qk_norm_width > c.head_dim ? ", q and k RMS-normed across heads"
                                                     : ", q/k heads RMS-normed";
  std::printf("params     %.1f M (%s classifier%s%s%s%s%s)\n", params / 1e6, c.tied_classifier ? "tied" : "separate",
              c.qkv_bias ? ", q/k/v biases" : "", qk_norm,
              post_norms ? (pre_norms ? ", norms before and after each block" : ", norms after each block only") : "",
              c.activation == Activation::GeluTanh ? ", GeGLU" : "", caps.c_str());
  // "memory     111.6 MB of weights read per decoded token; 211 matrices, all kept as stored"
  const std::string kept = matrices.as_stored == 0                   ? "all in fp32"
                           : matrices.as_stored == matrices.matrices ? "all kept as stored"
                                                                     : std::to_string(matrices.as_stored) +
                                                                           " kept as stored, the rest in fp32";
  std::printf("memory     %.1f MB of weights read per decoded token; %d matrices, %s\n",
              static_cast<double>(model.weight_bytes_per_token()) / 1e6, matrices.matrices, kept.c_str());
  // "kv cache   46.1 KB a position in fp32, 23.0 KB in fp16 or bf16 (--kv-dtype); 377.5 and 188.7 MB at
  // the whole 8192-token context"
  std::printf("kv cache   %.1f KB a position in fp32, %.1f KB in fp16 or bf16 (--kv-dtype); %.1f and %.1f MB at "
              "the whole %d-token context\n",
              static_cast<double>(kv_position) / 1e3, static_cast<double>(kv_position) / 2e3,
              static_cast<double>(kv_position) * c.seq_len / 1e6, static_cast<double>(kv_position) * c.seq_len / 2e6,
              c.seq_len);
  if (tok) {
    std::string ends;  // every token that ends a generated text
    for (int id : text_end_ids(model, *tok)) ends += (ends.empty() ? "" : ", ") + std::to_string(id);
    std::printf("tokenizer  %s, %d tokens, bos %d, eos %d; the text ends at %s\n", tok->kind().c_str(),
                tok->vocab_size(), tok->bos_id(), tok->eos_id(), ends.c_str());
  } else {
    std::printf("tokenizer  none: %s\n", tok_problem.c_str());
  }
  const ChatInfo chat = chat_info(model, tok.get());
  if (chat.source.empty())
    std::printf("chat       %s\n", chat.problem.c_str());
  else
    std::printf("chat       %s: %s + message + %s\n",
                chat.source == "template" ? "its chat template" : ("the " + chat.source + " fixed format").c_str(),
                escaped(chat.before).c_str(), escaped(chat.after).c_str());
  return 0;
}

}  // namespace

int cmd_info(const ArgList& argv) {
  Args a(argv, {"--tokenizer"}, {"--json"});
  if (a.positional().size() != 1) throw input_error("info", "expects one model or trace path");
  const std::string& path = a.positional()[0];
  // A .h5 name that is not HDF5 is a damaged or mistaken trace, not a model of some other format.
  const std::string ext = std::filesystem::path(path).extension().string();
  if (is_hdf5(path) || ext == ".h5" || ext == ".hdf5") {
    if (a.has("--tokenizer")) throw input_error("--tokenizer", "applies to a model, and " + path + " is a trace");
    return info_trace(path, a.has("--json"));
  }
  return info_model(path, a.str("--tokenizer"), a.has("--json"));
}

}  // namespace kvs
