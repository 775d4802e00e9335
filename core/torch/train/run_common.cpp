// SPDX-License-Identifier: MIT
#include "core/torch/train/run_common.h"

#include <sys/stat.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>

namespace peat::train {

namespace detail {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t fileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

std::string libtorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

void addCallError(Table& t, const store::CallId& id, ops::Variant v, const analyzer::ErrorSummary& e) {
  store::addCallError(t, id, ops::variantName(v), e);
}

void addFailedCall(Table& t, const store::CallId& id, ops::Variant v, const std::string& outcome) {
  store::addFailedCall(t, id, ops::variantName(v), outcome);
}

void KernelFailures::add(const std::string& outcome, const std::string& call, const std::string& message) {
  ++calls;
  ++byOutcome[outcome];
  if (first.empty()) first = call + ": " + message;
}

std::string KernelFailures::summary(int64_t of) const {
  if (calls == 0) return "";
  std::string kinds;
  for (const auto& [outcome, n] : byOutcome) kinds += (kinds.empty() ? "" : ", ") + outcome + " " + std::to_string(n);
  return std::to_string(calls) + " of " + std::to_string(of) + " calls (" + kinds + ")";
}

void KernelFailures::setAttributes(store::SessionWriter& w, int64_t of) const {
  if (calls == 0) return;
  w.setRunAttribute("kernel_failures", summary(of));
  w.setRunAttribute("first_kernel_failure", first);
}

void addInjections(Table& t, const std::vector<kernels::Injection>& log) {
  for (const kernels::Injection& i : log) store::addInjection(t, {i.call, i.target, i.index, i.bit, i.oldValue, i.newValue});
}

void keepWorst(analyzer::ErrorSummary& worst, const analyzer::ErrorSummary& e) {
  worst.elements = std::max(worst.elements, e.elements);
  worst.mismatched = std::max(worst.mismatched, e.mismatched);
  worst.newlyNonFinite = std::max(worst.newlyNonFinite, e.newlyNonFinite);
  worst.maxAbs = std::max(worst.maxAbs, e.maxAbs);
  worst.meanAbs = std::max(worst.meanAbs, e.meanAbs);
  worst.maxRel = std::max(worst.maxRel, e.maxRel);
  worst.meanRel = std::max(worst.meanRel, e.meanRel);
  worst.maxUlp = std::max(worst.maxUlp, e.maxUlp);
}

std::vector<store::NamedTensor> views(const std::vector<std::pair<std::string, store::Tensor>>& tensors) {
  std::vector<store::NamedTensor> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t.view()});
  return out;
}

std::vector<std::pair<std::string, store::Tensor>> owned(const NamedTensors& tensors, uint64_t& bytes) {
  std::vector<std::pair<std::string, store::Tensor>> out;
  for (const auto& [name, t] : tensors) {
    out.emplace_back(name, fromTorch(t));
    bytes += out.back().second.bytes.size();
  }
  return out;
}

void setTrainAttributes(store::SessionWriter& w, const TrainOptions& o, const std::string& dataset,
                        const std::string& init) {
  w.setRunAttribute("model", o.model);
  w.setRunAttribute("dataset", dataset);
  w.setRunAttribute("batch", std::to_string(o.batch));
  w.setRunAttribute("seed", std::to_string(o.seed));
  w.setRunAttribute("learning_rate", std::to_string(o.learningRate));
  w.setRunAttribute("threads", std::to_string(o.threads));
  w.setRunAttribute("context", std::to_string(o.context));
  w.setRunAttribute("attention", o.attention);
  w.setRunAttribute("eval_batches", std::to_string(o.evalBatches));
  w.setRunAttribute("init", init);
  if (!o.data.empty() || !o.modelSha256.empty()) {  // a model file: what resume and playback check
    w.setRunAttribute("data", o.data);
    w.setRunAttribute("task", o.task);
    w.setRunAttribute("input_mean", o.inputMean);
    w.setRunAttribute("input_std", o.inputStd);
    w.setRunAttribute("model_sha256", o.modelSha256);
    w.setRunAttribute("data_sha256", o.dataSha256);
  }
}

void Curve::add(int64_t it, const StepStats& s, const EvalStats* e) {
  store::addCurveRow(table, it, s.loss, s.accuracy, e ? e->loss : std::nan(""), e ? e->accuracy : std::nan(""));
}

bool evaluateNow(const TrainOptions& o, int64_t it) {
  return it + 1 == o.iterations || (o.evalEvery > 0 && (it + 1) % o.evalEvery == 0);
}

}  // namespace detail

store::Provenance makeProvenance(const TrainOptions& train, const std::string& dataset, const std::string& commandLine) {
  store::Provenance p;
  p.seed = int64_t(train.seed);
  p.model = train.model;
  p.dataset = dataset;
  p.backend = "cpu";
  p.device = "host CPU (" + std::to_string(train.threads) + " thread" + (train.threads == 1 ? ")" : "s)");
  p.libtorchVersion = detail::libtorchVersion();
  p.commandLine = commandLine;
  return p;
}

}  // namespace peat::train
