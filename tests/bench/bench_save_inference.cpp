// SPDX-License-Identifier: MIT
// SAVE's fault-free inference against LibTorch's on the same network: torchvision ResNet-18 at
// 3x224x224, batch 1, one thread each (SAVE's engine is single-threaded; LibTorch is set to one
// intra-op thread). The two files come from one seeded PyTorch model (tests/bench/save_inference.sh
// exports them): PEAT_BENCH_ONNX (SAVE reads it, core/save/onnx_model.h) and PEAT_BENCH_TS (its
// TorchScript trace, for LibTorch). The benchmark also checks that both predict the same class.
#include <benchmark/benchmark.h>
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <cstdlib>
#include <random>
#include <stdexcept>

#include "core/save/graph.h"
#include "core/save/onnx_model.h"

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set (see tests/bench/save_inference.sh)");
  return v;
}

const std::vector<float>& input() {
  static const std::vector<float> x = [] {
    std::vector<float> v(3 * 224 * 224);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& f : v) f = u(rng);
    return v;
  }();
  return x;
}

void SaveEngine(benchmark::State& state) {
  const peat::save::Graph g = peat::save::onnxGraph(env("PEAT_BENCH_ONNX"));
  for (auto _ : state) {
    auto all = peat::save::runAll(g, input().data(), 1);
    benchmark::DoNotOptimize(all.back().data());
  }
  const auto all = peat::save::runAll(g, input().data(), 1);
  state.counters["top1"] = peat::save::topClass(all[std::size_t(g.output)].data(), 10);
}

void LibTorch(benchmark::State& state) {
  at::set_num_threads(1);
  torch::jit::Module m = torch::jit::load(env("PEAT_BENCH_TS"));
  m.eval();
  torch::NoGradGuard noGrad;
  const at::Tensor x = at::from_blob(const_cast<float*>(input().data()), {1, 3, 224, 224}, at::kFloat);
  for (auto _ : state) {
    at::Tensor y = m.forward({x}).toTensor();
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["top1"] = double(m.forward({x}).toTensor().argmax(1).item<int64_t>());
}

BENCHMARK(SaveEngine)->Unit(benchmark::kMillisecond)->MinTime(5.0);
BENCHMARK(LibTorch)->Unit(benchmark::kMillisecond)->MinTime(5.0);

}  // namespace

BENCHMARK_MAIN();
