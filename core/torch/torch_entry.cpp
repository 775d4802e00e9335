// SPDX-License-Identifier: MIT
#include "core/torch/torch_entry.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdio>

extern "C" int peat_torch_info(PeatTorchInfo* out) {
  if (!out) return 1;
  out->abiVersion = PEAT_TORCH_ABI_VERSION;
  std::snprintf(out->version, sizeof out->version, "%d.%d.%d", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                TORCH_VERSION_PATCH);
  out->cudaAvailable = torch::cuda::is_available() ? 1 : 0;
  out->cudaDevices = out->cudaAvailable ? int(torch::cuda::device_count()) : 0;
  out->intraOpThreads = at::get_num_threads();
  return 0;
}
