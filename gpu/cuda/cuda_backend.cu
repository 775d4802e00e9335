// SPDX-License-Identifier: MIT
// CUDA build of the shared device backend.
#define PEAT_DEVICE_CUDA 1
#include "gpu/device/device_backend.inc"
