// SPDX-License-Identifier: MIT
#pragma once
// The model zoo, written against the op layer (ops::Dispatcher), not raw torch::nn calls.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/torch/ops/dispatcher.h"

namespace peat::models {

enum class Task {
  Images,  // Fashion-MNIST 1x28x28 -> 10 classes
  Text,    // next token over a context window (cross-entropy per token)
  Regression,  // a model file's data with float targets (mean squared error)
};

struct ModelOptions {
  int64_t vocabulary = 0;  // Text: number of distinct characters
  int64_t context = 64;    // Text: window length
  bool fusedAttention = false;  // transformers: attention as one slot call, not scores, softmax and values
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string modelName() const = 0;
  virtual Task task() const = 0;
  // Logits: [N, 10] for images, [N, T, vocabulary] for text.
  virtual at::Tensor forward(ops::Dispatcher& ops, const at::Tensor& input) = 0;
  // Dropout and batch norm of a model file follow the mode; the zoo's ops take it from the dispatcher.
  virtual void setTrainingMode(bool) {}

  // Trainable tensors and state (batch-norm statistics, masks) by dotted name, in creation order.
  const std::vector<std::pair<std::string, at::Tensor>>& parameters() const { return parameters_; }
  const std::vector<std::pair<std::string, at::Tensor>>& buffers() const { return buffers_; }
  int64_t parameterCount() const;

  at::Tensor registerParameter(const std::string& name, at::Tensor value);
  at::Tensor registerBuffer(const std::string& name, at::Tensor value);

 protected:
  // The tensor itself, not a detached copy: a model file's module keeps using it.
  void adoptParameter(const std::string& name, const at::Tensor& value) { parameters_.emplace_back(name, value); }
  void adoptBuffer(const std::string& name, const at::Tensor& value) { buffers_.emplace_back(name, value); }

 private:
  std::vector<std::pair<std::string, at::Tensor>> parameters_, buffers_;
};

const std::vector<std::string>& modelNames();  // mlp, lenet, resnet, vit, chargpt
std::string modelList();
// Throws std::invalid_argument listing the valid names.
std::shared_ptr<Model> makeModel(const std::string& name, const ModelOptions& options);
Task taskOf(const std::string& name);

}  // namespace peat::models
