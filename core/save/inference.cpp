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

// top-1 of each sample's output (of the first, for a model with several)
void predict(const Graph& g, InferenceResult& r) {
  const int64_t total = g.nodes[std::size_t(g.output)].size();
  r.predictions.resize(std::size_t(r.samples));
  for (int64_t s = 0; s < r.samples; ++s) r.predictions[std::size_t(s)] = topClassOf(g, r.outputs.data() + s * total);
}

}  // namespace

namespace {

// Samples of `sampleShape` in a tensor of `inputShape` (one sample, with or without leading 1s, or
// [N, sample...]); SaveError naming `what` otherwise.
int64_t samplesOf(const std::vector<int64_t>& sampleShape, const std::vector<uint64_t>& inputShape, const std::string& what) {
  std::vector<uint64_t> sample;
  for (int64_t d : sampleShape) sample.push_back(uint64_t(d));
  const std::vector<uint64_t> given = withoutLeadingOnes(inputShape);
  if (given == withoutLeadingOnes(sample)) return 1;
  if (inputShape.size() == sample.size() + 1 && inputShape[0] > 0 &&
      std::equal(sample.begin(), sample.end(), inputShape.begin() + 1))
    return int64_t(inputShape[0]);
  throw SaveError(what + " has shape " + shapeText(inputShape) + ", but the model takes samples of " +
                  shapeText(sample) + ": give one sample or [N," + shapeText(sample).substr(1));
}

}  // namespace

int64_t samplesIn(const Graph& g, const std::vector<uint64_t>& inputShape) {
  return samplesOf(g.nodes[0].shape, inputShape, "the input");
}

io::FloatTensor joinInputs(const Graph& g, const std::vector<const io::FloatTensor*>& parts) {
  if (parts.size() != g.inputs.size())
    throw SaveError("the model takes " + std::to_string(g.inputs.size()) + " inputs; " + std::to_string(parts.size()) +
                    " given");
  int64_t samples = -1;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const int64_t n = samplesOf(g.inputs[k].shape, parts[k]->shape(), "input '" + g.inputs[k].name + "' (" + parts[k]->origin + ")");
    if (samples >= 0 && n != samples)
      throw SaveError("input '" + g.inputs[k].name + "' holds " + std::to_string(n) + " sample(s), input '" +
                      g.inputs[0].name + "' " + std::to_string(samples) + ": give every input the same samples");
    samples = n;
  }
  const int64_t total = g.nodes[0].size();
  std::vector<float> joined(std::size_t(samples * total));
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const OutputPart& p = g.inputs[k];
    for (int64_t s = 0; s < samples; ++s)
      std::copy(parts[k]->data() + s * p.size(), parts[k]->data() + (s + 1) * p.size(),
                joined.begin() + std::ptrdiff_t(s * total + p.offset));
  }
  io::FloatTensor t = io::FloatTensor::owned(std::move(joined), {uint64_t(samples), uint64_t(total)});
  t.origin = "the inputs";
  return t;
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
      if (const OutputPart* p = inputPartOf(g, i); p && (p->tokens > 0 || p->integer) && x != std::floor(x)) {
        std::ostringstream m;
        m << "sample " << s << ", element " << i << inputElementText(g, i) << ": " << x << " is not an integer ("
          << (p->tokens > 0 ? "a token id" : "the input is integer") << ")";
        return m.str();
      }
      const double raw = x * double(g.deviationOf(i)) + double(g.meanOf(i));
      double lo = pixelLo, hi = pixelHi;
      elementRange(g, i, lo, hi);  // an input's own range, where one was named
      // the box is checked on raw values; a normalised value that maps back within rounding is in it
      const OutputPart* part = inputPartOf(g, i);  // integers (ids, masks) compared exactly
      const double slack = part && (part->tokens > 0 || part->integer) ? 0.0 : 1e-6 * std::max({1.0, std::fabs(lo), std::fabs(hi)});
      if (!(raw >= lo - slack && raw <= hi + slack)) {
        std::ostringstream m;
        m << "sample " << s << ", element " << i << inputElementText(g, i) << ": " << x << " (raw " << raw
          << ") lies outside the analysed input box [" << lo << ", " << hi << "]";
        return m.str();
      }
    }
  return {};
}

OutputComparison compareOutputs(const InferenceResult& r, const io::FloatTensor& reference, const OutputPart* part) {
  const int64_t total = r.samples ? int64_t(r.outputs.size()) / r.samples : 0;
  const int64_t offset = part ? part->offset : 0, size = part ? part->size() : total;
  if (int64_t(reference.size()) != r.samples * size) {
    std::vector<uint64_t> ours{uint64_t(r.samples)};
    for (int64_t d : part ? part->shape : r.outputShape) ours.push_back(uint64_t(d));
    throw SaveError("the reference " + reference.origin + " has shape " + shapeText(reference.shape()) + " (" +
                    std::to_string(reference.size()) + " values), the output" + (part ? " '" + part->name + "'" : "s") +
                    " " + shapeText(ours) + " (" + std::to_string(r.samples * size) + ")");
  }
  OutputComparison c;
  c.samples = r.samples;
  if (r.samples > 0 && size > 0) {  // where no element differs, the worst is the first
    c.worstValue = r.outputs[std::size_t(offset)];
    c.worstReference = reference.data()[0];
  }
  for (int64_t s = 0; s < r.samples; ++s) {
    const float* ref = reference.data() + s * size;
    const float* ours = r.outputs.data() + s * total + offset;
    const int top = topClass(ours, size);
    if (top >= 0 && topClass(ref, size) == top) ++c.top1Agree;
    for (int64_t i = 0; i < size; ++i) {
      const double a = ours[i], b = ref[i];
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

std::vector<float> outputValues(const InferenceResult& r, const OutputPart& part) {
  const int64_t total = r.samples ? int64_t(r.outputs.size()) / r.samples : 0;
  std::vector<float> v;
  v.reserve(std::size_t(r.samples * part.size()));
  for (int64_t s = 0; s < r.samples; ++s) {
    const float* from = r.outputs.data() + s * total + part.offset;
    v.insert(v.end(), from, from + part.size());
  }
  return v;
}

}  // namespace peat::save
