// Test helper: the GGML block formats (type number, block size, decoder, where the fp16 factors
// lie) — the K-quants, and with them the other formats a K-quant file mixes in — and random
// blocks whose fp16 factors are finite, for the loader and cross-checks.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "inference/gguf_file.h"
#include "kernels/quant.h"

namespace kvs::testing {

struct BlockFormat {
  std::string name;
  uint32_t type;
  std::size_t block_bytes;
  std::vector<std::size_t> half_offsets;  // byte offsets of the fp16 factors (d, dmin) in a block
  void (*dequantize)(const uint8_t*, float*, std::size_t);
  std::size_t weights = kQuantSuperBlock;  // weights per block
};

// Q2_K..Q6_K.
inline const std::vector<BlockFormat>& kquant_formats() {
  static const std::vector<BlockFormat> formats = {
      {"Q2_K", kGgmlQ2_K, kQ2_KBlockBytes, {80, 82}, dequantize_q2_k},
      {"Q3_K", kGgmlQ3_K, kQ3_KBlockBytes, {108}, dequantize_q3_k},
      {"Q4_K", kGgmlQ4_K, kQ4_KBlockBytes, {0, 2}, dequantize_q4_k},
      {"Q5_K", kGgmlQ5_K, kQ5_KBlockBytes, {0, 2}, dequantize_q5_k},
      {"Q6_K", kGgmlQ6_K, kQ6_KBlockBytes, {208}, dequantize_q6_k},
  };
  return formats;
}

// The K-quants, IQ4_XS, and the 32-weight formats llama.cpp stores rows that are not whole
// super-blocks in: Q5_0, Q5_1, IQ4_NL.
inline const std::vector<BlockFormat>& mixed_formats() {
  static const std::vector<BlockFormat> formats = [] {
    std::vector<BlockFormat> f = kquant_formats();
    f.push_back({"IQ4_XS", kGgmlIQ4_XS, kIQ4_XSBlockBytes, {0}, dequantize_iq4_xs});
    f.push_back({"Q5_0", kGgmlQ5_0, kQ5_0BlockBytes, {0}, dequantize_q5_0, kQuantBlock});
    f.push_back({"Q5_1", kGgmlQ5_1, kQ5_1BlockBytes, {0, 2}, dequantize_q5_1, kQuantBlock});
    f.push_back({"IQ4_NL", kGgmlIQ4_NL, kIQ4_NLBlockBytes, {0}, dequantize_iq4_nl, kQuantBlock});
    return f;
  }();
  return formats;
}

// `n_blocks` blocks of random bytes, except that every fp16 factor is a finite half with a
// random sign and mantissa and an exponent field in [0, max_exponent] (0 = subnormal, at most 30).
inline std::vector<uint8_t> random_blocks(const BlockFormat& f, std::size_t n_blocks,
                                                 std::mt19937& rng, int max_exponent) {
  std::uniform_int_distribution<int> byte(0, 255), exponent(0, max_exponent), mantissa(0, 1023);
  std::vector<uint8_t> out(n_blocks * f.block_bytes);
  for (uint8_t& b : out) b = static_cast<uint8_t>(byte(rng));
  for (std::size_t k = 0; k < n_blocks; ++k) {
    for (std::size_t off : f.half_offsets) {
      const uint16_t h = static_cast<uint16_t>((byte(rng) & 1) << 15 | exponent(rng) << 10 |
                                               mantissa(rng));
      out[k * f.block_bytes + off] = static_cast<uint8_t>(h & 0xff);
      out[k * f.block_bytes + off + 1] = static_cast<uint8_t>(h >> 8);
    }
  }
  return out;
}

}  // namespace kvs::testing
