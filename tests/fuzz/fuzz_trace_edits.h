// Structure-aware trace fuzzing: the input is a list of edits applied through the HDF5 API to a
// valid seed trace (attributes set to hostile values, datasets removed or replaced by others of
// random shape and type), so every file is well-formed HDF5 and the fuzzer exercises KVScope's
// own schema checks instead of libhdf5's low-level parser (see docs/reliability.md).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/h5_util.h"

namespace kvs::fuzz {

// Consumes bytes of the fuzz input; zeros when it runs out.
class ByteSource {
 public:
  ByteSource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t u64(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = v << 8 | byte();
    return v;
  }
  std::string text() {
    std::string s;
    for (int n = byte() % 24; n > 0; --n) s += static_cast<char>(byte());
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Paths of every dataset and group (with their attribute owners) in the file.
inline std::vector<std::string> object_paths(hid_t file) {
  std::vector<std::string> paths = {"/"};
  H5Ovisit(file, H5_INDEX_NAME, H5_ITER_NATIVE,
           [](hid_t, const char* name, const H5O_info_t*, void* out) -> herr_t {
             if (std::string(name) != ".") static_cast<std::vector<std::string>*>(out)->push_back("/" + std::string(name));
             return 0;
           },
           &paths);
  return paths;
}

inline std::vector<std::string> attr_names(hid_t obj) {
  std::vector<std::string> names;
  H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr,
              [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
                static_cast<std::vector<std::string>*>(out)->push_back(name);
                return 0;
              },
              &names);
  return names;
}

// Writes a small dataset of `type` with random rank and dims at `path` (replacing what was there).
inline void replace_dataset(hid_t file, const std::string& path, ByteSource& in) {
  const hid_t types[] = {H5T_NATIVE_UINT8, H5T_NATIVE_INT32, H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT64};
  const hid_t type = types[in.byte() % 5];
  const int rank = in.byte() % 5;
  std::vector<hsize_t> dims(rank);
  hsize_t n = 1;
  for (auto& d : dims) n *= (d = in.byte() % 9);
  const size_t elem = H5Tget_size(type);
  std::vector<uint8_t> bytes(n * elem);  // [n] elements of `type`
  for (auto& b : bytes) b = in.byte();
  H5Ldelete(file, path.c_str(), H5P_DEFAULT);
  const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr);
  const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  const hid_t ds = H5Dcreate2(file, path.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  if (ds >= 0) {
    if (n > 0) H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
    H5Dclose(ds);
  }
  H5Pclose(lcpl);
  H5Sclose(space);
}

// Applies the input's edits to the trace at `path` (a copy of a valid trace).
inline void apply_trace_edits(const std::string& path, const uint8_t* data, size_t size) {
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return;
  ByteSource in(data, size);
  for (int edit = 0; edit < 16 && !in.empty(); ++edit) {
    const std::vector<std::string> paths = object_paths(file);
    const std::string& target = paths[in.byte() % paths.size()];
    const uint8_t op = in.byte() % 4;
    if (op == 2) {
      if (target != "/") H5Ldelete(file, target.c_str(), H5P_DEFAULT);
      continue;
    }
    if (op == 3) {
      replace_dataset(file, target == "/" ? "/tokens/ids" : target, in);
      continue;
    }
    const hid_t obj = H5Oopen(file, target.c_str(), H5P_DEFAULT);
    if (obj < 0) continue;
    const std::vector<std::string> names = attr_names(obj);
    const std::string name = names.empty() || in.byte() % 8 == 0 ? in.text() : names[in.byte() % names.size()];
    if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
    try {
      if (op == 0) {
        const int64_t widths[] = {0, 1, -1, 1 << 30, INT64_MIN, INT64_MAX, 3};
        const uint8_t k = in.byte();
        const int64_t v = k < 7 * 16 ? widths[k % 7] : static_cast<int64_t>(in.u64(8));
        h5::write_attr_int(obj, name, v);
      } else {
        h5::write_attr(obj, name, in.text());
      }
    } catch (const h5::Error&) {
    }
    H5Oclose(obj);
  }
  H5Fclose(file);
}

}  // namespace kvs::fuzz
