// Checks shared by the plugin tests (test_plugin_loader.cpp, test_plugin_call.cpp), each with its
// injection (inject_tally.h): WEFT_TEST_INJECT=1 corrupts the value, string or status a check
// judges, and the check must then fail. The fixture plugins are tests/plugins/ (paths from
// tests/plugins/CMakeLists.txt as WEFT_TEST_PLUGIN_<NAME> macros).
#pragma once

#include <weft/weft.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "inject_tally.h"

namespace plugin_test {

inline void record(bool injected, bool bad, const std::string& what, const std::string& detail) {
  if (injected) {
    ++inject::tally().injected;
    if (bad) ++inject::tally().caught;
    return;
  }
  if (bad) ADD_FAILURE() << what << ": " << detail;
}

// Integers, bit patterns and exactly representable floating-point values: equality, no tolerance.
inline void check_i64(const std::string& what, int64_t got, int64_t want) {
  const bool injected = inject::enabled();
  if (injected) got ^= 1;
  record(injected, got != want, what, "got " + std::to_string(got) + ", expected " + std::to_string(want));
}

inline void check_f64(const std::string& what, double got, double want) {
  const bool injected = inject::enabled();
  if (injected) got = got * 2 + 1;
  record(injected, !(got == want), what, "got " + std::to_string(got) + ", expected " + std::to_string(want));
}

inline void check_str(const std::string& what, std::string got, const std::string& want) {
  const bool injected = inject::enabled();
  if (injected) got += "#";
  record(injected, got != want, what, "got \"" + got + "\", expected \"" + want + "\"");
}

inline void check_true(const std::string& what, bool ok, const std::string& detail = "") {
  const bool injected = inject::enabled();
  if (injected) ok = !ok;
  record(injected, !ok, what, detail.empty() ? "false" : detail);
}

// A call that must fail with `want` and a weft_last_error() containing every one of `parts`.
inline void check_refused(const std::string& what, weft_status_t st, weft_status_t want,
                          std::initializer_list<const char*> parts) {
  std::string msg = weft_last_error() ? weft_last_error() : "";
  const bool injected = inject::enabled();
  if (injected) st = WEFT_OK;
  bool bad = st != want;
  std::string missing;
  for (const char* p : parts) {
    if (msg.find(p) == std::string::npos) {
      bad = true;
      missing += std::string(" \"") + p + "\"";
    }
  }
  record(injected, bad, what,
         "status " + std::to_string(st) + " (expected " + std::to_string(want) + "), message \"" + msg + "\"" +
             (missing.empty() ? "" : "; missing" + missing));
}

inline weft_value_t val_i(weft_value_type_t t, int64_t i) {
  weft_value_t v = WEFT_VALUE_INIT;
  v.type = t;
  v.i = i;
  return v;
}
inline weft_value_t val_f(weft_value_type_t t, double f) {
  weft_value_t v = WEFT_VALUE_INIT;
  v.type = t;
  v.f = f;
  return v;
}
inline weft_value_t val_p(weft_value_type_t t, const void* p) {
  weft_value_t v = WEFT_VALUE_INIT;
  v.type = t;
  v.p = p;
  return v;
}

}  // namespace plugin_test
