// SPDX-License-Identifier: MIT
#include "core/catalog/catalog.h"
#include "core/torch/train/trainer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>


#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "base/sys.h"
#include "core/data/datasets.h"
#include "core/io/tensor_source.h"
#include "core/torch/models/script_model.h"
#include "core/util/sha256.h"
#include "core/util/text.h"

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
  virtual int64_t testCount() const = 0;  // the test samples (text: the distinct test windows)
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

  int64_t testCount() const override { return test_->count; }
  Batch test(int64_t index, int64_t batch) override {
    const int64_t lo = (index * batch) % test_->count;
    const int64_t hi = std::min(lo + batch, test_->count);
    return {normalise(testPixels_.slice(0, lo, hi)), testLabels_.slice(0, lo, hi).to(at::kLong)};
  }

 private:
  static at::Tensor normalise(const at::Tensor& pixels) {
    return (pixels.to(at::kFloat) / 255.0 - double(catalog::kFashionMnistMean)) / double(catalog::kFashionMnistStd);
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

  int64_t testCount() const override { return tokens_.size(0) - split_ - context_ - 1; }
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

// ------------------------------------------------------------------------ a model file's data

std::string shapeText(at::IntArrayRef shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string numberText(double v) {
  std::ostringstream out;
  out << v;  // 12, 0.5, nan
  return out.str();
}



struct Split {
  at::Tensor x, y;
  bool xInteger = false, yInteger = false;
  bool xIds = false;  // x holds integers wider than a byte: token ids or indices, fed as int64
};

// Integer inputs wider than a byte (int16 to int64) are ids (tokens, categories, indices) and go
// to the model as int64; bytes are pixels and go as float, as images are stored.
bool holdsIds(const std::string& dtype) {
  return dtype.find("int") != std::string::npos && dtype != "uint8" && dtype != "int8";
}

Split readSplit(const std::string& spec, const std::string& split) {
  auto read = [&](const std::string& part, bool& integer, bool& ids) {
    const std::string source = io::splitSource(spec, split, part);
    io::FloatTensor t = io::readSource(source);
    integer = t.dtype.find("int") != std::string::npos;
    ids = holdsIds(t.dtype);
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    if (shape.empty() || t.size() == 0) throw std::invalid_argument("data '" + source + "' is empty");
    return at::from_blob(const_cast<float*>(t.data()), shape, at::kFloat).clone();
  };
  Split s;
  bool yIds = false;
  s.x = read("x", s.xInteger, s.xIds);
  s.y = read("y", s.yInteger, yIds);
  if (s.x.size(0) != s.y.size(0))
    throw std::invalid_argument("data '" + spec + "': " + split + "/x has " + std::to_string(s.x.size(0)) +
                                " samples but " + split + "/y has " + std::to_string(s.y.size(0)));
  if (!s.xInteger) {
    const at::Tensor bad = at::isnan(s.x).logical_or(at::isinf(s.x)).reshape({-1}).nonzero();
    if (bad.numel() > 0) {
      const int64_t flat = bad[0].item<int64_t>(), per = s.x.numel() / s.x.size(0);
      throw std::invalid_argument("data '" + spec + "': " + split + "/x holds a NaN or infinity at sample " +
                                  std::to_string(flat / per) + " (element " + std::to_string(flat) + ")");
    }
  }
  return s;
}

// A model file's data set: tensors from the user's file, or Fashion-MNIST resized to CxHxW.
class UserDataSource final : public DataSource {
 public:
  UserDataSource(const TrainOptions& o, models::Task& task) {
    const std::string builtin = "fashion-mnist";
    if (o.data.empty())
      throw std::invalid_argument("a model file needs --data (an HDF5 file, a folder of .npy files, or " + builtin +
                                  "[:CxHxW])");
    if (o.data == builtin || o.data.rfind(builtin + ":", 0) == 0) {
      loadFashionMnist(o.data.substr(builtin.size()));
    } else {
      const Split train = readSplit(o.data, "train"), test = readSplit(o.data, "test");
      trainX_ = train.x;
      trainY_ = train.y;
      testX_ = test.x;
      testY_ = test.y;
      xInteger_ = train.xInteger;
      yInteger_ = train.yInteger;
      xIds_ = train.xIds;
      name_ = o.data;
      if (train.x.sizes().slice(1) != test.x.sizes().slice(1))
        throw std::invalid_argument("data '" + o.data + "': train/x samples are " + shapeText(train.x.sizes().slice(1)) +
                                    " but test/x samples are " + shapeText(test.x.sizes().slice(1)));
    }
    task = inferTask(o.task);
    task_ = task;
    if (task != models::Task::Regression) {  // labels and token ids must be whole numbers
      for (const at::Tensor* y : {&trainY_, &testY_}) {
        const at::Tensor flat = y->reshape({-1});
        const at::Tensor bad = flat.ne(flat.floor()).nonzero();
        if (bad.numel() > 0) {
          const int64_t i = bad[0].item<int64_t>();
          throw std::invalid_argument("data '" + o.data + "': " + (y == &trainY_ ? "train" : "test") + "/y[" +
                                      std::to_string(i) + "] = " + numberText(flat[i].item<double>()) +
                                      " is not a whole number, as " + taskName(task) + " labels must be");
        }
      }
    }
    if (!o.inputMean.empty() || !o.inputStd.empty()) {
      if (sampleShape().empty()) throw std::invalid_argument("--input-mean and --input-std need samples with a channel dimension");
      if (task == models::Task::Text || xIds_)
        throw std::invalid_argument("--input-mean and --input-std are for float inputs, not token ids");
      std::vector<double> mean = util::parseNumberList(o.inputMean.empty() ? "0" : o.inputMean, "--input-mean");
      std::vector<double> stdv = util::parseNumberList(o.inputStd.empty() ? "1" : o.inputStd, "--input-std");
      const int64_t channels = sampleShape().size() > 0 ? sampleShape()[0] : 1;
      for (auto* v : {&mean, &stdv}) {
        if (v->size() == 1) v->assign(std::size_t(channels), (*v)[0]);
        if (int64_t(v->size()) != channels)
          throw std::invalid_argument("--input-mean and --input-std need 1 or " + std::to_string(channels) +
                                      " values (one per channel of samples " + shapeText(sampleShape()) + ")");
      }
      for (double d : stdv)
        if (d <= 0) throw std::invalid_argument("--input-std values must be positive");
      std::vector<int64_t> shape(std::size_t(sampleShape().size()) + 1, 1);
      shape[1] = channels;
      mean_ = at::tensor(std::vector<float>(mean.begin(), mean.end())).reshape(shape);
      std_ = at::tensor(std::vector<float>(stdv.begin(), stdv.end())).reshape(shape);
    }
  }

  std::string name() const override { return name_; }
  std::vector<int64_t> sampleShape() const {
    if (resize_.size() == 3) return resize_;
    return std::vector<int64_t>(trainX_.sizes().begin() + 1, trainX_.sizes().end());
  }
  int64_t trainCount() const { return trainX_.size(0); }
  const at::Tensor& trainTargets() const { return trainY_; }
  const at::Tensor& testTargets() const { return testY_; }

  Batch train(int64_t iteration, int64_t batch, uint64_t seed) override {
    const at::Tensor index = at::tensor(order_.take(iteration, batch, trainX_.size(0), seed), at::kLong);
    return prepare(trainX_.index_select(0, index), trainY_.index_select(0, index));
  }
  int64_t testCount() const override { return testX_.size(0); }
  Batch test(int64_t index, int64_t batch) override {
    const int64_t n = testX_.size(0);
    const int64_t lo = (index * batch) % n, hi = std::min(lo + batch, n);
    return prepare(testX_.slice(0, lo, hi), testY_.slice(0, lo, hi));
  }

 private:
  void loadFashionMnist(const std::string& geometry) {
    resize_ = {1, 28, 28};
    if (!geometry.empty()) {
      std::vector<int64_t> dims;
      std::stringstream ss(geometry.substr(1));
      for (std::string item; std::getline(ss, item, 'x');) dims.push_back(std::atoll(item.c_str()));
      if (geometry[0] != ':' || dims.size() != 3 || dims[0] <= 0 || dims[1] <= 0 || dims[2] <= 0 || dims[0] > 64 ||
          dims[1] > 1024 || dims[2] > 1024)
        throw std::invalid_argument("--data fashion-mnist" + geometry + ": write fashion-mnist:CxHxW, e.g. fashion-mnist:3x64x64");
      resize_ = dims;
    }
    const data::ImageSet train = data::loadFashionMnist("train"), test = data::loadFashionMnist("t10k");
    auto pixels = [](const data::ImageSet& s) {
      return at::from_blob(const_cast<uint8_t*>(s.pixels.data()), {s.count, 1, s.rows, s.cols}, at::kByte).clone();
    };
    auto labels = [](const data::ImageSet& s) {
      return at::from_blob(const_cast<uint8_t*>(s.labels.data()), {s.count}, at::kByte).to(at::kFloat);
    };
    trainX_ = pixels(train);
    testX_ = pixels(test);
    trainY_ = labels(train);
    testY_ = labels(test);
    yInteger_ = true;
    name_ = "fashion-mnist " + std::to_string(resize_[0]) + "x" + std::to_string(resize_[1]) + "x" + std::to_string(resize_[2]);
  }

  models::Task inferTask(const std::string& task) const {
    if (task == "classification") return models::Task::Images;
    if (task == "regression") return models::Task::Regression;
    if (task == "lm") {
      if (!xInteger_ || !yInteger_ || trainX_.sizes() != trainY_.sizes())
        throw std::invalid_argument("--task lm needs integer token ids with x and y of the same shape [N, T]");
      return models::Task::Text;
    }
    if (!task.empty()) throw std::invalid_argument("unknown task '" + task + "'; valid tasks: classification, regression, lm");
    if (xInteger_ && yInteger_ && trainX_.sizes() == trainY_.sizes() && trainX_.dim() == 2) return models::Task::Text;
    if (yInteger_ && trainY_.dim() == 1) return models::Task::Images;
    return models::Task::Regression;
  }

  // Casts follow the task: token ids and labels as int64, regression targets as float.
  Batch prepare(const at::Tensor& x, const at::Tensor& y) const {
    if (task_ == models::Task::Text) return {x.to(at::kLong), y.to(at::kLong)};  // token ids
    const at::Tensor target = task_ == models::Task::Regression ? y.to(at::kFloat) : y.to(at::kLong);
    if (xIds_) return {x.to(at::kLong), target};  // a token classifier's or an embedding's ids
    at::Tensor input = x.to(at::kFloat);
    if (!resize_.empty()) {  // Fashion-MNIST: [0, 1], resized, channel repeated, its own mean and deviation
      input = input / 255.0;
      if (resize_[1] != 28 || resize_[2] != 28)
        input = at::upsample_bilinear2d(input, {resize_[1], resize_[2]}, /*align_corners=*/false);
      if (resize_[0] != 1) input = input.expand({-1, resize_[0], -1, -1}).contiguous();
      if (!mean_.defined()) input = (input - 0.2860) / 0.3530;
    }
    if (mean_.defined()) input = (input - mean_) / std_;
    return {input, task_ == models::Task::Regression ? y.to(at::kFloat) : y.to(at::kLong)};
  }

  struct EpochOrder {
    std::vector<int64_t> take(int64_t iteration, int64_t batch, int64_t n, uint64_t seed) {
      std::vector<int64_t> idx;
      for (int64_t k = 0; k < batch; ++k) {
        const int64_t position = iteration * batch + k, epoch = position / n;
        if (epoch != epoch_) {
          order_ = data::seededPermutation(n, seed * 1000003 + uint64_t(epoch));
          epoch_ = epoch;
        }
        idx.push_back(order_[std::size_t(position % n)]);
      }
      return idx;
    }
    std::vector<int64_t> order_;
    int64_t epoch_ = -1;
  } order_;

  at::Tensor trainX_, trainY_, testX_, testY_, mean_, std_;
  bool xInteger_ = false, yInteger_ = false;
  bool xIds_ = false;  // inputs are ids (tokens, indices): fed as int64, never normalised
  models::Task task_ = models::Task::Images;
  std::vector<int64_t> resize_;
  std::string name_;
};

// The digest of a model or data file, or of a folder's .npy files in order.
std::string digestOf(const std::string& path) {
  if (!io::isDirectory(path)) return util::sha256File(path);
  std::string all;
  for (const char* part : {"train_x", "train_y", "test_x", "test_y"}) all += util::sha256File(path + "/" + part + ".npy");
  util::Sha256 h;
  h.update(all.data(), all.size());
  return h.hex();
}

void checkDigest(const std::string& what, const std::string& path, const std::string& expected, std::string& actual) {
  actual = digestOf(path);
  if (!expected.empty() && expected != actual)
    throw std::invalid_argument(what + " '" + path + "' has changed since the session was recorded (SHA-256 " +
                                actual.substr(0, 12) + "..., recorded " + expected.substr(0, 12) + "...)");
}

double accuracyOf(const at::Tensor& logits, const at::Tensor& target) {
  if (target.scalar_type() == at::kFloat) return 0;  // regression: the loss is the measure
  return logits.argmax(-1).eq(target).to(at::kDouble).mean().item<double>();
}

at::Tensor lossOf(const at::Tensor& logits, const at::Tensor& target) {
  if (target.scalar_type() == at::kFloat) return at::mse_loss(logits, target);  // regression
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
  const store::SessionSummary s = reader.summaryWithoutCalls();  // checkpoints are in the runs' headers
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
  if (options_.attention != "parts" && options_.attention != "fused")
    throw std::invalid_argument("--attention '" + options_.attention + "' is not parts or fused");
  at::set_num_threads(options_.threads);
  modelFile_ = models::isModelFile(options_.model);
  models::Task task = models::Task::Images;
  if (modelFile_ && !sys::fileExists(options_.model))
    throw std::invalid_argument("unknown model '" + options_.model + "': not one of the zoo's (" + models::modelList() +
                                ") and no such TorchScript file");
  if (modelFile_) {
    auto data = std::make_unique<UserDataSource>(options_, task);
    options_.task = taskName(task);
    std::string digest;
    checkDigest("model file", options_.model, options_.modelSha256, digest);
    options_.modelSha256 = digest;
    if (data->name().rfind("fashion-mnist", 0) != 0) {
      checkDigest("data", options_.data, options_.dataSha256, digest);
      options_.dataSha256 = digest;
    }
    auto model = models::loadScriptedModel(options_.model, task, models::Probe::First, options_.attention == "fused");
    std::vector<int64_t> probeShape{std::min<int64_t>(2, data->trainCount())};
    for (int64_t d : data->sampleShape()) probeShape.push_back(d);
    models::probeModelForward(options_.model, probeShape, task);  // its code, where it cannot hurt
    routing_ = model->routingSummary();
    model_ = model;
    checkModelAgainstData(*data);
    data_ = std::move(data);
  } else {
    if (!options_.data.empty() || !options_.task.empty() || !options_.inputMean.empty() || !options_.inputStd.empty())
      throw std::invalid_argument("--data, --task, --input-mean and --input-std are for model files; zoo model '" +
                                  options_.model + "' has its own data");
    task = models::taskOf(options_.model);
    models::ModelOptions mo;
    mo.context = options_.context;
    mo.fusedAttention = options_.attention == "fused";
    if (task == models::Task::Images) {
      data_ = std::make_unique<FashionMnistSource>();
    } else {
      auto text = std::make_unique<FortunesSource>(options_.context);
      mo.vocabulary = text->vocabulary();
      data_ = std::move(text);
    }
    torch::manual_seed(options_.seed);
    model_ = models::makeModel(options_.model, mo);
  }
  // an evaluation reads the test set at most once round (the default 8 batches may go round a small
  // one): a session from elsewhere recording eval_batches=999999 ran for hours
  const int64_t testBatches = (data_->testCount() + options_.batch - 1) / options_.batch;
  const int64_t most = std::max<int64_t>(testBatches, TrainOptions().evalBatches);
  if (options_.evalBatches < 0 || options_.evalBatches > most)
    throw std::invalid_argument("eval_batches " + std::to_string(options_.evalBatches) + " is not from 0 to " +
                                std::to_string(most) + ": the data holds " + std::to_string(data_->testCount()) +
                                " test samples, " + std::to_string(testBatches) + " batches of " +
                                std::to_string(options_.batch));
  if (options_.learningRate <= 0)
    options_.learningRate = task == models::Task::Text ? 3e-3 : modelFile_ ? 0.01 : 0.05;
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
  model_->setTrainingMode(true);
  // Dropout in a model file draws from the global generator: seeded per iteration, so that a resumed
  // run and a same-seed run draw what the recorded one drew.
  if (modelFile_) torch::manual_seed(options_.seed * 1000003 + uint64_t(iteration));
  const Batch b = data_->train(iteration, options_.batch, options_.seed);
  for (const auto& p : model_->parameters()) {
    at::Tensor grad = p.second.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
  const at::Tensor logits = model_->forward(ops_, b.input);
  // Classification and language models: the loss is a slot call ("loss", cross_entropy); regression's
  // MSE stays on ATen (docs/models.md).
  const at::Tensor loss = b.target.scalar_type() == at::kFloat
                              ? lossOf(logits, b.target)
                              : ops_.crossEntropy("loss", logits.reshape({-1, logits.size(-1)}), b.target.reshape({-1}));
  loss.backward();
  StepStats stats{loss.item<double>(), accuracyOf(logits.detach(), b.target)};

  // The update of each parameter is a slot call (its name, op sgd or adam, variant update) over the
  // parameter, its gradient and its moments; the output stacks their new values.
  at::NoGradGuard noGrad;
  const double lr = options_.learningRate;
  const bool adam = model_->task() == models::Task::Text;
  if (adam) ++adamStep_;
  std::size_t i = 0;
  for (const auto& [name, p] : model_->parameters()) {
    const at::Tensor g = p.grad();
    at::Tensor& first = optimizerState_[i++].second;
    at::Tensor* second = adam ? &optimizerState_[i++].second : nullptr;
    if (!g.defined()) continue;
    ops::OpCall call{adam ? ops::OpKind::Adam : ops::OpKind::Sgd, ops::Variant::Update, {p.detach(), g, first}, {}};
    call.setReal("lr", lr);
    if (adam) {  // beta1 0.9, beta2 0.999, eps 1e-8
      call.inputs.push_back(*second);
      call.setReal("beta1", 0.9);
      call.setReal("beta2", 0.999);
      call.setReal("eps", 1e-8);
      call.params["step"] = adamStep_;
    } else {  // SGD with momentum 0.9
      call.setReal("momentum", 0.9);
    }
    const at::Tensor updated = ops_.update(name, call);
    p.copy_(updated[0]);
    first.copy_(updated[1]);
    if (adam) second->copy_(updated[2]);
  }
  return stats;
}

EvalStats Trainer::evaluate() {
  at::NoGradGuard noGrad;
  ops_.setTraining(false);
  model_->setTrainingMode(false);
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
  model_->setTrainingMode(true);
  if (e.samples > 0) {
    e.loss = lossSum / double(e.samples);
    e.accuracy = correct / double(e.samples);
  }
  return e;
}

std::string taskName(models::Task task) {
  switch (task) {
    case models::Task::Images: return "classification";
    case models::Task::Text: return "lm";
    case models::Task::Regression: return "regression";
  }
  return "?";
}

// One forward of two training samples, outside the slot's numbering, before any training: the
// model must take the data's input and give what the task needs; labels must fit its classes.
void Trainer::checkModelAgainstData(DataSource& source) {
  auto& data = static_cast<UserDataSource&>(source);
  const Batch b = data.train(0, std::min<int64_t>(2, data.trainCount()), options_.seed);
  at::Tensor out;
  {
    at::NoGradGuard noGrad;
    ops::Dispatcher scratch;
    model_->setTrainingMode(false);
    auto refuse = [&](const std::string& what) {
      return std::invalid_argument("model file '" + options_.model + "' does not take the data's input " +
                                   shapeText(b.input.sizes()) + " (" + std::string(c10::toString(b.input.scalar_type())) +
                                   "): " + models::interpreterMessage(what));
    };
    try {
      out = model_->forward(scratch, b.input);
    } catch (const c10::Error& e) {
      throw refuse(e.what_without_backtrace());
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const std::exception& e) {
      throw refuse(e.what());
    }
    model_->setTrainingMode(true);
  }
  const std::string model = "model file '" + options_.model + "'";
  const models::Task task = model_->task();
  if (task == models::Task::Regression) {
    if (out.sizes() != b.target.sizes())
      throw std::invalid_argument(model + " gives " + shapeText(out.sizes()) + " for a batch whose targets are " +
                                  shapeText(b.target.sizes()) + " (regression needs equal shapes)");
    return;
  }
  const bool lm = task == models::Task::Text;
  if (out.dim() != (lm ? 3 : 2) || (lm && out.sizes().slice(0, 2) != b.target.sizes()) ||
      (!lm && out.size(0) != b.target.size(0)))
    throw std::invalid_argument(model + " gives " + shapeText(out.sizes()) + " for input " + shapeText(b.input.sizes()) +
                                "; " + (lm ? "language modelling needs [N, T, vocabulary]" : "classification needs [N, classes]"));
  const int64_t classes = out.size(-1);
  for (const at::Tensor* y : {&data.trainTargets(), &data.testTargets()}) {
    const at::Tensor flat = y->reshape({-1});
    const at::Tensor bad = flat.lt(0).logical_or(flat.ge(classes)).logical_or(flat.ne(flat.floor())).nonzero();
    if (bad.numel() > 0) {
      const int64_t i = bad[0].item<int64_t>();
      throw std::invalid_argument(std::string(y == &data.trainTargets() ? "train" : "test") + "/y[" + std::to_string(i) +
                                  "] = " + numberText(flat[i].item<double>()) + " is not a class of " + model +
                                  " (it gives " + std::to_string(classes) + ")");
    }
  }
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
