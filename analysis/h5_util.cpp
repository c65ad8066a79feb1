// HDF5 C API helpers: error stack to exception, owning handles, attributes, groups, datasets.
#include "analysis/h5_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

namespace kvs::h5 {

namespace {

std::atomic<uint64_t> g_allocation_failures{0};

struct StackWalk {
  std::vector<std::string> descs;  // API call first, innermost last
  bool out_of_memory = false;      // an entry says an allocation failed
};

herr_t collect_desc(unsigned, const H5E_error2_t* err, void* data) {
  auto* walk = static_cast<StackWalk*>(data);
  walk->descs.push_back(err && err->desc ? err->desc : "");
  if (err && err->maj_num == H5E_RESOURCE && (err->min_num == H5E_NOSPACE || err->min_num == H5E_CANTALLOC))
    walk->out_of_memory = true;
  return 0;
}

// The most useful reason on the current error stack, prefixed with `what`; or only the OS
// message a file driver quotes ("error message = 'No space left on device'") when there is one.
Error stack_error(const std::string& what) {
  StackWalk walk;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_desc, &walk);
  H5Eclear2(H5E_DEFAULT);
  if (walk.out_of_memory) ++g_allocation_failures;
  static const std::string key = "error message = '";
  for (const std::string& d : walk.descs) {
    const size_t p = d.find(key);
    if (p == std::string::npos) continue;
    const size_t b = p + key.size();
    const size_t e = d.find('\'', b);
    return Error(d.substr(b, e == std::string::npos ? std::string::npos : e - b));
  }
  for (auto it = walk.descs.rbegin(); it != walk.descs.rend(); ++it)
    if (!it->empty()) return Error(what + ": " + *it, walk.out_of_memory);
  return Error(what + ": HDF5 call failed", walk.out_of_memory);
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

hsize_t product(const std::vector<hsize_t>& dims) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  return n;
}

Handle attr_for_write(hid_t obj, const std::string& name, hid_t type) {
  if (check(H5Aexists(obj, name.c_str()), "attribute " + name) > 0)
    check(H5Adelete(obj, name.c_str()), "attribute " + name);
  Handle space = space_handle(H5Screate(H5S_SCALAR), "attribute " + name);
  return attr_handle(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name);
}

// Opens an attribute holding exactly one element.
Handle open_single_attr(hid_t obj, const std::string& name) {
  Handle a = attr_handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "attribute " + name);
  Handle space = space_handle(H5Aget_space(a), "attribute " + name);
  if (check((hid_t)H5Sget_simple_extent_npoints(space), "attribute " + name) != 1)
    throw Error("attribute " + name + " holds more than one value");
  return a;
}

}  // namespace

uint64_t allocation_failures() { return g_allocation_failures.load(); }

void init() {
  static std::once_flag once;
  // No library shutdown at exit: every file is closed by its owner, and HDF5 1.10's shutdown
  // crashes on a file whose close failed after a write error (disk full).
  std::call_once(once, [] {
    H5dont_atexit();
    H5open();
  });
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::recursive_mutex& mutex() {
  static std::recursive_mutex m;
  return m;
}

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw stack_error(what);
  return id;
}

herr_t check(herr_t status, const std::string& what) {
  if (status < 0) throw stack_error(what);
  return status;
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = -1;
}

void Handle::close(const std::string& what) {
  if (id_ < 0 || !closer_) return;
  if (closer_ == H5Fclose) {
    check(closer_(id_), what);
    id_ = -1;
    return;
  }
  const hid_t id = id_;
  id_ = -1;
  check(closer_(id), what);
}

void divert_writes(hid_t file) {
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  const int fd = *static_cast<int*>(handle);
  const int sink = ::memfd_create("kvscope-discarded-trace", MFD_CLOEXEC);
  if (sink < 0) return;
  ::dup2(sink, fd);
  ::close(sink);
}

void stream_to_disk(hid_t file, off_t batch, off_t& written_to) {
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  const int fd = *static_cast<int*>(handle);
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size - written_to < batch) return;
  // Advice only: a filesystem without writeback (tmpfs) ignores both, and the final fsync still
  // makes the file durable.
  if (written_to > 0) {
    ::sync_file_range(fd, 0, written_to, SYNC_FILE_RANGE_WAIT_BEFORE);  // started a batch ago
    ::posix_fadvise(fd, 0, written_to, POSIX_FADV_DONTNEED);
  }
  ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  written_to = st.st_size;
}

Handle file_handle(hid_t id, const std::string& what) { return Handle(check(id, what), H5Fclose); }
Handle group_handle(hid_t id, const std::string& what) { return Handle(check(id, what), H5Gclose); }
Handle dataset_handle(hid_t id, const std::string& what) { return Handle(check(id, what), H5Dclose); }
Handle attr_handle(hid_t id, const std::string& what) { return Handle(check(id, what), H5Aclose); }
Handle space_handle(hid_t id, const std::string& what) { return Handle(check(id, what), H5Sclose); }
Handle type_handle(hid_t id, const std::string& what) { return Handle(check(id, what), H5Tclose); }
Handle plist_handle(hid_t id, const std::string& what) { return Handle(check(id, what), H5Pclose); }

Handle file_access() {
  Handle fapl = plist_handle(H5Pcreate(H5P_FILE_ACCESS), "file access");
  check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "file access");
  check(H5Pset_file_locking(fapl, 0, 1), "file access");
  return fapl;
}

Handle float16_type() {
  Handle t = type_handle(H5Tcopy(H5T_IEEE_F32LE), "float16 type");
  check(H5Tset_fields(t, 15, 10, 5, 0, 10), "float16 type");
  check(H5Tset_size(t, 2), "float16 type");
  check(H5Tset_precision(t, 16), "float16 type");
  check(H5Tset_ebias(t, 15), "float16 type");
  return t;
}

Handle utf8_string_type() {
  Handle t = type_handle(H5Tcopy(H5T_C_S1), "string type");
  check(H5Tset_size(t, H5T_VARIABLE), "string type");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "string type");
  return t;
}

// ---- attributes

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle type = utf8_string_type();
  Handle a = attr_for_write(obj, name, type);
  const char* p = value.c_str();
  check(H5Awrite(a, type, &p), "attribute " + name);
}

void write_attr_int(hid_t obj, const std::string& name, int64_t value, hid_t file_type) {
  Handle a = attr_for_write(obj, name, file_type);
  check(H5Awrite(a, H5T_NATIVE_INT64, &value), "attribute " + name);
}

void write_attr_u64(hid_t obj, const std::string& name, uint64_t value) {
  Handle a = attr_for_write(obj, name, H5T_STD_U64LE);
  check(H5Awrite(a, H5T_NATIVE_UINT64, &value), "attribute " + name);
}

void write_attr_float(hid_t obj, const std::string& name, float value) {
  Handle a = attr_for_write(obj, name, H5T_IEEE_F32LE);
  check(H5Awrite(a, H5T_NATIVE_FLOAT, &value), "attribute " + name);
}

void write_attr_double(hid_t obj, const std::string& name, double value) {
  Handle a = attr_for_write(obj, name, H5T_IEEE_F64LE);
  check(H5Awrite(a, H5T_NATIVE_DOUBLE, &value), "attribute " + name);
}

bool has_attr(hid_t obj, const std::string& name) {
  return check(H5Aexists(obj, name.c_str()), "attribute " + name) > 0;
}

H5T_class_t attr_class(hid_t obj, const std::string& name) {
  Handle a = attr_handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "attribute " + name);
  Handle type = type_handle(H5Aget_type(a), "attribute " + name);
  return H5Tget_class(type);
}

std::string read_attr_string(hid_t obj, const std::string& name) {
  Handle a = open_single_attr(obj, name);
  Handle type = type_handle(H5Aget_type(a), "attribute " + name);
  if (H5Tget_class(type) != H5T_STRING) throw Error("attribute " + name + " is not a string");
  const H5T_cset_t cset = H5Tget_cset(type);
  Handle mem = type_handle(H5Tcopy(H5T_C_S1), "attribute " + name);
  if (check((herr_t)H5Tis_variable_str(type), "attribute " + name) > 0) {
    check(H5Tset_size(mem, H5T_VARIABLE), "attribute " + name);
    check(H5Tset_cset(mem, cset), "attribute " + name);
    char* p = nullptr;
    check(H5Aread(a, mem, &p), "attribute " + name);
    std::string s = p ? p : "";
    if (p) H5free_memory(p);
    return s;
  }
  const size_t size = H5Tget_size(type);
  if (size == 0 || size > (64u << 20)) throw Error("attribute " + name + " has an implausible size");
  check(H5Tset_size(mem, size), "attribute " + name);
  check(H5Tset_cset(mem, cset), "attribute " + name);
  check(H5Tset_strpad(mem, H5T_STR_NULLPAD), "attribute " + name);
  std::string s(size, '\0');
  check(H5Aread(a, mem, s.data()), "attribute " + name);
  s.resize(std::strlen(s.c_str()));
  return s;
}

int64_t read_attr_int(hid_t obj, const std::string& name) {
  Handle a = open_single_attr(obj, name);
  Handle type = type_handle(H5Aget_type(a), "attribute " + name);
  const H5T_class_t cls = H5Tget_class(type);
  if (cls == H5T_INTEGER) {
    int64_t v = 0;
    check(H5Aread(a, H5T_NATIVE_INT64, &v), "attribute " + name);
    return v;
  }
  if (cls == H5T_FLOAT) {
    double v = 0;
    check(H5Aread(a, H5T_NATIVE_DOUBLE, &v), "attribute " + name);
    if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.0e15)
      throw Error("attribute " + name + " is not an integer");
    return (int64_t)v;
  }
  if (cls == H5T_ENUM) {  // numpy bool as h5py stores it
    const size_t size = H5Tget_size(type);
    if (size == 0 || size > 8) throw Error("attribute " + name + " has an unsupported enum size");
    Handle native = type_handle(H5Tget_native_type(type, H5T_DIR_ASCEND), "attribute " + name);
    int64_t v = 0;
    check(H5Aread(a, native, &v), "attribute " + name);
    if (size < 8 && (v >> (8 * size - 1)) & 1) v -= (int64_t)1 << (8 * size);  // sign-extend
    return v;
  }
  throw Error("attribute " + name + " is not a number");
}

uint64_t read_attr_u64(hid_t obj, const std::string& name) {
  Handle a = open_single_attr(obj, name);
  Handle type = type_handle(H5Aget_type(a), "attribute " + name);
  if (H5Tget_class(type) != H5T_INTEGER) throw Error("attribute " + name + " is not an integer");
  uint64_t v = 0;
  check(H5Aread(a, H5T_NATIVE_UINT64, &v), "attribute " + name);
  return v;
}

double read_attr_double(hid_t obj, const std::string& name) {
  Handle a = open_single_attr(obj, name);
  Handle type = type_handle(H5Aget_type(a), "attribute " + name);
  const H5T_class_t cls = H5Tget_class(type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) throw Error("attribute " + name + " is not a number");
  double v = 0;
  check(H5Aread(a, H5T_NATIVE_DOUBLE, &v), "attribute " + name);
  return v;
}

std::vector<std::string> attr_names(hid_t obj) {
  H5O_info_t info;
  check(H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS), "attributes");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    const ssize_t n = H5Aget_name_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check((hid_t)n, "attribute names");
    std::string s((size_t)n + 1, '\0');
    check((hid_t)H5Aget_name_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(), H5P_DEFAULT),
          "attribute names");
    s.resize((size_t)n);
    names.push_back(std::move(s));
  }
  return names;
}

// ---- links and groups

bool path_exists(hid_t loc, const std::string& path) {
  std::string prefix = path.empty() || path[0] != '/' ? "" : "/";
  const auto parts = split_path(path);
  if (parts.empty()) return true;
  for (const std::string& part : parts) {
    prefix += (prefix.empty() || prefix == "/" ? "" : "/") + part;
    if (check(H5Lexists(loc, prefix.c_str(), H5P_DEFAULT), "link " + prefix) <= 0) return false;
  }
  return true;
}

static H5I_type_t object_type(hid_t loc, const std::string& path) {
  if (!path_exists(loc, path)) return H5I_BADID;
  const hid_t o = H5Oopen(loc, path.c_str(), H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return H5I_BADID;
  }
  const H5I_type_t t = H5Iget_type(o);
  H5Oclose(o);
  return t;
}

bool is_dataset(hid_t loc, const std::string& path) { return object_type(loc, path) == H5I_DATASET; }
bool is_group(hid_t loc, const std::string& path) { return object_type(loc, path) == H5I_GROUP; }

std::vector<std::string> member_names(hid_t group) {
  H5G_info_t info;
  check(H5Gget_info(group, &info), "group members");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check((hid_t)n, "group members");
    std::string s((size_t)n + 1, '\0');
    check((hid_t)H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(), H5P_DEFAULT),
          "group members");
    s.resize((size_t)n);
    names.push_back(std::move(s));
  }
  return names;
}

Handle ensure_group(hid_t loc, const std::string& path) {
  std::string prefix = path.empty() || path[0] != '/' ? "" : "/";
  for (const std::string& part : split_path(path)) {
    prefix += (prefix.empty() || prefix == "/" ? "" : "/") + part;
    if (check(H5Lexists(loc, prefix.c_str(), H5P_DEFAULT), "group " + prefix) <= 0)
      group_handle(H5Gcreate2(loc, prefix.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group " + prefix);
  }
  return group_handle(H5Gopen2(loc, path.c_str(), H5P_DEFAULT), "group " + path);
}

void remove_link(hid_t loc, const std::string& path) {
  if (path_exists(loc, path)) check(H5Ldelete(loc, path.c_str(), H5P_DEFAULT), "delete " + path);
}

// ---- datasets

Handle create_dataset(hid_t loc, const std::string& path, hid_t file_type, const std::vector<hsize_t>& dims,
                      const Layout& layout) {
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) ensure_group(loc, path.substr(0, slash));
  Handle space = space_handle(
      H5Screate_simple((int)dims.size(), dims.data(), layout.maxdims.empty() ? nullptr : layout.maxdims.data()),
      path);
  Handle dcpl = plist_handle(H5Pcreate(H5P_DATASET_CREATE), path);
  if (!layout.chunk.empty()) {
    check(H5Pset_chunk(dcpl, (int)layout.chunk.size(), layout.chunk.data()), path);
    if (layout.deflate > 0) {
      check(H5Pset_shuffle(dcpl), path);
      check(H5Pset_deflate(dcpl, (unsigned)layout.deflate), path);
    }
  }
  return dataset_handle(H5Dcreate2(loc, path.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), path);
}

void write_dataset(hid_t loc, const std::string& path, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* data, const Layout& layout) {
  Handle ds = create_dataset(loc, path, file_type, dims, layout);
  if (product(dims) > 0) check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path);
  ds.close(path);
}

void write_strings(hid_t loc, const std::string& path, const std::vector<std::string>& values) {
  Handle type = utf8_string_type();
  std::vector<const char*> ptrs;  // [n]
  for (const std::string& s : values) ptrs.push_back(s.c_str());
  write_dataset(loc, path, type, type, {(hsize_t)values.size()}, ptrs.data());
}

Handle open_dataset(hid_t loc, const std::string& path) {
  return dataset_handle(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), path);
}

std::vector<hsize_t> dataset_dims(hid_t dataset) {
  Handle space = space_handle(H5Dget_space(dataset), "dataspace");
  const int rank = H5Sget_simple_extent_ndims(space);
  check((herr_t)rank, "dataspace");
  if (rank > 32) throw Error("dataspace of rank " + std::to_string(rank));
  std::vector<hsize_t> dims((size_t)rank);
  check((herr_t)H5Sget_simple_extent_dims(space, dims.data(), nullptr), "dataspace");
  return dims;
}

H5T_class_t dataset_class(hid_t dataset) {
  Handle type = type_handle(H5Dget_type(dataset), "datatype");
  return H5Tget_class(type);
}

size_t dataset_type_size(hid_t dataset) {
  Handle type = type_handle(H5Dget_type(dataset), "datatype");
  return H5Tget_size(type);
}

void write_chunk(hid_t dataset, const std::vector<hsize_t>& offset, std::span<const uint8_t> stored,
                 uint32_t skipped) {
  check(H5Dwrite_chunk(dataset, H5P_DEFAULT, skipped, offset.data(), stored.size(), stored.data()), "write chunk");
}

std::vector<hsize_t> shuffle_deflate_chunk(hid_t dataset, hid_t type) {
  Handle plist = plist_handle(H5Dget_create_plist(dataset), "dataset layout");
  Handle file_type = type_handle(H5Dget_type(dataset), "datatype");
  if (H5Pget_layout(plist) != H5D_CHUNKED || H5Pget_nfilters(plist) != 2 || H5Tequal(file_type, type) <= 0) return {};
  const H5Z_filter_t want[2] = {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE};
  for (unsigned i = 0; i < 2; ++i) {
    unsigned flags = 0, config = 0;
    size_t n_values = 0;
    if (H5Pget_filter2(plist, i, &flags, &n_values, nullptr, 0, nullptr, &config) != want[i]) return {};
  }
  const int rank = H5Pget_chunk(plist, 0, nullptr);
  if (rank < 1 || rank > 32) return {};
  std::vector<hsize_t> chunk((size_t)rank);
  if (H5Pget_chunk(plist, rank, chunk.data()) != rank) return {};
  return chunk;
}

bool read_chunk(hid_t dataset, const std::vector<hsize_t>& offset, uint64_t file_size, std::vector<uint8_t>& stored,
                uint32_t& skipped) {
  hsize_t size = 0;
  if (H5Dget_chunk_storage_size(dataset, offset.data(), &size) < 0 || size == 0) return false;
  if (size > file_size) return false;
  stored.resize(size);
  skipped = 0;
  return H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &skipped, stored.data()) >= 0;
}

void set_extent(hid_t dataset, const std::vector<hsize_t>& dims) {
  check(H5Dset_extent(dataset, dims.data()), "extend dataset");
}

static Handle select_box(hid_t dataset, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count) {
  Handle space = space_handle(H5Dget_space(dataset), "dataspace");
  check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), "hyperslab");
  return space;
}

void write_box(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
               const void* data) {
  const hsize_t n = product(count);
  if (n == 0) return;
  Handle file_space = select_box(dataset, start, count);
  Handle mem_space = space_handle(H5Screate_simple(1, &n, nullptr), "dataspace");
  check(H5Dwrite(dataset, mem_type, mem_space, file_space, H5P_DEFAULT, data), "write");
}

void check_chunks(hid_t dataset) {
  Handle plist = plist_handle(H5Dget_create_plist(dataset), "dataset layout");
  if (H5Pget_layout(plist) != H5D_CHUNKED) return;
  hsize_t file_size = 0;
  {
    Handle file = file_handle(H5Iget_file_id(dataset), "file");
    check(H5Fget_filesize(file, &file_size), "file size");
    if (H5Dget_storage_size(dataset) > file_size)
      throw Error("chunks claim " + std::to_string(H5Dget_storage_size(dataset)) + " bytes, more than the file's " +
                  std::to_string(file_size));
  }
  Handle space = space_handle(H5Dget_space(dataset), "dataspace");
  const int rank = H5Sget_simple_extent_ndims(space);
  check((herr_t)rank, "dataspace");
  if (rank < 1 || rank > 32) throw Error("dataspace of rank " + std::to_string(rank));
  std::vector<hsize_t> dims((size_t)rank), maxdims((size_t)rank), chunk((size_t)rank);
  check((herr_t)H5Sget_simple_extent_dims(space, dims.data(), maxdims.data()), "dataspace");
  if (H5Pget_chunk(plist, rank, chunk.data()) != rank) throw Error("chunk rank differs from the dataspace's");
  for (size_t i = 0; i < (size_t)rank; ++i)
    if (chunk[i] == 0 || (maxdims[i] != H5S_UNLIMITED && chunk[i] > std::max<hsize_t>(maxdims[i], 1)))
      throw Error("chunk dimension " + std::to_string(chunk[i]) + " exceeds the dataset's extent " +
                  std::to_string(maxdims[i]));
  // HDF5 allocates a whole chunk to read any of it. A stored chunk holds at least 1/1032 of its
  // bytes (deflate's best ratio), so a chunk larger than that many times the file (an unlimited
  // axis lets a corrupt one through the check above) cannot have been written into it.
  long double chunk_bytes = (long double)dataset_type_size(dataset);
  for (hsize_t c : chunk) chunk_bytes *= (long double)c;
  if (chunk_bytes > 1032.0L * (long double)file_size + (1 << 20))
    throw Error("chunks of " + std::to_string((uint64_t)std::min(chunk_bytes, 1e19L)) +
                " bytes cannot come from a file of " + std::to_string(file_size) + " bytes");
}

void read_box(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
              void* data) {
  const hsize_t n = product(count);
  if (n == 0) return;
  check_chunks(dataset);
  Handle file_space = select_box(dataset, start, count);
  Handle mem_space = space_handle(H5Screate_simple(1, &n, nullptr), "dataspace");
  check(H5Dread(dataset, mem_type, mem_space, file_space, H5P_DEFAULT, data), "read");
}

void read_all(hid_t dataset, hid_t mem_type, void* data) {
  if (product(dataset_dims(dataset)) == 0) return;
  check_chunks(dataset);
  check(H5Dread(dataset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "read");
}

std::vector<std::string> read_strings(hid_t dataset, size_t n) {
  std::vector<std::string> out;
  if (n == 0) return out;
  check_chunks(dataset);
  Handle type = type_handle(H5Dget_type(dataset), "datatype");
  if (H5Tget_class(type) != H5T_STRING) throw Error("not a string dataset");
  Handle mem = type_handle(H5Tcopy(H5T_C_S1), "datatype");
  check(H5Tset_cset(mem, H5Tget_cset(type)), "datatype");
  if (check((herr_t)H5Tis_variable_str(type), "datatype") > 0) {
    check(H5Tset_size(mem, H5T_VARIABLE), "datatype");
    std::vector<char*> ptrs(n, nullptr);  // [n]
    check(H5Dread(dataset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "read strings");
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    Handle space = space_handle(H5Dget_space(dataset), "dataspace");
    H5Dvlen_reclaim(mem, space, H5P_DEFAULT, ptrs.data());
    return out;
  }
  const size_t size = H5Tget_size(type);
  if (size == 0 || size > (1u << 20)) throw Error("string dataset with an implausible element size");
  check(H5Tset_size(mem, size), "datatype");
  check(H5Tset_strpad(mem, H5T_STR_NULLPAD), "datatype");
  std::vector<char> buf(n * size);  // [n, size]
  check(H5Dread(dataset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "read strings");
  for (size_t i = 0; i < n; ++i) {
    const char* p = buf.data() + i * size;
    out.emplace_back(p, strnlen(p, size));
  }
  return out;
}

}  // namespace kvs::h5
