// Conversion of stored weight encodings to fp32: IEEE half (F16), bfloat16 (BF16), the GGML
// block formats Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (32 weights per block, one fp16 scale,
// Q4_1/Q5_1 also an fp16 min; IQ4_NL's 4-bit codes index a fixed non-uniform table), the GGML
// K-quants Q2_K..Q6_K (256-weight super-blocks of 16 or 32-weight sub-blocks, each sub-block with
// its own small integer scale, and for Q2_K/Q4_K/Q5_K a min, under fp16 factors) and IQ4_XS
// (IQ4_NL's codes in 256-weight super-blocks, a six-bit scale per 32 weights). llama.cpp stores
// tensors whose rows are not whole super-blocks (SmolLM2's 576, Qwen2.5-0.5B's 896) of a K-quant
// file in Q5_0, Q5_1, Q8_0 or IQ4_NL.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvs {

constexpr int kQuantBlock = 32;        // weights per Q8_0 / Q4_0 / Q4_1 block
constexpr int kQuantSuperBlock = 256;  // weights per K-quant super-block (ggml's QK_K)

// Bytes of one block in the file.
constexpr std::size_t kQ8_0BlockBytes = 2 + 32;      // fp16 d, int8 qs[32]
constexpr std::size_t kQ4_0BlockBytes = 2 + 16;      // fp16 d, uint8 qs[16] (two nibbles each)
constexpr std::size_t kQ4_1BlockBytes = 2 + 2 + 16;  // fp16 d, fp16 m, uint8 qs[16]
// fp16 d, uint8 qh[4] (the fifth bit of weight j at bit j, little-endian), uint8 qs[16]
constexpr std::size_t kQ5_0BlockBytes = 2 + 4 + 16;
constexpr std::size_t kQ5_1BlockBytes = 2 + 2 + 4 + 16;  // fp16 d, fp16 m, uint8 qh[4], uint8 qs[16]
constexpr std::size_t kIQ4_NLBlockBytes = 2 + 16;        // fp16 d, uint8 qs[16] (two codes each)
// uint8 scales[16] (low nibble scale, high nibble min per 16 weights), uint8 qs[64] (four 2-bit
// quants each), fp16 d, fp16 dmin
constexpr std::size_t kQ2_KBlockBytes = 16 + 64 + 2 + 2;
// uint8 hmask[32] (third quant bit), uint8 qs[64] (low two bits), uint8 scales[12] (16 packed
// six-bit scales), fp16 d
constexpr std::size_t kQ3_KBlockBytes = 32 + 64 + 12 + 2;
// fp16 d, fp16 dmin, uint8 scales[12] (8 six-bit scales + 8 six-bit mins), uint8 qs[128]
constexpr std::size_t kQ4_KBlockBytes = 2 + 2 + 12 + 128;
// as Q4_K plus uint8 qh[32] (fifth quant bit) before qs
constexpr std::size_t kQ5_KBlockBytes = 2 + 2 + 12 + 32 + 128;
// uint8 ql[128] (low four bits), uint8 qh[64] (high two bits), int8 scales[16], fp16 d
constexpr std::size_t kQ6_KBlockBytes = 128 + 64 + 16 + 2;
// fp16 d, uint16 scales_h (two high scale bits per 32 weights), uint8 scales_l[4] (four low bits
// per 32 weights), uint8 qs[128] (two IQ4_NL codes each)
constexpr std::size_t kIQ4_XSBlockBytes = 2 + 2 + 4 + 128;

float fp16_to_fp32(uint16_t h);
// The little-endian fp16 at p (a block's factor) as fp32.
float load_half(const uint8_t* p);
// Round to nearest even; subnormals, infinities and NaN kept.
uint16_t fp32_to_fp16(float f);
// x[n] <- fp16_to_fp32(fp32_to_fp16(x)): what storing x in fp16 keeps of it.
void round_to_fp16(float* x, std::size_t n);
float bf16_to_fp32(uint16_t h);
// Round to nearest even (the upper 16 bits of the float, rounded); infinities kept, NaN stays a
// (quiet) NaN.
uint16_t fp32_to_bf16(float f);
// x[n] <- bf16_to_fp32(fp32_to_bf16(x)): what storing x in bf16 keeps of it.
void round_to_bf16(float* x, std::size_t n);

// Each converts `n` weights from `src` (little-endian file bytes) into `dst` [n].
// For the block formats `n` must be a multiple of kQuantBlock, for the K-quants of
// kQuantSuperBlock.
void dequantize_f16(const uint8_t* src, float* dst, std::size_t n);
void dequantize_bf16(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q8_0(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q4_0(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q4_1(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q5_0(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q5_1(const uint8_t* src, float* dst, std::size_t n);
void dequantize_iq4_nl(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q2_k(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q3_k(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q4_k(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q5_k(const uint8_t* src, float* dst, std::size_t n);
void dequantize_q6_k(const uint8_t* src, float* dst, std::size_t n);
void dequantize_iq4_xs(const uint8_t* src, float* dst, std::size_t n);

// Sub-block j's (32 weights', j < 8) factors in a Q4_K or Q5_K super-block, as the dequantizers
// use them: weight = scale * q - min.
void k4_sub_block_factors(const uint8_t* block, int j, float& scale, float& min);
// Sub-block t's (16 weights', t < 16) factors in a Q2_K, Q3_K or Q6_K super-block, as their
// dequantizers use them: weight = scale * q - min (Q3_K and Q6_K: min 0, q signed).
void q2_k_sub_block_factors(const uint8_t* block, int t, float& scale, float& min);
float q3_k_sub_block_scale(const uint8_t* block, int t);
float q6_k_sub_block_scale(const uint8_t* block, int t);
// Sub-block i's (32 weights', i < 8) scale in an IQ4_XS super-block: weight = scale * level.
float iq4_xs_sub_block_scale(const uint8_t* block, int i);

}  // namespace kvs
