# kernels/cuda: the device twins of kernels/cpu, compiled by nvcc into weft_internal. Included
# by core/device/device.cmake when CUDA is enabled. (A CUDA-emulated test build does not
# include this: it compiles the same .cu files with the host compiler, through
# tests/cuda_emulator/kernels_on_cpu.cpp; host_device.cuh says how.)
#
# Machine code for sm_80 (A100) and sm_90 (H100) plus compute_90 PTX that newer GPUs compile
# at load time; -DCMAKE_CUDA_ARCHITECTURES=... overrides. The .cu files are few and small so
# that a 2-core CI machine without a GPU compiles them in about a minute.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
endif()
enable_language(CUDA)

file(GLOB WEFT_CUDA_KERNELS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
target_sources(weft_internal PRIVATE ${WEFT_CUDA_KERNELS})
# CMake 3.25 does not know nvcc's C++20 flag (nvcc 12+ has it): teach it, so that CUDA_STANDARD
# 20 works (CMake would otherwise carry CXX_STANDARD 20 over to CUDA and give up).
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
endif()
set_target_properties(weft_internal PROPERTIES
  CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
  CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}" CUDA_VISIBILITY_PRESET hidden CUDA_RUNTIME_LIBRARY Static)
# Warnings are errors in device and host code alike. No fused multiply-add, so that results are
# the CPU twins' bit for bit. Relaxed constexpr: kernels/cpu/codecs.h uses std::bit_cast.
target_compile_options(weft_internal PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror --fmad=false
                             --expt-relaxed-constexpr>)
