// Chunks packed the way HDF5's shuffle + deflate filter pipeline stores them, so the trace writer
// can compress the chunks of a decode step (or of the prefill map) on several threads with
// libdeflate and hand the stored bytes to H5Dwrite_chunk; HDF5, h5py and every other reader
// unpack them with their own zlib, as if HDF5 had written them. The reader unpacks decode steps
// the same way, on several threads. A chunk may also be stored as it is, both filters skipped
// (its filter mask says so, and every HDF5 reader honours it): see StoredChunk. Float32 decode
// rows are packed by pack_shuffle_zero_runs, a deflate stream that only collapses zero runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvs {

// One chunk's bytes as stored, and the filters of the shuffle + deflate pipeline it skipped
// (bit 0 shuffle, bit 1 deflate: HDF5's chunk filter mask).
struct StoredChunk {
  std::vector<uint8_t> bytes;
  uint32_t skipped = 0;
};
inline constexpr uint32_t kSkipShuffleDeflate = 0x3;  // the raw chunk, unfiltered

// The bytes HDF5 stores for one chunk of a dataset created with H5Pset_shuffle + H5Pset_deflate:
// the raw chunk (row-major elements of elem_size bytes) byte-shuffled (all first bytes, then all
// second bytes, ...), then a zlib stream of that at `level` (1..12; 1 is fast, and with libdeflate
// compresses attention rows as well as zlib's level 4).
std::vector<uint8_t> pack_shuffle_deflate(std::span<const uint8_t> raw, std::size_t elem_size, int level);

// The same stored format (a zlib stream of the shuffled chunk, which every inflater reads) made
// without searching for matches: each run of 32 or more zero bytes becomes repeats of the byte
// before it, everything else is stored as it is. It runs at about the speed of a copy where
// deflate packs ~110 MB/s on a core, and float32 attention values gain only ~14% from deflate
// (their two low mantissa bytes are noise), so it is how the writer packs float32 decode rows,
// whose zero tails are their only redundancy worth the time.
std::vector<uint8_t> pack_shuffle_zero_runs(std::span<const uint8_t> raw, std::size_t elem_size);

// The inverse, for the trace reader's fast path: fills raw (the chunk's size) from stored bytes;
// false when they are not one zlib stream of exactly raw.size() bytes (the caller then lets HDF5
// read the chunk, and report what is wrong with it).
bool unpack_shuffle_deflate(std::span<const uint8_t> stored, std::size_t elem_size, std::span<uint8_t> raw);

}  // namespace kvs
