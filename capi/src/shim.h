// Helpers shared by the extern "C" shims: export macro, thread-local last error, and the
// exception-to-status boundary every ABI function goes through.
#pragma once

#include <cstring>
#include <string>

#include "core/common/status.h"
#include "weft/weft.h"

#define WEFT_API __attribute__((visibility("default")))

namespace weft::capi {

// The int a C caller put into an enum-typed argument or field. C allows any int there, but in
// C++ loading a value outside the enumerators' range is undefined behaviour (UBSan reports
// it), so enums from callers are read by their bytes and range-checked as ints.
template <typename Enum>
int enum_bits(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized on every ABI weft supports");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Records the message for weft_last_error() and returns status (pass WEFT_OK to clear).
weft_status_t set_error(weft_status_t status, const std::string& message);

// Runs body(); maps weft::Error, std::bad_alloc and anything else to a status, with the
// function's name in front of the message so users see where it failed.
template <typename Body>
weft_status_t guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return set_error(WEFT_OK, std::string());
  } catch (const weft::Error& e) {
    return set_error(static_cast<weft_status_t>(e.status()), std::string(function) + ": " + e.message());
  } catch (const std::bad_alloc&) {
    return set_error(WEFT_ERR_OUT_OF_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return set_error(WEFT_ERR_INTERNAL, std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return set_error(WEFT_ERR_INTERNAL, std::string(function) + ": internal error (unknown exception)");
  }
}

}  // namespace weft::capi
