// SPDX-License-Identifier: MIT
// HIP build of the shared device backend.
#define PEAT_DEVICE_HIP 1
#include "gpu/device/device_backend.inc"
