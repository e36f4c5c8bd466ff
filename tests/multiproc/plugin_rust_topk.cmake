# The Rust plugin rust_topk (plugins/rust_topk: the gradient codec "topk"), when cargo built it:
# the bucketer (all-reduce and reduce-scatter, SUM and AVG, with and without error feedback) and
# ZeRO stages 1 and 2 with the codec, bitwise against test_plugin_codec.cpp's own reference, on
# 1-8 ranks; the corruption proof at 3; the plugin loaded through WEFT_PLUGINS at 2 (the
# communicator's creation loads it, weft_plugin_load then returns the same codec); and the
# codec's own Rust tests (cargo test). Label `multiproc;plugin` (the cargo test: `unit;plugin`).
if(TARGET weft_plugin_rust_topk)
  weft_mp_gtest(weft_mp_plugin_codec test_plugin_codec.cpp)
  add_dependencies(weft_mp_plugin_codec weft_plugin_rust_topk)
  # The reference's float arithmetic must be exactly what it says (no FMA contraction).
  set_source_files_properties(test_plugin_codec.cpp PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
  set(_topk_env WEFT_TEST_TOPK_PLUGIN=${WEFT_RUST_TOPK_PLUGIN})
  foreach(n 1 2 3 4 5 6 7 8)
    weft_mp_test(mp_plugin_codec_n${n} ${n} TIMEOUT 300 ENV ${_topk_env} COMMAND weft_mp_plugin_codec --gtest_brief=1)
  endforeach()
  weft_mp_test(mp_plugin_codec_inject_n3 3 TIMEOUT 300 ENV ${_topk_env} WEFT_TEST_INJECT=1
               COMMAND weft_mp_plugin_codec --gtest_brief=1)
  weft_mp_test(mp_plugin_codec_env_n2 2 TIMEOUT 300 ENV ${_topk_env} WEFT_PLUGINS=${WEFT_RUST_TOPK_PLUGIN}
               COMMAND weft_mp_plugin_codec --gtest_brief=1)
  set(_topk_tests mp_plugin_codec_inject_n3 mp_plugin_codec_env_n2)
  foreach(n 1 2 3 4 5 6 7 8)
    list(APPEND _topk_tests mp_plugin_codec_n${n})
  endforeach()
  set_tests_properties(${_topk_tests} PROPERTIES LABELS "multiproc;plugin")

  add_test(NAME plugin.rust_topk_cargo_test
           COMMAND ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${WEFT_RUST_TOPK_CARGO_TEST_DIR}
                   WEFT_RUST_TOPK_MANIFEST=${WEFT_RUST_TOPK_MANIFEST_BIN}
                   ${CARGO} test --offline --manifest-path ${WEFT_RUST_TOPK_DIR}/Cargo.toml)
  set_tests_properties(plugin.rust_topk_cargo_test PROPERTIES LABELS "unit;plugin" TIMEOUT 600)
endif()
