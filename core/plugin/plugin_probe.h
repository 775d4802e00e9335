// SPDX-License-Identifier: MIT
#pragma once
// User kernels (peat/kernel_abi.h): checked in a child process before they are trusted in ours.
#include <cstdint>
#include <stdexcept>
#include <string>

struct peat_kernel_info;  // core/plugin/peat/kernel_abi.h

namespace peat::plugin {

class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PluginInfo {
  std::string path;
  std::string name;
  uint32_t abiVersion = 0, opKind = 0, dtype = 0, memory = 0;
  // The probe's test GEMM (7x5 by 5x6, exact in fp32) against the reference. A wrong result does
  // not refuse the plugin: finding out what is wrong is what playback and the detector are for.
  uint32_t probeMismatches = 0;  // of kProbeElements
  double probeMaxAbsError = 0;   // NaN when the plugin wrote NaN or left an element unwritten
  int32_t probeFirstMismatch = -1;
};
inline constexpr uint32_t kProbeElements = 42;

// "plugin 'x' computed its probe GEMM with 6 of 42 elements wrong (max abs error 17, first at 1)"
// for a plugin whose probe GEMM differed; empty otherwise.
std::string probeWarning(const PluginInfo& info);

using GemmFn = int (*)(const float*, const float*, float*, int64_t, int64_t, int64_t);
using LastErrorFn = const char* (*)();

// Loads the library here, checks its symbols and ABI version and runs a small GEMM against a
// reference. Only the probe helper calls this: a bad plugin may crash the calling process.
PluginInfo checkPluginInProcess(const std::string& path);

// Runs checkPluginInProcess in the peat-probe helper. A crash, a hang past `timeoutSeconds`, a
// wrong ABI or a missing symbol comes back as PluginError with a one-line reason; a wrong result
// comes back in the info (probeWarning).
PluginInfo probePlugin(const std::string& path, double timeoutSeconds = 30);

// The checks of a plugin's self-description, and of the probe helper's answer (which comes from a
// process that ran the plugin): PluginError for anything out of the ABI's bounds. Fuzzed by
// tests/fuzz/fuzz_plugin.cpp.
PluginInfo validatePluginInfo(const ::peat_kernel_info* info, const std::string& path);
PluginInfo parseProbeAnswer(const std::string& text, const std::string& path);

// After a successful probe: loads the plugin into this process and returns its GEMM entry point.
struct LoadedPlugin {
  PluginInfo info;
  GemmFn gemm = nullptr;
  LastErrorFn lastError = nullptr;
};
LoadedPlugin loadProbedPlugin(const std::string& path);

}  // namespace peat::plugin
