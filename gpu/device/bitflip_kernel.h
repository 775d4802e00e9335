// SPDX-License-Identifier: MIT
#pragma once
#include <cstdint>

#include "gpu/device/portable.h"

namespace peat::gpu::kernels {

// One thread per flip, so cost follows the number of flips, not the buffer size.
// atomicXor makes repeated indices compose exactly as the sequential CPU reference does.
__global__ void sparseBitFlip(unsigned int* words, const unsigned long long* indices, const unsigned int* masks,
                              unsigned long long flipCount) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < flipCount;
       i += stride)
    atomicXor(&words[indices[i]], masks[i]);
}

}  // namespace peat::gpu::kernels
