// weft_version and weft_status_string: the parts of the ABI that need no communicator.
#include "capi/src/shim.h"

extern "C" {

WEFT_API weft_status_t weft_version(int* version_code, int* abi_version) {
  if (version_code) *version_code = WEFT_VERSION_CODE;
  if (abi_version) *abi_version = WEFT_ABI_VERSION;
  return WEFT_OK;
}

WEFT_API const char* weft_status_string(weft_status_t status) {
  switch (weft::capi::enum_bits(status)) {
    case WEFT_OK: return "WEFT_OK: success";
    case WEFT_ERR_INVALID_ARGUMENT: return "WEFT_ERR_INVALID_ARGUMENT: an argument is invalid";
    case WEFT_ERR_UNSUPPORTED: return "WEFT_ERR_UNSUPPORTED: not supported by this build or transport";
    case WEFT_ERR_OUT_OF_MEMORY: return "WEFT_ERR_OUT_OF_MEMORY: allocation failed";
    case WEFT_ERR_TIMEOUT: return "WEFT_ERR_TIMEOUT: a deadline expired";
    case WEFT_ERR_REMOTE: return "WEFT_ERR_REMOTE: a peer rank failed";
    case WEFT_ERR_ABORTED: return "WEFT_ERR_ABORTED: the communicator was aborted";
    case WEFT_ERR_MISMATCH: return "WEFT_ERR_MISMATCH: ranks disagree";
    case WEFT_ERR_TRANSPORT: return "WEFT_ERR_TRANSPORT: the transport failed";
    case WEFT_ERR_INTERNAL: return "WEFT_ERR_INTERNAL: internal error in weft";
    case WEFT_IN_PROGRESS: return "WEFT_IN_PROGRESS: operation not complete yet";
  }
  return "WEFT_STATUS_UNKNOWN: not a weft status code";
}

}  // extern "C"
