// The CPU engine's state (Engine::State): the cache, the RoPE table, the hooks attached, the
// decode step's activations and scratch. Shared by the forward pass (engine.cpp) and the prefill
// snapshots (engine_snapshot.cpp); nothing else includes it.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "inference/attended_rows.h"
#include "inference/decode_team.h"
#include "inference/engine.h"
#include "inference/group_rows.h"
#include "inference/hooks.h"
#include "inference/kv_store.h"
#include "inference/model.h"
#include "kernels/rope.h"

namespace kvs {

struct Engine::State {
  State(const Model& m, bool rope_in_cache, KvDtype kv_dtype)
      : store(m.config.n_layers, m.config.n_kv_heads, m.config.head_dim, m.config.seq_len, kv_row_type(kv_dtype)),
        ropes{rope_table(m, RopeTableKind::Global), rope_table(m, RopeTableKind::Long),
              rope_table(m, RopeTableKind::Local), rope_table(m, RopeTableKind::None)},
        config(m.config),
        rope_in_cache(rope_in_cache),
        ranges_left(std::make_unique<std::atomic<int>[]>(m.config.n_kv_heads)) {}

  KvStore store;
  // The RoPE tables by RopeTableKind (empty for a kind the model has no layers of).
  std::array<ops::RopeTable, kRopeTableKinds> ropes;
  const ModelConfig& config;  // the model's, which outlives the engine
  bool long_rope = false;     // the forward pass under way rotates with LongRoPE's long factors
  const bool rope_in_cache;  // EngineOptions::rope_in_cache
  AttentionObserver* observer = nullptr;
  CacheController* controller = nullptr;
  DecodeTeam team;
  int pos = 0;

  // Decode activations.
  std::vector<float> x;       // [dim] residual stream
  std::vector<float> xb;      // [dim] normalised input / projection output
  std::vector<float> q;       // [q_dim]
  std::vector<float> k;       // [kv_dim]
  std::vector<float> v;       // [kv_dim]
  std::vector<float> att;     // [q_dim] attention output of every head
  std::vector<float> gate;    // [hidden_dim]
  std::vector<float> up;      // [hidden_dim]
  std::vector<float> logits;  // [vocab]
  // Decode attention scratch, sized to the largest head's storage rows `cap` (>= its entries).
  int cap = 0;
  std::vector<int32_t> rows;     // [n_kv_heads, cap] storage rows of active entries, where they are not a run
  std::vector<int32_t> key_pos;  // [n_kv_heads, cap] their positions, where copied
  std::vector<int> n_rows;       // [n_kv_heads]
  std::vector<int> head_first;   // [n_kv_heads] the first entry at or after the window's start
  std::vector<const int32_t*> head_rows;  // [n_kv_heads] -> [n_rows[g]] storage rows, in `rows` or the store
  std::vector<const int32_t*> head_pos;   // [n_kv_heads] -> [n_rows[g]] positions, in `key_pos` or the store
  std::vector<float> probs;      // [n_heads, cap]
  std::vector<float> lse;        // [n_heads]
  // Decode attention split into ranges of kRangeKeys keys per KV head (see decode_token).
  std::vector<std::pair<int, int>> ranges;  // [n_ranges] (KV head, range) pairs of the layer
  std::vector<float> part_out;   // [n_heads, max_ranges, head_dim] unnormalized value mixes
  std::vector<float> part_m;     // [n_heads, max_ranges] largest scaled score of each range
  std::vector<float> part_l;     // [n_heads, max_ranges] sum of exps of each range
  std::unique_ptr<std::atomic<int>[]> ranges_left;  // [n_kv_heads] ranges of the layer not yet done
  std::vector<float> qrot;       // [n_heads, head_dim] queries rotated by slot (rope_in_cache)
  std::vector<float> krot;       // [n_kv_heads, cap, head_dim] keys rotated by slot (rope_in_cache)
  std::vector<AttentionBlock> blocks;  // [n_heads]
  HostGroupRows group_rows;            // a controller's group rows, when it asks for them

  // Lists, per KV head of `layer`, the active entries at positions >= first_pos (head_rows: their
  // storage rows, head_pos, n_rows), growing the scratch buffers to the largest head. Where they
  // are one run of entries (no controller, or one that left every entry active), the rows and
  // positions point into the store's own lists, unless a controller is set: it may evict while it
  // reads the positions, so they are copied then (the rows are read before it runs).
  void gather_active(int layer, int first_pos) {
    const int n_kv = store.n_kv_heads(), n_heads = static_cast<int>(lse.size());
    int largest = 0;
    for (int g = 0; g < n_kv; ++g) largest = std::max(largest, store.rows_used(layer, g));
    if (largest > cap) {
      cap = largest;
      rows.resize(static_cast<std::size_t>(n_kv) * cap);
      key_pos.resize(static_cast<std::size_t>(n_kv) * cap);
      probs.resize(static_cast<std::size_t>(n_heads) * cap);
      if (rope_in_cache) krot.resize(static_cast<std::size_t>(n_kv) * cap * store.head_dim());
    }
    for (int g = 0; g < n_kv; ++g) {
      const std::span<const int32_t> held = store.held(layer, g);
      const std::span<const int32_t> held_rows = store.rows(layer, g);
      const std::span<uint8_t> active = store.active(layer, g);
      int32_t* r = rows.data() + static_cast<std::size_t>(g) * cap;
      int32_t* kp = key_pos.data() + static_cast<std::size_t>(g) * cap;
      const std::size_t j0 = window_start(held, first_pos);
      int n = 0;
      if (!std::memchr(active.data() + j0, 0, active.size() - j0)) {  // all active: a run
        n = static_cast<int>(held.size() - j0);
        head_rows[g] = held_rows.data() + j0;
        if (controller) std::copy(held.begin() + j0, held.end(), kp);
        head_pos[g] = controller ? kp : held.data() + j0;
      } else {
        n = list_attended(held, held_rows, active, j0, r, kp);
        head_rows[g] = r;
        head_pos[g] = kp;
      }
      if (n == 0) {
        throw std::logic_error("cache controller left layer " + std::to_string(layer) +
                               " KV head " + std::to_string(g) + " with no active key");
      }
      n_rows[g] = n;
      head_first[g] = static_cast<int>(j0);
    }
  }

  // Starts a forward pass over positions up to end - 1: those positions in the tables the layers
  // use, and the global layers' table (LongRoPE's long one where the pass ends past the original
  // context).
  void prepare_rope(int end) {
    long_rope = config.long_rope(end);
    for (int l = 0; l < config.n_layers; ++l) rope_of(l).reserve(end);  // (a table reserved already returns)
  }
  ops::RopeTable& rope_of(int layer) { return ropes[static_cast<int>(config.rope_table_of(layer, long_rope))]; }
  const ops::RopeTable& rope_of(int layer) const {
    return ropes[static_cast<int>(config.rope_table_of(layer, long_rope))];
  }

  // rope_in_cache: rotates every attended (pre-RoPE) key of `layer` by its slot in the cache (its
  // index among the head's entries) into krot, at its storage row, and each query (from q) by its
  // KV head's last slot into qrot.
  void rotate_by_slot(int layer, ops::RopePairing pairing) {
    const ops::RopeTable& rope = rope_of(layer);
    const int hd = store.head_dim(), n_heads = static_cast<int>(lse.size());
    const int group = n_heads / store.n_kv_heads();
    for (int g = 0; g < store.n_kv_heads(); ++g) {
      float* kr = krot.data() + static_cast<std::size_t>(g) * cap * hd;
      const std::span<const int32_t> held_rows = store.rows(layer, g);
      const std::span<uint8_t> active = store.active(layer, g);
      for (int j = head_first[g]; j < static_cast<int>(held_rows.size()); ++j) {
        if (!active[j]) continue;
        const std::size_t row = static_cast<std::size_t>(held_rows[j]);
        store.read_key(layer, g, held_rows[j], kr + row * hd);
        ops::rope_apply(kr + row * hd, 1, hd, rope.cos(j), rope.sin(j), pairing);
      }
    }
    for (int h = 0; h < n_heads; ++h) {
      const int last = store.size(layer, h / group) - 1;
      float* qh = qrot.data() + static_cast<std::size_t>(h) * hd;
      std::copy_n(q.data() + static_cast<std::size_t>(h) * hd, hd, qh);
      ops::rope_apply(qh, 1, hd, rope.cos(last), rope.sin(last), pairing);
    }
  }
};

}  // namespace kvs
