// SPDX-License-Identifier: MIT
#pragma once
// Kernels that a kernel slot can run: the golden ATen implementation and candidates chosen by name.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/catalog/catalog.h"
#include "core/torch/ops/op_types.h"

namespace peat::kernels {

// Thrown for an unknown kernel name or bad options; what() lists what is valid.
class KernelError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A call the kernel did not complete: a user kernel crashed, aborted, hung or wrote outside its
// output in its kernel host process (core/plugin/kernel_host.h). The call has no output; the next
// call runs in a new host. Playback records the outcome for the call, runtime FI uses golden's output.
class KernelCallFailed : public std::runtime_error {
 public:
  KernelCallFailed(std::string outcome, const std::string& message)
      : std::runtime_error(message), outcome_(std::move(outcome)) {}
  // "crash:SIGSEGV", "crash:SIGABRT", "hang", "out_of_bounds", "exit:N"
  const std::string& outcome() const { return outcome_; }

 private:
  std::string outcome_;
};

// Where a user kernel (plugin:path=...) runs: in a kernel host process, or, for trusted kernels,
// in this process (--in-process), where a crash of the kernel is a crash of peat.
enum class PluginPlacement { KernelHost, InProcess };

// Identity of the call a kernel runs, for injection logs.
struct CallContext {
  std::string callId;  // e.g. "it 3 call 12 fc1 linear forward"
  int64_t iteration = 0;
  int64_t callIndex = 0;
};

// Ground truth of one injected fault.
struct Injection {
  std::string call;
  std::string target;  // "output", "input", "weight"
  uint64_t index = 0;  // flat element index in that tensor
  int bit = -1;        // -1 when the fault is not a bit fault (zero, random value, NaN, Inf)
  float oldValue = 0, newValue = 0;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string name() const = 0;
  virtual bool supports(ops::OpKind kind) const = 0;
  // Whether it runs this variant of the op (a user kernel may implement only some of them).
  virtual bool supports(ops::OpKind kind, ops::Variant) const { return supports(kind); }
  // Whether it runs a call with these parameters (an attention kernel without dropout does not run
  // a call that has it).
  virtual bool supports(ops::OpKind kind, ops::Variant variant, const std::map<std::string, int64_t>&) const {
    return supports(kind, variant);
  }
  // Returns a new fp32 tensor; never modifies the call's inputs.
  virtual at::Tensor run(const ops::OpCall& call, const CallContext& context) = 0;
  // Injections made since the last call, handed over once.
  virtual std::vector<Injection> takeInjections() { return {}; }
  // The formats a user kernel declares per op kind ("gemm:fp8_e4m3->f32,attention:bf16->f32", plugin
  // ABI v2's op kinds and dtypes), stored with a playback run so that the analysis judges each call
  // with them (core/analysis/session_analysis.h); empty for the built-in kernels.
  virtual std::string declaredFormats() const { return {}; }
};

// The golden implementation of every op (ATen). Candidates are measured against it.
at::Tensor runGolden(const ops::OpCall& call);
std::unique_ptr<Kernel> makeGolden();

// An attention call's additive mask that is one [tq, tk] mask for every batch entry ([1, .., tq, tk]
// too, not a per-entry padding mask of the same size), and one that is exactly the causal one (0 where
// key j <= i + tk - tq, -inf above): what attention ports take as their causal flag.
bool isOneMask(const at::Tensor& mask, int64_t tq, int64_t tk);
bool isCausalMask(const at::Tensor& mask, int64_t tq, int64_t tk);

// A plain GEMM c[M,N] = a[M,K] b[K,N] on contiguous fp32 CPU matrices: what GEMM candidates replace.
using GemmEngine = std::function<at::Tensor(const at::Tensor& a, const at::Tensor& b)>;
// Runs any GEMM-based op call (all variants) through `engine`, by reshaping and im2col.
at::Tensor runThroughGemm(const ops::OpCall& call, const GemmEngine& engine);

struct KernelSpec {
  std::string name;
  std::map<std::string, std::string> options;  // from "name:key=value,key=value"
  std::string text;
};
KernelSpec parseKernelSpec(const std::string& text);

// The catalog (core/catalog/catalog.h, torch-free: the GUI and the shell completion read it too).
using KernelDescription = catalog::KernelDescription;
const std::vector<KernelDescription>& kernelCatalog();
std::string kernelList();  // names for error messages

// Builds a kernel from a spec such as "bf16", "splitk:parts=4", "bitflip:bit=30,target=weight" or
// "plugin:path=/x/libk.so". `seed` drives the kernels that draw random numbers (faults), except
// stale-race, which is nondeterministic on purpose.
std::unique_ptr<Kernel> makeKernel(const std::string& spec, uint64_t seed,
                                   PluginPlacement placement = PluginPlacement::KernelHost);
// The spec with `device` as the device of a gpu-* kernel ("gpu-tiled" -> "gpu-tiled:device=cuda:0").
// Other kernels run on the CPU: they accept "cpu" (or no device) and refuse any other device.
std::string withDevice(const std::string& spec, const std::string& device);

}  // namespace peat::kernels
