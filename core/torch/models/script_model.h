// SPDX-License-Identifier: MIT
#pragma once
// A user's TorchScript module (torch.jit.trace or torch.jit.script, saved with .save), trained with
// every GEMM and every op the slot has through the kernel slot. The forward graph is inlined and each
// GEMM-based node (aten::linear, conv1d/conv2d/_convolution, matmul, mm, bmm, addmm, baddbmm) is
// replaced by a registered op (peat::linear, peat::conv, peat::matmul, peat::addmm), and so are
// softmax and log-softmax, layer norm, GELU (both forms), ReLU, SiLU, tanh, sigmoid, dropout and
// embedding (peat::softmax, peat::layer_norm, peat::activation, peat::dropout, peat::embedding);
// they call ops::Dispatcher, whose autograd functions send the backward through the slot too. The
// trainer adds the loss (cross-entropy) and the optimiser's update of each parameter. The layer of a
// call is the module path of its weight ("layer1.0.conv1"); an op without a weight (attention's bmm,
// a softmax) is named after the module it runs in ("encoder.layers.0.self_attn.bmm", "#2" for the
// second one there). Kernels the slot has no op for (norms, pools, arithmetic, recurrent layers) are
// listed as left on ATen. docs/models.md describes the rewrite, what is routed and what is not.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/torch/models/zoo.h"

namespace peat::models {

// One op site of the forward graph: a node the slot routes, or a kernel it leaves on ATen (GEMMs
// it cannot take, recurrent layers, norms, pools and arithmetic it has no op for), named with why.
struct ScriptSite {
  std::string layer;   // the name its calls carry
  std::string aten;    // the node's op, "aten::_convolution"
  bool routed = false;
  std::string detail;  // routed: the slot op and geometry; not routed: the reason
  std::string op;      // routed: the slot's op ("linear", "softmax", ...)
};

// True unless `spec` is one of the zoo's names: a model file.
bool isModelFile(const std::string& spec);

class ScriptedModel final : public Model {
 public:
  // fuseAttention: route attention (scores, softmax, values) as one call where the graph allows (--attention fused)
  ScriptedModel(const std::string& path, Task task, bool fuseAttention = false);
  ~ScriptedModel() override;
  std::string modelName() const override { return path_; }
  Task task() const override { return task_; }
  at::Tensor forward(ops::Dispatcher& ops, const at::Tensor& input) override;
  void setTrainingMode(bool training) override;

  const std::vector<ScriptSite>& sites() const { return sites_; }
  // "routed 57 sites (21 linear, 12 softmax, ...); left on ATen: 2 aten::lstm, 30 aten::add"
  std::string routingSummary() const;
  std::vector<std::string> skippedBuffers() const { return skippedBuffers_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  Task task_;
  std::vector<ScriptSite> sites_;
  std::vector<std::string> skippedBuffers_;
};

// The first forward call of each layer in one forward of `inputShape` (zeros; token 0 for lm):
// what `peat models --inspect FILE --input-shape ...` prints.
struct SiteCall {
  std::string layer, op;
  std::string shapes;  // "x [1, 64, 16, 16] w [64, 64, 3, 3] -> [1, 64, 16, 16]"
  int64_t reduction = 0;  // K of the GEMM
  int64_t calls = 0;      // forward calls of this layer in the pass
};
std::vector<SiteCall> forwardCalls(ScriptedModel& model, const std::vector<int64_t>& inputShape);

// The message of an error from the TorchScript interpreter: the Python-side "...Error: what" line
// at its end rather than its "The following operation failed" preamble; else its first line.
std::string interpreterMessage(const std::string& what);

// Loads and rewrites; throws std::invalid_argument with one line for a file that is not TorchScript
// (a pickled eager module, an ONNX file) or that this LibTorch cannot load. A model file is code-like
// input from someone else: Probe::First loads it in the probe helper first (peat-probe torchscript,
// once per file per process), so that a crash or a hang of LibTorch's loader refuses the file
// instead of taking this process down. `peat models --inspect` is what the helper runs: it loads
// in place (Probe::Inside).
enum class Probe { First, Inside };
// The model's own code on an input of `inputShape` (zeros; int64 ids where its embedding wants them),
// once, in the probe helper under a memory limit (PEAT_MODEL_MEMORY_MIB, 4096 MiB by default) and
// a time limit (PEAT_PROBE_TIMEOUT, 120 s): a forward that crashes, hangs or takes too much memory
// refuses the file with one line before this process runs it. Throws std::invalid_argument.
void probeModelForward(const std::string& path, const std::vector<int64_t>& inputShape, Task task);
std::shared_ptr<ScriptedModel> loadScriptedModel(const std::string& path, Task task, Probe probe = Probe::First,
                                                 bool fuseAttention = false);

}  // namespace peat::models
