// SPDX-License-Identifier: MIT
#include "core/save/check_bits.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <random>

#include "core/fp/format.h"
#include "core/save/ranges_detail.h"
#include "core/util/parallel.h"

namespace peat::save {

void Confusion::add(bool predictedRobust, bool actuallyRobust) {
  if (predictedRobust)
    ++(actuallyRobust ? robustRobust : robustVulnerable);
  else
    ++(actuallyRobust ? protectedRobust : protectedVulnerable);
}

void Confusion::merge(const Confusion& o) {
  robustRobust += o.robustRobust;
  robustVulnerable += o.robustVulnerable;
  protectedRobust += o.protectedRobust;
  protectedVulnerable += o.protectedVulnerable;
}

namespace {

float flipBit(float v, int bit) { return fp::floatOf(fp::bitsOf(v) ^ (uint32_t(1) << bit)); }

struct Sample {
  std::vector<std::vector<float>> act;      // every node's output
  std::vector<std::vector<double>> radius;  // fp32 rounding bound of every element of this run
  int top = 0;
};

struct Change {
  std::size_t element;
  float value;
};

struct Stats {
  uint64_t settled = 0, reruns = 0;
};

// Decides whether changed values at one node change a sample's prediction.
class Prober {
 public:
  Prober(const Graph& g, const std::vector<Sample>& samples) : g_(g), samples_(samples), delta_(g.nodes.size()) {}

  // Whether the changed values change sample s's prediction and (epsilon >= 0) move a logit by
  // more than epsilon: settled by the bound where it proves neither, rerun exactly otherwise.
  FlipOracle::Outcome changes(int s, int v, const std::vector<Change>& changed, Stats& stats, double epsilon) {
    double moveBound = 0;
    if (changed.empty() || (provedSafe(s, v, changed, moveBound) && !(epsilon >= 0 && moveBound > epsilon))) {
      ++stats.settled;
      return {};
    }
    ++stats.reruns;
    const Sample& sm = samples_[std::size_t(s)];
    const std::vector<float> logits = rerun(s, v, changed);
    FlipOracle::Outcome out;
    out.top1 = topClassOf(g_, logits.data()) != sm.top;
    if (epsilon >= 0) {
      const std::vector<float>& clean = sm.act[std::size_t(g_.output)];
      for (std::size_t m = 0; m < logits.size(); ++m)
        out.moved = out.moved || !(std::fabs(double(logits[m]) - double(clean[m])) <= epsilon);
    }
    return out;
  }

 private:
  // Propagates a sound bound on |new - old| of every element; true when no prediction can change,
  // with `moveBound` then the largest bound on a logit's move.
  bool provedSafe(int s, int v, const std::vector<Change>& changed, double& moveBound) {
    const Sample& sm = samples_[std::size_t(s)];
    for (auto& d : delta_) d.clear();
    std::vector<double>& dv = delta_[std::size_t(v)];
    dv.assign(std::size_t(g_.nodes[std::size_t(v)].size()), 0.0);
    for (const Change& c : changed) {
      if (!std::isfinite(c.value)) return false;
      dv[c.element] = std::fabs(double(c.value) - double(sm.act[std::size_t(v)][c.element]));
    }
    for (std::size_t u = std::size_t(v) + 1; u < g_.nodes.size(); ++u) {
      const Node& n = g_.nodes[u];
      bool touched = false;
      for (int i : n.inputs) touched = touched || !delta_[std::size_t(i)].empty();
      if (!touched) continue;
      if (!propagate(sm, int(u))) return false;
    }
    const std::vector<double>& d = delta_[std::size_t(g_.output)];
    moveBound = 0;
    if (d.empty()) return true;
    const std::vector<float>& l = sm.act[std::size_t(g_.output)];
    const std::size_t t = std::size_t(sm.top);
    for (std::size_t m = 0; m < l.size(); ++m) {
      if (m != t && !(double(l[t]) - d[t] > double(l[m]) + d[m])) return false;
      moveBound = std::max(moveBound, d[m]);
    }
    return true;
  }

  static double reluMove(double x, double d) {
    const double y = std::max(x, 0.0);
    return std::max(std::fabs(std::max(x - d, 0.0) - y), std::fabs(std::max(x + d, 0.0) - y));
  }

  static double clipMove(double x, double d, double a, double c) {
    auto clip = [&](double v) { return std::min(std::max(v, a), c); };
    const double y = clip(x);
    return std::max(std::fabs(clip(x - d) - y), std::fabs(clip(x + d) - y));
  }

  bool propagate(const Sample& sm, int u) {
    const Node& n = g_.nodes[std::size_t(u)];
    const std::size_t size = std::size_t(n.size());
    const int in0 = n.inputs[0];
    const std::vector<double>& dx = delta_[std::size_t(in0)];
    const std::vector<float>& x = sm.act[std::size_t(in0)];
    const std::vector<double>& radius = sm.radius[std::size_t(u)];
    std::vector<double>& out = delta_[std::size_t(u)];
    out.assign(size, 0.0);
    bool any = false;
    switch (n.op) {
      case Op::Input:
        return false;
      case Op::Flatten:
        out = dx;
        any = true;
        break;
      case Op::Relu:
        for (std::size_t i = 0; i < size; ++i)
          if (dx[i] > 0) any |= (out[i] = reluMove(x[i], dx[i])) > 0;
        break;
      case Op::Clip:
        for (std::size_t i = 0; i < size; ++i)
          if (dx[i] > 0) any |= (out[i] = clipMove(x[i], dx[i], n.bias[0], n.bias[1])) > 0;
        break;
      case Op::AvgPool2d: {
        const Node& src = g_.nodes[std::size_t(in0)];
        const double k2 = double(n.kernel * n.kernel);
        for (std::size_t j = 0; j < size; ++j) {
          double d = 0;
          detail::forEachPoolTap(n, src, int64_t(j), [&](std::size_t i) { d += dx[i]; });
          if (d > 0) {
            out[j] = d / k2 * (1 + gamma32(int64_t(k2) + 1)) + 2 * radius[j];
            any = true;
          }
        }
        break;
      }
      case Op::Select: {
        const std::vector<int64_t> off = selectOffsets(g_, n);  // several inputs: a concatenation
        for (std::size_t i = 0; i < size; ++i) {
          if (n.gather[i] < 0) continue;
          const std::size_t k = selectPart(off, n.gather[i]);
          const std::vector<double>& d = delta_[std::size_t(n.inputs[k])];
          const double di = d.empty() ? 0.0 : d[std::size_t(n.gather[i] - off[k])];
          any |= (out[i] = di) > 0;
        }
        break;
      }
      case Op::Max2:
      case Op::MaxPool2d: {
        // the new max lies in [max(x_i - d_i), max(x_i + d_i)]
        const std::vector<float>& y = sm.act[std::size_t(u)];
        auto window = [&](std::size_t j, auto&& each) {
          if (n.op == Op::Max2) {
            each(j, 0);
            each(j, 1);
            return;
          }
          const Node& src = g_.nodes[std::size_t(in0)];
          const int64_t oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
          const int64_t ch = int64_t(j) / (oh * ow), yy = (int64_t(j) / ow) % oh, xx = int64_t(j) % ow;
          for (int64_t ky = 0; ky < n.kernel; ++ky)
            for (int64_t kx = 0; kx < n.kernel; ++kx)
              each(std::size_t(poolInput(n, h, w, ch, yy, xx, ky, kx)), 0);
        };
        for (std::size_t j = 0; j < size; ++j) {
          double lo = -std::numeric_limits<double>::infinity(), hi = lo;
          bool moved = false;
          window(j, [&](std::size_t i, int which) {
            const std::vector<double>& d = delta_[std::size_t(n.inputs[std::size_t(which)])];
            const double di = d.empty() ? 0.0 : d[i];
            const double xi = sm.act[std::size_t(n.inputs[std::size_t(which)])][i];
            moved = moved || di > 0;
            lo = std::max(lo, xi - di);
            hi = std::max(hi, xi + di);
          });
          if (moved) any |= (out[j] = std::max(std::fabs(lo - y[j]), std::fabs(hi - y[j]))) > 0;
        }
        break;
      }
      case Op::Linear: {
        const std::size_t features = std::size_t(n.features()), taps = n.weight.size() / features;
        std::vector<uint8_t> hit(size / features, 0);  // rows that read a changed value
        for (std::size_t i = 0; i < dx.size(); ++i) {
          if (dx[i] == 0) continue;
          const std::size_t row = i / taps, t = i % taps;
          hit[row] = 1;
          for (std::size_t o = 0; o < features; ++o) out[row * features + o] += std::fabs(n.weight[o * taps + t]) * dx[i];
        }
        const double gm = gamma32(int64_t(taps) + 1);
        for (std::size_t k = 0; k < size; ++k)
          if (hit[k / features]) {
            out[k] += gm * out[k] + 2 * radius[k];
            any = true;
          }
        break;
      }
      case Op::AddConst:
        for (std::size_t i = 0; i < size; ++i)
          if (dx[i] > 0) any |= (out[i] = dx[i] * (1 + kU32) + 2 * radius[i]) > 0;
        break;
      case Op::Gelu:  // |gelu'| <= 1.13
        for (std::size_t i = 0; i < size; ++i)
          if (dx[i] > 0) any |= (out[i] = 1.13 * dx[i] + 2 * radius[i]) > 0;
        break;
      case Op::Sigmoid:  // |sigmoid'| <= 1/4, |tanh'| <= 1
      case Op::Tanh:
        for (std::size_t i = 0; i < size; ++i)
          if (dx[i] > 0) any |= (out[i] = (n.op == Op::Sigmoid ? 0.25 : 1.0) * dx[i] + 2 * radius[i]) > 0;
        break;
      case Op::LayerNorm:
      case Op::Softmax:
      case Op::MatMul:
      case Op::Mul:
      case Op::Embed:  // a changed id swaps a row
        return false;  // no bound here: the exact rerun decides
      case Op::Conv2d: {
        // from each changed input to the outputs of its group whose windows hold it
        const Node& src = g_.nodes[std::size_t(in0)];
        const int64_t ci = src.shape[0], h = src.shape[1], w = src.shape[2], k = n.kernel, cg = groupChannels(n, src);
        const int64_t cog = n.shape[0] / n.groups, oh = n.shape[1], ow = n.shape[2];
        std::vector<uint8_t> hit(size, 0);
        for (int64_t c = 0; c < ci; ++c)
          for (int64_t iy = 0; iy < h; ++iy)
            for (int64_t ix = 0; ix < w; ++ix) {
              const double d = dx[std::size_t((c * h + iy) * w + ix)];
              if (d == 0) continue;
              for (int64_t ky = 0; ky < k; ++ky) {
                const int64_t ny = iy + n.padding - ky * n.dilation;
                if (ny < 0 || ny % n.stride || ny / n.stride >= oh) continue;
                for (int64_t kx = 0; kx < k; ++kx) {
                  const int64_t nx = ix + n.padding - kx * n.dilation;
                  if (nx < 0 || nx % n.stride || nx / n.stride >= ow) continue;
                  for (int64_t o = (c / cg) * cog; o < (c / cg + 1) * cog; ++o) {
                    const std::size_t j = std::size_t((o * oh + ny / n.stride) * ow + nx / n.stride);
                    out[j] += std::fabs(n.weight[std::size_t(((o * cg + c % cg) * k + ky) * k + kx)]) * d;
                    hit[j] = 1;
                  }
                }
              }
            }
        const double gm = gamma32(cg * k * k + 1);
        for (std::size_t j = 0; j < size; ++j)
          if (hit[j]) {
            out[j] += gm * out[j] + 2 * radius[j];
            any = true;
          }
        break;
      }
      case Op::BatchNorm: {
        const std::size_t hw = size / std::size_t(n.shape[0]);
        for (std::size_t i = 0; i < size; ++i)
          if (dx[i] > 0) {
            out[i] = std::fabs(n.weight[i / hw]) * dx[i] * (1 + gamma32(2)) + 2 * radius[i];
            any = true;
          }
        break;
      }
      case Op::Add: {
        const std::vector<double>& dy = delta_[std::size_t(n.inputs[1])];
        const std::vector<float>& y = sm.act[std::size_t(u)];
        for (std::size_t i = 0; i < size; ++i) {
          const double d = (dx.empty() ? 0.0 : dx[i]) + (dy.empty() ? 0.0 : dy[i]);
          if (d > 0) {
            out[i] = d + kU32 * (2 * std::fabs(double(y[i])) + d);
            any = true;
          }
        }
        break;
      }
      case Op::GlobalAvgPool: {
        const std::size_t hw = dx.size() / size;
        for (std::size_t c = 0; c < size; ++c) {
          double d = 0;
          for (std::size_t i = 0; i < hw; ++i) d += dx[c * hw + i];
          if (d > 0) {
            out[c] = d / double(hw) * (1 + gamma32(int64_t(hw) + 1)) + 2 * radius[c];
            any = true;
          }
        }
        break;
      }
    }
    for (double d : out)
      if (!std::isfinite(d)) return false;
    if (!any) out.clear();
    return true;
  }

  // The exact logits with the changed values: every node downstream of v that reads a changed
  // tensor is recomputed with the engine.
  std::vector<float> rerun(int s, int v, const std::vector<Change>& changed) {
    const Sample& sm = samples_[std::size_t(s)];
    std::map<int, std::vector<float>> fresh;
    std::vector<float>& at = fresh[v] = sm.act[std::size_t(v)];
    for (const Change& c : changed) at[c.element] = c.value;
    for (std::size_t u = std::size_t(v) + 1; u < g_.nodes.size(); ++u) {
      const Node& n = g_.nodes[u];
      std::vector<const float*> in;
      bool touched = false;
      for (int i : n.inputs) {
        auto it = fresh.find(i);
        touched = touched || it != fresh.end();
        in.push_back(it != fresh.end() ? it->second.data() : sm.act[std::size_t(i)].data());
      }
      if (!touched) continue;
      std::vector<float>& out = fresh[int(u)];
      out.resize(std::size_t(n.size()));
      runNode(g_, int(u), in, 1, out.data());
    }
    auto it = fresh.find(g_.output);
    return it != fresh.end() ? it->second : sm.act[std::size_t(g_.output)];
  }

  const Graph& g_;
  const std::vector<Sample>& samples_;
  std::vector<std::vector<double>> delta_;
};

struct WeightFlip {
  int node;
  bool bias;
  uint32_t index;
  uint8_t bit;
};

struct ActivationFlip {
  int sample, node;
  uint32_t element;
  uint8_t bit;
};

std::vector<Sample> cleanRuns(const Graph& g, const float* images, int64_t batch) {
  std::vector<Sample> samples(static_cast<std::size_t>(batch));
  const int64_t inSize = g.nodes[0].size();
  for (int64_t s = 0; s < batch; ++s) {
    Sample& sm = samples[std::size_t(s)];
    sm.act = runAll(g, images + s * inSize, 1);
    std::vector<NodeRange> point(g.nodes.size());
    for (std::size_t v = 0; v < g.nodes.size(); ++v) {
      point[v].lo.assign(sm.act[v].begin(), sm.act[v].end());
      point[v].hi = point[v].lo;
    }
    sm.radius.resize(g.nodes.size());
    for (std::size_t v = 1; v < g.nodes.size(); ++v) sm.radius[v] = roundingRadius(g, int(v), point);
    const std::vector<float>& logits = sm.act[std::size_t(g.output)];
    sm.top = topClassOf(g, logits.data());
    if (sm.top < 0) throw SaveError("the clean model gives a non-finite logit on evaluation image " + std::to_string(s));
  }
  return samples;
}

}  // namespace

struct FlipOracle::Impl {
  Impl(const Graph& graph, std::vector<Sample> runs) : g(graph), local(graph), samples(std::move(runs)), prober(g, samples) {}
  const Graph& g;
  Graph local;  // flips are made in this copy and undone
  std::vector<Sample> samples;
  Prober prober;
  Stats stats;
  std::vector<Change> changed;
  std::vector<int64_t> reads;
};

FlipOracle::FlipOracle(const Graph& g, const float* images, int64_t batch) {
  if (batch <= 0) throw SaveError("the evaluation batch must hold at least one image");
  d = std::make_unique<Impl>(g, cleanRuns(g, images, batch));
}

FlipOracle::~FlipOracle() = default;

FlipOracle::Outcome FlipOracle::weightFlip(int node, bool bias, uint32_t index, int bit, double epsilon) {
  Node& n = d->local.nodes[std::size_t(node)];
  if (n.op != Op::Linear && n.op != Op::Conv2d) throw SaveError("node '" + n.name + "' has no weights to flip");
  const Node& src = d->local.nodes[std::size_t(n.inputs[0])];
  float& param = bias ? n.bias.at(index) : n.weight.at(index);
  const float clean = param;
  param = flipBit(clean, bit);
  // the output elements that read this parameter: one output channel of every row (linear) or
  // every position (conv)
  std::vector<int64_t>& reads = d->reads;
  reads.clear();
  if (n.op == Op::Linear) {
    const int64_t features = n.features(), o = bias ? int64_t(index) : int64_t(index) / (int64_t(n.weight.size()) / features);
    for (int64_t r = 0; r < n.rows(); ++r) reads.push_back(r * features + o);
  } else {
    const int64_t per = convTaps(n, src), count = n.shape[1] * n.shape[2];
    const int64_t first = (bias ? int64_t(index) : int64_t(index) / per) * count;
    for (int64_t e = first; e < first + count; ++e) reads.push_back(e);
  }
  Outcome outcome;
  // every image until both questions are answered (a logit's move only when asked)
  for (std::size_t s = 0; s < d->samples.size() && !(outcome.top1 && (outcome.moved || epsilon < 0)); ++s) {
    const Sample& sm = d->samples[s];
    d->changed.clear();
    const std::vector<float>& x = sm.act[std::size_t(n.inputs[0])];
    for (int64_t e : reads) {
      const float y = affineElement(n, src, x.data(), e);
      if (fp::bitsOf(y) != fp::bitsOf(sm.act[std::size_t(node)][std::size_t(e)])) d->changed.push_back({std::size_t(e), y});
    }
    const Outcome one = d->prober.changes(int(s), node, d->changed, d->stats, outcome.moved ? -1.0 : epsilon);
    outcome.top1 = outcome.top1 || one.top1;
    outcome.moved = outcome.moved || one.moved;
  }
  param = clean;
  return outcome;
}

FlipOracle::Outcome FlipOracle::activationFlip(int sample, int node, uint32_t element, int bit, double epsilon) {
  const float clean = value(sample, node, element);
  d->changed.assign(1, {element, flipBit(clean, bit)});
  return d->prober.changes(sample, node, d->changed, d->stats, epsilon);
}

int FlipOracle::prediction(int sample) const { return d->samples.at(std::size_t(sample)).top; }
float FlipOracle::value(int sample, int node, uint32_t element) const {
  return d->samples.at(std::size_t(sample)).act.at(std::size_t(node)).at(element);
}
uint64_t FlipOracle::settledByBound() const { return d->stats.settled; }
uint64_t FlipOracle::reruns() const { return d->stats.reruns; }

void keepFirstFalseRobust(std::vector<std::pair<uint64_t, std::string>>& into,
                          std::vector<std::pair<uint64_t, std::string>> more) {
  for (auto& f : more) into.push_back(std::move(f));
  std::sort(into.begin(), into.end());
  if (into.size() > kFalseRobustKept) into.resize(kFalseRobustKept);
}

CheckBitsResult checkBits(const Graph& g, const Selection& sel, const float* images, const int32_t* labels,
                          const CheckBitsOptions& o, const std::function<void(uint64_t, uint64_t)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (o.batch <= 0) throw SaveError("the evaluation batch must hold at least one image");
  if (!(o.tau > 0)) throw SaveError("tau must be a positive number");
  if (o.weightsPerStratum < 0 || o.activationImages < 0) throw SaveError("sample sizes must not be negative");
  CheckBitsResult result;
  const bool outputCriterion = sel.sensitivity != nullptr;
  result.criterion = outputCriterion ? "output" : "value";
  result.epsilon = outputCriterion ? sel.options.epsilon : 0;
  result.rtol = outputCriterion ? 0 : sel.options.rtol;
  // The value criterion's tolerance for a value v: tau, plus rtol |v| with a relative tolerance.
  auto tolerance = [&](float v) { return o.tau + result.rtol * std::fabs(double(v)); };
  const double epsilon = outputCriterion ? sel.options.epsilon : -1;  // < 0: the logits' move is not asked
  const int64_t inSize = g.nodes[0].size();
  const int64_t activationImages = o.activationImages > 0 ? o.activationImages : o.batch;
  {
    FlipOracle clean(g, images, o.batch);  // checks the clean runs once, before the threads start
    uint64_t correct = 0;
    for (int64_t s = 0; s < o.batch; ++s) correct += labels && clean.prediction(int(s)) == labels[s];
    result.cleanAccuracy = double(correct) / double(o.batch);
  }

  // The flips: every parameter bit of linear and conv layers (or a sample), and sampled activation bits.
  // Every weight bit, in order: flip k of segment (node, weight or bias) starting at flip s is bit
  // (k - s) mod 32 of parameter (k - s) / 32. An exhaustive run computes its flips from k, so its
  // memory does not grow with the model (ResNet-18 has 374 M); a sample lists and shuffles them.
  struct Segment {
    uint64_t start;
    int node;
    bool bias;
  };
  std::vector<Segment> segments;
  std::vector<int> affineNodes;
  uint64_t weightBits = 0;
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    if (n.op != Op::Linear && n.op != Op::Conv2d) continue;
    affineNodes.push_back(int(v));
    for (int isBias = 0; isBias < 2; ++isBias) {
      const uint64_t count = isBias ? n.bias.size() : n.weight.size();
      if (count == 0) continue;
      segments.push_back({weightBits, int(v), isBias == 1});
      weightBits += 32 * count;
    }
  }
  auto weightBit = [&](uint64_t k) {
    const auto seg = std::prev(std::upper_bound(segments.begin(), segments.end(), k,
                                                [](uint64_t x, const Segment& s) { return x < s.start; }));
    const uint64_t local = k - seg->start;
    return WeightFlip{seg->node, seg->bias, uint32_t(local / 32), uint8_t(local % 32)};
  };
  std::mt19937_64 rng(o.seed);
  std::vector<WeightFlip> sampled;
  bool sampling = false;
  if (o.weightsPerStratum > 0) {  // stratified: K parameters per (layer, bit position)
    sampling = true;
    for (int v : affineNodes) {
      const Node& n = g.nodes[std::size_t(v)];
      const uint64_t params = n.weight.size() + n.bias.size();
      std::vector<uint64_t> order(params);
      for (int bit = 0; bit < 32; ++bit) {
        for (uint64_t i = 0; i < params; ++i) order[i] = i;
        const uint64_t take = std::min<uint64_t>(params, uint64_t(o.weightsPerStratum));
        for (uint64_t i = 0; i < take; ++i) std::swap(order[i], order[i + rng() % (params - i)]);  // partial shuffle
        for (uint64_t i = 0; i < take; ++i) {
          const bool bias = order[i] >= n.weight.size();
          sampled.push_back({v, bias, uint32_t(bias ? order[i] - n.weight.size() : order[i]), uint8_t(bit)});
        }
      }
    }
    std::shuffle(sampled.begin(), sampled.end(), rng);  // shards and threads get every stratum
  } else if (o.weightFlips > 0 && uint64_t(o.weightFlips) < weightBits) {
    sampling = true;
    sampled.reserve(std::size_t(weightBits));
    for (uint64_t k = 0; k < weightBits; ++k) sampled.push_back(weightBit(k));
    std::shuffle(sampled.begin(), sampled.end(), rng);
    sampled.resize(std::size_t(o.weightFlips));
  }
  const uint64_t weightCount = sampling ? sampled.size() : weightBits;
  std::vector<ActivationFlip> activations;
  for (int64_t k = 0; k < o.activationFlips; ++k) {
    const int node = 1 + int(rng() % (g.nodes.size() - 1));
    activations.push_back({int(rng() % uint64_t(activationImages)), node,
                           uint32_t(rng() % uint64_t(g.nodes[std::size_t(node)].size())), uint8_t(rng() % 32)});
  }

  if (o.shardCount <= 0 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw SaveError("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) + " does not exist");
  // This shard's flips: the m-th is flip k = shardIndex + m * shardCount of the whole campaign.
  const uint64_t campaignFlips = weightCount + activations.size();
  const uint64_t shardIndex = uint64_t(o.shardIndex), shardCount = uint64_t(o.shardCount);
  const uint64_t total = shardIndex < campaignFlips ? (campaignFlips - shardIndex + shardCount - 1) / shardCount : 0;
  // This shard's activation flips (campaign positions), grouped by image: each image's clean run is
  // made once, for all its flips.
  std::vector<uint64_t> activationOrder;
  for (uint64_t m = 0; m < total; ++m)
    if (shardIndex + m * shardCount >= weightCount) activationOrder.push_back(shardIndex + m * shardCount);
  std::stable_sort(activationOrder.begin(), activationOrder.end(), [&](uint64_t a, uint64_t b) {
    return activations[std::size_t(a - weightCount)].sample < activations[std::size_t(b - weightCount)].sample;
  });
  const uint64_t weightTotal = total - activationOrder.size();
  result.flips = total;
  std::atomic<uint64_t> next{0}, done{0};
  std::mutex merge;
  std::map<int, Judged> weightLayers, activationLayers;
  // The criterion's promise for one activation bit of value v: value criterion, the flip moves it
  // by less than tau + rtol |v|, or a ReLU that reads it gives the same output (the engine's ReLU: NaN -> 0).
  auto valuePromiseHolds = [&](float v, int bit, bool feedsRelu) {
    const float f = flipBit(v, bit);
    if (std::fabs(double(f) - double(v)) < tolerance(v)) return true;
    auto relu = [](float x) { return x > 0 ? x : 0.0f; };
    return feedsRelu && fp::bitsOf(relu(f)) == fp::bitsOf(relu(v));
  };
  // One outcome into the totals (top-1, promise), its layer's and its bit position's counts.
  auto tally = [](std::pair<Confusion*, Confusion*> all, Judged& layer, Judged& bit, bool predicted, bool top1Robust,
                  bool promised) {
    for (Judged* j : {&layer, &bit}) {
      j->top1.add(predicted, top1Robust);
      j->promise.add(predicted, promised);
    }
    all.first->add(predicted, top1Robust);
    all.second->add(predicted, promised);
  };
  auto work = [&](bool reporter) {
    std::unique_ptr<FlipOracle> batchOracle, imageOracle;
    int oracleImage = -1;
    uint64_t settled = 0, reruns = 0;  // of the image oracles let go
    CheckBitsResult part;
    std::map<int, Judged> wLayers, aLayers;
    constexpr uint64_t kGrain = 64;
    while (true) {
      const uint64_t first = next.fetch_add(kGrain);
      if (first >= total) break;
      for (uint64_t m = first; m < std::min(total, first + kGrain); ++m) {
        if (m < weightTotal) {
          const uint64_t k = shardIndex + m * shardCount;
          if (!batchOracle) batchOracle = std::make_unique<FlipOracle>(g, images, o.batch);
          const WeightFlip f = sampling ? sampled[std::size_t(k)] : weightBit(k);
          const Node& n = g.nodes[std::size_t(f.node)];
          const float clean = f.bias ? n.bias[f.index] : n.weight[f.index];
          const FlipOracle::Outcome out = batchOracle->weightFlip(f.node, f.bias, f.index, f.bit, epsilon);
          const bool predictedRobust =
              weightBitRobust(sel, f.node, f.bias ? n.weight.size() + f.index : std::size_t(f.index), clean, f.bit);
          const bool promised =
              outputCriterion ? !out.moved : std::fabs(double(flipBit(clean, f.bit)) - double(clean)) < tolerance(clean);
          tally({&part.weights, &part.weightsPromise}, wLayers[f.node], part.weightBits[f.bit], predictedRobust, !out.top1,
                promised);
          if (predictedRobust && (out.top1 || !promised))
            part.falseRobust.emplace_back(k, n.name + (f.bias ? ".bias[" : ".weight[") + std::to_string(f.index) + "] bit " +
                                                 std::to_string(f.bit) + (out.top1 ? "" : " (broke the promise only)"));
        } else {
          const uint64_t k = activationOrder[std::size_t(m - weightTotal)];
          const ActivationFlip& f = activations[std::size_t(k - weightCount)];
          if (f.sample != oracleImage) {
            if (imageOracle) settled += imageOracle->settledByBound(), reruns += imageOracle->reruns();
            imageOracle = std::make_unique<FlipOracle>(g, images + int64_t(f.sample) * inSize, 1);
            oracleImage = f.sample;
          }
          const FlipOracle::Outcome out = imageOracle->activationFlip(0, f.node, f.element, f.bit, epsilon);
          const LayerSelection& l = sel.layers[std::size_t(f.node - 1)];
          const bool predictedRobust = (l.robustMask[f.element] >> f.bit) & 1;
          const bool promised =
              outputCriterion ? !out.moved : valuePromiseHolds(imageOracle->value(0, f.node, f.element), f.bit, l.feedsRelu);
          tally({&part.activations, &part.activationsPromise}, aLayers[f.node], part.activationBits[f.bit], predictedRobust,
                !out.top1, promised);
          if (predictedRobust && (out.top1 || !promised))
            part.falseRobust.emplace_back(k, l.name + " image " + std::to_string(f.sample) + " element " + std::to_string(f.element) +
                                                 " bit " + std::to_string(f.bit) + (out.top1 ? "" : " (broke the promise only)"));
        }
      }
      done.fetch_add(std::min(total, first + kGrain) - first);
      if (reporter && progress) progress(done.load(), total);
    }
    std::lock_guard<std::mutex> lock(merge);
    result.weights.merge(part.weights);
    result.activations.merge(part.activations);
    result.weightsPromise.merge(part.weightsPromise);
    result.activationsPromise.merge(part.activationsPromise);
    for (const auto& [node, c] : wLayers) weightLayers[node].merge(c);
    for (const auto& [node, c] : aLayers) activationLayers[node].merge(c);
    for (std::size_t b = 0; b < 32; ++b) {
      result.weightBits[b].merge(part.weightBits[b]);
      result.activationBits[b].merge(part.activationBits[b]);
    }
    result.settledByBound += settled;
    result.reruns += reruns;
    for (const FlipOracle* oracle : {batchOracle.get(), imageOracle.get()})
      if (oracle) {
        result.settledByBound += oracle->settledByBound();
        result.reruns += oracle->reruns();
      }
    keepFirstFalseRobust(result.falseRobust, std::move(part.falseRobust));
  };
  util::parallelFor(util::threadsOr(o.threads), [&](unsigned worker) { work(worker == 0); });
  // every layer, flipped or not, so that every shard lists the same layers in graph order
  for (int node : affineNodes) result.weightLayers.emplace_back(g.nodes[std::size_t(node)].name, weightLayers[node]);
  for (std::size_t v = 1; v < g.nodes.size(); ++v)
    result.activationLayers.emplace_back(g.nodes[v].name, activationLayers[int(v)]);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress) progress(total, total);
  return result;
}

}  // namespace peat::save
