// libFuzzer target: a plugin manifest's bytes (weft/plugin.h) through everything the loader does
// with them before and besides dlopen: the verifier and field checks (parse_manifest), and for a
// manifest that passes, the libffi call interface of every entry and the signature checks. Any
// bytes must give either a Manifest that keeps every promise parse_manifest makes or a
// weft::Error of the documented statuses: anything else (a crash, a sanitizer report, another
// exception, a broken promise) aborts. Built and run by scripts/fuzz (clang-14, ASan + UBSan).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "core/common/status.h"
#include "core/plugin/closure.h"
#include "core/plugin/ffi_call.h"
#include "core/plugin/manifest.h"

using namespace weft;
using namespace weft::plugin;

namespace {

[[noreturn]] void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_plugin_manifest: %s: %s\n", what, detail.c_str());
  std::abort();
}

bool printable(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// What a Manifest from parse_manifest promises (core/plugin/manifest.h), checked independently.
void check_promises(const Manifest& m) {
  if (m.abi_major != kAbiMajor || m.abi_minor > kAbiMinor) broken("ABI accepted", m.name);
  if (!printable(m.name, kMaxNameLength)) broken("plugin name", m.name);
  if (m.entries.size() > kMaxEntries) broken("entry count", std::to_string(m.entries.size()));
  std::set<std::string> names;
  for (const Entry& e : m.entries) {
    if (!printable(e.name, kMaxNameLength) || e.name.find(' ') != std::string::npos) broken("entry name", e.name);
    if (!names.insert(e.name).second) broken("duplicate name accepted", e.name);
    if (static_cast<int>(e.kind) < 0 || static_cast<int>(e.kind) >= kNumKinds) broken("kind", e.name);
    if (e.signature.args.size() > kMaxArgs) broken("arity", e.name);
    for (ValueType t : e.signature.args) {
      if (static_cast<int>(t) <= 0 || static_cast<int>(t) >= kNumValueTypes) broken("argument type", e.name);
    }
    if (const Signature* want = kind_signature(e.kind); want && !(*want == e.signature)) broken("kind signature", e.name);
    if ((e.kind == Kind::reduce_op) == e.dtypes.empty()) broken("dtypes", e.name);
    // The loader prepares a libffi call interface per entry at load: it must accept every
    // signature the manifest check lets through.
    CallInterface ci(e.signature);
    (void)signature_string(ci.signature(), e.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    check_promises(parse_manifest(data, size));
  } catch (const Error& e) {
    if (e.status() != Status::invalid_argument && e.status() != Status::mismatch) broken("status", e.message());
    if (e.message().empty()) broken("empty message", "");
  } catch (const std::exception& e) {
    broken("unexpected exception", e.what());
  }
  // The same bytes as a closure's signature (weft_closure_create's check): a return type and
  // up to 40 argument types, any values.
  if (size >= 1) {
    int types[40];
    const size_t n = (size - 1) < 40 ? size - 1 : 40;
    for (size_t i = 0; i < n; ++i) types[i] = static_cast<int8_t>(data[1 + i]);
    try {
      CallInterface ci(make_signature(static_cast<int8_t>(data[0]), types, n, "fuzz"));
    } catch (const Error& e) {
      if (e.status() != Status::invalid_argument) broken("closure signature status", e.message());
    }
  }
  return 0;
}
