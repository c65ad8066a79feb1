// Live policy runs: the policy is the engine's CacheController (real eviction); its decisions,
// its own attention and its effect on the next-token distribution are recorded per step.
#include "analysis/live_run.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

#include "analysis/enforcing_controller.h"
#include "inference/errors.h"
#include "inference/loader.h"
#include "inference/model.h"

namespace kvs {

namespace {

// log-softmax of logits, in double for stable KL sums.
std::vector<double> log_softmax(std::span<const float> logits) {
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(v - m);
  const double lse = m + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - lse;
  return out;
}

int argmax(std::span<const float> v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Collects the decode-step logits (query at P+s) of a run.
class LogitsCapture : public AttentionObserver {
 public:
  explicit LogitsCapture(int prompt_len) : P_(prompt_len) {}
  PrefillNeed prefill_need() const override { return {false, 1}; }  // no prompt attention
  bool needs_decode_rows() const override { return false; }
  void on_logits(int pos, std::span<const float> logits) override {
    if (pos < P_) return;
    logits_.insert(logits_.end(), logits.begin(), logits.end());
  }
  std::vector<float> take() { return std::move(logits_); }
 private:
  int P_;
  std::vector<float> logits_;  // [steps, vocab]
};

// A policy run's own decode attention, scattered to dense rows: rows [S, L, H, T], lse [S, L, H].
class RowCapture : public AttentionObserver {
 public:
  RowCapture(const ModelShape& shape, int P, int S, bool keep)
      : shape_(shape), P_(P), S_(S), T_(P + S), keep_(keep) {
    if (keep_) {
      rows_.assign(static_cast<size_t>(S) * shape.n_layers * shape.n_heads * T_, 0.0f);
      lse_.assign(static_cast<size_t>(S) * shape.n_layers * shape.n_heads, 0.0f);
    }
  }
  PrefillNeed prefill_need() const override { return {false, 1}; }  // decode rows only
  bool needs_decode_rows() const override { return keep_; }
  void on_attention(const AttentionBlock& b) override {
    if (!b.decode || !keep_) return;
    const int step = b.q_pos0 - P_;
    if (step < 0 || step >= S_) return;
    const size_t lh = (static_cast<size_t>(step) * shape_.n_layers + b.layer) * shape_.n_heads + b.head;
    float* row = rows_.data() + lh * T_;
    for (int j = 0; j < b.n_keys; ++j) row[b.key(j)] = b.probs[j];
    lse_[lh] = b.lse[0];
  }
  std::vector<float> rows_;  // [S, L, H, T]
  std::vector<float> lse_;   // [S, L, H]
 private:
  ModelShape shape_;
  int P_, S_, T_;
  bool keep_;
};

// Hands an observer one part of a run: the prompt's prefill (its tokens and attention), or what
// comes after it (a prompt fed in chunks gives decode rows of its later chunks: they are the
// prompt's).
class OnePart : public AttentionObserver {
 public:
  OnePart(AttentionObserver* to, int prompt_len, bool prompt) : to_(to), P_(prompt_len), prompt_(prompt) {}
  void on_begin(const ModelConfig& c, std::span<const int> p) override {
    if (prompt_) to_->on_begin(c, p);
  }
  void on_attention(const AttentionBlock& b) override {
    if (mine(b)) to_->on_attention(b);
  }
  void on_attention_heads(std::span<const AttentionBlock> heads) override {
    if (!heads.empty() && mine(heads[0])) to_->on_attention_heads(heads);
  }
  PrefillNeed prefill_need() const override { return prompt_ ? to_->prefill_need() : PrefillNeed{false, 0, 0}; }
  bool needs_decode_rows() const override { return !prompt_ && to_->needs_decode_rows(); }
  void on_prefill_summary(const PrefillSummary& s) override {
    if (prompt_) to_->on_prefill_summary(s);
  }
  void on_prefill_end(int n) override {
    if (prompt_) to_->on_prefill_end(n);
  }
  void on_logits(int pos, std::span<const float> l) override {
    if (!prompt_ && pos >= P_) to_->on_logits(pos, l);
  }
  void on_token(int pos, int t) override {
    if ((pos < P_) == prompt_) to_->on_token(pos, t);
  }

 private:
  bool mine(const AttentionBlock& b) const { return prompt_ ? !b.decode : b.decode && b.q_pos0 >= P_; }
  AttentionObserver* to_;
  int P_;
  bool prompt_;
};

}  // namespace

ReferenceRun run_reference(Engine& engine, const std::vector<int>& prompt, int steps,
                           const std::vector<int>& forced, const SamplingOptions& sampling,
                           const RunProgress& progress, int share_window, AttentionObserver* prompt_observer) {
  const int vocab = engine.model().config.vocab_size;
  ReferenceRun ref;
  ref.prompt = prompt;
  LogitsCapture capture(static_cast<int>(prompt.size()));
  PrefillProgress prefill(progress.on_prefill_layer, progress.cancelled);
  std::optional<PrefillReducer> reducer;  // the policy runs' evidence, when the prefill is shared
  ObserverFanout fan;
  fan.add(&capture);
  fan.add(&prefill);
  std::optional<OnePart> watcher;  // prompt_observer, shown the prefill alone
  if (share_window > 0) {
    fan.add(&reducer.emplace(shape_of(engine.model().config), share_window));
    if (prompt_observer) fan.add(&watcher.emplace(prompt_observer, static_cast<int>(prompt.size()), true));
  }
  std::shared_ptr<const PrefillSnapshot> snapshot;
  GenerateRequest req;
  req.prompt = prompt;
  req.steps = steps;
  req.sampling = sampling;
  req.forced = forced;
  req.stop_at_eos = false;
  GenerateCallbacks cb;
  cb.on_token = [&](int step, int, std::span<const float>) {
    if (step > 0) ref.kv_bytes.push_back(engine.kv_bytes());
    if (progress.on_step) progress.on_step(step, steps);
  };
  cb.cancelled = progress.cancelled;
  if (reducer) cb.after_prefill = [&] { snapshot = engine.snapshot_prefill(); };
  {
    const EngineAttachment attached(engine, &fan, nullptr);
    engine.reset();
    ref.tokens = generate(engine, req, cb);
    ref.kv_bytes.push_back(engine.kv_bytes());
  }
  if (static_cast<int>(ref.tokens.size()) < steps) throw RunCancelled{};
  if (reducer) {
    ref.prefill = std::make_shared<SharedPrefill>();
    ref.prefill->snapshot = std::move(snapshot);
    ref.prefill->evidence = std::move(reducer->evidence());
    ref.prefill->window = share_window;
    ref.prefill->watched_by = prompt_observer;
  }
  ref.logits = capture.take();
  ref.peak_kv_bytes = engine.peak_kv_bytes();
  const int S = static_cast<int>(ref.logits.size() / vocab);
  for (int s = 0; s < S; ++s) {
    std::span<const float> l(ref.logits.data() + static_cast<size_t>(s) * vocab, vocab);
    ref.next.push_back(s + 1 < static_cast<int>(ref.tokens.size()) ? ref.tokens[s + 1] : argmax(l));
  }
  return ref;
}

RunData live_run(Engine& engine, Policy& policy, PolicyContext context, const ReferenceRun& reference,
                 const Tokenizer& tokenizer, const LiveRunOptions& options) {
  if (options.mode != "forced" && options.mode != "free")
    throw input_error("--mode", "expected forced or free, got '" + options.mode + "'");
  const ModelConfig& cfg = engine.model().config;
  const ModelShape shape = shape_of(cfg);
  const int P = static_cast<int>(reference.prompt.size());
  const int S = static_cast<int>(reference.tokens.size());
  const int vocab = cfg.vocab_size;

  // A policy that has the prompt fed in chunks compresses the cache between them: the run feeds
  // its own prompt, the reference's whole prefill being another one.
  const int chunk = policy.prefill_chunk();
  const bool chunked = chunk > 0 && P > chunk;
  // The observer saw the prompt in the reference's prefill: it is shown this run's decode alone.
  SharedPrefill* const sp = reference.prefill.get();
  const bool watched = sp && options.observer && options.observer == sp->watched_by;
  if (chunked && options.observer && !watched)
    throw std::logic_error("live_run: an observer of a prompt fed in chunks must have watched the reference's prefill");
  OnePart after_prompt(options.observer, P, false);
  // The reference's prefill, when it was kept for this window and the observer (if any) saw it.
  SharedPrefill* const shared = !chunked && sp && sp->snapshot && sp->window == options.window_request &&
                                        (!options.observer || watched)
                                    ? sp
                                    : nullptr;
  PrefillReducer reducer(shape, options.window_request);
  PrefillEvidence& evidence = shared ? shared->evidence : reducer.evidence();
  RowCapture rows(shape, P, S, options.keep_attention);
  LogitsCapture logits(P);
  ObserverFanout fan;
  if (!shared) fan.add(&reducer);
  fan.add(&rows);
  fan.add(&logits);
  fan.add(watched ? &after_prompt : options.observer);
  PrefillProgress prefill(options.progress.on_prefill_layer, options.progress.cancelled);
  fan.add(&prefill);

  context.shape = shape;
  context.prompt_len = P;
  context.prefill = &evidence;
  policy.begin(context);
  EnforcingController controller(policy, evidence, shape, P, S);
  if (policy.needs_key_scores()) {
    if (options.key_scores.size() != static_cast<size_t>(shape.n_layers) * shape.n_kv_heads * P)
      throw input_error(policy.spec().name, "needs the repeat-pass scores for this prompt");
    controller.key_scores = options.key_scores;
  }

  std::vector<size_t> kv_bytes;  // [n] bytes held after each step
  GenerateRequest req;
  req.prompt = reference.prompt;
  req.steps = S;
  req.sampling = options.sampling;
  // Free mode writes its own text, which ends where the model ends it (as record's does); forced
  // mode feeds the reference's tokens.
  req.stop_at_eos = options.mode == "free";
  req.end_ids = text_end_ids(engine.model(), tokenizer);
  if (options.mode == "forced") req.forced = reference.tokens;
  if (shared) req.from = shared->snapshot.get();
  if (chunked) req.prefill_chunk = chunk;
  GenerateCallbacks cb;
  cb.on_token = [&](int step, int, std::span<const float>) {
    if (step > 0) kv_bytes.push_back(engine.kv_bytes());
    if (options.progress.on_step) options.progress.on_step(step, S);
  };
  cb.cancelled = options.progress.cancelled;
  // A restored prompt is through at once.
  if (shared && options.progress.on_prefill_layer)
    cb.after_prefill = [&] { options.progress.on_prefill_layer(shape.n_layers, shape.n_layers); };
  std::vector<int> generated;
  {
    // The KVzip scores the controller puts into shared evidence are this run's alone.
    struct ScoresReturned {
      PrefillEvidence& ev;
      ~ScoresReturned() { ev.key_scores.clear(); }
    } returned{evidence};
    const EngineAttachment attached(engine, &fan, &controller);
    engine.reset();
    generated = generate(engine, req, cb);
    kv_bytes.push_back(engine.kv_bytes());
  }
  const bool cancelled = options.progress.cancelled && options.progress.cancelled();
  if (cancelled && static_cast<int>(generated.size()) < S) throw RunCancelled{};
  // Steps the run holds: S, or fewer when a free run's model chose end-of-text (the trace format
  // allows a run fewer steps than the recording; later steps read as absent).
  const int n = static_cast<int>(generated.size());
  const bool ended = n < S;

  RunData run;
  run.name = policy.spec().run_name() + "_" + options.mode;  // beside the simulated run's name
  run.policy = policy.spec().name;
  run.params_json = policy.params_json();
  run.eviction = "real";
  run.mode = options.mode;
  const EngineOptions& eo = engine.options();
  run.device = device_name(eo.device);
  run.device_dtype = storage_name(engine.model(), eo.device, eo.gpu_dtype, eo.kv_dtype);
  run.budget = policy.spec().budget;
  run.kept = std::move(controller.kept());
  const uint64_t L = shape.n_layers, H = shape.n_heads, Hkv = shape.n_kv_heads, T = P + S;
  run.kept.resize(n * L * Hkv * T);
  run.tokens.assign(reference.prompt.begin(), reference.prompt.end());
  run.tokens.insert(run.tokens.end(), generated.begin(), generated.end());
  int prev = reference.prompt.back();
  for (int t : generated) {
    run.text += tokenizer.decode_piece(prev, t);
    prev = t;
  }
  if (options.keep_attention) {
    run.attention = std::move(rows.rows_);
    run.lse = std::move(rows.lse_);
    run.attention.resize(n * L * H * T);
    run.lse.resize(n * L * H);
  }

  // Per-step comparison with the reference distribution.
  const std::vector<float> own = logits.take();  // [n, vocab]
  NamedArray kl{"kl", {static_cast<uint64_t>(n)}, {}};
  NamedArray top1{"top1_agree", {static_cast<uint64_t>(n)}, {}};
  NamedArray ref_lp{"ref_logprob", {static_cast<uint64_t>(n)}, {}};
  // KV bytes per (layer, KV head) as the simulator counts them: held entries x K and V in fp32.
  NamedArray bytes{"kv_bytes", {static_cast<uint64_t>(n), L, Hkv}, std::vector<float>(n * L * Hkv, 0.0f)};
  for (size_t a = 0; a < bytes.data.size(); ++a) {
    const uint8_t* kept = run.kept.data() + a * T;  // [T]
    bytes.data[a] = static_cast<float>(T - std::count(kept, kept + T, 0)) * static_cast<float>(shape.kv_bytes_per_entry());
  }
  double ratio_sum = 0.0;  // over steps: bytes the engine holds after the step / the full cache's
  double nll = 0.0, full_nll = 0.0;  // the reference continuation's, under the run and under the full cache
  int first_div = -1, compared = 0;
  // Free mode: step s's logits come after feeding the run's token s, the reference's after its
  // own; they compare while those agree: up to the step before the first generated token that
  // differs (that step chose it). Later steps hold NaN: a distance between two different texts'
  // predictions.
  int free_div = -1;  // the first generated token that differs
  for (int s = 0; s < n && options.mode == "free" && free_div < 0; ++s)
    if (generated[s] != reference.tokens[s]) free_div = s;
  if (ended && free_div < 0) free_div = n;  // its end-of-text is the first token that differs
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int s = 0; s < n; ++s) {
    ratio_sum += static_cast<double>(kv_bytes[std::min<size_t>(s, kv_bytes.size() - 1)]) /
                 static_cast<double>(reference.kv_bytes[std::min<size_t>(s, reference.kv_bytes.size() - 1)]);
    if (options.mode == "free" && free_div >= 0 && s >= free_div) {
      kl.data.push_back(nan);
      top1.data.push_back(nan);
      ref_lp.data.push_back(nan);
      continue;
    }
    std::span<const float> lf(reference.logits.data() + static_cast<size_t>(s) * vocab, vocab);
    std::span<const float> lp(own.data() + static_cast<size_t>(s) * vocab, vocab);
    const auto a = log_softmax(lf), b = log_softmax(lp);
    double d = 0.0;
    for (int v = 0; v < vocab; ++v) d += std::exp(a[v]) * (a[v] - b[v]);
    kl.data.push_back(static_cast<float>(std::max(0.0, d)));
    const bool agree = argmax(lf) == argmax(lp);
    top1.data.push_back(agree ? 1.0f : 0.0f);
    ref_lp.data.push_back(static_cast<float>(b[reference.next[s]]));
    nll -= b[reference.next[s]];
    full_nll -= a[reference.next[s]];
    ++compared;
    if (first_div < 0 && options.mode == "forced" && !agree) first_div = s;  // forced: first differing top-1
  }
  // Free: the step whose choice differs, the one before the first differing token (the same
  // step forced mode names when its top-1 differs). Token 0 comes from the prompt's logits,
  // which eviction after the prompt does not change: it differs only under sampling.
  if (options.mode == "free") first_div = free_div < 0 ? -1 : std::max(0, free_div - 1);
  // The last step's choice is fed to neither run: taken as each one's top-1 (the reference's
  // next token there is its top-1 too), it differs where the step's top-1 does.
  if (options.mode == "free" && free_div < 0 && n == S && n > 0 &&
      argmax(std::span<const float>(own.data() + static_cast<size_t>(n - 1) * vocab, vocab)) != reference.next[n - 1])
    first_div = n - 1;
  run.metrics = {kl, top1, ref_lp, bytes};
  const double none = std::nan("");  // no compared step (a free run whose first token differs)
  // The full cache's peak over the steps this run holds: a free run that ended early is held
  // against the full cache at its last step (which never evicts, so holds then its most).
  const double full_peak = static_cast<double>(
      ended && n > 0 ? reference.kv_bytes[std::min<size_t>(n - 1, reference.kv_bytes.size() - 1)]
                     : reference.peak_kv_bytes);
  run.scalars = {{"perplexity", compared ? std::exp(nll / compared) : none},
                 {"full_perplexity", compared ? std::exp(full_nll / compared) : none},
                 {"compared_steps", static_cast<double>(compared)},
                 {"first_divergence", static_cast<double>(first_div)},
                 {"peak_kv_bytes", static_cast<double>(engine.peak_kv_bytes())},
                 {"full_peak_kv_bytes", full_peak},
                 {"peak_kv_ratio", full_peak > 0 ? static_cast<double>(engine.peak_kv_bytes()) / full_peak : 0.0},
                 {"mean_kv_ratio", n > 0 ? ratio_sum / n : 0.0}};
  return run;
}

}  // namespace kvs
