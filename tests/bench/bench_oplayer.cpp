// SPDX-License-Identifier: MIT
// What the kernel slot costs: one LeNet training step (forward, backward, SGD update) on a real
// Fashion-MNIST batch, through the op layer with golden kernels, against the same network written
// with plain torch::nn modules.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "core/data/datasets.h"
#include "core/torch/models/zoo.h"
#include "core/torch/ops/dispatcher.h"

namespace {

struct Batch {
  at::Tensor images, labels;
};

const Batch& realBatch() {
  static const Batch batch = [] {
    static peat::data::ImageSet test = peat::data::loadFashionMnist("t10k");
    const at::Tensor pixels = at::from_blob(test.pixels.data(), {test.count, 1, 28, 28}, at::kByte).slice(0, 0, 64);
    const at::Tensor labels = at::from_blob(test.labels.data(), {test.count}, at::kByte).slice(0, 0, 64);
    return Batch{(pixels.to(at::kFloat) / 255.0 - 0.2860) / 0.3530, labels.to(at::kLong)};
  }();
  return batch;
}

struct PlainLeNet : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 6, 5).padding(2)}, conv2{torch::nn::Conv2dOptions(6, 16, 5)};
  torch::nn::Linear fc1{400, 120}, fc2{120, 84}, fc3{84, 10};
  PlainLeNet() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  at::Tensor forward(at::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2, 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2, 2);
    x = x.reshape({x.size(0), -1});
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};

void sgd(const std::vector<at::Tensor>& params) {
  torch::NoGradGuard noGrad;
  for (const at::Tensor& p : params) {
    p.add_(p.grad(), -0.01);
    p.mutable_grad().zero_();
  }
}

at::Tensor loss(const at::Tensor& logits, const at::Tensor& labels) {
  return at::nll_loss(at::log_softmax(logits, -1), labels);
}

void BM_LeNetStep_OpLayer(benchmark::State& state) {
  at::set_num_threads(1);
  const Batch& b = realBatch();
  torch::manual_seed(1);
  auto model = peat::models::makeModel("lenet", {});
  peat::ops::Dispatcher ops;
  std::vector<at::Tensor> params;
  for (const auto& p : model->parameters()) params.push_back(p.second);
  int64_t it = 0;
  for (auto _ : state) {
    ops.beginIteration(it++);
    loss(model->forward(ops, b.images), b.labels).backward();
    sgd(params);
  }
}

void BM_LeNetStep_TorchNN(benchmark::State& state) {
  at::set_num_threads(1);
  const Batch& b = realBatch();
  torch::manual_seed(1);
  PlainLeNet model;
  std::vector<at::Tensor> params = model.parameters();
  for (auto _ : state) {
    loss(model.forward(b.images), b.labels).backward();
    sgd(params);
  }
}

}  // namespace

BENCHMARK(BM_LeNetStep_OpLayer)->Unit(benchmark::kMillisecond)->MinTime(3.0);
BENCHMARK(BM_LeNetStep_TorchNN)->Unit(benchmark::kMillisecond)->MinTime(3.0);
BENCHMARK_MAIN();
