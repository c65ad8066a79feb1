// An HDF5 file driver for traces being recorded: a POSIX file like HDF5's default driver (sec2),
// except that (1) HDF5's writes are kept in memory until HDF5 flushes and then written by a
// thread of the file's own while the recording goes on, and (2) raw data written at consecutive
// addresses (a decode step's chunks, a prefill map's) goes out in one O_DIRECT write, around the
// page cache. On the development VM, copying a step's rows into fresh page-cache pages and writing
// them back cost the recording thread ~2 us per 4 KiB page, on one of the two cores decode runs
// on (~0.2 ms a step on the stories110M shape, ~1.5 ms for SmolLM2 at 4K keys); one direct write
// of the same bytes costs a fifth of that in CPU, and its wait for the device (and for the inode
// lock it holds meanwhile) falls on the driver's thread. Metadata, short ranges and the unaligned
// ends of a raw range go through the page cache; where the filesystem refuses O_DIRECT,
// everything does. A flush therefore hands the writes over rather than making them: reads,
// settle_writes and close wait for them. Files it writes are plain HDF5 files.
#pragma once
#include <hdf5.h>

#include <cstdint>

namespace kvs::h5 {

// Sets `fapl` to open files through this driver.
void use_direct_driver(hid_t fapl);

// Waits until everything HDF5 wrote to `file`, opened through this driver, is in the file (a
// no-op for other drivers). Throws Error with the OS reason ("No space left on device") when a
// write failed: HDF5's flush only hands its writes over, and a failure found by the close of a
// file is harder to recover from than one found here.
void settle_writes(hid_t file);

// Bytes written through the driver by this process so far: directly, and through the page cache.
struct DirectDriverTotals {
  uint64_t direct_bytes = 0;
  uint64_t cached_bytes = 0;
};
DirectDriverTotals direct_driver_totals();

}  // namespace kvs::h5
