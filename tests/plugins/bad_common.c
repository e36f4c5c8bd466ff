/* The one function and the one data object the bad fixture plugins' manifests name
 * (tests/plugins/manifests/bad_*.json): each of those plugins is refused for its manifest or its
 * symbols, never for missing code. */
#include <stdint.h>

__attribute__((visibility("default"))) int64_t tp_bad_add(int64_t a, int64_t b) { return a + b; }
__attribute__((visibility("default"))) int32_t tp_bad_data_object[4] = {1, 2, 3, 4};
