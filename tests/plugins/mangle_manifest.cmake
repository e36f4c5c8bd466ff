# cmake -DIN=<manifest.bin> -DOUT=<file.c> -DMODE=truncate|identifier -P mangle_manifest.cmake:
# like cmake/weft_bin2c.cmake, a C file exporting weft_plugin_manifest(), but with bytes a plugin
# must be refused for: the first half of IN only (truncate), or IN with file identifier "XXXX".
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
if(MODE STREQUAL "truncate")
  math(EXPR keep "(${n} / 4) * 2")
  string(SUBSTRING "${hex}" 0 ${keep} hex)
elseif(MODE STREQUAL "identifier")
  string(SUBSTRING "${hex}" 0 8 head)
  math(EXPR rest "${n} - 16")
  string(SUBSTRING "${hex}" 16 ${rest} tail)
  set(hex "${head}58585858${tail}")
else()
  message(FATAL_ERROR "MODE=${MODE}; expected truncate or identifier")
endif()
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "/* Generated from ${IN} by tests/plugins/mangle_manifest.cmake (${MODE}). */
#include <stddef.h>

static const unsigned char bytes[${bytes}] __attribute__((aligned(16))) = { ${body} };

__attribute__((visibility(\"default\"))) const void *weft_plugin_manifest(size_t *size) {
  *size = sizeof bytes;
  return bytes;
}
")
