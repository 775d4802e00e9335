// SPDX-License-Identifier: MIT
#pragma once
// Real training of the zoo models on real data, every op through the kernel slot.
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/store/session.h"
#include "core/torch/models/zoo.h"
#include "core/torch/ops/dispatcher.h"

namespace peat::train {

struct TrainOptions {
  std::string model = "lenet";
  int64_t iterations = 200;
  int64_t batch = 64;
  double learningRate = 0;  // 0: the model's default (SGD 0.05 with momentum 0.9; Adam 3e-3 for chargpt)
  uint64_t seed = 1;
  int threads = 1;          // intra-op threads; results are bit-identical for a fixed count
  int64_t evalEvery = 0;    // evaluate on the test split every N iterations (0: only at the end)
  int64_t evalBatches = 8;  // test batches per evaluation (fixed, so evaluations compare)
  int64_t context = 64;     // chargpt window
  std::string attention = "parts";  // "fused": attention (scores, softmax, values) as one slot call
  std::string init;         // finetune from "FILE[:RUN[:ITERATION]]"; empty: random init (pretraining)
  // A model file (`model` is a TorchScript path, models::isModelFile) trains on `data`: an HDF5 file
  // with train/x, train/y, test/x, test/y; a folder of train_x.npy, train_y.npy, test_x.npy,
  // test_y.npy; or fashion-mnist[:CxHxW] (Fashion-MNIST resized and its channel repeated).
  std::string data;
  std::string task;                  // classification, regression or lm; empty: from the data's types
  std::string inputMean, inputStd;   // per-channel input normalisation, "0.485,0.456,0.406"
  std::string modelSha256, dataSha256;  // when set (a resume), the files must still have these digests
};

struct StepStats {
  double loss = 0;
  double accuracy = 0;  // on the training batch
};

struct EvalStats {
  double loss = 0;
  double accuracy = 0;
  int64_t samples = 0;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class DataSource;

class Trainer {
 public:
  Trainer(const TrainOptions& options, ops::Dispatcher& ops);
  ~Trainer();

  StepStats step(int64_t iteration);  // one forward, backward and update on the iteration's batch
  EvalStats evaluate();

  models::Model& model() { return *model_; }
  const TrainOptions& options() const { return options_; }  // a model file's with its digests and task
  std::string datasetName() const;
  std::string initDescription() const { return initDescription_; }
  // A model file's routing ("routed 57 GEMM sites, ..."), digests and task; empty for the zoo.
  std::string routingSummary() const { return routing_; }

  NamedTensors parameterState() const;  // parameters and buffers
  NamedTensors optimizerState() const;
  // Restores a checkpoint; throws std::invalid_argument naming the first tensor that does not fit.
  void loadState(const std::map<std::string, store::Tensor>& parameters,
                 const std::map<std::string, store::Tensor>* optimizer);

 private:
  void checkModelAgainstData(DataSource& data);

  TrainOptions options_;
  ops::Dispatcher& ops_;
  std::unique_ptr<DataSource> data_;
  std::shared_ptr<models::Model> model_;
  NamedTensors optimizerState_;
  int64_t adamStep_ = 0;
  std::string initDescription_ = "random";
  std::string routing_;
  bool modelFile_ = false;
};

// The task names of TrainOptions::task.
std::string taskName(models::Task task);

// store::Tensor <-> at::Tensor (fp32, copies).
at::Tensor toTorch(const store::Tensor& t);
store::Tensor fromTorch(const at::Tensor& t);

}  // namespace peat::train
