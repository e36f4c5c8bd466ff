# plugins/c_reduce in the collectives (test_plugin_reduce.cpp): its operators loaded with
# weft_plugin_load at 1-8 ranks, once through WEFT_PLUGINS (an unchanged call path), with the
# point-to-point algorithms (WEFT_SHM=0), the injection proof, and weft-bench's --plugin row.
if(NOT TARGET weft_plugin_c_reduce)
  return()
endif()
weft_mp_gtest(weft_mp_plugin_reduce test_plugin_reduce.cpp)
add_dependencies(weft_mp_plugin_reduce weft_plugin_c_reduce)
set(_c_reduce WEFT_TEST_C_REDUCE=$<TARGET_FILE:weft_plugin_c_reduce>)
# A failing operator can leave peers waiting on the duplicate communicator: a short deadline.
set(_c_reduce_env ${_c_reduce} WEFT_TEST_TIMEOUT_MS=30000)
foreach(n 1 2 3 4 5 7 8)
  weft_mp_test(mp_plugin_reduce_n${n} ${n} TIMEOUT 300 ENV ${_c_reduce_env}
               COMMAND weft_mp_plugin_reduce --gtest_brief=1)
endforeach()
weft_mp_test(mp_plugin_reduce_env_n3 3 TIMEOUT 300 ENV ${_c_reduce_env} WEFT_PLUGINS=$<TARGET_FILE:weft_plugin_c_reduce>
             COMMAND weft_mp_plugin_reduce --gtest_brief=1)
weft_mp_test(mp_plugin_reduce_noshm_n4 4 TIMEOUT 300 ENV ${_c_reduce_env} WEFT_SHM=0
             COMMAND weft_mp_plugin_reduce --gtest_brief=1)
weft_mp_test(mp_plugin_reduce_inject_n3 3 TIMEOUT 300 ENV ${_c_reduce_env} WEFT_TEST_INJECT=1
             COMMAND weft_mp_plugin_reduce --gtest_brief=1)
# Every call's arguments compared across ranks: a mismatch names both operators.
weft_mp_test(mp_plugin_reduce_check_n2 2 TIMEOUT 300 ENV ${_c_reduce_env} WEFT_DEBUG=check
             COMMAND weft_mp_plugin_reduce --gtest_brief=1)
set(_plugin_tests mp_plugin_reduce_check_n2 mp_plugin_reduce_env_n3 mp_plugin_reduce_noshm_n4 mp_plugin_reduce_inject_n3)
foreach(n 1 2 3 4 5 7 8)
  list(APPEND _plugin_tests mp_plugin_reduce_n${n})
endforeach()
# weft-bench with the plugin's sum_f32 (a smoke row: it runs and reports, no timing judged).
if(TARGET weft-bench)
  weft_mp_test(mp_plugin_bench_n2 2 TIMEOUT 120
               COMMAND weft-bench --plugin $<TARGET_FILE:weft_plugin_c_reduce> -c allreduce -o sum_f32 -d float32
                       -b 4K -e 64K -n 3 -w 1)
  list(APPEND _plugin_tests mp_plugin_bench_n2)
endif()
# Device memory (CUDA builds; exit 77 = skipped without a GPU): over NCCL a custom operator is
# refused; staged through host memory it runs. In an emulated build (tests/cuda_emulator) two
# emulated GPUs give each rank its own, so the stand-in NCCL is used; WEFT_NCCL=0 stages.
if(WEFT_WITH_CUDA_ENABLED)
  weft_mp_program(weft_mp_plugin_reduce_device test_plugin_reduce_device.cpp)
  target_link_libraries(weft_mp_plugin_reduce_device PRIVATE ${WEFT_CUDART})
  add_dependencies(weft_mp_plugin_reduce_device weft_plugin_c_reduce)
  set(_expect_nccl any)
  if(WEFT_CUDA_EMULATION)
    set(_expect_nccl nccl)
  endif()
  weft_mp_test(mp_plugin_reduce_device_nccl_n2 2 TIMEOUT 120 ENV ${_c_reduce} WEFT_EMU_DEVICES=2
               COMMAND weft_mp_plugin_reduce_device --expect=${_expect_nccl})
  weft_mp_test(mp_plugin_reduce_device_staged_n2 2 TIMEOUT 120 ENV ${_c_reduce} WEFT_NCCL=0
               COMMAND weft_mp_plugin_reduce_device --expect=staged)
  weft_mp_test(mp_plugin_reduce_device_inject_n2 2 TIMEOUT 120 ENV ${_c_reduce} WEFT_NCCL=0 WEFT_TEST_INJECT=1
               COMMAND weft_mp_plugin_reduce_device --expect=staged)
  foreach(t nccl_n2 staged_n2 inject_n2)
    list(APPEND _plugin_tests mp_plugin_reduce_device_${t})
    set_tests_properties(mp_plugin_reduce_device_${t} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endif()
set_tests_properties(${_plugin_tests} PROPERTIES LABELS "multiproc;plugin")
