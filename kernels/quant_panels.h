// Weight matrices kept in their file's encoding for the CPU products: the GGML blocks of 32
// weights regrouped into kernels/matmul.h's panels, so that decode streams 5-10 bits a weight
// instead of 32 and expands them in registers (fp16 and bf16 weights likewise, 16 bits each).
// Every weight expands to the value the fp32 dequantizer (kernels/quant.h) gives it, so products
// over these panels equal products over fp32 panels (bit for bit, or to rounding where the
// compiler fuses a multiply-add in one loop and not in the other: quant_panel_dot);
// pack_quant_panels checks that on every weight and refuses a matrix where it does not hold.
//
// Layout: panel p (rows p*kPanelRows ...), block b (columns 32b ... 32b+31), one after another:
//   scale[S][kPanelRows]  float, a row's factor in each of the block's S sub-blocks (S = 1, or 2
//                         for the kinds of 16-weight sub-blocks: columns 16s ... 16s+15)
//   offset[S][kPanelRows] float, a row's offset (the kinds with one)
//   q[32][column bytes] column k's kPanelRows quants: int8 each (kPanelRows bytes), or 4 bits
//                      each (kPanelRows/2 bytes: byte i holds row i in its low nibble and row
//                      i + kPanelRows/2 in its high one)
// Rows past the matrix's last in its last panel have scale and offset 0 and level 0 (Q4_0's quant
// 8): weight +0.
// The 16-bit kinds (F16, BF16) have no blocks: panel p is q[cols][kPanelRows], uint16 each, the
// weights as the file stores them (any cols), +0 past the last row.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvs::ops {

// How a block's weights expand, per row: w = scale * q (+ offset); or a 16-bit float's value.
enum class QuantKind : uint8_t {
  None,           // fp32 panels
  Int8,           // q int8: w = s*q (Q8_0; Q5_0 with q - 16; IQ4_NL and IQ4_XS with q their level)
  Int8Offset,     // q int8: w = s*q + o (Q5_1, Q5_K)
  Nibble,         // q 0..15: w = s*q + o (Q4_1, Q4_K)
  NibbleCentred,  // q 0..15: w = s*(q - 8) (Q4_0)
  Int8Halves,     // as Int8, a factor per 16 columns (Q6_K, Q3_K)
  NibbleHalves,   // as Nibble, factors per 16 columns (Q2_K)
  F16,            // IEEE half weights
  BF16,           // bfloat16 weights
};

// The encodings kept as stored: the GGML block formats, and 16-bit floats (little-endian).
enum class QuantFormat { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, F16, BF16 };

QuantKind quant_kind(QuantFormat f);
// Bytes of one row of W[rows, cols] in the file's encoding (its blocks, or 16-bit floats).
std::size_t quant_file_row_bytes(QuantFormat f, int cols);
// Bytes of a matrix's quantized panels (cols a multiple of 32 for the block kinds).
std::size_t quant_panel_bytes(QuantKind k, int cols);  // one panel
std::size_t quant_bytes(QuantKind k, long rows, int cols);

// A matrix's quantized panels.
struct QuantPanels {
  QuantKind kind = QuantKind::None;
  const uint8_t* bytes = nullptr;  // [quant_bytes(kind, rows, cols)]
  // Every weight times this: a model's multiplier that a 16-bit kind cannot hold exactly
  // (quant_scale refuses it). Expansions multiply each weight by it (the fp32 weight w f), the
  // decode product its sums ((w . x) f, within a rounding of (w f) . x).
  float scale = 1.0f;
};

// Whether every weight of the format widens to fp32 exactly, whatever its bits (F16, BF16): its
// panels need no fp32 weights to be checked against.
bool quant_exact(QuantFormat f);

// Writes the panels of W[rows, cols] into out[quant_bytes(quant_kind(f), rows, cols)] from its
// GGML blocks or 16-bit floats (`blocks`: row-major, as the file stores them) and its fp32
// weights `w` [rows, cols] (the dequantizer's; null where quant_exact(f)), panels on the OpenMP
// threads. Returns false, out then undefined, where some weight would not expand to exactly w's
// value (a block whose factors are not finite).
bool pack_quant_panels(uint8_t* out, QuantFormat f, const uint8_t* blocks, const float* w, int rows, int cols);

// Row `to` of the panels at dst becomes row `from` of those at src, both of W[rows, cols] in kind
// k (its factors move with it).
void quant_copy_row(uint8_t* dst, int to, const uint8_t* src, int from, QuantKind k, int cols);

// W[rows, cols] in kind k at `bytes` becomes W * f, in place: a block kind's factors (scale and
// offset) times f, so a weight becomes (s f) q + o f, within a rounding or two of w f; a 16-bit
// kind's weights only where every one of w f is again a 16-bit value (f a power of two, no
// weight leaving the range), exactly. Returns false, the bytes unchanged, where that fails.
bool quant_scale(uint8_t* bytes, QuantKind k, long rows, int cols, float f);

// Panel p of W as an fp32 panel [cols, kPanelRows] (matmul.h's layout), times w.scale.
void quant_panel_to_f32(float* panel, QuantPanels w, int cols, long p);
// out[cols] = W[r, :] times w.scale.
void quant_row(float* out, QuantPanels w, int cols, int r);
// y[n_rows] = the rows of panel p times x[cols], summed in matmul.h's panel_dot's order (even and
// odd columns in two chains, then added). Whether each multiply-add is fused is the compiler's
// choice per loop (GCC's tuning for AMD Zen splits some chains: there, fusing them by hand cost
// 13% of this product's speed), so the result equals the fp32 panel's to a rounding per term,
// and bit for bit where both loops fuse alike. The sums are then multiplied by w.scale.
void quant_panel_dot(float* y, QuantPanels w, long p, const float* x, int cols, int n_rows);

}  // namespace kvs::ops
