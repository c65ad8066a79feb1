// A thin layer over the HDF5 C API for the trace reader and writer: owning handles, every failing
// call turned into an exception carrying HDF5's (or the OS's) reason, attributes, datasets, and
// the float16 storage type h5py reads as numpy.float16.
#pragma once
#include <hdf5.h>
#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvs::h5 {

// An HDF5 or OS call failed. what() is a short reason, e.g. "No space left on device".
struct Error : std::runtime_error {
  explicit Error(const std::string& reason, bool no_memory = false)
      : std::runtime_error(reason), out_of_memory(no_memory) {}
  bool out_of_memory;  // libhdf5 could not allocate memory for the call (H5E_RESOURCE: NOSPACE or CANTALLOC)
};

// How many libhdf5 calls this process has seen fail for want of memory (H5E_RESOURCE: NOSPACE or
// CANTALLOC on the error stack check() reads). A probe child compares it before and after: under
// its memory bound such a failure, whatever the error becomes on its way out (the errno of the
// failed allocation long overwritten), means the file asked for more memory than it may have.
uint64_t allocation_failures();

// Silences HDF5's automatic error printing for the calling thread (the setting is per thread in
// thread-safe HDF5 builds); every trace entry point calls it.
void init();
// The Debian HDF5 build is not thread-safe: every public trace entry point holds this lock.
std::recursive_mutex& mutex();

// Throws Error when the call returned a negative value: "<what>: <HDF5's innermost reason>", or
// just the OS reason ("No space left on device") when a file operation failed.
hid_t check(hid_t id, const std::string& what);
herr_t check(herr_t status, const std::string& what);

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();                        // closes, ignoring errors
  // Closes, throwing Error on failure; a file that fails to close stays held (see divert_writes).
  void close(const std::string& what);
 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

Handle file_handle(hid_t id, const std::string& what);
// For a file being abandoned after a write error: points its descriptor at an anonymous memory
// file, so the flushes HDF5 does while closing succeed (into memory) and the close completes.
// (HDF5 1.10 leaves a half-freed file behind when closing fails, crashing at exit.)
void divert_writes(hid_t file);
// For a file written step by step and read back only when complete (a trace being recorded),
// once it has grown by `batch` bytes since the last round: starts the disk writes of everything
// flushed so far, waits for those the last round started and drops their pages from the page
// cache. Keeps a multi-GB recording from filling the page cache; on the development VM a copy
// into fresh page-cache pages ran at ~700 MB/s, into recycled ones at 2-4 GB/s. `written_to`
// carries the file's size at the last round between calls (0 at the start).
void stream_to_disk(hid_t file, off_t batch, off_t& written_to);
Handle group_handle(hid_t id, const std::string& what);
Handle dataset_handle(hid_t id, const std::string& what);
Handle attr_handle(hid_t id, const std::string& what);
Handle space_handle(hid_t id, const std::string& what);
Handle type_handle(hid_t id, const std::string& what);
Handle plist_handle(hid_t id, const std::string& what);

// File access properties for traces: closing the file closes everything opened in it, and no
// file locks (traces are only published by rename, and locks fail on some network filesystems).
Handle file_access();

// float16 as h5py builds it: IEEE F32LE resized to 2 bytes, sign bit 15, exponent bits 10-14
// (bias 15), mantissa bits 0-9.
Handle float16_type();
// Variable-length UTF-8 string.
Handle utf8_string_type();

// ---- attributes (scalar; an existing one of the same name is replaced)
void write_attr(hid_t obj, const std::string& name, const std::string& value);
void write_attr_int(hid_t obj, const std::string& name, int64_t value, hid_t file_type = H5T_STD_I32LE);
void write_attr_u64(hid_t obj, const std::string& name, uint64_t value);
void write_attr_float(hid_t obj, const std::string& name, float value);
void write_attr_double(hid_t obj, const std::string& name, double value);
bool has_attr(hid_t obj, const std::string& name);
// Readers accept any string (fixed or variable length) or numeric type with one element.
std::string read_attr_string(hid_t obj, const std::string& name);
int64_t read_attr_int(hid_t obj, const std::string& name);
uint64_t read_attr_u64(hid_t obj, const std::string& name);  // integer attributes only
double read_attr_double(hid_t obj, const std::string& name);
std::vector<std::string> attr_names(hid_t obj);
H5T_class_t attr_class(hid_t obj, const std::string& name);

// ---- links and groups
// True when every component of `path` ("/a/b/c") exists.
bool path_exists(hid_t loc, const std::string& path);
bool is_dataset(hid_t loc, const std::string& path);
bool is_group(hid_t loc, const std::string& path);
// Names of the links in a group, in name order.
std::vector<std::string> member_names(hid_t group);
// Creates the group and missing parents when absent; returns it opened.
Handle ensure_group(hid_t loc, const std::string& path);
// Deletes the link when present.
void remove_link(hid_t loc, const std::string& path);

// ---- datasets
struct Layout {
  std::vector<hsize_t> maxdims;  // empty = fixed at dims
  std::vector<hsize_t> chunk;    // empty = contiguous
  int deflate = 0;               // 0 = none; with shuffle when > 0
};
// Creates `path` (parents included) with the given storage type; zeros are the fill value.
Handle create_dataset(hid_t loc, const std::string& path, hid_t file_type,
                      const std::vector<hsize_t>& dims, const Layout& layout = {});
// One-call write of a whole fixed-size dataset from memory of type mem_type.
void write_dataset(hid_t loc, const std::string& path, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* data, const Layout& layout = {});
void write_strings(hid_t loc, const std::string& path, const std::vector<std::string>& values);

Handle open_dataset(hid_t loc, const std::string& path);
std::vector<hsize_t> dataset_dims(hid_t dataset);
H5T_class_t dataset_class(hid_t dataset);
size_t dataset_type_size(hid_t dataset);
void set_extent(hid_t dataset, const std::vector<hsize_t>& dims);
// Reads or writes the box start..start+count of a dataset from/to a dense memory buffer.
void write_box(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start,
               const std::vector<hsize_t>& count, const void* data);
// Writes one chunk's stored bytes at the chunk whose first element is `offset`, bypassing HDF5's
// filters: every filter of the dataset applied (e.g. by pack_shuffle_deflate), except those whose
// bit is set in `skipped` (bit i: filter i of the pipeline; every reader then skips it too).
void write_chunk(hid_t dataset, const std::vector<hsize_t>& offset, std::span<const uint8_t> stored,
                 uint32_t skipped = 0);
// The chunk dimensions of a dataset stored as pack_shuffle_deflate packs chunks (chunked, the
// filters exactly shuffle then deflate) and of file type `type`; empty for any other storage.
std::vector<hsize_t> shuffle_deflate_chunk(hid_t dataset, hid_t type);
// The stored bytes of the chunk whose first element is `offset`, and in `skipped` the filters it
// did not go through (bit i: filter i), when that chunk is allocated and no larger than the file
// (`file_size` bytes); false otherwise.
bool read_chunk(hid_t dataset, const std::vector<hsize_t>& offset, uint64_t file_size, std::vector<uint8_t>& stored,
                uint32_t& skipped);
void read_box(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start,
              const std::vector<hsize_t>& count, void* data);
void read_all(hid_t dataset, hid_t mem_type, void* data);
// Throws Error for a chunk layout HDF5 1.10 mishandles: chunks larger than a fixed-size dataset
// (it reads out of bounds) or a chunk index claiming more than the file holds (it allocates that
// much). Both found by fuzz_trace_bytes; HDF5 never writes such files. Every read calls it first.
void check_chunks(hid_t dataset);
// Reads a 1-D string dataset (variable or fixed length) of n elements.
std::vector<std::string> read_strings(hid_t dataset, size_t n);

}  // namespace kvs::h5
