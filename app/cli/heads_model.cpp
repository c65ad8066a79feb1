// α estimation and retrieval scores on a model, printed per head and optionally written as a
// DuoAttention pattern folder (full_attention_heads.tsv + config.json).
#include "app/cli/heads_model.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "analysis/alpha_estimate.h"
#include "analysis/duo_pattern.h"
#include "analysis/retrieval_score.h"
#include "analysis/json_writer.h"
#include "analysis/trace.h"
#include "app/cli/device_flag.h"
#include "app/cli/policy_setup.h"
#include "inference/errors.h"
#include "inference/loader.h"

namespace kvs {

namespace {

std::string no_trial_kept(const RetrievalScores& scores) {
  return "none of the " + std::to_string(scores.n_trials) +
         " needle trials was kept (the model copied no needle), so no head has a score; nothing stored";
}

}  // namespace

RetrievalScores score_retrieval_heads(const Model& model, const Tokenizer& tokenizer, int threads,
                                      KvDtype kv_dtype) {
  RetrievalOptions ro;
  ro.context_tokens = {std::min(200, model.config.seq_len / 2)};
  ro.engine.n_threads = threads;
  ro.engine.kv_dtype = kv_dtype;
  return retrieval_scores(model, tokenizer, ro);
}

void store_retrieval_scores(const std::string& trace_path, const Model& model, const RetrievalScores& scores,
                            KvDtype kv_dtype) {
  if (scores.n_kept() == 0) throw input_error("retrieval scores", no_trial_kept(scores));
  const uint64_t L = model.config.n_layers, H = model.config.n_heads;
  append_array(trace_path, "/heads/retrieval_score", {"retrieval_score", {L, H}, scores.mean()},
               {{"definition", "Wu et al. retrieval score on needle prompts, mean over kept trials (docs/analyses.md)"},
                {"model_path", model.path},
                {"trials_kept", std::to_string(scores.n_kept()) + " of " + std::to_string(scores.n_trials)},
                {"kv_dtype", kv_dtype_name(kv_dtype)}});
}

int heads_from_model(const HeadsModelOptions& options) {
  const std::string& trace_path = options.trace_path;
  const std::string& alpha_out = options.alpha_out;
  const bool json = options.json;
  Model model = load_model(options.model_path);
  auto tok = load_tokenizer(model, options.tokenizer_path);
  const ModelConfig& c = model.config;
  KvDtype kv_dtype = options.kv_dtype.value_or(KvDtype::Fp32);
  if (!trace_path.empty()) {  // before the long part
    const TraceMeta meta = TraceReader(trace_path).meta();
    check_model_matches(model, meta);
    check_appendable(trace_path);
    // The recording's cache unless told otherwise: what is stored describes the model as it ran there.
    if (!options.kv_dtype) kv_dtype = recorded_storage(meta).kv;
  }
  if (!alpha_out.empty()) check_duo_pattern_output(alpha_out);

  AlphaEstimateOptions ao;
  ao.sink = options.sink;
  ao.recent = options.recent;
  ao.context_tokens = std::min(256, c.seq_len / 2);
  ao.engine.n_threads = options.threads;
  ao.engine.kv_dtype = kv_dtype;
  if (!json && isatty(fileno(stderr)))
    ao.progress = [](int done, int total) {
      std::fprintf(stderr, "\rkvscope: estimating alpha %d/%d", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  const AlphaEstimate est = estimate_alpha(model, *tok, ao);
  if (!alpha_out.empty()) write_alpha_pattern(alpha_out, est);
  if (!trace_path.empty())  // DuoAttention's gates for simulate and rerun on this trace
    append_array(trace_path, "/heads/alpha", {"alpha", {(uint64_t)c.n_layers, (uint64_t)c.n_kv_heads}, est.alpha},
                 {{"source", est.source() + " on " + model.path}});

  const RetrievalScores rs = score_retrieval_heads(model, *tok, options.threads, kv_dtype);
  const std::vector<float> retrieval = rs.mean();  // [L, H]
  const bool scored = rs.n_kept() > 0;
  if (!trace_path.empty() && scored) store_retrieval_scores(trace_path, model, rs, kv_dtype);

  if (json) {
    JsonObject o;
    o.add("n_layers", c.n_layers).add("n_heads", c.n_heads).add("n_kv_heads", c.n_kv_heads)
        .add("alpha", std::vector<double>(est.alpha.begin(), est.alpha.end()))
        .add("alpha_source", est.source());
    if (scored) o.add("retrieval_score", std::vector<double>(retrieval.begin(), retrieval.end()));
    else o.add_null("retrieval_score");  // no trial kept: no score, not a score of 0
    o.add("retrieval_trials", rs.n_trials).add("retrieval_trials_kept", rs.n_kept());
    std::printf("%s\n", o.str().c_str());
    return 0;
  }
  std::printf("alpha per KV head (%s)\n", est.source().c_str());
  for (int l = 0; l < c.n_layers; ++l) {
    std::printf("layer %2d", l);
    for (int g = 0; g < c.n_kv_heads; ++g) std::printf("  %.3f", est.alpha[static_cast<size_t>(l) * c.n_kv_heads + g]);
    std::printf("\n");
  }
  if (!scored) std::printf("retrieval scores: %s\n", no_trial_kept(rs).c_str());
  else std::printf("retrieval score per query head (%d of %d needle trials kept)\n", rs.n_kept(), rs.n_trials);
  for (int l = 0; l < c.n_layers && scored; ++l) {
    std::printf("layer %2d", l);
    for (int h = 0; h < c.n_heads; ++h) std::printf("  %.3f", retrieval[static_cast<size_t>(l) * c.n_heads + h]);
    std::printf("\n");
  }
  if (!alpha_out.empty())
    std::printf("alpha written to %s\n",
                (std::filesystem::path(alpha_out) / "full_attention_heads.tsv").lexically_normal().c_str());
  if (!trace_path.empty() && scored)
    std::printf("alpha and retrieval scores stored in %s as /heads/alpha and /heads/retrieval_score\n", trace_path.c_str());
  else if (!trace_path.empty())
    std::printf("alpha stored in %s as /heads/alpha\n", trace_path.c_str());
  return 0;
}

}  // namespace kvs
