// Test support: an AttentionObserver that copies every event (attention rows, tokens, logits).
#pragma once
#include <span>
#include <vector>

#include "inference/hooks.h"

namespace kvs::tiny {

struct CapturedRow {
  int layer = 0, head = 0, q_pos = 0;
  bool decode = false;
  std::vector<int> keys;     // [n_keys] key positions
  std::vector<float> probs;  // [n_keys]
  float lse = 0.0f;
};

struct CapturedBlock {
  int layer = 0, head = 0, q_pos0 = 0, n_q = 0, n_keys = 0;
  bool decode = false;
};

class Capture : public AttentionObserver {
 public:
  void on_begin(const ModelConfig&, std::span<const int> prompt) override {
    begun.assign(prompt.begin(), prompt.end());
  }
  void on_attention(const AttentionBlock& b) override {
    blocks.push_back({b.layer, b.head, b.q_pos0, b.n_q, b.n_keys, b.decode});
    for (int i = 0; i < b.n_q; ++i) {
      CapturedRow r;
      r.layer = b.layer;
      r.head = b.head;
      r.q_pos = b.q_pos0 + i;
      r.decode = b.decode;
      r.lse = b.lse[i];
      for (int j = 0; j < b.n_keys; ++j) {
        r.keys.push_back(b.key(j));
        r.probs.push_back(b.probs[static_cast<std::size_t>(i) * b.n_keys + j]);
      }
      rows.push_back(std::move(r));
    }
  }
  void on_prefill_end(int n) override { prefill_end = n; }
  void on_logits(int pos, std::span<const float> l) override {
    logits_pos.push_back(pos);
    logits.emplace_back(l.begin(), l.end());
  }
  void on_token(int pos, int t) override { tokens.emplace_back(pos, t); }

  std::vector<int> begun;                  // prompt given to on_begin
  std::vector<CapturedBlock> blocks;       // in delivery order
  std::vector<CapturedRow> rows;           // every row of every block
  int prefill_end = -1;
  std::vector<int> logits_pos;
  std::vector<std::vector<float>> logits;  // [events][vocab]
  std::vector<std::pair<int, int>> tokens; // (pos, token)
};

}  // namespace kvs::tiny
