// The compressed wire formats of gradient reduction (weft/training.h, "wire formats"): float32
// chunks encoded to bf16, or to OCP FP8 E4M3 with one float32 scale (absmax / 448) per block of
// kFp8Block elements, and decoded back. Every rank encodes and decodes with these same loops, so
// a reduction's result does not depend on which rank computed which chunk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::kernels {

enum class WireFormat : int { native = 0, bf16 = 1, fp8_e4m3 = 2 };

constexpr size_t kFp8Block = 256;  // WEFT_WIRE_FP8_BLOCK

// Bytes `count` float32 elements take on the wire (native: 4 per element). An FP8 chunk is
// ceil(count / kFp8Block) float32 scales followed by count E4M3 bytes.
size_t wire_bytes(WireFormat wire, size_t count);

// Encodes src[0..count) into dst (wire_bytes(wire, count) bytes). FP8: a block whose absmax is
// inf or NaN gets a NaN scale, so every element of it decodes to NaN and an overflowed gradient
// stays visible to the loss scaler; an all-zero block gets scale 0.
void wire_encode(WireFormat wire, const float* src, size_t count, void* dst);
// dst[i] = the decoded value of element i.
void wire_decode(WireFormat wire, const void* src, size_t count, float* dst);
// acc[i] += the decoded value of element i (float32 addition).
void wire_decode_add(WireFormat wire, const void* src, size_t count, float* acc);

}  // namespace weft::kernels
