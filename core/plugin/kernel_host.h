// SPDX-License-Identifier: MIT
#pragma once
// A user kernel in a kernel host process (lib/peat/peat-kernel-host): the host loads the plugin
// and serves calls over shared memory (core/plugin/kernel_wire.h), so a kernel that crashes,
// aborts, hangs or writes outside its output ends that one call with an outcome, never peat.
// After such a call the host is started again for the next one. docs/plugins.md#crashes.
// The host dies with the thread that started it (PR_SET_PDEATHSIG, so a hanging kernel never
// outlives peat): make and call a KernelHost from threads that live as long as it, as peat's
// main thread does (LibTorch runs a CPU backward on the calling thread).
#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/plugin/kernel_wire.h"

namespace peat::plugin {

// How long a call may take before it counts as a hang: floorSeconds plus secondsPerGflop per
// 10^9 floating-point operations of the call. PEAT_KERNEL_TIMEOUT=FLOOR[,PER_GFLOP] sets them.
// The memory the kernel may take besides its tensors (which live in shared memory): the host runs
// under RLIMIT_DATA of memoryMiB, so a kernel that allocates without bound fails an allocation
// instead of taking the machine. PEAT_KERNEL_MEMORY_MIB=N sets it (at least 64).
struct HostLimits {
  double floorSeconds = 5;
  double secondsPerGflop = 10;  // allows 0.1 GFLOP/s, ten times slower than a naive loop
  double loadSeconds = 30;      // loading the plugin (its constructors) in the host
  int64_t memoryMiB = 4096;     // heap and private mappings of the host, the plugin's included
  double seconds(double flops) const { return floorSeconds + secondsPerGflop * flops * 1e-9; }
};
// The defaults, or PEAT_KERNEL_TIMEOUT's and PEAT_KERNEL_MEMORY_MIB's; PluginError when one is malformed.
HostLimits hostLimitsFromEnvironment();

// What became of one call.
struct CallOutcome {
  // OutOfMemory: an allocation failed under HostLimits::memoryMiB, then the kernel crashed, aborted
  // (std::bad_alloc), ended the host or returned an error.
  enum Kind { Ok, KernelFailed, OutOfBounds, Crashed, Hung, Exited, OutOfMemory };
  Kind kind = Ok;
  int signal = 0;      // Crashed (and OutOfBounds by a fault)
  int exitCode = 0;    // Exited: the host ended with this code in the call
  int returnCode = 0;  // KernelFailed (and OutOfMemory after an error return): the kernel's return code
  uint64_t failedAllocation = 0;  // OutOfMemory: bytes of the first allocation that failed
  std::string message; // one line: what happened, for the user

  bool ok() const { return kind == Ok; }
  // For the session's records: "ok", "kernel_error", "out_of_bounds", "crash:SIGSEGV", "hang", "exit:3",
  // "out_of_memory"
  std::string text() const;
};

// "SIGSEGV" for 11; "SIG40" for a signal without a name here.
std::string signalName(int signal);

class KernelHost {
 public:
  // Starts the host with the plugin at `path` (already probed; `name` is its declared name).
  // PluginError with one line when the host cannot start or dies loading the plugin.
  KernelHost(std::string path, std::string name, HostLimits limits);
  ~KernelHost();
  KernelHost(const KernelHost&) = delete;
  KernelHost& operator=(const KernelHost&) = delete;

  // One tensor of a call: `in` for an input, `out` for an output (written only when the call is ok).
  struct Arg {
    wire::Role role = wire::kInput;
    uint32_t dtype = 0;
    std::vector<int64_t> shape;
    const void* in = nullptr;
    void* out = nullptr;
    float scale = 1;  // an fp8 input's scale; for an output, set to the scale it came back with
  };
  // Runs one call of op `opKind` with `params` in the host, within limits.seconds(flops). A host
  // that died or hung in the call is started again before the next; PluginError when it can no
  // longer be started (three times in a row).
  CallOutcome call(uint32_t opKind, const std::vector<Arg>& args, const std::vector<int64_t>& params, double flops);
  // One call of an ABI v2 plugin (peat_kernel_run_v2): op kind, variant, its tensors in the op's
  // order (inputs, then outputs) and its parameters. Outputs and their scales are written when ok.
  CallOutcome callV2(uint32_t opKind, uint32_t variant, std::vector<Arg>& args, const peat_params& params, double flops);
  // c[m,n] = a[m,k] b[k,n], fp32 row-major (peat_kernel_gemm_v1).
  CallOutcome gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

  int64_t starts() const { return starts_; }  // hosts started so far

 private:
  CallOutcome exchange(wire::Request& request, std::vector<Arg>& args, double flops);
  void start();  // PluginError when it fails
  void reap(bool kill, double waitSeconds, int& signal, int& exitCode);
  void stop();
  void ensureArena(uint64_t arenaBytes);
  // Waits for the reply to `sequence`: true when it came, false when the host ended or timed out.
  bool awaitReply(uint64_t sequence, double seconds, bool& timedOut);
  std::string describe(const CallOutcome& o, const wire::Reply& reply, const wire::Request& request) const;

  std::string path_, name_;
  HostLimits limits_;
  std::mutex mutex_;
  pid_t pid_ = -1;
  int memfd_ = -1, socket_ = -1;
  void* map_ = nullptr;
  uint64_t mapped_ = 0;  // bytes of the file mapped here
  uint64_t sequence_ = 0;
  int64_t starts_ = 0;
  int failedStarts_ = 0;  // in a row
};

}  // namespace peat::plugin
