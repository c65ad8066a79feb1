// RowListEdits: the edits of each KV head's row list since its device copy was written.
#include "inference/row_list_edits.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

namespace kvs {

RowListEdits::RowListEdits(int n_layers, int n_kv_heads)
    : n_kv_heads_(n_kv_heads), heads_(static_cast<std::size_t>(n_layers) * n_kv_heads) {}

void RowListEdits::forget(Head& h) {
  h.synced = false;
  h.n_synced = 0;
  h.removed.clear();
  h.added.clear();
}

void RowListEdits::forget_all() {
  for (Head& h : heads_) forget(h);
}

void RowListEdits::evicted(int layer, int kv_head, std::span<const uint8_t> keep) {
  Head& h = head(layer, kv_head);
  if (!h.synced) return;
  if (static_cast<int>(keep.size()) != h.size()) {
    throw std::logic_error("RowListEdits: " + std::to_string(keep.size()) + " keep flags for " +
                           std::to_string(h.size()) + " entries");
  }
  const int copied = h.n_synced - static_cast<int>(h.removed.size());  // entries of the copy still held
  std::vector<int32_t> gone;  // indices into the copy, ascending
  std::size_t k = 0;          // removed indices passed
  // (memchr: at 32K entries a head the host must not fall behind the GPU's step)
  const uint8_t* const flags = keep.data();
  const uint8_t* const end = flags + copied;
  for (const uint8_t* z = flags; z != end && (z = static_cast<const uint8_t*>(std::memchr(z, 0, end - z))); ++z) {
    const int i = static_cast<int>(z - flags);  // the i-th entry of the copy still held
    while (k < h.removed.size() && h.removed[k] <= i + static_cast<int>(k)) ++k;
    gone.push_back(i + static_cast<int32_t>(k));
  }
  if (!gone.empty()) {
    std::vector<int32_t> merged;
    merged.reserve(h.removed.size() + gone.size());
    std::merge(h.removed.begin(), h.removed.end(), gone.begin(), gone.end(), std::back_inserter(merged));
    h.removed = std::move(merged);
  }
  std::size_t w = 0;
  for (std::size_t a = 0; a < h.added.size(); ++a) {
    if (keep[copied + a]) h.added[w++] = h.added[a];
  }
  h.added.resize(w);
  // An edit as long as the list is no cheaper than the list.
  if (h.removed.size() + h.added.size() >= static_cast<std::size_t>(std::max(1, h.size()))) forget(h);
}

void RowListEdits::appended(int layer, int kv_head, std::span<const int32_t> rows) {
  Head& h = head(layer, kv_head);
  if (!h.synced) return;
  h.added.insert(h.added.end(), rows.begin(), rows.end());
  if (h.removed.size() + h.added.size() >= static_cast<std::size_t>(h.size())) forget(h);
}

int RowListEdits::stage(int layer, int kv_head, std::span<const int32_t> rows, int offset, ops::RowListEdit& edit,
                        int32_t* payload) {
  Head& h = head(layer, kv_head);
  const int n = static_cast<int>(rows.size());
  int written = 0;
  if (h.synced) {
    if (h.size() != n) {
      throw std::logic_error("RowListEdits: the edits leave " + std::to_string(h.size()) + " rows, the head holds " +
                             std::to_string(n));
    }
    edit = {h.n_synced, static_cast<int32_t>(h.removed.size()), static_cast<int32_t>(h.added.size()), offset, 0};
    int32_t* out = std::copy(h.removed.begin(), h.removed.end(), payload + offset);
    std::copy(h.added.begin(), h.added.end(), out);
    written = static_cast<int>(h.removed.size() + h.added.size());
  } else {
    edit = {0, 0, n, offset, 0};
    std::copy(rows.begin(), rows.end(), payload + offset);
    written = n;
  }
  forget(h);
  h.synced = true;
  h.n_synced = n;
  return written;
}

void RowListEdits::stage_other(int layer, int kv_head, int n, int offset, bool slots, ops::RowListEdit& edit) {
  edit = {0, 0, n, offset, slots ? 1 : 0};
  forget(head(layer, kv_head));
}

}  // namespace kvs
