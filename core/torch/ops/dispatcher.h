// SPDX-License-Identifier: MIT
#pragma once
// The kernel slot. Every model op goes through Dispatcher, which gives the call its identity
// (layer, op, phase, iteration, call index), runs the golden kernel, substitutes a candidate when
// the policy says so, and lets observers record. GEMM-based ops send their backward GEMMs through
// the slot too, via custom autograd functions, so a candidate GEMM shapes training like a real kernel.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/analyzer/error_summary.h"
#include "core/store/session.h"
#include "core/torch/kernels/kernel.h"
#include "core/torch/ops/op_types.h"

namespace peat::ops {

// Sees every call with its golden output (recording, storage accounting).
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  virtual void onCall(const store::CallId& id, const OpCall& call, const at::Tensor& goldenOutput) = 0;
};

// When to run the candidate instead of the golden kernel.
struct SubstitutionPolicy {
  std::shared_ptr<kernels::Kernel> candidate;
  std::optional<OpKind> op;  // none: every op the candidate supports
  std::string layer;         // empty: every layer
  bool forward = true, backward = true;
  int64_t every = 1;         // the k-th, 2k-th, ... matching call; ignored when probability > 0
  double probability = 0;    // per matching call, drawn from a generator seeded with `seed`
  uint64_t seed = 0;
};

// One substituted call: what ran and how far the candidate was from golden.
struct Substitution {
  store::CallId id;
  Variant variant = Variant::Forward;
  analyzer::ErrorSummary error;
  // "ok", or how the candidate failed the call in its kernel host ("crash:SIGSEGV", "hang",
  // "out_of_bounds"; kernels::KernelCallFailed): then golden's output was used and `error` is empty
  std::string outcome = "ok";
  std::string message;  // the failure's one line
};

class Dispatcher {
 public:
  Dispatcher();
  ~Dispatcher();

  void beginIteration(int64_t iteration);
  int64_t iteration() const { return iteration_; }
  void setTraining(bool training) { training_ = training; }
  bool training() const { return training_; }

  void setSubstitution(std::optional<SubstitutionPolicy> policy);
  void addObserver(CallObserver* observer);
  void removeObserver(CallObserver* observer);
  std::vector<Substitution> takeSubstitutions();
  std::vector<kernels::Injection> takeInjections();
  int64_t matchingCalls() const { return matching_; }

  // The slot itself: runs one call and returns the output to use.
  at::Tensor run(const std::string& layer, const OpCall& call, bool backward);

  // Ops for models. Tensors are fp32 on the CPU.
  at::Tensor linear(const std::string& layer, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
  at::Tensor conv2d(const std::string& layer, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                    int64_t stride, int64_t padding);
  at::Tensor conv2d(const std::string& layer, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                    const ConvGeometry& geometry);  // groups, dilation, unequal strides and padding
  at::Tensor matmul(const std::string& layer, const at::Tensor& a, const at::Tensor& b);
  // Activations, softmax, layer norm, dropout, embedding and the loss send their backward through
  // the slot too (GradInput; layer norm's GradWeight and GradBias; embedding's GradWeight).
  at::Tensor relu(const std::string& layer, const at::Tensor& x);
  at::Tensor gelu(const std::string& layer, const at::Tensor& x, bool tanhApproximation = false);
  at::Tensor silu(const std::string& layer, const at::Tensor& x);
  at::Tensor tanh(const std::string& layer, const at::Tensor& x);
  at::Tensor sigmoid(const std::string& layer, const at::Tensor& x);
  at::Tensor softmax(const std::string& layer, const at::Tensor& x, int64_t dim = -1);
  at::Tensor logSoftmax(const std::string& layer, const at::Tensor& x, int64_t dim = -1);
  // Training-mode dropout with probability p: draws ATen's CPU mask, which the call records.
  at::Tensor dropout(const std::string& layer, const at::Tensor& x, double p);
  // Over the last `normalizedDims` dimensions; gamma and beta may be undefined (no affine).
  at::Tensor layerNorm(const std::string& layer, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                       int64_t normalizedDims = 1, double eps = 1e-5);
  at::Tensor add(const std::string& layer, const at::Tensor& a, const at::Tensor& b);
  // softmax(scale q k^T + mask) v as one call (mask undefined: none; causal: query i sees keys up to
  // i + Tk - Tq; dropout > 0: training-mode dropout of the probabilities, its multipliers drawn as
  // ATen's CPU dropout draws them and recorded with the call); backward dq, dk, dv through the slot.
  at::Tensor attention(const std::string& layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& mask, double scale = 1.0, bool causal = false, double dropout = 0);
  at::Tensor embedding(const std::string& layer, const at::Tensor& indices, const at::Tensor& table,
                       int64_t paddingIdx = -1);
  // Mean cross-entropy of logits [N, C] against class ids [N]: a 0-dim loss.
  at::Tensor crossEntropy(const std::string& layer, const at::Tensor& logits, const at::Tensor& target);
  // An optimiser's update (Sgd, Adam; Variant::Update), outside autograd: the stacked new values.
  at::Tensor update(const std::string& layer, const OpCall& call);
  // In training mode, uses batch statistics and updates the running ones (outside the slot).
  at::Tensor batchNorm(const std::string& layer, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                       at::Tensor& runningMean, at::Tensor& runningVar);
  at::Tensor maxPool2d(const std::string& layer, const at::Tensor& x, int64_t kernel, int64_t stride);
  at::Tensor globalAvgPool(const std::string& layer, const at::Tensor& x);

 private:
  at::Tensor elementwise(const std::string& layer, OpCall call);
  at::Tensor oneGradient(const std::string& layer, OpKind kind, const at::Tensor& x,
                         const std::map<std::string, int64_t>& params, bool keepOutput);
  bool shouldSubstitute(const OpCall& call, const std::string& layer, bool backward);

  int64_t iteration_ = 0;
  int64_t callIndex_ = 0;
  bool training_ = true;
  std::optional<SubstitutionPolicy> policy_;
  std::mt19937_64 policyRng_;
  int64_t matching_ = 0;
  std::vector<CallObserver*> observers_;
  std::vector<Substitution> substitutions_;
  std::vector<kernels::Injection> injections_;
};

}  // namespace peat::ops
