#include "core/plugin/manifest.h"

#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "core/common/dtype.h"
#include "core/common/status.h"
#include "core/schema/plugin_generated.h"

namespace weft::plugin {

static_assert(static_cast<int>(schema::ValueType::FN) == static_cast<int>(ValueType::fn), "ValueType numbers");
static_assert(static_cast<int>(schema::ValueType::MAX) + 1 == kNumValueTypes, "ValueType list");
static_assert(static_cast<int>(schema::EntryKind::COST_MODEL) == static_cast<int>(Kind::cost_model), "kind numbers");
static_assert(static_cast<int>(schema::EntryKind::MAX) + 1 == kNumKinds, "kind list");

namespace {

constexpr const char* kTypeNames[kNumValueTypes] = {"VOID", "I8",  "U8",  "I16", "U16",  "I32",    "U32",    "I64",
                                                    "U64",  "F32", "F64", "PTR", "SIZE", "TENSOR", "STRING", "FN"};
constexpr const char* kKindNames[kNumKinds] = {"FUNCTION",     "REDUCE_OP", "CODEC_BYTES", "CODEC_ENCODE",
                                               "CODEC_DECODE", "ROUTER",    "SCHEDULE",    "COST_MODEL"};
constexpr size_t kMaxSymbolLength = 256;
constexpr size_t kMaxVersionLength = 128;

// The verifier's limits: a manifest is one root table and one table per entry, nested two deep;
// anything far beyond that is hostile or broken, and the limits bound the verifier's work.
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
constexpr flatbuffers::uoffset_t kMaxTables = 100000;

using T = ValueType;
const Signature kReduceSig{T::i32, {T::ptr, T::ptr, T::ptr, T::size, T::i32}};
const Signature kCodecBytesSig{T::size, {T::size}};
const Signature kCodecCodeSig{T::i32, {T::ptr, T::size, T::ptr}};
const Signature kRouterSig{T::i32, {T::ptr, T::size, T::i32, T::i32, T::ptr}};
const Signature kScheduleSig{T::i32, {T::i32, T::i32, T::i32, T::ptr, T::size, T::ptr, T::ptr}};
const Signature kCostSig{T::f64, {T::i32, T::i32, T::i32, T::i32, T::i32}};

// The codec part a kind is, with its name suffix; nullptr for the other kinds.
const char* codec_suffix(Kind k) {
  switch (k) {
    case Kind::codec_bytes: return ".bytes";
    case Kind::codec_encode: return ".encode";
    case Kind::codec_decode: return ".decode";
    default: return nullptr;
  }
}

// What a string field holds, for messages: quoted when printable, else its length only (the
// bytes may be anything).
std::string shown(const flatbuffers::String* s) {
  for (size_t i = 0; i < s->size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s->c_str()[i]);
    if (c < 0x20 || c > 0x7e) return format("a %u-byte string with byte 0x%02x at %zu", s->size(), c, i);
  }
  return format("'%s'", s->c_str());  // printable: no NUL inside
}

// Printable ASCII, 1..max characters; `spaces` allows ' ' (versions and docs, not names).
bool printable(const flatbuffers::String* s, size_t max, bool spaces) {
  if (s->size() < 1 || s->size() > max) return false;
  for (size_t i = 0; i < s->size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s->c_str()[i]);
    if (c < 0x20 || c > 0x7e || (c == ' ' && !spaces)) return false;
  }
  return true;
}

std::string check_text(const flatbuffers::String* s, const std::string& what, size_t max, bool spaces) {
  if (!printable(s, max, spaces)) {
    fail(Status::invalid_argument, "%s is %s; expected 1-%zu printable ASCII characters%s", what.c_str(),
         shown(s).c_str(), max, spaces ? "" : " without spaces");
  }
  return s->str();
}

Entry read_entry(const schema::PluginEntry* e, size_t index) {
  Entry out;
  const std::string where = format("entries[%zu]", index);
  out.name = check_text(e->name(), where + ".name", kMaxNameLength, false);
  const std::string entry = format("entry %zu ('%s')", index, out.name.c_str());
  out.symbol = check_text(e->symbol(), entry + ": symbol", kMaxSymbolLength, false);
  if (e->doc() && e->doc()->size() > 0) out.doc = check_text(e->doc(), entry + ": doc", kMaxDocLength, true);

  const int kind = static_cast<int>(e->kind());
  if (kind < 0 || kind >= kNumKinds) {
    fail(Status::invalid_argument, "%s: unknown kind %d; expected one of FUNCTION (0) .. COST_MODEL (%d)", entry.c_str(),
         kind, kNumKinds - 1);
  }
  out.kind = static_cast<Kind>(kind);
  const int ret = static_cast<int>(e->ret());
  if (ret < 0 || ret >= kNumValueTypes) {
    fail(Status::invalid_argument, "%s: unknown return type %d; expected VOID (0) .. FN (%d)", entry.c_str(), ret,
         kNumValueTypes - 1);
  }
  out.signature.ret = static_cast<ValueType>(ret);
  if (e->args()) {
    if (e->args()->size() > kMaxArgs) {
      fail(Status::invalid_argument, "%s has %u arguments; at most %zu are supported", entry.c_str(), e->args()->size(),
           kMaxArgs);
    }
    for (flatbuffers::uoffset_t i = 0; i < e->args()->size(); ++i) {
      const int t = static_cast<int>(e->args()->Get(i));
      if (t <= 0 || t >= kNumValueTypes) {
        fail(Status::invalid_argument, "%s: argument %u has %s; expected I8 (1) .. FN (%d) (VOID is a return type only)",
             entry.c_str(), i, t == 0 ? "type VOID" : format("unknown type %d", t).c_str(), kNumValueTypes - 1);
      }
      out.signature.args.push_back(static_cast<ValueType>(t));
    }
  }
  if (const Signature* want = kind_signature(out.kind); want && !(*want == out.signature)) {
    fail(Status::invalid_argument, "%s: a %s entry's signature must be %s; the manifest declares %s", entry.c_str(),
         kind_name(kind).c_str(), signature_string(*want).c_str(), signature_string(out.signature).c_str());
  }
  if (const char* suffix = codec_suffix(out.kind)) {
    const size_t n = std::strlen(suffix);
    if (out.name.size() <= n || out.name.compare(out.name.size() - n, n, suffix) != 0) {
      fail(Status::invalid_argument, "%s: a %s entry's name must be \"<codec>%s\"", entry.c_str(),
           kind_name(kind).c_str(), suffix);
    }
  }
  const size_t ndtypes = e->dtypes() ? e->dtypes()->size() : 0;
  if (out.kind == Kind::reduce_op) {
    if (ndtypes == 0) {
      fail(Status::invalid_argument, "%s: a REDUCE_OP entry needs dtypes (the weft_dtype_t values it takes); it has none",
           entry.c_str());
    }
    uint32_t seen = 0;
    for (flatbuffers::uoffset_t i = 0; i < ndtypes; ++i) {
      const int d = e->dtypes()->Get(i);
      if (!dtype_valid(d)) {
        fail(Status::invalid_argument, "%s: dtypes[%u] = %d; expected a weft_dtype_t (0 .. %d)", entry.c_str(), i, d,
             kNumDTypes - 1);
      }
      if ((seen >> d) & 1u) {
        fail(Status::invalid_argument, "%s: dtypes lists %s twice", entry.c_str(), dtype_name(static_cast<DType>(d)));
      }
      seen |= 1u << d;
      out.dtypes.push_back(d);
    }
  } else if (ndtypes != 0) {
    fail(Status::invalid_argument, "%s: only REDUCE_OP entries take dtypes; this %s entry lists %zu", entry.c_str(),
         kind_name(kind).c_str(), ndtypes);
  }
  return out;
}

// Every codec named by a part has all three parts.
void check_codecs(const std::vector<Entry>& entries) {
  std::map<std::string, int> parts;  // codec -> bit per part
  for (const Entry& e : entries) {
    if (const char* suffix = codec_suffix(e.kind)) {
      parts[e.name.substr(0, e.name.size() - std::strlen(suffix))] |=
          1 << (static_cast<int>(e.kind) - static_cast<int>(Kind::codec_bytes));
    }
  }
  for (const auto& [codec, bits] : parts) {
    if (bits == 7) continue;
    std::string missing;
    const char* suffixes[3] = {".bytes", ".encode", ".decode"};
    for (int i = 0; i < 3; ++i) {
      if (!((bits >> i) & 1)) {
        missing += format("%s'%s%s' (%s)", missing.empty() ? "" : ", ", codec.c_str(), suffixes[i],
                          kKindNames[static_cast<int>(Kind::codec_bytes) + i]);
      }
    }
    fail(Status::invalid_argument, "codec '%s' is incomplete: a codec needs all three entries; missing %s",
         codec.c_str(), missing.c_str());
  }
}

}  // namespace

std::string value_type_name(int type) {
  return type >= 0 && type < kNumValueTypes ? kTypeNames[type] : format("type %d", type);
}

std::string kind_name(int kind) { return kind >= 0 && kind < kNumKinds ? kKindNames[kind] : format("kind %d", kind); }

std::string signature_string(const Signature& s, const std::string& name) {
  std::string out = value_type_name(static_cast<int>(s.ret));
  if (!name.empty()) out += " " + name;
  out += "(";
  for (size_t i = 0; i < s.args.size(); ++i) out += (i ? ", " : "") + value_type_name(static_cast<int>(s.args[i]));
  return out + ")";
}

const Signature* kind_signature(Kind kind) {
  switch (kind) {
    case Kind::function: return nullptr;
    case Kind::reduce_op: return &kReduceSig;
    case Kind::codec_bytes: return &kCodecBytesSig;
    case Kind::codec_encode: case Kind::codec_decode: return &kCodecCodeSig;
    case Kind::router: return &kRouterSig;
    case Kind::schedule: return &kScheduleSig;
    case Kind::cost_model: return &kCostSig;
  }
  return nullptr;
}

Manifest parse_manifest(const void* data, size_t size) {
  if (!data) fail(Status::invalid_argument, "the manifest is NULL");
  if (size > kMaxManifestBytes) {
    fail(Status::invalid_argument, "the manifest is %zu bytes; at most %zu are accepted", size, kMaxManifestBytes);
  }
  // FlatBuffers reads aligned scalars; the plugin's bytes may sit anywhere, so they are copied
  // into a buffer aligned for the widest scalar (and owned here, not by the library).
  std::unique_ptr<uint64_t[]> owned(new uint64_t[size / 8 + 1]);
  std::memcpy(owned.get(), data, size);
  const auto* bytes = reinterpret_cast<const uint8_t*>(owned.get());
  if (size < 8) fail(Status::invalid_argument, "the manifest is %zu bytes; a FlatBuffers manifest has at least 8", size);
  if (!schema::PluginManifestBufferHasIdentifier(bytes)) {
    char got[5] = {0};
    for (int i = 0; i < 4; ++i) {
      const char c = static_cast<char>(bytes[4 + i]);
      got[i] = c >= 0x20 && c <= 0x7e ? c : '?';
    }
    fail(Status::invalid_argument, "the manifest's file identifier is \"%s\"; expected \"WFPM\" (core/schema/plugin.fbs)",
         got);
  }
  flatbuffers::Verifier verifier(bytes, size, kMaxDepth, kMaxTables);
  if (!schema::VerifyPluginManifestBuffer(verifier)) {
    fail(Status::invalid_argument,
         "the manifest (%zu bytes) fails the FlatBuffers verifier (truncated, corrupt, missing a required field, or "
         "beyond the depth %u / table %u limits); expected bytes of core/schema/plugin.fbs",
         size, kMaxDepth, kMaxTables);
  }
  const schema::PluginManifest* m = schema::GetPluginManifest(bytes);
  Manifest out;
  out.abi_major = m->abi_major();
  out.abi_minor = m->abi_minor();
  if (out.abi_major != kAbiMajor || out.abi_minor > kAbiMinor) {
    fail(Status::mismatch, "built for plugin ABI %d.%d, this weft has %d.%d (%s)", out.abi_major, out.abi_minor,
         kAbiMajor, kAbiMinor,
         out.abi_major != kAbiMajor ? "the major versions must be equal" : "a plugin may not be newer than weft");
  }
  out.name = check_text(m->name(), "the plugin's name", kMaxNameLength, false);
  out.version = check_text(m->version(), "the plugin's version", kMaxVersionLength, true);
  const auto* entries = m->entries();
  if (entries->size() > kMaxEntries) {
    fail(Status::invalid_argument, "the manifest has %u entries; at most %zu are accepted", entries->size(), kMaxEntries);
  }
  std::set<std::string> names;
  for (flatbuffers::uoffset_t i = 0; i < entries->size(); ++i) {
    out.entries.push_back(read_entry(entries->Get(i), i));
    if (!names.insert(out.entries.back().name).second) {
      fail(Status::invalid_argument, "entry %u: duplicate entry name '%s'; expected names unique in the plugin", i,
           out.entries.back().name.c_str());
    }
  }
  check_codecs(out.entries);
  return out;
}

}  // namespace weft::plugin
