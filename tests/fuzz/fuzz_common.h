// Shared by the fuzz targets: what a target does when a promise breaks (print and abort, so
// libFuzzer keeps the input), and the rule every decoder here follows: any bytes give either a
// value or a weft::Error of the documented status with a message; anything else aborts.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>

#include "core/common/status.h"

namespace fuzz {

[[noreturn]] inline void broken(const char* target, const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_%s: %s: %s\n", target, what, detail.c_str());
  std::abort();
}

// Runs decode(); returns true when it gave a value. A weft::Error must carry one of `allowed`
// and a non-empty message; any other exception is a bug.
template <typename F>
bool refuses_or_decodes(const char* target, std::initializer_list<weft::Status> allowed, F&& decode) {
  try {
    decode();
    return true;
  } catch (const weft::Error& e) {
    bool ok = false;
    for (weft::Status s : allowed) ok = ok || e.status() == s;
    if (!ok) broken(target, "unexpected status", e.message());
    if (e.message().empty()) broken(target, "empty message", "");
  } catch (const std::exception& e) {
    broken(target, "unexpected exception", e.what());
  }
  return false;
}

}  // namespace fuzz
