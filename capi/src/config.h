// weft_comm_config_t -> CommConfig, following the struct_size rule in weft.h.
#pragma once

#include "core/comm/config.h"
#include "weft/weft.h"

namespace weft::capi {

// NULL = defaults (+ environment). `inherit` supplies defaults for split/dup.
CommConfig resolve_config(const weft_comm_config_t* config, const CommConfig* inherit);

}  // namespace weft::capi
