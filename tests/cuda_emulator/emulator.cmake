# tests/cuda_emulator: a CUDA runtime emulator (and a stand-in NCCL) so that the GPU path's host
# logic runs on machines without a GPU (emulator.h says what is modelled). Included by the
# top-level CMakeLists.txt when WEFT_CUDA_EMULATION=ON: core/device then links
# weft_cuda_emu instead of the CUDA runtime, and kernels/cuda's .cu files are compiled by the
# host compiler and run their kernels on the emulated streams (kernels_on_cpu.cpp). No nvcc is
# involved; the toolkit's headers give the types.
add_library(weft_cuda_emu SHARED
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/streams.cpp)
target_include_directories(weft_cuda_emu PUBLIC ${CMAKE_SOURCE_DIR})
target_include_directories(weft_cuda_emu SYSTEM PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(weft_cuda_emu PUBLIC Threads::Threads)
# The runtime's C functions are this library's interface: export them (the project default is
# hidden).
set_target_properties(weft_cuda_emu PROPERTIES CXX_VISIBILITY_PRESET default VISIBILITY_INLINES_HIDDEN OFF)

if(WEFT_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  add_executable(weft_test_cuda_emulator ${CMAKE_CURRENT_LIST_DIR}/test_emulator.cpp)
  target_link_libraries(weft_test_cuda_emulator PRIVATE weft_cuda_emu GTest::gtest GTest::gtest_main)
  gtest_discover_tests(weft_test_cuda_emulator DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS emulator)
endif()

if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/fake_nccl.cmake)
  include(${CMAKE_CURRENT_LIST_DIR}/fake_nccl.cmake)
endif()
