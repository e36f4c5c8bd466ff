// A plugin's manifest (weft/plugin.h, core/schema/plugin.fbs) read into plain C++: the bytes come
// from a library weft did not build, so parse_manifest verifies them with the FlatBuffers
// verifier before reading a field and then checks every field; what it returns is safe to use.
// It throws weft::Error and never crashes on any bytes (tests/fuzz/fuzz_plugin_manifest.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::plugin {

constexpr int kAbiMajor = 1;  // WEFT_PLUGIN_ABI_MAJOR / MINOR (static_assert in capi)
constexpr int kAbiMinor = 0;
constexpr const char* kManifestSymbol = "weft_plugin_manifest";  // WEFT_PLUGIN_MANIFEST_SYMBOL
constexpr size_t kMaxManifestBytes = size_t{1} << 20;
constexpr size_t kMaxEntries = 1024;
constexpr size_t kMaxArgs = 32;
constexpr size_t kMaxNameLength = 128;
constexpr size_t kMaxDocLength = 4096;

// weft_value_type_t's numbers.
enum class ValueType : int {
  void_ = 0, i8 = 1, u8 = 2, i16 = 3, u16 = 4, i32 = 5, u32 = 6, i64 = 7, u64 = 8,
  f32 = 9, f64 = 10, ptr = 11, size = 12, tensor = 13, string = 14, fn = 15,
};
constexpr int kNumValueTypes = 16;

// weft_plugin_kind_t's numbers.
enum class Kind : int {
  function = 0, reduce_op = 1, codec_bytes = 2, codec_encode = 3, codec_decode = 4,
  router = 5, schedule = 6, cost_model = 7,
};
constexpr int kNumKinds = 8;

struct Signature {
  ValueType ret = ValueType::void_;
  std::vector<ValueType> args;
  bool operator==(const Signature&) const = default;
};

struct Entry {
  Kind kind = Kind::function;
  std::string name;
  std::string symbol;
  std::string doc;
  Signature signature;
  std::vector<int> dtypes;  // REDUCE_OP: weft_dtype_t values
};

struct Manifest {
  std::string name;
  std::string version;
  int abi_major = 0;
  int abi_minor = 0;
  std::vector<Entry> entries;
};

// "I32", "PTR", ...; "VOID"; "type 42" outside the list (messages only).
std::string value_type_name(int type);
// "FUNCTION", "REDUCE_OP", ...; "kind 42" outside the list.
std::string kind_name(int kind);
// "I32(PTR, PTR, PTR, SIZE, I32)", or with a name "I32 absmax(PTR, PTR, PTR, SIZE, I32)".
std::string signature_string(const Signature& s, const std::string& name = "");
// The C signature every symbol of `kind` must have (weft/plugin.h); FUNCTION has none (nullptr).
const Signature* kind_signature(Kind kind);

// Verifies and checks size bytes at data (any alignment, any content). Throws
// Error(INVALID_ARGUMENT) naming the entry and what was expected, or Error(MISMATCH) for another
// plugin ABI major or a newer minor ("built for plugin ABI 2.0, this weft has 1.0").
Manifest parse_manifest(const void* data, size_t size);

}  // namespace weft::plugin
