// SPDX-License-Identifier: MIT
#pragma once
// The thin portability layer: one kernel and backend source compiles as CUDA (nvcc) and HIP (hipcc),
// and the kernels alone for the host (g++, tests only).
// Kernel syntax (__global__, blockIdx, atomics, __shared__) is shared; only runtime API names differ.
#if defined(PEAT_DEVICE_HIP)
#include <hip/hip_runtime.h>
#define PEAT_BACKEND_NAME "hip"
using gpuError_t = hipError_t;
using gpuDeviceProp_t = hipDeviceProp_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
#define gpuSuccess hipSuccess
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetErrorString hipGetErrorString
#define gpuGetErrorName hipGetErrorName
#define gpuSetDevice hipSetDevice
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemGetInfo hipMemGetInfo
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuGetLastError hipGetLastError
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuErrorOutOfMemory hipErrorOutOfMemory
// errors after which the device (or this process's context on it) cannot be used any more
#define PEAT_DEVICE_LOST_ERRORS                                                                        \
  hipErrorLaunchFailure, hipErrorIllegalAddress, hipErrorNoDevice, hipErrorECCNotCorrectable,         \
      hipErrorLaunchTimeOut, hipErrorAssert
#elif defined(PEAT_DEVICE_CUDA)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#define PEAT_BACKEND_NAME "cuda"
using gpuError_t = cudaError_t;
using gpuDeviceProp_t = cudaDeviceProp;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
#define gpuSuccess cudaSuccess
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetErrorString cudaGetErrorString
#define gpuGetErrorName cudaGetErrorName
#define gpuSetDevice cudaSetDevice
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemGetInfo cudaMemGetInfo
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuGetLastError cudaGetLastError
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuErrorOutOfMemory cudaErrorMemoryAllocation
#define PEAT_DEVICE_LOST_ERRORS                                                                         \
  cudaErrorLaunchFailure, cudaErrorIllegalAddress, cudaErrorNoDevice, cudaErrorECCUncorrectable,        \
      cudaErrorLaunchTimeout, cudaErrorAssert, cudaErrorHardwareStackError, cudaErrorIllegalInstruction, \
      cudaErrorMisalignedAddress, cudaErrorInvalidPc, cudaErrorDevicesUnavailable
#elif defined(PEAT_DEVICE_HOST)
// the kernels compiled for the host, for tests (gpu/device/host_emulation.h): no runtime API
#include "gpu/device/host_emulation.h"
#define PEAT_BACKEND_NAME "host"
#else
#error "define PEAT_DEVICE_CUDA, PEAT_DEVICE_HIP or (tests only) PEAT_DEVICE_HOST"
#endif
