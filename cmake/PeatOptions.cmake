# SPDX-License-Identifier: MIT
option(PEAT_BUILD_GUI "Build peat-workbench and the Qt-based tests (needs Qt 6 and QCustomPlot)" ON)
option(PEAT_BUILD_TESTS "Build the test suite" ON)
option(PEAT_ENABLE_CUDA "Build the CUDA backend when nvcc is found" ON)
option(PEAT_ENABLE_HIP "Build the HIP backend when hipcc is found" ON)
set(PEAT_CUDA_ARCHS "80;90" CACHE STRING "CUDA architectures (CUDA 13 has no sm_70)")
set(PEAT_HIP_ARCHS "gfx90a" CACHE STRING "HIP offload architectures (semicolon list)")
# Only gpu/, its conformance tests and its benchmark: for a GPU machine without Qt, HDF5 or
# LibTorch development files (tools/gpu-check.sh).
option(PEAT_GPU_ONLY "Build only the GPU backends, gpu_tests and bench_gpu" OFF)
option(PEAT_WERROR "Treat warnings as errors (CI sets this)" OFF)
