// Gradient codecs: how a compressed wire format (weft/training.h, "wire formats") turns float32
// chunks into bytes and back. The built-in BF16 and FP8_E4M3 formats (kernels/cpu/wire_codec)
// and a plugin's codec (weft/plugin.h, CODEC_* entries, found in core/plugin/registry by its
// weft_wire_format_t id) share this interface, so core/training/reduction has one compressed
// path whichever codec a bucketer or a ZeRO handle was given.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace weft::training {

class Codec {
 public:
  virtual ~Codec() = default;
  // The weft_wire_format_t value: 1 (BF16), 2 (FP8_E4M3), or a plugin codec's id (64 and up).
  virtual int id() const = 0;
  // For messages: "WEFT_WIRE_BF16", "gradient codec 'topk' (plugin rust_topk, /path/lib.so)".
  virtual std::string name() const = 0;
  // Bytes encode writes for count float32 values (a pure function of count: every rank sizes
  // every other rank's chunk with it).
  virtual size_t bytes(size_t count) const = 0;
  // src[0..count) into dst (bytes(count) bytes). A plugin's failure throws weft::Error naming it.
  virtual void encode(const float* src, size_t count, void* dst) const = 0;
  // dst[i] = decoded element i.
  virtual void decode(const void* src, size_t count, float* dst) const = 0;
  // acc[i] += decoded element i, in float32: the same bits as decode into a buffer and adding.
  // scratch: the caller's buffer a codec without a fused form decodes into (grown once, kept).
  virtual void decode_add(const void* src, size_t count, float* acc, std::vector<float>& scratch) const;
};

// The codec of wire format `wire` (a weft_wire_format_t value): nullptr for NATIVE (0), the
// built-in BF16 / FP8_E4M3 codecs, or the plugin codec registered under that id. Anything else
// throws weft::Error(INVALID_ARGUMENT) naming the value and the ids that exist.
std::shared_ptr<const Codec> codec_of(int wire);

// Error feedback (training.h, error_feedback) for one chunk: v = data + residual (float32,
// written to data), dst = encode(v), residual = v - decode(encode(v)) - exactly what the
// receivers lose of this rank's term, added back next step. An element whose residual would not
// be finite (v or its decoded value inf or NaN) keeps 0: an overflowed gradient (a loss scale
// too high) must not poison every later step through its residual.
void encode_with_feedback(const Codec& codec, float* data, size_t count, void* dst, float* residual);

}  // namespace weft::training
