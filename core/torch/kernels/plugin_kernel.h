// SPDX-License-Identifier: MIT
#pragma once
// A user kernel from a shared library (plugin:path=FILE, peat/kernel_abi.h): ABI v1 GEMMs, and the
// op kinds and dtypes of ABI v2, mapped from the slot's calls (docs/plugins.md).
#include <memory>
#include <string>

#include "core/torch/kernels/kernel.h"

namespace peat::kernels {

// Probes the library (in the peat-probe helper), then runs it in a kernel host process, or in this
// process with PluginPlacement::InProcess. KernelError with one line when it is refused.
std::unique_ptr<Kernel> makePluginKernel(const std::string& path, PluginPlacement placement);

}  // namespace peat::kernels
