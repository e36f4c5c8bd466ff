// The thread-local text behind weft_last_error().
#include "capi/src/shim.h"

namespace weft::capi {
namespace {
thread_local std::string g_last_error;
}

weft_status_t set_error(weft_status_t status, const std::string& message) {
  if (status != WEFT_OK) g_last_error = message;
  return status;
}

}  // namespace weft::capi

extern "C" WEFT_API const char* weft_last_error(void) { return weft::capi::g_last_error.c_str(); }
