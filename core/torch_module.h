// SPDX-License-Identifier: MIT
#pragma once
// The torch-free side of the boundary to libpeat_torch.so: loads it on first use only.
// Plain C types cross the boundary, so a LibTorch built with another libstdc++ ABI still works.
#include <string>

namespace peat {

struct TorchRuntimeInfo {
  std::string version;     // LibTorch version, e.g. "1.13.1"
  bool cudaAvailable = false;
  int cudaDevices = 0;
  int intraOpThreads = 0;
  double loadSeconds = 0;  // wall time to dlopen the module (LibTorch included)
};

// Throws std::runtime_error with a one-line reason when the module cannot be loaded.
TorchRuntimeInfo loadTorchRuntime();

// Runs a command implemented in libpeat_torch.so, given as cli::encode(TorchCommand) text; returns
// its exit code.
int runTorchCommand(const std::string& encodedCommand);

}  // namespace peat
