# core/device: device memory (routing, NCCL, staging), with the engines it drives:
# transports/cuda (the CUDA runtime) and transports/nccl (the NCCL library and communicator).
# Included by the top-level CMakeLists.txt after weft_internal exists.
#
# Linking: the CUDA runtime is linked statically (CUDA::cudart_static) and hidden by the version
# script, so libweft.so needs no libcudart.so at run time and cannot clash with an
# application's own runtime; without a driver its calls fail cleanly (0 devices). NCCL is not
# linked at all but loaded with dlopen when a communicator is created (nccl_lib.h says why);
# the library found here is only the last place searched.
if(NOT WEFT_WITH_CUDA_ENABLED)
  target_sources(weft_internal PRIVATE ${CMAKE_SOURCE_DIR}/core/device/host_only.cpp
                                       ${CMAKE_SOURCE_DIR}/core/device/driver_probe.cpp)
  target_link_libraries(weft_internal PUBLIC ${CMAKE_DL_LIBS})
  return()
endif()

# WEFT_CUDART: the CUDA runtime core/device, transports/cuda and the GPU tests link. In an emulated build
# (WEFT_CUDA_EMULATION) that is tests/cuda_emulator, and kernels/cuda's own .cu sources are
# compiled by the host compiler into kernels_on_cpu.cpp, whose launches run every thread of the
# grid on the emulator's streams: the tests run the product's kernel code, not the CPU twins.
if(WEFT_CUDA_EMULATION)
  set(WEFT_CUDART weft_cuda_emu)
  target_sources(weft_internal PRIVATE ${CMAKE_SOURCE_DIR}/tests/cuda_emulator/kernels_on_cpu.cpp)
else()
  set(WEFT_CUDART CUDA::cudart_static)
  include(${CMAKE_SOURCE_DIR}/kernels/cuda/kernels.cmake)
endif()

file(GLOB WEFT_DEVICE_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/core/device/*.cpp
     ${CMAKE_SOURCE_DIR}/transports/cuda/*.cpp ${CMAKE_SOURCE_DIR}/transports/nccl/*.cpp)
list(FILTER WEFT_DEVICE_SOURCES EXCLUDE REGEX "/host_only\\.cpp$")
if(NOT WEFT_WITH_NCCL_ENABLED)
  # core/device/nccl_*.cpp and everything in transports/nccl/.
  list(FILTER WEFT_DEVICE_SOURCES EXCLUDE REGEX "/(nccl_[^/]*\\.cpp|transports/nccl/[^/]*)$")
endif()
target_sources(weft_internal PRIVATE ${WEFT_DEVICE_SOURCES})
target_compile_definitions(weft_internal PUBLIC WEFT_HAVE_CUDA=1)
target_link_libraries(weft_internal PUBLIC ${WEFT_CUDART} ${CMAKE_DL_LIBS})
if(WEFT_CUDA_EMULATION)
  # NCCL is the stand-in (tests/cuda_emulator/fake_nccl.cpp) unless WEFT_NCCL_LIBRARY says otherwise.
  # WEFT_TEST_SEAMS: switches that only a test build may read (e.g. WEFT_TEST_UCX_CUDA in
  # transports/ucx); a release build compiles them out, so no environment variable can reach them.
  target_compile_definitions(weft_internal PUBLIC WEFT_HAVE_NCCL=1
    PRIVATE WEFT_NCCL_SYSTEM_LIBRARY="$<TARGET_FILE:weft_fake_nccl>" WEFT_TEST_SEAMS=1)
  target_include_directories(weft_internal SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
elseif(WEFT_WITH_NCCL_ENABLED)
  get_filename_component(_nccl_real ${NCCL_LIBRARY} REALPATH)
  get_filename_component(_nccl_dir ${_nccl_real} DIRECTORY)
  target_compile_definitions(weft_internal PUBLIC WEFT_HAVE_NCCL=1
    PRIVATE WEFT_NCCL_BUILD_LIBRARY="${_nccl_dir}/libnccl.so.2")
  target_include_directories(weft_internal SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
endif()
