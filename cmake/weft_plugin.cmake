# Building plugins' manifests (weft/plugin.h): a plugin writes its manifest as JSON, flatc turns it
# into FlatBuffers bytes of core/schema/plugin.fbs, and for C, C++ and Go (cgo) plugins a generated
# C file embeds them and exports weft_plugin_manifest(). Rust plugins include the .bin directly.
#
#   weft_plugin_manifest_bin(<json> <out-var>)   sets <out-var> to the .bin path (a build output)
#   weft_plugin_manifest_c(<json> <out-var>)     sets <out-var> to a generated .c file defining
#                                                 weft_plugin_manifest()

set(WEFT_PLUGIN_SCHEMA ${CMAKE_SOURCE_DIR}/core/schema/plugin.fbs)
set(WEFT_BIN2C_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/weft_bin2c.cmake)

function(weft_plugin_manifest_bin json out_var)
  get_filename_component(stem ${json} NAME_WE)
  get_filename_component(dir ${json} DIRECTORY)
  get_filename_component(plugin ${dir} NAME)
  set(outdir ${CMAKE_BINARY_DIR}/plugins/${plugin}/manifest)
  set(out ${outdir}/${stem}.bin)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${outdir}
    COMMAND ${FLATC} --binary -o ${outdir} ${WEFT_PLUGIN_SCHEMA} ${json}
    DEPENDS ${json} ${WEFT_PLUGIN_SCHEMA}
    COMMENT "flatc: the manifest of plugin ${plugin}")
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()

function(weft_plugin_manifest_c json out_var)
  weft_plugin_manifest_bin(${json} bin)
  set(out ${bin}.c)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DIN=${bin} -DOUT=${out} -P ${WEFT_BIN2C_SCRIPT}
    DEPENDS ${bin} ${WEFT_BIN2C_SCRIPT}
    COMMENT "embedding ${bin}")
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
