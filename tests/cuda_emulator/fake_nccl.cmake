# The stand-in NCCL (fake_nccl.cpp says what it models): libweft_fake_nccl.so, loaded by weft
# as its NCCL in an emulated build (core/device/device.cmake; WEFT_NCCL_LIBRARY overrides).
# Included by emulator.cmake, after weft_cuda_emu.
add_library(weft_fake_nccl SHARED
  ${CMAKE_CURRENT_LIST_DIR}/fake_nccl.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_nccl_support.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_nccl_reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_nccl_floats.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_nccl_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_nccl_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_nccl_group.cpp)
# Types and signatures come from the real nccl.h; half/bfloat16/fp8 codecs are its own
# (fake_nccl_floats.cpp): no weft code is compiled in, so the stand-in never reduces with the
# library it stands beside.
target_include_directories(weft_fake_nccl PRIVATE ${CMAKE_SOURCE_DIR})
target_include_directories(weft_fake_nccl SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
target_link_libraries(weft_fake_nccl PRIVATE weft_cuda_emu Threads::Threads)
# Initial-exec TLS: weft dlopens the stand-in, and its few thread_locals then live in the static
# TLS that glibc keeps room for. Dynamic TLS is reached through __tls_get_addr, where ASan can
# only guess each block's extent (glibc offers no interface: sanitizer_tls_get_addr.h); in the
# sanitizer build a wrong guess ("DTLS ... at 0x63b-0x2400...") made LeakSanitizer crash at exit
# ("Tracer caught signal 11"), in one test and depending only on where the blocks landed.
target_compile_options(weft_fake_nccl PRIVATE -O2 -ftls-model=initial-exec)
target_link_options(weft_fake_nccl PRIVATE -Wl,--no-undefined)

if(WEFT_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  add_executable(weft_test_fake_nccl ${CMAKE_CURRENT_LIST_DIR}/test_fake_nccl.cpp
                 ${CMAKE_SOURCE_DIR}/tests/multiproc/reference.cpp)
  target_include_directories(weft_test_fake_nccl PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests/multiproc
                             ${CMAKE_SOURCE_DIR}/capi/include)
  target_include_directories(weft_test_fake_nccl SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
  # The test calls the fake directly (linked, not dlopened): the same symbols weft binds. Its
  # expected low-precision values use the test suite's reference codecs (tests/multiproc).
  target_link_libraries(weft_test_fake_nccl PRIVATE weft_fake_nccl weft_cuda_emu GTest::gtest GTest::gtest_main)
  # Two emulated devices, so two threads can act as two ranks. (One variable only:
  # gtest_discover_tests does not pass a list through PROPERTIES.)
  gtest_discover_tests(weft_test_fake_nccl DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 120 LABELS emulator ENVIRONMENT WEFT_EMU_DEVICES=2)
endif()
