// Crash-safe file replacement: write under a unique temporary sibling name, fsync, rename over
// the final name, fsync the folder. A kill at any moment leaves the old file or the new one.
#pragma once
#include <stdexcept>
#include <string>

namespace kvs {

// An OS call failed; what() is the system's reason, e.g. "Permission denied".
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "<final>.tmp-<pid>-<random hex>" in the same folder (so rename() stays on one filesystem).
std::string temp_sibling(const std::string& final_path);
// Creates an empty file that must not exist yet (O_EXCL). Throws FileError.
void create_exclusive(const std::string& path);
// Byte copy of `from` into a new file `to` (created exclusively). Throws FileError.
void copy_file_bytes(const std::string& from, const std::string& to);
// fsync()s `temp`, renames it to `final_path`, fsync()s the folder. Throws FileError.
void publish_file(const std::string& temp, const std::string& final_path);
// Removes the temporary siblings ("<name>.tmp-<pid>-<hex>") in the folder of `final_path` whose
// process is gone (left by a kill -9 or a power cut). Errors are ignored.
void remove_stale_temps(const std::string& final_path);
// Removes a file, ignoring errors (cleanup paths).
void remove_quietly(const std::string& path);
// True when `path` names an existing folder.
bool is_directory(const std::string& path);

}  // namespace kvs
