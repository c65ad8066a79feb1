// Conversion of stored weight encodings to fp32: IEEE half (F16), bfloat16 (BF16) and the GGML
// block formats Q8_0, Q4_0 and Q4_1 (32 weights per block, one fp16 scale, Q4_1 also an fp16 min).
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvs {

constexpr int kQuantBlock = 32;  // weights per Q8_0 / Q4_0 / Q4_1 block

// Bytes of one block in the file.
constexpr std::size_t kQ8_0BlockBytes = 2 + 32;      // fp16 d, int8 qs[32]
constexpr std::size_t kQ4_0BlockBytes = 2 + 16;      // fp16 d, uint8 qs[16] (two nibbles each)
constexpr std::size_t kQ4_1BlockBytes = 2 + 2 + 16;  // fp16 d, fp16 m, uint8 qs[16]

float fp16_to_fp32(uint16_t h);
float bf16_to_fp32(uint16_t h);

// Each converts `n` weights from `src` (little-endian file bytes) into `dst` [n].
// For the block formats `n` must be a multiple of kQuantBlock.
void dequantize_f16(const uint8_t* src, float* dst, std::size_t n);
void dequantize_bf16(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q8_0(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q4_0(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q4_1(const uint8_t* src, float* dst, std::size_t n);

}  // namespace kvs
