// Edits of a KV head's row list: the storage rows of its held entries, in held order, which the
// decode attention reads keys through. A list kept on the device is brought up to date by an edit
// (the entries evicted since it was written, the rows appended since) rather than uploaded whole.
// CPU twin of cuda::edit_row_lists (kernels/row_lists.cu).
#pragma once
#include <cstdint>

namespace kvs::ops {

// One KV head's edit: five ints, and a payload at `offset` in the payload array.
//   n_src        entries of the source list the edit starts from (0: the list is given whole)
//   n_removed    source indices dropped, ascending, first in the payload
//   n_new        rows appended after the kept source entries, next in the payload
//   offset       where the head's payload starts
//   slots_given  1: the payload then gives each entry's slot ([n_kept + n_new], only with
//                n_src 0); 0: entry i's slot is i
struct RowListEdit {
  int32_t n_src, n_removed, n_new, offset, slots_given;
};
inline constexpr int kRowListEditInts = 5;
static_assert(sizeof(RowListEdit) == kRowListEditInts * sizeof(int32_t));

// dst [n_src - n_removed + n_new] = src [n_src] without the removed indices, then the new rows;
// slots (when not null) [the same count] = the given slots, or 0, 1, 2, ... dst must not overlap
// src.
void edit_row_list(int32_t* dst, int32_t* slots, const int32_t* src, const RowListEdit& edit,
                   const int32_t* payload);

}  // namespace kvs::ops
