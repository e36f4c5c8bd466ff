// weft's version for core/ (which never includes capi/). These equal WEFT_VERSION_MAJOR/MINOR/
// PATCH, WEFT_VERSION_CODE and WEFT_ABI_VERSION in capi/include/weft/weft.h; capi static_asserts
// that they match, so bump both together.
#pragma once

namespace weft {

constexpr int kVersionMajor = 0;
constexpr int kVersionMinor = 1;
constexpr int kVersionPatch = 0;
// major * 10000 + minor * 100 + patch, as WEFT_VERSION_CODE.
constexpr int kVersionCode = kVersionMajor * 10000 + kVersionMinor * 100 + kVersionPatch;
constexpr int kAbiVersion = 1;

}  // namespace weft
