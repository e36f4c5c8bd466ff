# cmake -DIN=<manifest.bin> -DOUT=<file.c> -P weft_bin2c.cmake: a C file whose exported
# weft_plugin_manifest() returns IN's bytes (weft/plugin.h).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n  " body "${body}")
file(WRITE ${OUT} "/* Generated from ${IN} by cmake/weft_bin2c.cmake: the plugin's manifest (weft/plugin.h). */
#include <stddef.h>

static const unsigned char weft_manifest_bytes[${bytes}] __attribute__((aligned(16))) = {
  ${body}
};

__attribute__((visibility(\"default\"))) const void *weft_plugin_manifest(size_t *size) {
  *size = sizeof weft_manifest_bytes;
  return weft_manifest_bytes;
}
")
