/* A shared library that is not a weft plugin: it exports a function but no weft_plugin_manifest. */
#include <stdint.h>

__attribute__((visibility("default"))) int64_t tp_lonely(int64_t x) { return x; }
