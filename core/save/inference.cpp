// SPDX-License-Identifier: MIT
#include "core/save/inference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

namespace peat::save {

namespace {

std::string shapeText(const std::vector<uint64_t>& shape) {
  std::ostringstream s;
  s << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? "," : "") << shape[i];
  s << ']';
  return s.str();
}

std::vector<uint64_t> withoutLeadingOnes(std::vector<uint64_t> shape) {
  while (shape.size() > 1 && shape.front() == 1) shape.erase(shape.begin());
  return shape;
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void predict(const Graph& g, InferenceResult& r) {
  const int64_t size = g.nodes[std::size_t(g.output)].size();
  r.predictions.resize(std::size_t(r.samples));
  for (int64_t s = 0; s < r.samples; ++s) r.predictions[std::size_t(s)] = topClass(r.outputs.data() + s * size, size);
}

}  // namespace

int64_t samplesIn(const Graph& g, const std::vector<uint64_t>& inputShape) {
  std::vector<uint64_t> sample;
  for (int64_t d : g.nodes[0].shape) sample.push_back(uint64_t(d));
  const std::vector<uint64_t> given = withoutLeadingOnes(inputShape);
  if (given == withoutLeadingOnes(sample)) return 1;
  if (inputShape.size() == sample.size() + 1 && inputShape[0] > 0 &&
      std::equal(sample.begin(), sample.end(), inputShape.begin() + 1))
    return int64_t(inputShape[0]);
  throw SaveError("the input has shape " + shapeText(inputShape) + ", but the model takes samples of " +
                  shapeText(sample) + ": give one sample or [N," + shapeText(sample).substr(1));
}

namespace {

// The median of the timings after the first (the warm runs), 0 for one run.
double warmMedian(std::vector<double> times) {
  if (times.size() < 2) return 0;
  times.erase(times.begin());
  std::sort(times.begin(), times.end());
  const std::size_t m = times.size() / 2;
  return times.size() % 2 ? times[m] : (times[m - 1] + times[m]) / 2;
}

}  // namespace

InferenceResult runPlain(const Graph& g, const float* inputs, int64_t samples, int runs) {
  if (runs < 1) throw SaveError("--repeat must be 1 or more");
  InferenceResult r;
  r.samples = samples;
  r.runs = runs;
  r.outputShape = g.nodes[std::size_t(g.output)].shape;
  std::vector<double> times;
  std::vector<std::vector<float>> all;  // kept between runs, as a runtime keeps its arena
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    runAllInto(g, inputs, samples, all);
    times.push_back(seconds(start));
    if (i == 0) r.outputs = all[std::size_t(g.output)];
  }
  r.seconds = times[0];
  r.warmSeconds = warmMedian(times);
  predict(g, r);
  return r;
}

InferenceResult runProtected(const Graph& g, ProtectedRunner& runner, const float* inputs, int64_t samples,
                             const InferenceOptions& o, int runs) {
  if (runs < 1) throw SaveError("--repeat must be 1 or more");
  InferenceResult r;
  r.samples = samples;
  r.runs = runs;
  r.outputShape = g.nodes[std::size_t(g.output)].shape;
  r.unreliableWords = runner.unreliableWords(o.scheme);
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {  // the same faults each time (one seed): the first run's outcome is reported
    RunStats stats;
    const auto start = std::chrono::steady_clock::now();
    std::vector<int> predictions = runner.infer(inputs, o.scheme, o.faults, o.seed, stats);
    times.push_back(seconds(start));
    if (i == 0) {
      r.predictions = std::move(predictions);
      r.stats = stats;
      r.outputs = runner.outputs();
    }
  }
  r.seconds = times[0];
  r.warmSeconds = warmMedian(times);
  return r;
}

std::string outsideInputBox(const Graph& g, const float* inputs, int64_t samples, double pixelLo, double pixelHi) {
  const int64_t size = g.nodes[0].size();
  fitInputRange(g, pixelLo, pixelHi);
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t i = 0; i < size; ++i) {
      const double x = inputs[s * size + i];
      if (g.tokens > 0 && !(x >= 0 && x < double(g.tokens) && x == std::floor(x))) {
        std::ostringstream m;
        m << "sample " << s << ", element " << i << ": " << x << " is not a token id in [0, " << g.tokens - 1
          << "] (the embedding tables' rows)";
        return m.str();
      }
      const double raw = x * double(g.deviationOf(i)) + double(g.meanOf(i));
      // the box is checked on raw values; a normalised value that maps back within rounding is in it
      const double slack = 1e-6 * std::max({1.0, std::fabs(pixelLo), std::fabs(pixelHi)});
      if (!(raw >= pixelLo - slack && raw <= pixelHi + slack)) {
        std::ostringstream m;
        m << "sample " << s << ", element " << i << ": " << x << " (raw " << raw << ") lies outside the analysed input box ["
          << pixelLo << ", " << pixelHi << "]";
        return m.str();
      }
    }
  return {};
}

OutputComparison compareOutputs(const InferenceResult& r, const io::FloatTensor& reference) {
  if (reference.size() != r.outputs.size()) {
    std::vector<uint64_t> ours{uint64_t(r.samples)};
    for (int64_t d : r.outputShape) ours.push_back(uint64_t(d));
    throw SaveError("the reference " + reference.origin + " has shape " + shapeText(reference.shape()) + " (" +
                    std::to_string(reference.size()) + " values), the outputs " + shapeText(ours) + " (" +
                    std::to_string(r.outputs.size()) + ")");
  }
  OutputComparison c;
  c.samples = r.samples;
  const int64_t size = r.samples ? int64_t(r.outputs.size()) / r.samples : 0;
  if (!r.outputs.empty()) {  // where no element differs, the worst is the first
    c.worstValue = r.outputs[0];
    c.worstReference = reference.data()[0];
  }
  for (int64_t s = 0; s < r.samples; ++s) {
    const float* ref = reference.data() + s * size;
    if (topClass(ref, size) == r.predictions[std::size_t(s)] && r.predictions[std::size_t(s)] >= 0) ++c.top1Agree;
    for (int64_t i = 0; i < size; ++i) {
      const double a = r.outputs[std::size_t(s * size + i)], b = ref[i];
      if (std::isfinite(a) != std::isfinite(b)) {
        ++c.nonFinite;
        continue;
      }
      if (!std::isfinite(a)) continue;
      const double d = std::fabs(a - b);
      c.maxRel = std::max(c.maxRel, d / std::max(std::fabs(b), 1e-30));
      if (d > c.maxAbs) {
        c.maxAbs = d;
        c.worstSample = s;
        c.worstElement = i;
        c.worstValue = a;
        c.worstReference = b;
      }
    }
  }
  return c;
}

}  // namespace peat::save
