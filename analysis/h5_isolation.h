// Lets a forked child parse a file's HDF5 metadata before this process trusts libhdf5 with it.
// libhdf5 1.10 (Debian 12) crashes inside its own parser on some deliberately corrupted files
// (global-heap strings, object-header messages; see docs/reliability.md). A crash in the child
// becomes an error message in the parent, which never opens that file itself.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>

namespace kvs::h5 {

// Why a probe child did not finish; `why` is empty when it did.
struct ProbeFailure {
  std::string why;
  bool host_out_of_memory = false;  // the host's memory ran out, not the child's bound: no sign of a bad file
};

// Runs `probe` in a forked child with crash handlers reset, sanitizer reports and stderr silenced,
// an alarm after `timeout_s` and its address space allowed to grow by `memory_bytes`. Returns no
// reason when the child finished (normally or with an exception, which the parent will meet again
// and report itself), else why it did not, e.g. "the HDF5 library crashed reading it (SIGSEGV)",
// "reading its HDF5 metadata needed more than N MB of memory", or, where the host had less than
// that, "… ran out of host memory (X available)". A child that calls exit() (libhdf5 does on
// some failures) ends at once, without the exit handlers that would flush the parent's open
// files. The caller holds h5::mutex(), so no other thread of this process is inside libhdf5 at the
// fork; the child re-creates that lock unlocked. Returns no reason when fork itself fails (the
// file is then opened unprobed).
ProbeFailure run_isolated(const std::function<void()>& probe, unsigned timeout_s, uint64_t memory_bytes);

// Parses every object header, attribute value and string dataset in the file through libhdf5.
// `max_bytes` bounds any one value read (the file's size). Throws Error for what libhdf5 reports.
void parse_all_metadata(hid_t file, uint64_t max_bytes);

}  // namespace kvs::h5
