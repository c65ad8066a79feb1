// Hook interfaces of the engine (DESIGN.md "one policy, two drivers").
//
// AttentionObserver: receives attention evidence, tokens and logits as the engine runs; the trace
//   recorder, prefill reducers and policies implement it. The engine does not know who listens.
// CacheController: decides, per (layer, KV head), which cached positions stay and which of them
//   the next attention reads. The engine asks it before each decode attention and applies its
//   evictions after. Eviction policies implement it; the simulator drives the same objects over a
//   recorded trace through a KvSlots that holds positions only.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/group_rows.h"

namespace kvs {

struct ModelConfig;

// Attention probabilities of one query head for a block of consecutive query positions.
// Prefill delivers blocks of rows per (layer, head) over keys 0..q_pos0+n_q-1 (causal: a row's
// keys past its own position are 0); decode delivers one row per (layer, head) over the keys the
// query actually attended (its KV head's active entries, which include itself).
struct AttentionBlock {
  int layer = 0;
  int head = 0;                      // query head; its KV head is head / (n_heads / n_kv_heads)
  int q_pos0 = 0;                    // position of the first query row
  int n_q = 0;                       // rows in this block
  int n_keys = 0;                    // keys per row
  const int32_t* key_pos = nullptr;  // [n_keys] ascending positions; nullptr = 0..n_keys-1
  const float* probs = nullptr;      // [n_q, n_keys] softmax rows, fp32, each sums to 1
  const float* lse = nullptr;        // [n_q] log-sum-exp of the scaled logits q.k/sqrt(d) of each
                                     // row over its keys: logit_j = log(probs_j) + lse
  bool decode = false;               // false during prefill

  int key(int j) const { return key_pos ? key_pos[j] : j; }

  // A decode row: the query at q_pos over n_keys keys at key_pos.
  static AttentionBlock decode_row(int layer, int head, int q_pos, int n_keys, const int32_t* key_pos,
                                   const float* probs, const float* lse) {
    AttentionBlock b;
    b.layer = layer;
    b.head = head;
    b.q_pos0 = q_pos;
    b.n_q = 1;
    b.n_keys = n_keys;
    b.key_pos = key_pos;
    b.probs = probs;
    b.lse = lse;
    b.decode = true;
    return b;
  }

  // A prefill block: rows of queries q_pos0..q_pos0+n_q-1 over keys 0..q_pos0+n_q-1.
  static AttentionBlock prefill(int layer, int head, int q_pos0, int n_q, const float* probs, const float* lse) {
    AttentionBlock b;
    b.layer = layer;
    b.head = head;
    b.q_pos0 = q_pos0;
    b.n_q = n_q;
    b.n_keys = q_pos0 + n_q;
    b.probs = probs;
    b.lse = lse;
    return b;
  }
};

// What an observer needs of the prompt's attention. rows: the blocks of rows (on_attention) —
// the whole P x P map passes by. Otherwise its reductions suffice: per (layer, head) the column
// sums, the last `window` rows and, when pool_block > 0, the map pooled in pool_block x
// pool_block cells (on_prefill_summary), which a GPU backend computes on the device instead of
// copying the map.
struct PrefillNeed {
  bool rows = true;
  int window = 0;
  int pool_block = 0;  // 0: no pooled map
};

// Prefill reductions of one (layer, head) over the P prompt queries.
struct PrefillSummary {
  int layer = 0;
  int head = 0;
  int prompt_len = 0;                  // P
  int window = 0;                      // W <= P
  const float* colsum = nullptr;       // [P] sum over the P queries of their attention to each key
  const float* window_rows = nullptr;  // [W, P] rows of queries P-W..P-1 (0 past the diagonal)
  const float* window_lse = nullptr;   // [W] their log-sum-exp (as AttentionBlock::lse)
  int pool_block = 0;                  // 0: no pooled map in this summary
  const float* pooled = nullptr;       // [nb, nb], nb = ceil(P / pool_block): cell (a, b) = mean
                                       // over queries of pool row a of their mass on pool column b
};

// In one prefill an engine delivers either the blocks of rows (on_attention, to every observer)
// or, when no observer needs rows, the summaries (on_prefill_summary) — never both.
class AttentionObserver {
 public:
  virtual ~AttentionObserver() = default;
  // A new sequence starts with these prompt tokens (BOS included).
  virtual void on_begin(const ModelConfig& config, std::span<const int> prompt) {}
  // Attention evidence; see AttentionBlock. Pointers are valid during the call only.
  virtual void on_attention(const AttentionBlock& block) {}
  // One layer's decode rows at once, its query heads in order: what on_attention would get one
  // block at a time, in that order (by default it does). An engine that has a layer's rows
  // together (the GPU backend) delivers them so, and an observer may then process the heads in
  // parallel. Pointers are valid during the call only.
  virtual void on_attention_heads(std::span<const AttentionBlock> heads) {
    for (const AttentionBlock& b : heads) on_attention(b);
  }
  virtual PrefillNeed prefill_need() const { return {}; }
  // Whether it reads decode rows (on_attention / on_attention_heads during Engine::decode). Asked
  // at each decode step; when no listener does, the engine delivers none (a GPU backend then
  // leaves them on the device). Tokens and logits come either way.
  virtual bool needs_decode_rows() const { return true; }
  // Prefill reductions (see PrefillNeed); pointers are valid during the call only.
  virtual void on_prefill_summary(const PrefillSummary& summary) {}
  // Every layer of the prompt has been processed.
  virtual void on_prefill_end(int prompt_len) {}
  // Next-token logits [vocab] computed at position pos.
  virtual void on_logits(int pos, std::span<const float> logits) {}
  // Token fed to the model at position pos (prompt tokens and generated ones).
  virtual void on_token(int pos, int token) {}
};

// Forwards every event to several observers, in order.
class ObserverFanout : public AttentionObserver {
 public:
  void add(AttentionObserver* o) { if (o) observers_.push_back(o); }
  bool empty() const { return observers_.empty(); }
  void on_begin(const ModelConfig& c, std::span<const int> p) override { for (auto* o : observers_) o->on_begin(c, p); }
  void on_attention(const AttentionBlock& b) override { for (auto* o : observers_) o->on_attention(b); }
  void on_attention_heads(std::span<const AttentionBlock> heads) override {
    for (auto* o : observers_) o->on_attention_heads(heads);
  }
  bool needs_decode_rows() const override {
    for (auto* o : observers_)
      if (o->needs_decode_rows()) return true;
    return false;
  }
  PrefillNeed prefill_need() const override {
    PrefillNeed need{false, 0, 0};  // the widest window, the coarsest pooling asked for
    for (auto* o : observers_) {
      const PrefillNeed n = o->prefill_need();
      need.rows = need.rows || n.rows;
      need.window = n.window > need.window ? n.window : need.window;
      need.pool_block = n.pool_block > need.pool_block ? n.pool_block : need.pool_block;
    }
    return need;
  }
  void on_prefill_summary(const PrefillSummary& s) override { for (auto* o : observers_) o->on_prefill_summary(s); }
  void on_prefill_end(int n) override { for (auto* o : observers_) o->on_prefill_end(n); }
  void on_logits(int pos, std::span<const float> l) override { for (auto* o : observers_) o->on_logits(pos, l); }
  void on_token(int pos, int t) override { for (auto* o : observers_) o->on_token(pos, t); }
 private:
  std::vector<AttentionObserver*> observers_;
};

// The cache seen as positions: per (layer, KV head), the positions it holds (ascending) and
// whether the next attention reads each of them. The engine implements it over real K/V storage
// (evict frees the entries' rows for later appends); the simulator implements it over positions
// only.
class KvSlots {
 public:
  virtual ~KvSlots() = default;
  virtual int n_layers() const = 0;
  virtual int n_kv_heads() const = 0;
  // Positions held by (layer, kv_head), ascending.
  virtual std::span<const int32_t> held(int layer, int kv_head) const = 0;
  // Per held entry: 1 = attended by the next attention, 0 = retained but inactive (skipped).
  // New entries arrive active. Same length and order as held().
  virtual std::span<uint8_t> active(int layer, int kv_head) = 0;
  // Removes the held entries whose keep[i] == 0 (keep has held().size() entries).
  virtual void evict(int layer, int kv_head, std::span<const uint8_t> keep) = 0;
};

// A ranking of one layer's decode keys that the engine computes where the rows are (on the GPU
// for a CUDA run), for a controller that needs it and not the rows: the k keys at positions
// below `below`, among those the layer's heads attended, with the largest logit
// (log p + lse) maximized over the layer's query heads; among equal ones the later positions.
struct KeyRanking {
  int k = 0;  // 0: no ranking
  int below = 0;
};

// One KV head's decode rows reduced over its query heads (CacheController::group_rows):
// values[j] belongs to the key at key_pos[j], among the keys the KV head's query heads attended.
struct GroupRow {
  int kv_head = 0;
  int n_keys = 0;
  const int32_t* key_pos = nullptr;  // [n_keys] ascending positions; nullptr = 0..n_keys-1
  const float* values = nullptr;     // [n_keys]

  int key(int j) const { return key_pos ? key_pos[j] : j; }
};

class CacheController {
 public:
  virtual ~CacheController() = default;
  // The prompt (prompt_len positions) went through full attention in every layer; compress it.
  virtual void after_prefill(int prompt_len, KvSlots& kv) = 0;
  // Decode: the query at q_pos is about to attend in `layer`; its own key is already held and
  // active. Mark inactive what it must skip (evictions may also happen here). Engine::extend
  // calls it once a layer for a chunk of queries (q_pos the first; see there).
  virtual void before_attention(int layer, int q_pos, KvSlots& kv) = 0;
  // Decode: the query at q_pos attended in `layer`; heads[h] is query head h's row over the keys
  // it attended, or heads is empty where needs_decode_rows(layer) is false. Evict here ("attend,
  // then evict").
  virtual void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads,
                               KvSlots& kv) = 0;
  // Whether after_attention reads the rows at `layer` (asked at each decode step). Where it does
  // not, a GPU backend need not bring them to the host, nor wait for them, before calling it.
  virtual bool needs_decode_rows(int layer) const { return true; }
  // The ranking wanted at `layer` (asked at each decode step; k = 0: none). The engine then
  // calls on_key_ranking just before after_attention.
  virtual KeyRanking key_ranking(int layer) const { return {}; }
  // Decode: the positions key_ranking(layer) asked for, ascending (all of them when fewer than k
  // keys qualify).
  virtual void on_key_ranking(int layer, int q_pos, std::span<const int32_t> positions) {}
  // The reduction of the decode rows wanted at `layer` (asked at each decode step; nullopt: none):
  // per KV head, its query heads' rows, each renormalized over the keys it attended, reduced
  // element-wise (ops::reduce_group_rows, kernels/group_rows.h). The engine makes it where the
  // rows are (on the GPU for a CUDA run: n_kv rows then cross PCIe, not n_heads), then calls
  // on_group_rows just before after_attention.
  virtual std::optional<ops::GroupReduce> group_rows(int layer) const { return std::nullopt; }
  // Decode: the rows group_rows(layer) asked for, one a KV head in order, valid until
  // after_attention returns.
  virtual void on_group_rows(int layer, int q_pos, std::span<const GroupRow> rows) {}
};

}  // namespace kvs
