// SPDX-License-Identifier: MIT
#include "core/torch/train/trainer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>
#include <stdexcept>

#include "core/data/datasets.h"

namespace peat::train {

at::Tensor toTorch(const store::Tensor& t) {
  std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
  if (t.dtype == store::DType::F32) {
    at::Tensor out = at::empty(shape, at::kFloat);
    std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
    return out;
  }
  if (t.dtype == store::DType::I64) {
    at::Tensor out = at::empty(shape, at::kLong);
    std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
    return out;
  }
  throw std::invalid_argument(std::string("tensor of type ") + h5::typeName(t.dtype) + " cannot be used here");
}

store::Tensor fromTorch(const at::Tensor& source) {
  const at::Tensor t = source.detach().contiguous().cpu();
  store::Tensor out;
  if (t.scalar_type() == at::kFloat)
    out.dtype = store::DType::F32;
  else if (t.scalar_type() == at::kLong)
    out.dtype = store::DType::I64;
  else
    throw std::invalid_argument("only fp32 and int64 tensors are stored");
  out.shape.assign(t.sizes().begin(), t.sizes().end());
  out.bytes.resize(std::size_t(t.numel()) * t.element_size());
  if (!out.bytes.empty()) std::memcpy(out.bytes.data(), t.data_ptr(), out.bytes.size());
  return out;
}

// ------------------------------------------------------------------------------------------- data

struct Batch {
  at::Tensor input, target;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual Batch train(int64_t iteration, int64_t batch, uint64_t seed) = 0;
  virtual Batch test(int64_t index, int64_t batch) = 0;
  virtual std::string name() const = 0;
};

namespace {

class FashionMnistSource final : public DataSource {
 public:
  FashionMnistSource() {
    static std::mutex mutex;
    static std::shared_ptr<data::ImageSet> trainSet, testSet;  // read once per process
    std::lock_guard<std::mutex> lock(mutex);
    if (!trainSet) trainSet = std::make_shared<data::ImageSet>(data::loadFashionMnist("train"));
    if (!testSet) testSet = std::make_shared<data::ImageSet>(data::loadFashionMnist("t10k"));
    train_ = trainSet;
    test_ = testSet;
    trainPixels_ = at::from_blob(train_->pixels.data(), {train_->count, 1, 28, 28}, at::kByte);
    trainLabels_ = at::from_blob(train_->labels.data(), {train_->count}, at::kByte);
    testPixels_ = at::from_blob(test_->pixels.data(), {test_->count, 1, 28, 28}, at::kByte);
    testLabels_ = at::from_blob(test_->labels.data(), {test_->count}, at::kByte);
  }
  std::string name() const override { return "fashion-mnist"; }

  Batch train(int64_t iteration, int64_t batch, uint64_t seed) override {
    // Epoch e visits a permutation seeded by (seed, e); iteration i takes the next `batch` positions.
    std::vector<int64_t> idx;
    idx.reserve(std::size_t(batch));
    const int64_t n = train_->count;
    for (int64_t k = 0; k < batch; ++k) {
      const int64_t position = iteration * batch + k;
      const int64_t epoch = position / n;
      if (epoch != epoch_) {
        order_ = data::seededPermutation(n, seed * 1000003 + uint64_t(epoch));
        epoch_ = epoch;
      }
      idx.push_back(order_[std::size_t(position % n)]);
    }
    const at::Tensor index = at::tensor(idx, at::kLong);
    return {normalise(trainPixels_.index_select(0, index)), trainLabels_.index_select(0, index).to(at::kLong)};
  }

  Batch test(int64_t index, int64_t batch) override {
    const int64_t lo = (index * batch) % test_->count;
    const int64_t hi = std::min(lo + batch, test_->count);
    return {normalise(testPixels_.slice(0, lo, hi)), testLabels_.slice(0, lo, hi).to(at::kLong)};
  }

 private:
  static at::Tensor normalise(const at::Tensor& pixels) {
    return (pixels.to(at::kFloat) / 255.0 - 0.2860) / 0.3530;  // Fashion-MNIST's mean and deviation
  }
  std::shared_ptr<data::ImageSet> train_, test_;
  at::Tensor trainPixels_, trainLabels_, testPixels_, testLabels_;
  std::vector<int64_t> order_;
  int64_t epoch_ = -1;
};

class FortunesSource final : public DataSource {
 public:
  explicit FortunesSource(int64_t context) : context_(context) {
    static std::mutex mutex;
    static std::shared_ptr<data::TextCorpus> corpus;
    std::lock_guard<std::mutex> lock(mutex);
    if (!corpus) corpus = std::make_shared<data::TextCorpus>(data::loadFortunes());
    corpus_ = corpus;
    tokens_ = at::from_blob(corpus_->tokens.data(), {int64_t(corpus_->tokens.size())}, at::kByte).to(at::kLong);
    split_ = tokens_.size(0) * 9 / 10;  // the last tenth is the test split
  }
  std::string name() const override { return "fortunes"; }
  int64_t vocabulary() const { return int64_t(corpus_->vocabulary.size()); }

  Batch train(int64_t iteration, int64_t batch, uint64_t seed) override {
    std::mt19937_64 rng(seed * 1000003 + uint64_t(iteration));
    std::vector<int64_t> offsets;
    for (int64_t k = 0; k < batch; ++k) offsets.push_back(int64_t(rng() % uint64_t(split_ - context_ - 1)));
    return windows(offsets);
  }

  Batch test(int64_t index, int64_t batch) override {
    std::vector<int64_t> offsets;
    const int64_t span = tokens_.size(0) - split_ - context_ - 1;
    for (int64_t k = 0; k < batch; ++k) offsets.push_back(split_ + ((index * batch + k) * 7919) % span);
    return windows(offsets);
  }

 private:
  Batch windows(const std::vector<int64_t>& offsets) {
    std::vector<at::Tensor> xs, ys;
    for (int64_t o : offsets) {
      xs.push_back(tokens_.slice(0, o, o + context_));
      ys.push_back(tokens_.slice(0, o + 1, o + context_ + 1));
    }
    return {at::stack(xs), at::stack(ys)};
  }
  std::shared_ptr<data::TextCorpus> corpus_;
  at::Tensor tokens_;
  int64_t split_ = 0, context_;
};

double accuracyOf(const at::Tensor& logits, const at::Tensor& target) {
  return logits.argmax(-1).eq(target).to(at::kDouble).mean().item<double>();
}

at::Tensor lossOf(const at::Tensor& logits, const at::Tensor& target) {
  return at::nll_loss(at::log_softmax(logits.reshape({-1, logits.size(-1)}), -1), target.reshape({-1}));
}

// "FILE[:RUN[:ITERATION]]" -> the checkpoint; the newest one of the last run that has any by default.
std::map<std::string, store::Tensor> readInitCheckpoint(const std::string& spec, std::string& described) {
  std::string file = spec, run;
  int64_t iteration = -1;
  const auto c1 = spec.find(':');
  if (c1 != std::string::npos) {
    file = spec.substr(0, c1);
    const std::string rest = spec.substr(c1 + 1);
    const auto c2 = rest.find(':');
    run = rest.substr(0, c2);
    if (c2 != std::string::npos) iteration = std::stoll(rest.substr(c2 + 1));
  }
  store::SessionReader reader(file);
  const store::SessionSummary s = reader.summary();
  if (run.empty())
    for (const store::RunInfo& r : s.runs)
      if (!r.checkpoints.empty()) run = r.name;
  if (run.empty()) throw std::invalid_argument("'" + file + "' holds no checkpoint to start from");
  for (const store::RunInfo& r : s.runs)
    if (r.name == run && iteration < 0 && !r.checkpoints.empty()) iteration = r.checkpoints.back();
  described = file + ":" + run + ":" + std::to_string(iteration);
  return reader.checkpoint(run, iteration).parameters;
}

}  // namespace

// ---------------------------------------------------------------------------------------- trainer

Trainer::Trainer(const TrainOptions& options, ops::Dispatcher& ops) : options_(options), ops_(ops) {
  if (options_.batch <= 0) throw std::invalid_argument("the batch size must be positive");
  if (options_.threads <= 0) throw std::invalid_argument("the thread count must be positive");
  at::set_num_threads(options_.threads);
  const models::Task task = models::taskOf(options_.model);
  models::ModelOptions mo;
  mo.context = options_.context;
  if (task == models::Task::Images) {
    data_ = std::make_unique<FashionMnistSource>();
  } else {
    auto text = std::make_unique<FortunesSource>(options_.context);
    mo.vocabulary = text->vocabulary();
    data_ = std::move(text);
  }
  torch::manual_seed(options_.seed);
  model_ = models::makeModel(options_.model, mo);
  if (options_.learningRate <= 0) options_.learningRate = task == models::Task::Text ? 3e-3 : 0.05;
  for (const auto& [name, p] : model_->parameters()) {
    if (task == models::Task::Text) {
      optimizerState_.emplace_back(name + ".adam_m", at::zeros_like(p).detach());
      optimizerState_.emplace_back(name + ".adam_v", at::zeros_like(p).detach());
    } else {
      optimizerState_.emplace_back(name + ".momentum", at::zeros_like(p).detach());
    }
  }
  if (!options_.init.empty()) {
    std::string described;
    loadState(readInitCheckpoint(options_.init, described), nullptr);
    initDescription_ = described;
  }
}

Trainer::~Trainer() = default;

std::string Trainer::datasetName() const { return data_->name(); }

StepStats Trainer::step(int64_t iteration) {
  ops_.beginIteration(iteration);
  ops_.setTraining(true);
  const Batch b = data_->train(iteration, options_.batch, options_.seed);
  for (const auto& p : model_->parameters()) {
    at::Tensor grad = p.second.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
  const at::Tensor logits = model_->forward(ops_, b.input);
  const at::Tensor loss = lossOf(logits, b.target);
  loss.backward();
  StepStats stats{loss.item<double>(), accuracyOf(logits.detach(), b.target)};

  at::NoGradGuard noGrad;
  const double lr = options_.learningRate;
  if (model_->task() == models::Task::Text) {  // Adam, beta1 0.9, beta2 0.999
    ++adamStep_;
    const double c1 = 1.0 - std::pow(0.9, double(adamStep_)), c2 = 1.0 - std::pow(0.999, double(adamStep_));
    std::size_t i = 0;
    for (const auto& [name, p] : model_->parameters()) {
      const at::Tensor g = p.grad();
      at::Tensor& m = optimizerState_[i++].second;
      at::Tensor& v = optimizerState_[i++].second;
      if (!g.defined()) continue;
      m.mul_(0.9).add_(g, 0.1);
      v.mul_(0.999).addcmul_(g, g, 0.001);
      p.addcdiv_(m / c1, (v / c2).sqrt_().add_(1e-8), -lr);
    }
  } else {  // SGD with momentum 0.9
    std::size_t i = 0;
    for (const auto& [name, p] : model_->parameters()) {
      const at::Tensor g = p.grad();
      at::Tensor& buf = optimizerState_[i++].second;
      if (!g.defined()) continue;
      buf.mul_(0.9).add_(g);
      p.add_(buf, -lr);
    }
  }
  return stats;
}

EvalStats Trainer::evaluate() {
  at::NoGradGuard noGrad;
  ops_.setTraining(false);
  EvalStats e;
  double lossSum = 0, correct = 0;
  for (int64_t i = 0; i < options_.evalBatches; ++i) {
    const Batch b = data_->test(i, options_.batch);
    const at::Tensor logits = model_->forward(ops_, b.input);
    const int64_t n = b.target.numel();
    lossSum += lossOf(logits, b.target).item<double>() * double(n);
    correct += accuracyOf(logits, b.target) * double(n);
    e.samples += n;
  }
  ops_.setTraining(true);
  if (e.samples > 0) {
    e.loss = lossSum / double(e.samples);
    e.accuracy = correct / double(e.samples);
  }
  return e;
}

NamedTensors Trainer::parameterState() const {
  NamedTensors out;
  for (const auto& p : model_->parameters()) out.emplace_back(p.first, p.second.detach());
  for (const auto& b : model_->buffers()) out.emplace_back(b.first, b.second);
  return out;
}

NamedTensors Trainer::optimizerState() const {
  NamedTensors out = optimizerState_;
  if (adamStep_ > 0) out.emplace_back("adam_step", at::full({1}, double(adamStep_)).to(at::kFloat));
  return out;
}

void Trainer::loadState(const std::map<std::string, store::Tensor>& parameters,
                        const std::map<std::string, store::Tensor>* optimizer) {
  at::NoGradGuard noGrad;
  auto assign = [&](const std::string& name, at::Tensor& target, const std::map<std::string, store::Tensor>& from) {
    auto it = from.find(name);
    if (it == from.end())
      throw std::invalid_argument("the checkpoint has no tensor '" + name + "' of model " + options_.model +
                                  " (was it written by another model?)");
    const at::Tensor value = toTorch(it->second);
    if (value.sizes() != target.sizes())
      throw std::invalid_argument("checkpoint tensor '" + name + "' has another shape than model " + options_.model +
                                  " expects (was it written by another model?)");
    target.copy_(value);
  };
  for (const auto& [name, p] : model_->parameters()) {
    at::Tensor t = p;
    assign(name, t, parameters);
  }
  for (const auto& [name, b] : model_->buffers()) {
    at::Tensor t = b;
    assign(name, t, parameters);
  }
  if (optimizer) {
    for (auto& [name, s] : optimizerState_) assign(name, s, *optimizer);
    auto step = optimizer->find("adam_step");
    if (step != optimizer->end()) adamStep_ = int64_t(toTorch(step->second).item<float>());
  }
}

}  // namespace peat::train
