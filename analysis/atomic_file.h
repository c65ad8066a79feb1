// Crash-safe file replacement: write under a unique temporary sibling name, fsync, rename over
// the final name, fsync the folder. A kill at any moment leaves the old file or the new one.
// Only regular files are ever replaced; a symbolic link is written through to its target.
#pragma once
#include <sys/stat.h>

#include <stdexcept>
#include <string>

namespace kvs {

// An OS call failed; what() is the system's reason, e.g. "Permission denied".
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a write meant for `path` lands: `path` itself when nothing is there or a regular file
// is, the file a symbolic link leads to (every link resolved) when that is a regular file.
// Throws InputError naming `path`, changing nothing, when it is a folder, a device, a FIFO or a
// socket (or a link to one), or a link that leads nowhere, or when the folder it lands in has no
// owner-write bit (root included).
std::string output_target(const std::string& path);
// Throws InputError("<path>: is in the read-only folder F ...") when the folder `target` would be
// created in (its nearest existing ancestor folder) has no owner-write bit. Root may write into
// any folder, so the rule is on the mode bits, as require_owner_write's for files: a folder made
// read-only (the shared models' are 555) is meant to stay as it is. Anything else is the OS's to
// refuse.
void require_writable_folder(const std::string& path, const std::string& target);
// Replaces output_target(`path`) with `bytes` through a temporary sibling. Throws InputError
// naming `path`; on an error nothing is left behind.
void write_file_atomically(const std::string& path, const std::string& bytes);
// Copies `from` to output_target(`to`) through a temporary sibling. Throws InputError naming
// `to`; on an error nothing is left behind.
void copy_file_atomically(const std::string& from, const std::string& to);

// "<final>.tmp-<pid>-<random hex>" in the same folder (so rename() stays on one filesystem).
std::string temp_sibling(const std::string& final_path);
// Creates an empty file that must not exist yet (O_EXCL). Throws FileError.
void create_exclusive(const std::string& path);
// Byte copy of `from` into a new file `to` (created exclusively). Throws FileError.
void copy_file_bytes(const std::string& from, const std::string& to);
// Gives `path` the permission bits of `like` and, where permitted, its owner and group.
// Throws FileError when the mode cannot be set.
void copy_mode_and_owner(const struct stat& like, const std::string& path);
// Throws InputError("<path>: is read-only (its owner has no write permission); not <action> it")
// when `st` has no owner-write bit: decided on the mode bits, since root may write anything, and a
// file made read-only is meant to stay as it is.
void require_owner_write(const std::string& path, const struct stat& st, const std::string& action);
// fsync()s `temp`, renames it to `final_path`, fsync()s the folder. Throws FileError.
void publish_file(const std::string& temp, const std::string& final_path);
// Removes the temporary siblings of `final_path` ("<final>.tmp-<pid>-<16 hex>", that name only)
// whose process is gone (left by a kill -9 or a power cut). Errors are ignored.
void remove_stale_temps(const std::string& final_path);
// Removes a file, ignoring errors (cleanup paths).
void remove_quietly(const std::string& path);

}  // namespace kvs
