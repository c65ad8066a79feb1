// Row-list edits on the host: the CPU twin of cuda::edit_row_lists.
#include "kernels/row_lists.h"

namespace kvs::ops {

void edit_row_list(int32_t* dst, int32_t* slots, const int32_t* src, const RowListEdit& e,
                   const int32_t* payload) {
  const int32_t* removed = payload + e.offset;      // [n_removed] ascending
  const int32_t* fresh = removed + e.n_removed;     // [n_new]
  int n = 0, r = 0;
  for (int s = 0; s < e.n_src; ++s) {
    if (r < e.n_removed && removed[r] == s) {
      ++r;
      continue;
    }
    dst[n++] = src[s];
  }
  for (int a = 0; a < e.n_new; ++a) dst[n++] = fresh[a];
  if (!slots) return;
  for (int i = 0; i < n; ++i) slots[i] = e.slots_given ? fresh[e.n_new + i] : i;
}

}  // namespace kvs::ops
