// SPDX-License-Identifier: MIT
#pragma once
// C entry points of libpeat_torch.so, found with dlsym by core/torch_module.cpp.
#ifdef __cplusplus
extern "C" {
#endif

#define PEAT_TORCH_ABI_VERSION 2

struct PeatTorchInfo {
  int abiVersion;       /* PEAT_TORCH_ABI_VERSION of the module */
  char version[64];     /* LibTorch version */
  int cudaAvailable;
  int cudaDevices;
  int intraOpThreads;
};

/* Fills `out`; returns 0 on success. */
int peat_torch_info(struct PeatTorchInfo* out);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
extern "C" {
#endif
/* Runs a torch command parsed by `peat` (core/cli/torch_commands.h), given as its encode() text.
 * Prints to stdout/stderr; returns the exit code. */
int peat_torch_run(const char* encodedCommand);
#ifdef __cplusplus
}
#endif
