// core/plugin/manifest.cpp's checks one by one, on manifests built here with the FlatBuffers
// builder (the refusals flatc's JSON cannot express, and the limits): each must be refused with
// its status and a message naming the entry and what was expected, and a valid manifest must
// read back field by field. WEFT_TEST_INJECT=1 (ctest unit.plugin_manifest_inject) corrupts
// every check once.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/plugin/manifest.h"
#include "core/schema/plugin_generated.h"
#include "inject_tally.h"

using namespace weft;
using namespace weft::plugin;
namespace fb = flatbuffers;
namespace s = weft::schema;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

using inject::record;

struct EntrySpec {
  int kind = 0;
  std::string name = "f";
  std::string symbol = "sym";
  int ret = 7;  // I64
  std::vector<uint8_t> args = {7, 7};
  std::vector<uint8_t> dtypes;
  std::string doc = "doc";
};

struct ManifestSpec {
  std::string name = "p";
  std::string version = "1.0";
  int major = 1, minor = 0;
  std::vector<EntrySpec> entries = {EntrySpec{}};
};

std::vector<uint8_t> build(const ManifestSpec& m) {
  fb::FlatBufferBuilder b;
  std::vector<fb::Offset<s::PluginEntry>> entries;
  for (const EntrySpec& e : m.entries) {
    auto name = b.CreateString(e.name), symbol = b.CreateString(e.symbol), doc = b.CreateString(e.doc);
    auto args = b.CreateVector(reinterpret_cast<const s::ValueType*>(e.args.data()), e.args.size());
    auto dtypes = b.CreateVector(e.dtypes);
    s::PluginEntryBuilder eb(b);
    eb.add_kind(static_cast<s::EntryKind>(e.kind));
    eb.add_name(name);
    eb.add_symbol(symbol);
    eb.add_ret(static_cast<s::ValueType>(e.ret));
    eb.add_args(args);
    eb.add_dtypes(dtypes);
    eb.add_doc(doc);
    entries.push_back(eb.Finish());
  }
  auto root = s::CreatePluginManifestDirect(b, m.name.c_str(), m.version.c_str(), static_cast<uint16_t>(m.major),
                                             static_cast<uint16_t>(m.minor), &entries);
  b.Finish(root, s::PluginManifestIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

// parse_manifest must refuse m with `status` and a message containing every part.
void refused(const std::string& what, const ManifestSpec& m, Status status, std::vector<std::string> parts) {
  const std::vector<uint8_t> bytes = build(m);
  Status got = Status::ok;
  std::string msg;
  try {
    parse_manifest(bytes.data(), bytes.size());
  } catch (const Error& e) {
    got = e.status();
    msg = e.message();
  }
  const bool injected = inject::enabled();
  if (injected) parts.push_back("\u2603 not in any message");
  bool bad = got != status;
  for (const std::string& p : parts) bad = bad || msg.find(p) == std::string::npos;
  record(injected, bad, what, "status " + std::string(status_name(got)) + ", message \"" + msg + "\"");
}

EntrySpec reduce_entry(std::string name = "op") {
  EntrySpec e;
  e.kind = 1;
  e.name = std::move(name);
  e.ret = 5;
  e.args = {11, 11, 11, 12, 5};
  e.dtypes = {1};
  return e;
}

EntrySpec codec_part(const std::string& codec, int kind) {
  EntrySpec e;
  e.kind = kind;
  e.name = codec + (kind == 2 ? ".bytes" : kind == 3 ? ".encode" : ".decode");
  e.ret = kind == 2 ? 12 : 5;
  e.args = kind == 2 ? std::vector<uint8_t>{12} : std::vector<uint8_t>{11, 12, 11};
  return e;
}

TEST(PluginManifest, ValidReadsBack) {
  ManifestSpec m;
  m.name = "reduce_ops";
  m.version = "2.1.0 beta";
  m.entries = {EntrySpec{}, reduce_entry(), codec_part("q", 2), codec_part("q", 3), codec_part("q", 4)};
  m.entries[0].args = {};
  m.entries[0].ret = 0;
  const std::vector<uint8_t> bytes = build(m);
  // At an odd address: the parser copies into an aligned buffer first.
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  Manifest got = parse_manifest(shifted.data() + 1, bytes.size());
  const bool injected = inject::enabled();
  if (injected) got.entries[1].dtypes.push_back(3);
  const bool bad = got.name != "reduce_ops" || got.version != "2.1.0 beta" || got.abi_major != 1 ||
                   got.entries.size() != 5 || got.entries[0].signature.ret != ValueType::void_ ||
                   !got.entries[0].signature.args.empty() || got.entries[1].kind != Kind::reduce_op ||
                   got.entries[1].dtypes != std::vector<int>{1} || got.entries[4].name != "q.decode" ||
                   signature_string(got.entries[1].signature, "op") != "I32 op(PTR, PTR, PTR, SIZE, I32)";
  record(injected, bad, "a valid manifest read back", "fields differ");
}

TEST(PluginManifest, Refusals) {
  ManifestSpec m;
  m.major = 2;
  refused("ABI 2.0", m, Status::mismatch, {"built for plugin ABI 2.0, this weft has 1.0"});
  m = {};
  m.minor = 1;
  refused("ABI 1.1 (newer minor)", m, Status::mismatch, {"built for plugin ABI 1.1, this weft has 1.0", "newer"});
  m = {};
  m.name = "has space";
  refused("plugin name with a space", m, Status::invalid_argument, {"the plugin's name", "without spaces"});
  m = {};
  m.entries[0].name = std::string(129, 'a');
  refused("129-character entry name", m, Status::invalid_argument, {"entries[0].name", "1-128 printable"});
  m = {};
  m.entries[0].name = std::string("a\x01", 2);
  refused("control character in a name", m, Status::invalid_argument, {"entries[0].name", "byte 0x01 at 1"});
  m = {};
  m.entries[0].name = "";
  refused("empty name", m, Status::invalid_argument, {"entries[0].name"});
  m = {};
  m.entries[0].symbol = "";
  refused("empty symbol", m, Status::invalid_argument, {"entry 0 ('f'): symbol"});
  m = {};
  m.entries[0].ret = 16;
  refused("return type 16", m, Status::invalid_argument, {"entry 0 ('f')", "unknown return type 16"});
  m = {};
  m.entries[0].args = {7, 0};
  refused("VOID argument", m, Status::invalid_argument, {"entry 0 ('f')", "argument 1 has type VOID"});
  m = {};
  m.entries[0].args = {7, 200};
  refused("argument type 200", m, Status::invalid_argument, {"argument 1 has unknown type 200"});
  m = {};
  m.entries[0].args = std::vector<uint8_t>(33, 7);
  refused("33 arguments", m, Status::invalid_argument, {"entry 0 ('f') has 33 arguments; at most 32"});
  m = {};
  m.entries = std::vector<EntrySpec>(1025);
  for (size_t i = 0; i < m.entries.size(); ++i) m.entries[i].name = "e" + std::to_string(i);
  refused("1025 entries", m, Status::invalid_argument, {"1025 entries; at most 1024"});
  m = {};
  m.entries = {EntrySpec{}, EntrySpec{}};
  refused("duplicate name", m, Status::invalid_argument, {"entry 1: duplicate entry name 'f'"});
  m = {};
  m.entries = {reduce_entry()};
  m.entries[0].args = {11, 11, 11, 12};
  refused("REDUCE_OP of arity 4", m, Status::invalid_argument,
          {"entry 0 ('op')", "must be I32(PTR, PTR, PTR, SIZE, I32)", "declares I32(PTR, PTR, PTR, SIZE)"});
  m.entries = {reduce_entry()};
  m.entries[0].dtypes = {};
  refused("REDUCE_OP without dtypes", m, Status::invalid_argument, {"entry 0 ('op')", "needs dtypes"});
  m.entries[0].dtypes = {1, 12};
  refused("dtype 12", m, Status::invalid_argument, {"dtypes[1] = 12"});
  m.entries[0].dtypes = {1, 1};
  refused("dtype twice", m, Status::invalid_argument, {"lists float32 twice"});
  m = {};
  m.entries[0].dtypes = {1};
  refused("dtypes on a FUNCTION", m, Status::invalid_argument, {"only REDUCE_OP entries take dtypes"});
  m.entries = {codec_part("q", 2), codec_part("q", 4)};
  refused("codec without encode", m, Status::invalid_argument, {"codec 'q' is incomplete", "'q.encode' (CODEC_ENCODE)"});
  m.entries = {codec_part("q", 2), codec_part("q", 3), codec_part("q", 4)};
  m.entries[1].name = "q.enc";
  refused("codec part misnamed", m, Status::invalid_argument, {"entry 1 ('q.enc')", "\"<codec>.encode\""});
  m.entries = {codec_part("q", 2)};
  m.entries[0].ret = 5;
  refused("CODEC_BYTES returning I32", m, Status::invalid_argument, {"must be SIZE(SIZE)", "declares I32(SIZE)"});
  m = {};
  m.entries[0].kind = 8;
  refused("kind 8", m, Status::invalid_argument, {"unknown kind 8"});
}

TEST(PluginManifest, BrokenBytes) {
  const std::vector<uint8_t> good = build(ManifestSpec{});
  auto check = [](const std::string& what, const void* data, size_t size, const std::string& part) {
    std::string msg;
    try {
      parse_manifest(data, size);
    } catch (const Error& e) {
      msg = e.message();
    }
    const bool injected = inject::enabled();
    record(injected, msg.find(injected ? part + "\u2603" : part) == std::string::npos, what, msg);
  };
  check("NULL", nullptr, 0, "the manifest is NULL");
  check("4 bytes", good.data(), 4, "at least 8");
  // (Not the last byte: the builder may end on padding nothing refers to.)
  for (size_t n : {size_t{8}, size_t{12}, good.size() / 4, good.size() / 2}) {
    check("truncated to " + std::to_string(n), good.data(), n, "fails the FlatBuffers verifier");
  }
  std::vector<uint8_t> other = good;
  other[4] = 'Q';
  check("identifier QFPM", other.data(), other.size(), "file identifier is \"QFPM\"");
  check("2 MiB", std::vector<uint8_t>(2 << 20).data(), 2 << 20, "at most 1048576");
}

}  // namespace
