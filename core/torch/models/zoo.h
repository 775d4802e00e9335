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
  Text,    // next character over a context window
};

struct ModelOptions {
  int64_t vocabulary = 0;  // Text: number of distinct characters
  int64_t context = 64;    // Text: window length
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string modelName() const = 0;
  virtual Task task() const = 0;
  // Logits: [N, 10] for images, [N, T, vocabulary] for text.
  virtual at::Tensor forward(ops::Dispatcher& ops, const at::Tensor& input) = 0;

  // Trainable tensors and state (batch-norm statistics, masks) by dotted name, in creation order.
  const std::vector<std::pair<std::string, at::Tensor>>& parameters() const { return parameters_; }
  const std::vector<std::pair<std::string, at::Tensor>>& buffers() const { return buffers_; }
  int64_t parameterCount() const;

  at::Tensor registerParameter(const std::string& name, at::Tensor value);
  at::Tensor registerBuffer(const std::string& name, at::Tensor value);

 private:
  std::vector<std::pair<std::string, at::Tensor>> parameters_, buffers_;
};

const std::vector<std::string>& modelNames();  // mlp, lenet, resnet, vit, chargpt
std::string modelList();
// Throws std::invalid_argument listing the valid names.
std::shared_ptr<Model> makeModel(const std::string& name, const ModelOptions& options);
Task taskOf(const std::string& name);

}  // namespace peat::models
