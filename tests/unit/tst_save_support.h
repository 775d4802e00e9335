// SPDX-License-Identifier: MIT
#pragma once
// Shared by SAVE's unit tests (tst_save_*.cpp): the shipped weights, LibTorch twins of the zoo
// models, the Fashion-MNIST test set, the 10,000 inputs of the soundness tests, and a bit flip.
#include <ATen/ATen.h>  // before Qt: LibTorch uses `slots` as a name
#include <torch/torch.h>
#include <QtTest>

#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <utility>

#include <hwy/targets.h>

#include "core/data/datasets.h"
#include "core/save/analysis_record.h"
#include "core/save/campaign.h"
#include "core/save/check_bits.h"
#include "core/save/dataset.h"
#include "core/save/flip_in_model.h"
#include "core/save/mixed.h"
#include "core/save/selection.h"
#include "core/torch/models/zoo.h"
#include "core/torch/ops/dispatcher.h"
#include "core/torch/train/trainer.h"

namespace savetest {

using namespace peat;

inline const char* const kLenetWeights = PEAT_SOURCE_DIR "/data/lenet-fashion-mnist.h5";
inline const char* const kVitWeights = PEAT_SOURCE_DIR "/data/vit-fashion-mnist.h5";

// A session holding one SAVE analysis of the shipped LeNet, as "lenet-interval".
// `packUpTo`: layers of at most that many elements are stored as rows of one record.
inline void writeLenetAnalysis(const std::string& path, const save::Selection& s, int64_t packUpTo = save::kPackUpTo) {
  store::SessionWriter w(path, store::Provenance{});
  save::ModelSource source;
  source.model = "lenet";
  source.weights = kLenetWeights;
  save::writeAnalysis(w, "lenet-interval", s, source, nullptr, packUpTo);
  w.flush();
}

// A zoo model in LibTorch and its parameters (and buffers) by name: the shipped LeNet or ViT, or a seeded
// initialisation with batch-norm statistics moved away from identity so the folding is exercised.
struct Twin {
  std::shared_ptr<models::Model> model;
  std::map<std::string, store::Tensor> parameters;
};

inline Twin twin(const std::string& name) {
  Twin t;
  at::manual_seed(7);
  t.model = models::makeModel(name, {});
  at::NoGradGuard noGrad;
  if (name == "lenet" || name == "vit") {
    const auto stored = save::loadCheckpoint(name == "vit" ? kVitWeights : kLenetWeights);
    for (auto& [n, p] : t.model->parameters()) p.copy_(train::toTorch(stored.at(n)));
  }
  for (auto& [n, b] : t.model->buffers()) {
    if (n.find("running_mean") != std::string::npos) b.copy_(at::randn(b.sizes()) * 0.2);
    if (n.find("running_var") != std::string::npos) b.copy_(at::rand(b.sizes()) + 0.5);
  }
  for (auto& [n, p] : t.model->parameters())
    if (n.find("bn") != std::string::npos && n.find("weight") != std::string::npos) p.copy_(at::rand(p.sizes()) + 0.5);
  for (const auto& [n, p] : t.model->parameters()) t.parameters[n] = train::fromTorch(p);
  for (const auto& [n, b] : t.model->buffers()) t.parameters[n] = train::fromTorch(b);
  return t;
}

inline const data::ImageSet& testSet() {
  static const data::ImageSet set = data::loadFashionMnist("t10k");
  return set;
}

// 10,000 inputs in the pixel box [0, 1]: all black, all white, 3,000 random black-and-white
// patterns (corners of the box), 4,998 uniform random images and 2,000 test images.
// The test set's labels as the campaign takes them (classes as int32).
inline const std::vector<int32_t>& labels32() {
  static const std::vector<int32_t> l(testSet().labels.begin(), testSet().labels.end());
  return l;
}

inline std::vector<float> boxInputs(const save::Graph& g, uint64_t seed) {
  std::vector<uint8_t> unused;
  const int64_t n = 784;
  std::vector<float> pixels;
  pixels.reserve(10000 * n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < n; ++i) pixels.push_back(0);
  for (int64_t i = 0; i < n; ++i) pixels.push_back(1);
  for (int k = 0; k < 3000; ++k)
    for (int64_t i = 0; i < n; ++i) pixels.push_back(float(rng() & 1));
  for (int k = 0; k < 4998; ++k)
    for (int64_t i = 0; i < n; ++i) pixels.push_back(u(rng));
  for (std::size_t i = 0; i < std::size_t(2000 * n); ++i) pixels.push_back(float(testSet().pixels[i]) / 255.0f);
  std::vector<float> x(pixels.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (pixels[i] - g.inputMean) / g.inputDeviation;
  return x;
}

inline float flipped(float v, int bit) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b ^= uint32_t(1) << bit;
  std::memcpy(&v, &b, 4);
  return v;
}

// The data of a test run once per model: a "model" column, and a row per (row name, model).
inline void modelRows(std::initializer_list<std::pair<const char*, const char*>> rows) {
  QTest::addColumn<QString>("model");
  for (const auto& [name, model] : rows) QTest::newRow(name) << QString::fromLatin1(model);
}

}  // namespace savetest
