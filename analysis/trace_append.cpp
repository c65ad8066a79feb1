// Atomic updates of an existing trace (append_runs, append_array): under an exclusive lock, copy
// it to a temporary sibling, change the copy, fsync and rename it over the original. On any error
// the original is untouched and the copy removed.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>

#include "analysis/atomic_file.h"
#include "analysis/file_lock.h"
#include "analysis/h5_util.h"
#include "analysis/trace.h"
#include "analysis/trace_schema.h"
#include "inference/errors.h"

namespace kvs {

namespace ts = trace_schema;

namespace {

InputError cannot_update(const std::string& path, const char* why) {
  return input_error(path, std::string("cannot update trace (") + why + ")");
}

// The regular file an update of `path` rewrites (the file a symbolic link leads to).
std::string appendable_target(const std::string& path) {
  const std::string target = output_target(path);
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) throw cannot_update(path, std::strerror(errno));
  require_owner_write(path, st, "changing");
  return target;
}

// Validates `path` as a trace, then applies `change` to a copy and publishes it, holding the
// trace's lock from the read to the rename so that concurrent updates take turns.
void rewrite_trace(const std::string& path, const std::function<void(const TraceMeta&)>& validate,
                   const std::function<void(hid_t, const TraceMeta&)>& change) {
  const std::string target = appendable_target(path);
  std::optional<FileLock> held;  // taken before HDF5's lock: waiting here must not stop this process's reads
  try {
    held.emplace(target);
  } catch (const FileError& e) {
    throw cannot_update(path, e.what());
  }
  require_owner_write(path, held->status(), "changing");  // as the locked file is now
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  TraceMeta meta;
  {
    TraceReader reader(target);  // throws InputError for anything that is not a readable trace
    meta = reader.meta();
  }
  validate(meta);
  remove_stale_temps(target);
  const std::string temp = temp_sibling(target);
  h5::Handle file;
  auto abandon = [&] {
    if (file.valid()) h5::divert_writes(file);
    file.reset();
    remove_quietly(temp);
  };
  try {
    copy_file_bytes(target, temp);
    copy_mode_and_owner(held->status(), temp);
    h5::Handle fapl = h5::file_access();
    file = h5::file_handle(H5Fopen(temp.c_str(), H5F_ACC_RDWR, fapl), "open copy");
    change(file, meta);
    h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush");
    file.close("close");
    publish_file(temp, target);
  } catch (const InputError&) {
    abandon();
    throw;
  } catch (const std::runtime_error& e) {  // h5::Error, FileError
    abandon();
    throw cannot_update(path, e.what());
  } catch (...) {
    abandon();
    throw;
  }
}

}  // namespace

void append_runs(const std::string& path, std::span<const RunData> runs) {
  rewrite_trace(
      path,
      [&](const TraceMeta& meta) {
        std::set<std::string> names;
        for (const RunData& run : runs) {
          ts::validate_run(run, meta, path);
          if (!names.insert(run.name).second) throw input_error(path, "run '" + run.name + "' given twice");
          if (run.name == meta.recorded_under)
            throw input_error(path, "run '" + run.name + "' would replace the run this trace was recorded under");
        }
      },
      [&](hid_t file, const TraceMeta& meta) {
        for (const RunData& run : runs) ts::write_run(file, run, meta);
      });
}

void append_array(const std::string& path, const std::string& array_path, const NamedArray& array,
                  const std::vector<std::pair<std::string, std::string>>& string_attrs) {
  ts::validate_array(array_path, array);
  rewrite_trace(
      path, [](const TraceMeta&) {},
      [&](hid_t file, const TraceMeta&) { ts::write_array(file, array_path, array, string_attrs); });
}

void check_appendable(const std::string& path) { appendable_target(path); }

}  // namespace kvs
