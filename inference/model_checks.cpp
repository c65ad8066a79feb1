// Checks the model loaders share: the attention layout and width, and the layer count against the
// layer tensors present.
#include "inference/model_checks.h"

#include <algorithm>
#include <charconv>

#include "inference/errors.h"

namespace kvs {

void check_attention_width(int64_t n_heads, int64_t head_dim, const std::string& where) {
  const int64_t width = n_heads * head_dim;  // both at most 2^20: no overflow
  if (width > kMaxModelDim) {
    throw input_error(where, std::to_string(n_heads) + " heads of head_dim " +
                                 std::to_string(head_dim) + " make " + std::to_string(width) +
                                 " query features, more than the " + std::to_string(kMaxModelDim) +
                                 " supported");
  }
}

void check_attention_layout(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                            bool head_dim_given, const AttentionKeys& keys, const std::string& where) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  if (!head_dim_given && dim % n_heads != 0) {
    throw input_error(where, keys.dim + " " + n(dim) + " is not a multiple of " + keys.n_heads + " " + n(n_heads) +
                                 " (with no " + keys.head_dim + ", each head gets " + keys.dim + " / " +
                                 keys.n_heads + " features)");
  }
  if (n_heads % n_kv_heads != 0) {
    throw input_error(where, keys.n_heads + " " + n(n_heads) + " is not a multiple of " + keys.n_kv_heads + " " +
                                 n(n_kv_heads));
  }
  if (head_dim % 2 != 0) {
    const std::string derived = head_dim_given ? "" : " (" + keys.dim + " / " + keys.n_heads + ")";
    throw input_error(where, keys.head_dim + " " + n(head_dim) + derived +
                                 " is odd (rotary embeddings rotate pairs of features)");
  }
}

void check_layer_count(int64_t n_layers, const std::vector<std::string>& tensor_names,
                       const std::string& prefix, const std::string& where, const std::string& key) {
  uint64_t covered = 0;  // one more than the largest layer index seen
  for (const std::string& name : tensor_names) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    uint64_t index = 0;
    const auto [end, ec] = std::from_chars(first, last, index);
    if (end == first || end == last || *end != '.') continue;  // not "<prefix><digits>."
    // An index too large to parse covers more layers than any count allows.
    covered = std::max(covered, ec == std::errc() ? index + 1 : UINT64_MAX);
  }
  if (covered == static_cast<uint64_t>(n_layers)) return;
  const std::string held =
      covered == 0 ? "no layer tensors (" + prefix + "N.*)"
      : covered == UINT64_MAX ? "layer tensors with indices too large to count"
                              : "tensors for " + std::to_string(covered) + " layers (" + prefix +
                                    "0.* to " + prefix + std::to_string(covered - 1) + ".*)";
  throw input_error(where, key + " " + std::to_string(n_layers) +
                               " does not match the checkpoint, which holds " + held);
}

}  // namespace kvs
