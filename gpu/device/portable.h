// SPDX-License-Identifier: MIT
#pragma once
// The thin portability layer: one kernel and backend source compiles as CUDA (nvcc) and HIP (hipcc).
// Kernel syntax (__global__, blockIdx, atomicXor) is shared; only runtime API names differ.
#if defined(PEAT_DEVICE_HIP)
#include <hip/hip_runtime.h>
#define PEAT_BACKEND_NAME "hip"
using gpuError_t = hipError_t;
using gpuDeviceProp_t = hipDeviceProp_t;
#define gpuSuccess hipSuccess
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetErrorString hipGetErrorString
#define gpuSetDevice hipSetDevice
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuGetLastError hipGetLastError
#define gpuDeviceSynchronize hipDeviceSynchronize
#elif defined(PEAT_DEVICE_CUDA)
#include <cuda_runtime.h>
#define PEAT_BACKEND_NAME "cuda"
using gpuError_t = cudaError_t;
using gpuDeviceProp_t = cudaDeviceProp;
#define gpuSuccess cudaSuccess
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetErrorString cudaGetErrorString
#define gpuSetDevice cudaSetDevice
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuGetLastError cudaGetLastError
#define gpuDeviceSynchronize cudaDeviceSynchronize
#else
#error "define PEAT_DEVICE_CUDA or PEAT_DEVICE_HIP"
#endif
