#include "core/training/codec.h"

#include <cmath>

#include "core/common/status.h"
#include "core/plugin/registry.h"
#include "kernels/cpu/wire_codec.h"

namespace weft::training {

namespace {

// BF16 and FP8_E4M3: the loops of kernels/cpu/wire_codec, unchanged (the fused decode_add too),
// so a reduction over them gives the bits it gave before codecs were an interface.
class BuiltinCodec final : public Codec {
 public:
  explicit BuiltinCodec(kernels::WireFormat wire) : wire_(wire) {}
  int id() const override { return static_cast<int>(wire_); }
  std::string name() const override {
    return wire_ == kernels::WireFormat::bf16 ? "WEFT_WIRE_BF16" : "WEFT_WIRE_FP8_E4M3";
  }
  size_t bytes(size_t count) const override { return kernels::wire_bytes(wire_, count); }
  void encode(const float* src, size_t count, void* dst) const override { kernels::wire_encode(wire_, src, count, dst); }
  void decode(const void* src, size_t count, float* dst) const override { kernels::wire_decode(wire_, src, count, dst); }
  void decode_add(const void* src, size_t count, float* acc, std::vector<float>&) const override {
    kernels::wire_decode_add(wire_, src, count, acc);
  }

 private:
  kernels::WireFormat wire_;
};

// A plugin's codec: its three entries, called as plugin.h's kind signatures say. Holding the
// registry's shared_ptr keeps the entry alive for as long as a bucketer or ZeRO handle uses it.
class PluginCodec final : public Codec {
 public:
  PluginCodec(int id, std::shared_ptr<const plugin::Codec> c) : id_(id), c_(std::move(c)) {}
  int id() const override { return id_; }
  std::string name() const override { return c_->origin.describe("gradient codec"); }
  size_t bytes(size_t count) const override { return c_->bytes(count); }
  void encode(const float* src, size_t count, void* dst) const override {
    check(c_->encode(src, count, dst), "encode", count);
  }
  void decode(const void* src, size_t count, float* dst) const override {
    check(c_->decode(src, count, dst), "decode", count);
  }

 private:
  // A nonzero return fails the reduction with that status when it is one of weft's error codes
  // (1-9, as a plugin reduction operator's), else INVALID_ARGUMENT; the message names the codec,
  // its plugin and file, the part and the value.
  void check(int32_t rc, const char* part, size_t count) const {
    if (rc == 0) return;
    const Status status = rc >= 1 && rc <= 9 ? static_cast<Status>(rc) : Status::invalid_argument;
    throw Error(status, format("%s failed: %s returned %d on %zu float32 elements", name().c_str(), part,
                               static_cast<int>(rc), count));
  }

  int id_;
  std::shared_ptr<const plugin::Codec> c_;
};

}  // namespace

void Codec::decode_add(const void* src, size_t count, float* acc, std::vector<float>& scratch) const {
  if (scratch.size() < count) scratch.resize(count);
  decode(src, count, scratch.data());
  for (size_t i = 0; i < count; ++i) acc[i] += scratch[i];
}

std::shared_ptr<const Codec> codec_of(int wire) {
  static const auto bf16 = std::make_shared<const BuiltinCodec>(kernels::WireFormat::bf16);
  static const auto fp8 = std::make_shared<const BuiltinCodec>(kernels::WireFormat::fp8_e4m3);
  switch (wire) {
    case static_cast<int>(kernels::WireFormat::native): return nullptr;
    case static_cast<int>(kernels::WireFormat::bf16): return bf16;
    case static_cast<int>(kernels::WireFormat::fp8_e4m3): return fp8;
    default: break;
  }
  if (wire < plugin::kIdBase) {
    fail(Status::invalid_argument, "wire format %d is not a weft_wire_format_t: 0-2 are built in (NATIVE, BF16, "
         "FP8_E4M3), plugin codecs have ids from %d (weft_plugin_entry's id)", wire, plugin::kIdBase);
  }
  return std::make_shared<const PluginCodec>(wire, plugin::get_codec(wire));
}

void encode_with_feedback(const Codec& codec, float* data, size_t count, void* dst, float* residual) {
  for (size_t i = 0; i < count; ++i) data[i] += residual[i];
  codec.encode(data, count, dst);
  // What every receiver decodes of this rank's term; residual is reused as its buffer.
  codec.decode(dst, count, residual);
  for (size_t i = 0; i < count; ++i) {
    const float lost = data[i] - residual[i];
    residual[i] = std::isfinite(lost) ? lost : 0.0f;
  }
}

}  // namespace weft::training
