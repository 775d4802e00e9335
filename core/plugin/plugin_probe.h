// SPDX-License-Identifier: MIT
#pragma once
// User kernels (peat/kernel_abi.h): checked in a child process before they are trusted in ours.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

struct peat_kernel_info;     // core/plugin/peat/kernel_abi.h
struct peat_plugin_info;
struct peat_call;

namespace peat::plugin {

class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One op kind of an ABI v2 plugin, as it declares it and as its probe found it.
struct PluginOp {
  uint32_t kind = 0, variants = 0, inputDtype = 0, outputDtype = 0, features = 0;  // peat_op_desc
  // The probe ran every declared variant on small cases against a double-precision reference,
  // with a tolerance for the declared dtypes: how many cases, how many had an element wrong.
  uint32_t cases = 0, failedCases = 0;
  double maxError = 0;       // the largest abs error over the failed cases (NaN: NaN or unwritten)
  std::string firstFailure;  // "grad_input, 3x5 rows: 4 of 15 elements wrong"; empty when none
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
  // ABI v2 (abiVersion 2): the op kinds it exports (opKind and dtype are then 0; the v1 probe fields unused)
  std::vector<PluginOp> ops;
  const PluginOp* op(uint32_t kind) const {
    for (const PluginOp& o : ops)
      if (o.kind == kind) return &o;
    return nullptr;
  }
};
inline constexpr uint32_t kProbeElements = 42;

// "plugin 'x' computed its probe GEMM with 6 of 42 elements wrong (max abs error 17, first at 1)"
// for a v1 plugin whose probe GEMM differed, "plugin 'x' got 3 of 52 probe cases wrong: attention
// forward, causal 5x18: ..." for a v2 plugin with a failed case; empty otherwise.
std::string probeWarning(const PluginInfo& info);

// The variants (PEAT_VARIANT_BIT) the ABI defines for an op kind; 0 for an unknown kind.
uint32_t abiVariantsOf(uint32_t opKind);
// The longest PluginOp::firstFailure the probe's answer carries.
inline constexpr std::size_t kMaxFailureText = 200;

// The probe helper's answer for `info` (peat-probe plugin PLUGIN prints it, parseProbeAnswer reads
// it): v1 "ok\tname\tabi\top\tdtype\tmemory\tmismatches\tmax_error\tfirst"; v2 a line
// "ok2\tname\tmemory\top_count", then one line per op
// "op\tkind\tvariants\tinput_dtype\toutput_dtype\tfeatures\tcases\tfailed\tmax_error\tfirst_failure".
std::string probeAnswer(const PluginInfo& info);

using GemmFn = int (*)(const float*, const float*, float*, int64_t, int64_t, int64_t);
using LastErrorFn = const char* (*)();
using RunV2Fn = int (*)(const ::peat_call*);

// Loads the library here, checks its symbols and ABI version and runs a small GEMM against a
// reference (v1), or every declared variant of every declared op kind on small cases against a
// double-precision reference (v2: a library exporting peat_kernel_info_v2). Only the probe helper
// calls this: a bad plugin may crash the calling process.
PluginInfo checkPluginInProcess(const std::string& path);

// Runs checkPluginInProcess in the peat-probe helper. A crash, a hang past `timeoutSeconds`, a
// wrong ABI or a missing symbol comes back as PluginError with a one-line reason; a wrong result
// comes back in the info (probeWarning).
PluginInfo probePlugin(const std::string& path, double timeoutSeconds = 30);

// The checks of a plugin's self-description, and of the probe helper's answer (which comes from a
// process that ran the plugin): PluginError for anything out of the ABI's bounds. Fuzzed by
// tests/fuzz/fuzz_plugin.cpp.
PluginInfo validatePluginInfo(const ::peat_kernel_info* info, const std::string& path);
PluginInfo validatePluginInfoV2(const ::peat_plugin_info* info, const std::string& path);
PluginInfo parseProbeAnswer(const std::string& text, const std::string& path);

// The slot's ops (ops::opName) whose calls a plugin runs: linear, conv2d and matmul through a GEMM
// (v1, or v2's GEMM / batched GEMM), conv2d through its own kernel, softmax and log_softmax, layernorm,
// attention, the activations, sgd and adam.
std::vector<std::string> slotOpsOf(const PluginInfo& info);

// After a successful probe: loads the plugin into this process and returns its entry points.
struct LoadedPlugin {
  PluginInfo info;
  GemmFn gemm = nullptr;   // v1
  RunV2Fn run = nullptr;   // v2
  LastErrorFn lastError = nullptr;
};
LoadedPlugin loadProbedPlugin(const std::string& path);

}  // namespace peat::plugin
