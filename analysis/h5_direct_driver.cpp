// The recording file driver (h5_direct_driver.h): HDF5's virtual file layer callbacks. HDF5's
// writes are batched in memory; at each HDF5 flush the batch goes to a writing thread of the
// file's own, which writes raw ranges' aligned middles through an O_DIRECT descriptor and the
// rest through a cached one. Reads, truncation and close wait for it.
#include "analysis/h5_direct_driver.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "analysis/h5_util.h"

namespace kvs::h5 {

namespace {

constexpr haddr_t kAlign = 4096;             // O_DIRECT's offset, length and memory alignment
constexpr size_t kBatchBytes = 16u << 20;    // a batch is handed over at the latest at this size
constexpr haddr_t kMinDirect = 64u << 10;    // a shorter aligned middle goes through the cache
constexpr haddr_t kMaxAddr = ((haddr_t)1 << (8 * sizeof(off_t) - 1)) - 1;

std::atomic<uint64_t> g_direct_bytes{0}, g_cached_bytes{0};

// A stretch of the file to write: `len` bytes at file address `at`, from the batch's bytes at `off`.
struct Piece {
  haddr_t at = 0;
  size_t len = 0;
  size_t off = 0;
  bool raw = false;  // raw data; its bytes lie at an offset congruent to `at` modulo kAlign
};

// The writes HDF5 made since the last hand-over, in order, and their bytes.
struct Batch {
  std::vector<Piece> pieces;
  uint8_t* bytes = nullptr;  // [kBatchBytes] kAlign-aligned; pages touched only as far as used
  size_t used = 0;
};

struct DirectFile;

// What H5Fget_vfd_handle gives: the cached descriptor first, as HDF5's POSIX drivers give it.
struct FileHandle {
  int fd = -1;
  DirectFile* file = nullptr;
};

struct DirectFile {
  H5FD_t pub;            // HDF5's part of every driver's file: first
  FileHandle handle;     // handle.fd: cached I/O
  int direct_fd = -1;    // io's: the same file opened with O_DIRECT; -1 where refused or given up
  dev_t dev = 0;         // the file handle.fd was opened on (a diverted one no longer is: see same_file)
  ino_t ino = 0;
  haddr_t eoa = 0;       // end of the address space HDF5 has allocated
  haddr_t eof = 0;       // end of what HDF5 wrote, batched writes included
  Batch next;            // HDF5's writes since the last hand-over (only in files opened to write)
  Batch handed;          // the batch io writes or last wrote

  // The writing thread: writes each handed-over batch while HDF5 goes on, so neither the device
  // nor the inode lock an extending direct write holds (which also stalls cached writes to the
  // file) keeps the recording thread waiting.
  std::thread io;
  std::mutex mu;
  std::condition_variable cv;
  bool busy = false, stop = false;  // under mu
  int io_err = 0;                   // under mu: errno of the first failed write, until reported
};

haddr_t round_down(haddr_t a) { return a / kAlign * kAlign; }
haddr_t round_up(haddr_t a) { return round_down(a + kAlign - 1); }

// Pushes an HDF5 error quoting the OS reason as HDF5's own drivers do (h5_util's check() shows
// "No space left on device" from it) and returns -1.
herr_t os_error(const char* func, hid_t minor, const char* what, int err) {
  H5Epush2(H5E_DEFAULT, __FILE__, func, __LINE__, H5E_ERR_CLS, H5E_IO, minor,
           "%s, errno = %d, error message = '%s'", what, err, std::strerror(err));
  return -1;
}

herr_t usage_error(const char* func, const char* what) {
  H5Epush2(H5E_DEFAULT, __FILE__, func, __LINE__, H5E_ERR_CLS, H5E_ARGS, H5E_OVERFLOW, "%s", what);
  return -1;
}

bool overflows(haddr_t addr, size_t size) {
  return addr == HADDR_UNDEF || addr > kMaxAddr || size > kMaxAddr || addr + size > kMaxAddr;
}

// Writes all of p[0, n) at `at` through the cache; false with errno set on failure.
bool write_cached(int fd, const uint8_t* p, size_t n, haddr_t at) {
  g_cached_bytes.fetch_add(n, std::memory_order_relaxed);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, std::min<size_t>(n, size_t{1} << 30), (off_t)at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    p += w;
    n -= (size_t)w;
    at += (haddr_t)w;
  }
  return true;
}

// Whether direct writes still go to the file HDF5 writes through fd: after a write error the
// recorder points fd at a memory file (h5_util's divert_writes), and so must everything else.
bool same_file(const DirectFile& f) {
  struct stat st;
  return ::fstat(f.handle.fd, &st) == 0 && st.st_dev == f.dev && st.st_ino == f.ino;
}

// Writes one piece: a raw one's aligned middle directly when long enough (what the file refuses,
// EINVAL, or a short write leaves goes through the cache), everything else through the cache.
bool write_piece(DirectFile& f, const Batch& b, const Piece& p) {
  const uint8_t* src = b.bytes + p.off;
  const haddr_t s = p.at, e = p.at + p.len, lo = round_up(s), hi = round_down(e);  // [lo, hi) aligned
  if (!p.raw || f.direct_fd < 0 || hi <= lo || hi - lo < kMinDirect) return write_cached(f.handle.fd, src, p.len, s);
  ssize_t w = ::pwrite(f.direct_fd, src + (lo - s), hi - lo, (off_t)lo);
  if (w < 0) {
    if (errno == EINVAL) {  // cached from now on
      ::close(f.direct_fd);
      f.direct_fd = -1;
    } else if (errno != EINTR) {
      return false;
    }
    w = 0;
  }
  g_direct_bytes.fetch_add((uint64_t)w, std::memory_order_relaxed);
  const haddr_t done = lo + (haddr_t)w;
  return write_cached(f.handle.fd, src, lo - s, s) && write_cached(f.handle.fd, src + (done - s), e - done, done);
}

void io_loop(DirectFile* f) {
  pthread_setname_np(pthread_self(), "kvs-trace-io");  // as top and perf show it
  std::unique_lock<std::mutex> lock(f->mu);
  for (;;) {
    f->cv.wait(lock, [f] { return f->busy || f->stop; });
    if (!f->busy) return;
    lock.unlock();
    if (f->direct_fd >= 0 && !same_file(*f)) {
      ::close(f->direct_fd);
      f->direct_fd = -1;
    }
    int err = 0;
    for (const Piece& p : f->handed.pieces)
      if (!write_piece(*f, f->handed, p)) {
        err = errno;
        break;
      }
    lock.lock();
    f->busy = false;
    if (!f->io_err) f->io_err = err;
    f->cv.notify_all();
  }
}

// Waits until io has written everything handed over; the errno of a failed write not reported
// before, else 0.
int wait_io(DirectFile& f) {
  std::unique_lock<std::mutex> lock(f.mu);
  f.cv.wait(lock, [&f] { return !f.busy; });
  const int err = f.io_err;
  f.io_err = 0;
  return err;
}

// Hands HDF5's writes so far to io, once io is done with the previous ones; when io is still
// busy and `wait` is false, they stay for a later hand-over instead (HDF5 flushes several times
// while closing or flushing a file). False with errno set when an earlier write failed.
bool hand_over(DirectFile& f, bool wait) {
  if (f.next.pieces.empty()) return true;
  {
    std::unique_lock<std::mutex> lock(f.mu);
    if (f.busy && !wait) return true;
    f.cv.wait(lock, [&f] { return !f.busy; });
    if (f.io_err) {
      errno = f.io_err;
      f.io_err = 0;
      return false;
    }
    std::swap(f.next, f.handed);
    f.busy = true;
  }
  f.cv.notify_all();
  f.next.pieces.clear();
  f.next.used = 0;
  return true;
}

// Everything HDF5 wrote is in the file (or failed: false with errno set).
bool settle(DirectFile& f) {
  if (!f.io.joinable()) return true;
  if (!hand_over(f, true)) return false;
  errno = wait_io(f);
  return errno == 0;
}

// Appends a write to the batch, handing the batch over first when it is full.
bool add_write(DirectFile& f, bool raw, haddr_t at, const uint8_t* p, size_t n) {
  while (n > 0) {
    Batch& b = f.next;
    Piece* last = b.pieces.empty() ? nullptr : &b.pieces.back();
    const bool extends = raw && last && last->raw && last->at + last->len == at && last->off + last->len == b.used;
    // raw bytes lie congruent to their address, so a direct write can start from them
    const size_t off = extends || !raw ? b.used : b.used + (size_t)((at - b.used) % kAlign);
    if (off >= kBatchBytes) {
      if (!hand_over(f, true)) return false;
      continue;
    }
    const size_t take = std::min(n, kBatchBytes - off);
    std::memcpy(b.bytes + off, p, take);
    if (extends)
      last->len += take;
    else
      b.pieces.push_back({at, take, off, raw});
    b.used = off + take;
    p += take;
    at += take;
    n -= take;
  }
  return true;
}

H5FD_t* direct_open(const char* name, unsigned flags, hid_t, haddr_t maxaddr) {
  if (!name || !*name || maxaddr == 0 || maxaddr == HADDR_UNDEF || maxaddr > kMaxAddr) {
    usage_error("direct_open", "invalid file name or address space");
    return nullptr;
  }
  int o = O_CLOEXEC | ((flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY);
  if (flags & H5F_ACC_TRUNC) o |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) o |= O_CREAT;
  if (flags & H5F_ACC_EXCL) o |= O_EXCL;
  const int fd = ::open(name, o, 0666);
  if (fd < 0) {
    os_error("direct_open", H5E_CANTOPENFILE, "unable to open file", errno);
    return nullptr;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    os_error("direct_open", H5E_CANTOPENFILE, "unable to stat file", err);
    return nullptr;
  }
  auto* f = new DirectFile{};
  f->handle.fd = fd;
  f->handle.file = f;
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  f->eof = (haddr_t)st.st_size;
  if (flags & H5F_ACC_RDWR) {
    f->next.bytes = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBatchBytes));
    f->handed.bytes = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBatchBytes));
    if (!f->next.bytes || !f->handed.bytes) {
      std::free(f->next.bytes);
      std::free(f->handed.bytes);
      ::close(fd);
      delete f;
      os_error("direct_open", H5E_CANTALLOC, "unable to allocate the write buffers", ENOMEM);
      return nullptr;
    }
    f->direct_fd = ::open(name, O_WRONLY | O_DIRECT | O_CLOEXEC);
    f->io = std::thread(io_loop, f);
  }
  return &f->pub;
}

// Writes what is left and closes. When a write fails, the file stays open and the error is
// reported, as a failing close of HDF5's own drivers leaves it: the recorder then diverts the
// descriptor (it abandons the file) and closes again, which succeeds.
herr_t direct_close(H5FD_t* file) {
  auto* f = reinterpret_cast<DirectFile*>(file);
  if (!settle(*f) && same_file(*f)) return os_error("direct_close", H5E_WRITEERROR, "file write failed", errno);
  if (f->io.joinable()) {
    {
      std::lock_guard<std::mutex> lock(f->mu);
      f->stop = true;
    }
    f->cv.notify_all();
    f->io.join();
  }
  if (f->direct_fd >= 0) ::close(f->direct_fd);
  const bool closed = ::close(f->handle.fd) == 0 || errno == EINTR;
  const int close_err = errno;
  std::free(f->next.bytes);
  std::free(f->handed.bytes);
  delete f;
  if (!closed) return os_error("direct_close", H5E_CANTCLOSEFILE, "unable to close file", close_err);
  return 0;
}

int direct_cmp(const H5FD_t* a, const H5FD_t* b) {
  const auto* f = reinterpret_cast<const DirectFile*>(a);
  const auto* g = reinterpret_cast<const DirectFile*>(b);
  if (f->dev != g->dev) return f->dev < g->dev ? -1 : 1;
  if (f->ino != g->ino) return f->ino < g->ino ? -1 : 1;
  return 0;
}

herr_t direct_query(const H5FD_t*, unsigned long* flags) {
  if (flags)
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_POSIX_COMPAT_HANDLE | H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
  return 0;
}

haddr_t direct_get_eoa(const H5FD_t* file, H5FD_mem_t) { return reinterpret_cast<const DirectFile*>(file)->eoa; }

herr_t direct_set_eoa(H5FD_t* file, H5FD_mem_t, haddr_t addr) {
  if (addr > kMaxAddr) return usage_error("direct_set_eoa", "address space overflow");
  reinterpret_cast<DirectFile*>(file)->eoa = addr;
  return 0;
}

haddr_t direct_get_eof(const H5FD_t* file, H5FD_mem_t) { return reinterpret_cast<const DirectFile*>(file)->eof; }

herr_t direct_get_handle(H5FD_t* file, hid_t, void** handle) {
  if (!handle) return usage_error("direct_get_handle", "no handle pointer");
  *handle = &reinterpret_cast<DirectFile*>(file)->handle;
  return 0;
}

herr_t direct_read(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buf) {
  auto* f = reinterpret_cast<DirectFile*>(file);
  if (overflows(addr, size) || addr + size > f->eoa) return usage_error("direct_read", "read past the end of the address space");
  if (!settle(*f)) return os_error("direct_read", H5E_WRITEERROR, "file write failed", errno);
  auto* p = static_cast<uint8_t*>(buf);
  while (size > 0) {
    const ssize_t r = ::pread(f->handle.fd, p, std::min<size_t>(size, size_t{1} << 30), (off_t)addr);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return os_error("direct_read", H5E_READERROR, "file read failed", errno);
    if (r == 0) {  // past the end of the file: zeros, as HDF5's own drivers give
      std::memset(p, 0, size);
      break;
    }
    p += r;
    size -= (size_t)r;
    addr += (haddr_t)r;
  }
  return 0;
}

herr_t direct_write(H5FD_t* file, H5FD_mem_t type, hid_t, haddr_t addr, size_t size, const void* buf) {
  auto* f = reinterpret_cast<DirectFile*>(file);
  if (overflows(addr, size) || addr + size > f->eoa) return usage_error("direct_write", "write past the end of the address space");
  if (!f->io.joinable()) return usage_error("direct_write", "file opened read-only");
  if (!add_write(*f, type == H5FD_MEM_DRAW, addr, static_cast<const uint8_t*>(buf), size))
    return os_error("direct_write", H5E_WRITEERROR, "file write failed", errno);
  f->eof = std::max(f->eof, addr + size);
  return 0;
}

// HDF5 flushed: its writes go to io. A failure of the previous batch is reported here.
herr_t direct_flush(H5FD_t* file, hid_t, hbool_t) {
  auto* f = reinterpret_cast<DirectFile*>(file);
  if (f->io.joinable() && !hand_over(*f, false)) return os_error("direct_flush", H5E_WRITEERROR, "file write failed", errno);
  return 0;
}

// HDF5 calls this at every flush: only a file whose size differs from the allocated address space
// waits for io (writes past a new end must land before it).
herr_t direct_truncate(H5FD_t* file, hid_t, hbool_t) {
  auto* f = reinterpret_cast<DirectFile*>(file);
  if (f->eoa == f->eof) return 0;
  if (!settle(*f)) return os_error("direct_truncate", H5E_WRITEERROR, "file write failed", errno);
  if (::ftruncate(f->handle.fd, (off_t)f->eoa) != 0)
    return os_error("direct_truncate", H5E_SEEKERROR, "unable to extend file properly", errno);
  f->eof = f->eoa;
  return 0;
}

hid_t driver_id() {
  static hid_t id = [] {
    static H5FD_class_t cls{};
#if H5_VERSION_GE(1, 13, 2)  // HDF5 1.14's class starts with these (not built here: Debian 12 has 1.10)
    cls.version = H5FD_CLASS_VERSION;
    cls.value = (H5FD_class_value_t)511;  // 256-511: drivers not registered with The HDF Group
#endif
    cls.name = "kvscope_direct";
    cls.maxaddr = kMaxAddr;
    cls.fc_degree = H5F_CLOSE_WEAK;
    cls.open = direct_open;
    cls.close = direct_close;
    cls.cmp = direct_cmp;
    cls.query = direct_query;
    cls.get_eoa = direct_get_eoa;
    cls.set_eoa = direct_set_eoa;
    cls.get_eof = direct_get_eof;
    cls.get_handle = direct_get_handle;
    cls.read = direct_read;
    cls.write = direct_write;
    cls.flush = direct_flush;
    cls.truncate = direct_truncate;
    const H5FD_mem_t map[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
    std::copy(map, map + H5FD_MEM_NTYPES, cls.fl_map);
    return H5FDregister(&cls);
  }();
  return id;
}

}  // namespace

void use_direct_driver(hid_t fapl) { check(H5Pset_driver(fapl, check(driver_id(), "file driver"), nullptr), "file driver"); }

void settle_writes(hid_t file) {
  Handle fapl = plist_handle(H5Fget_access_plist(file), "file access");
  if (check(H5Pget_driver(fapl), "file driver") != driver_id()) return;
  void* handle = nullptr;
  check(H5Fget_vfd_handle(file, H5P_DEFAULT, &handle), "file handle");
  if (!settle(*static_cast<FileHandle*>(handle)->file)) throw Error(std::strerror(errno));
}

DirectDriverTotals direct_driver_totals() {
  return {g_direct_bytes.load(std::memory_order_relaxed), g_cached_bytes.load(std::memory_order_relaxed)};
}

}  // namespace kvs::h5
