// SPDX-License-Identifier: MIT
// Symbolic ranges: DeepPoly-style linear bounds of a block of a node's elements, substituted back
// through the graph (affine ops exactly, ReLU and pairwise max by sound relaxations) and made concrete.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>

#include "core/save/ranges_detail.h"

namespace peat::save::detail {

namespace {

// Ops the linear bounds do not pass through: the back-substitution makes them concrete with their
// intervals (a cut), which is sound and only looser.
bool cutsLinearBounds(Op op) {
  return op == Op::LayerNorm || op == Op::Softmax || op == Op::Gelu || op == Op::MatMul || op == Op::Sigmoid ||
         op == Op::Tanh || op == Op::Mul || op == Op::Embed;
}

}  // namespace

void BackSubstitution::run(int v, std::size_t first, std::size_t rows, double* lo, double* hi) {
  start(rows);
  set(v, first, 1.0);
  finish(level_[std::size_t(v)], lo, hi);
}

void BackSubstitution::start(std::size_t rows) {
  rows_ = rows;
  pending_.clear();
  cL_.assign(rows, 0.0);
  cU_.assign(rows, 0.0);
  mag_.assign(rows, 0.0);
}

void BackSubstitution::set(int v, std::size_t first, double coefficient) {
  const std::size_t size = std::size_t(g_.nodes[std::size_t(v)].size());
  Bounds& b = at(v);
  for (std::size_t r = 0; r < rows_; ++r) {
    b.lower[r * size + first + r] += coefficient;
    b.upper[r * size + first + r] += coefficient;
  }
}

// Substitutes back node by node (highest index first, so every node has all its coefficients
// when it is expanded). The pending nodes always form a cut of the graph, so making them concrete
// with their intervals gives a sound bound at every step: each row keeps the best one. Relaxations
// that lose more than they gain further back then cost nothing.
void BackSubstitution::finish(int top, double* lo, double* hi) {
  const std::size_t rows = rows_;
  for (std::size_t r = 0; r < rows; ++r) {
    lo[r] = -std::numeric_limits<double>::infinity();
    hi[r] = std::numeric_limits<double>::infinity();
  }
  std::vector<double> cL, cU, mag;
  while (true) {
    cL = cL_;
    cU = cU_;
    mag = mag_;
    for (const auto& [u, b] : pending_) concretise(u, b, cL, cU, mag);
    for (std::size_t r = 0; r < rows; ++r) {
      const double m = mag[r] * kDoubleMargin;
      lo[r] = std::max(lo[r], cL[r] - m);
      hi[r] = std::min(hi[r], cU[r] + m);
    }
    if (pending_.empty()) break;
    auto it = std::prev(pending_.end());
    const int u = it->first;
    Bounds cur = std::move(it->second);
    pending_.erase(it);
    const Node& n = g_.nodes[std::size_t(u)];
    if (n.op == Op::Input || cutsLinearBounds(n.op) || (depth_ > 0 && top - level_[std::size_t(u)] >= depth_))
      concretise(u, cur, cL_, cU_, mag_);
    else
      expand(u, cur);
    spare_.push_back(std::move(cur.lower));  // reused: no page faults for the next node's matrices
    spare_.push_back(std::move(cur.upper));
  }
}

std::vector<double> BackSubstitution::zeros(std::size_t n) {
  std::vector<double> v;
  if (!spare_.empty()) {
    v = std::move(spare_.back());
    spare_.pop_back();
  }
  v.assign(n, 0.0);
  return v;
}

Bounds& BackSubstitution::at(int u) {
  auto it = pending_.find(u);
  if (it == pending_.end()) {
    const std::size_t size = std::size_t(g_.nodes[std::size_t(u)].size());
    Bounds b;
    b.lower = zeros(rows_ * size);
    b.upper = zeros(rows_ * size);
    it = pending_.emplace(u, std::move(b)).first;
  }
  return it->second;
}

void BackSubstitution::concretise(int u, const Bounds& b, std::vector<double>& cL, std::vector<double>& cU,
                                  std::vector<double>& magnitudes) const {
  const NodeRange& x = r_[std::size_t(u)];
  const std::size_t size = x.lo.size();
  for (std::size_t r = 0; r < rows_; ++r) {
    const double* al = b.lower.data() + r * size;
    const double* au = b.upper.data() + r * size;
    double lo = 0, hi = 0, mag = 0;
    for (std::size_t j = 0; j < size; ++j) {
      if (al[j] != 0) {
        lo += al[j] >= 0 ? al[j] * x.lo[j] : al[j] * x.hi[j];
        mag += std::fabs(al[j]) * magnitude(x, j);
      }
      if (au[j] != 0) {
        hi += au[j] >= 0 ? au[j] * x.hi[j] : au[j] * x.lo[j];
        mag += std::fabs(au[j]) * magnitude(x, j);
      }
    }
    cL[r] += lo;
    cU[r] += hi;
    magnitudes[r] += mag;
  }
}

// Constants of an affine op: coefficient times bias, minus (plus) |coefficient| times the op's
// fp32 rounding radius.
void BackSubstitution::addConstants(std::size_t r, double aL, double aU, double bias, double radius) {
  cL_[r] += aL * bias - std::fabs(aL) * radius;
  cU_[r] += aU * bias + std::fabs(aU) * radius;
  mag_[r] += (std::fabs(aL) + std::fabs(aU)) * (std::fabs(bias) + radius);
}

void BackSubstitution::expand(int u, const Bounds& b) {
  const Node& n = g_.nodes[std::size_t(u)];
  const std::size_t size = std::size_t(n.size());
  std::vector<double> radius;
  if (isAffine(n.op)) radius = roundingRadius(g_, u, r_);
  switch (n.op) {
    case Op::Input:
      break;
    case Op::Flatten:
      expandCopy(n.inputs[0], b, rows_ * size);
      break;
    case Op::Relu:
      expandRelu(n, b);
      break;
    case Op::MaxPool2d:
      throw SaveError("internal: max-pooling reached the symbolic analysis without being rewritten");
    case Op::Select:
      expandSelect(n, b);
      break;
    case Op::Max2:
      expandMax2(u, b);
      break;
    case Op::Linear:
      expandLinear(n, b, radius);
      break;
    case Op::AddConst:
      expandAddConst(n, b, radius);
      break;
    case Op::LayerNorm:
    case Op::Gelu:
    case Op::Softmax:
    case Op::MatMul:
    case Op::Sigmoid:
    case Op::Tanh:
    case Op::Mul:
    case Op::Embed:
      throw SaveError("internal: the linear bounds cannot pass through " + std::string(opName(n.op)));
    case Op::Conv2d:
      expandConv(n, b, radius);
      break;
    case Op::BatchNorm:
      expandBatchNorm(n, b, radius);
      break;
    case Op::Add:
      expandAdd(n, b, radius);
      break;
    case Op::GlobalAvgPool:
      expandGlobalAvgPool(n, b, radius);
      break;
    case Op::AvgPool2d:
      expandAvgPool(n, b, radius);
      break;
    case Op::Clip:
      expandClip(n, b);
      break;
  }
}

// Ops that only move or select values (Flatten, and each input of Add): the coefficients carry over.
void BackSubstitution::expandCopy(int input, const Bounds& b, std::size_t count) {
  Bounds& t = at(input);
  for (std::size_t i = 0; i < count; ++i) {
    t.lower[i] += b.lower[i];
    t.upper[i] += b.upper[i];
  }
}

void BackSubstitution::expandRelu(const Node& n, const Bounds& b) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const std::size_t inSize = std::size_t(g_.nodes[std::size_t(in0)].size());
  const NodeRange& x = r_[std::size_t(in0)];
  Bounds& t = at(in0);
  for (std::size_t j = 0; j < size; ++j) {
    const double l = x.lo[j], h = x.hi[j];
    if (h <= 0) continue;  // always 0
    const bool exact = l >= 0;
    const double s = exact ? 1.0 : h / (h - l), lambda = exact ? 1.0 : (h > -l ? 1.0 : 0.0);
    for (std::size_t r = 0; r < rows_; ++r) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL != 0) {
        if (aL >= 0 || exact) {
          t.lower[r * inSize + j] += aL * lambda;
        } else {
          t.lower[r * inSize + j] += aL * s;
          cL_[r] -= aL * s * l;
          mag_[r] += std::fabs(aL * s * l);
        }
      }
      if (aU != 0) {
        if (aU < 0 || exact) {
          t.upper[r * inSize + j] += aU * lambda;
        } else {
          t.upper[r * inSize + j] += aU * s;
          cU_[r] -= aU * s * l;
          mag_[r] += std::fabs(aU * s * l);
        }
      }
    }
  }
}

// Each coefficient moves to the input element it was gathered from (of one input, or of several
// laid end to end: a concatenation).
void BackSubstitution::expandSelect(const Node& n, const Bounds& b) {
  const std::size_t size = std::size_t(n.size());
  const std::vector<int64_t> off = selectOffsets(g_, n);
  std::vector<Bounds*> t;
  for (int i : n.inputs) t.push_back(&at(i));  // std::map: references stay valid
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t j = 0; j < size; ++j) {
      if (n.gather[j] < 0) continue;  // a constant 0
      const std::size_t k = selectPart(off, n.gather[j]);
      const std::size_t inSize = std::size_t(off[k + 1] - off[k]), e = std::size_t(n.gather[j] - off[k]);
      t[k]->lower[r * inSize + e] += b.lower[r * size + j];
      t[k]->upper[r * inSize + e] += b.upper[r * size + j];
    }
}

void BackSubstitution::expandMax2(int u, const Bounds& b) {
  const Node& n = g_.nodes[std::size_t(u)];
  const std::size_t size = std::size_t(n.size());
  // y = max(a, b) = b + relu(d), d = a - b in [l, h]: exact when d keeps one sign; else
  // y >= lambda a + (1 - lambda) b and y <= s a + (1 - s) b - s l, s = h / (h - l).
  Bounds& ta = at(n.inputs[0]);
  Bounds& tb = at(n.inputs[1]);
  const NodeRange& d = diff_[std::size_t(u)];
  for (std::size_t j = 0; j < size; ++j) {
    const double l = d.lo[j], h = d.hi[j];
    double lambda, s, offset;
    if (l >= 0) {
      lambda = s = 1;
      offset = 0;
    } else if (h <= 0) {
      lambda = s = 0;
      offset = 0;
    } else {
      lambda = h > -l ? 1 : 0;
      s = h / (h - l);
      offset = -s * l;
    }
    for (std::size_t r = 0; r < rows_; ++r) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL != 0) {
        const double w = aL >= 0 ? lambda : s;  // a lower bound takes the upper plane when aL < 0
        ta.lower[r * size + j] += aL * w;
        tb.lower[r * size + j] += aL * (1 - w);
        if (aL < 0) {
          cL_[r] += aL * offset;
          mag_[r] += std::fabs(aL * offset);
        }
      }
      if (aU != 0) {
        const double w = aU >= 0 ? s : lambda;
        ta.upper[r * size + j] += aU * w;
        tb.upper[r * size + j] += aU * (1 - w);
        if (aU > 0) {
          cU_[r] += aU * offset;
          mag_[r] += std::fabs(aU * offset);
        }
      }
    }
  }
}

void BackSubstitution::expandLinear(const Node& n, const Bounds& b, const std::vector<double>& radius) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const std::size_t inSize = std::size_t(g_.nodes[std::size_t(in0)].size());
  Bounds& t = at(in0);
  const std::size_t features = std::size_t(n.features()), taps = n.weight.size() / features;
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t j = 0; j < size; ++j) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL == 0 && aU == 0) continue;
      const std::size_t o = j % features;
      addConstants(r, aL, aU, n.bias[o], radius[j]);
      const float* wr = n.weight.data() + o * taps;
      double* tl = t.lower.data() + r * inSize + (j / features) * taps;
      double* tu = t.upper.data() + r * inSize + (j / features) * taps;
      for (std::size_t i = 0; i < taps; ++i) {
        tl[i] += aL * wr[i];
        tu[i] += aU * wr[i];
      }
    }
}

void BackSubstitution::expandAddConst(const Node& n, const Bounds& b, const std::vector<double>& radius) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const std::size_t inSize = std::size_t(g_.nodes[std::size_t(in0)].size());
  Bounds& t = at(in0);
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t j = 0; j < size; ++j) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL == 0 && aU == 0) continue;
      addConstants(r, aL, aU, n.bias[j], radius[j]);
      t.lower[r * inSize + j] += aL;
      t.upper[r * inSize + j] += aU;
    }
}

void BackSubstitution::expandConv(const Node& n, const Bounds& b, const std::vector<double>& radius) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const Node& src = g_.nodes[std::size_t(in0)];
  const std::size_t inSize = std::size_t(src.size());
  Bounds& t = at(in0);
  const std::size_t plane = std::size_t(n.shape[1] * n.shape[2]);
  for (std::size_t r = 0; r < rows_; ++r) {
    double* tl = t.lower.data() + r * inSize;
    double* tu = t.upper.data() + r * inSize;
    for (std::size_t j = 0; j < size; ++j) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL == 0 && aU == 0) continue;
      addConstants(r, aL, aU, n.bias.empty() ? 0.0 : n.bias[j / plane], radius[j]);
      forEachTap(n, src, int64_t(j), [&](std::size_t w, std::size_t i) {
        tl[i] += aL * n.weight[w];
        tu[i] += aU * n.weight[w];
      });
    }
  }
}

void BackSubstitution::expandBatchNorm(const Node& n, const Bounds& b, const std::vector<double>& radius) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const std::size_t inSize = std::size_t(g_.nodes[std::size_t(in0)].size());
  Bounds& t = at(in0);
  const std::size_t c = std::size_t(n.shape[0]), hw = size / c;
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t j = 0; j < size; ++j) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL == 0 && aU == 0) continue;
      addConstants(r, aL, aU, n.bias[j / hw], radius[j]);
      t.lower[r * inSize + j] += aL * n.weight[j / hw];
      t.upper[r * inSize + j] += aU * n.weight[j / hw];
    }
}

void BackSubstitution::expandAdd(const Node& n, const Bounds& b, const std::vector<double>& radius) {
  const std::size_t size = std::size_t(n.size());
  for (int input : n.inputs) expandCopy(input, b, rows_ * size);
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t j = 0; j < size; ++j) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL != 0 || aU != 0) addConstants(r, aL, aU, 0.0, radius[j]);
    }
}

void BackSubstitution::expandGlobalAvgPool(const Node& n, const Bounds& b, const std::vector<double>& radius) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const std::size_t inSize = std::size_t(g_.nodes[std::size_t(in0)].size());
  Bounds& t = at(in0);
  const std::size_t hw = inSize / size;
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t ch = 0; ch < size; ++ch) {
      const double aL = b.lower[r * size + ch], aU = b.upper[r * size + ch];
      if (aL == 0 && aU == 0) continue;
      addConstants(r, aL, aU, 0.0, radius[ch]);
      for (std::size_t i = 0; i < hw; ++i) {
        t.lower[r * inSize + ch * hw + i] += aL / double(hw);
        t.upper[r * inSize + ch * hw + i] += aU / double(hw);
      }
    }
}

void BackSubstitution::expandAvgPool(const Node& n, const Bounds& b, const std::vector<double>& radius) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const Node& src = g_.nodes[std::size_t(in0)];
  const std::size_t inSize = std::size_t(src.size());
  Bounds& t = at(in0);
  const double k2 = double(n.kernel * n.kernel);
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t j = 0; j < size; ++j) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL == 0 && aU == 0) continue;
      addConstants(r, aL, aU, 0.0, radius[j]);
      forEachPoolTap(n, src, int64_t(j), [&](std::size_t i) {
        t.lower[r * inSize + i] += aL / k2;
        t.upper[r * inSize + i] += aU / k2;
      });
    }
}

// Clip to [a, c] over an input range [l, h], as lambdaL x + muL <= y <= lambdaU x + muU: exact where
// the range misses both ends' kinks; with one kink inside, ReLU's relaxation (the chord above or below,
// the better of the two flat or unit-slope lines on the other side); with both inside, the constants a and c.
void BackSubstitution::expandClip(const Node& n, const Bounds& b) {
  const std::size_t size = std::size_t(n.size());
  const int in0 = n.inputs[0];
  const NodeRange& x = r_[std::size_t(in0)];
  Bounds& t = at(in0);
  const double a = n.bias[0], c = n.bias[1];
  for (std::size_t j = 0; j < size; ++j) {
    const double l = x.lo[j], h = x.hi[j];
    double lamL = 0, muL = 0, lamU = 0, muU = 0;
    if (h <= a) {
      muL = muU = a;
    } else if (l >= c) {
      muL = muU = c;
    } else if (l >= a && h <= c) {
      lamL = lamU = 1;
    } else if (l < a && h <= c) {  // y = a + relu(x - a)
      lamU = (h - a) / (h - l);
      muU = a - lamU * l;
      if (h - a > a - l) lamL = 1; else muL = a;
    } else if (l >= a && h > c) {  // y = c - relu(c - x)
      lamL = (c - l) / (h - l);
      muL = l - lamL * l;
      if (c - l > h - c) lamU = 1; else muU = c;
    } else {
      muL = a;
      muU = c;
    }
    for (std::size_t r = 0; r < rows_; ++r) {
      const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
      if (aL != 0) {
        const double lam = aL >= 0 ? lamL : lamU, mu = aL >= 0 ? muL : muU;  // a lower bound takes the upper plane when aL < 0
        t.lower[r * size + j] += aL * lam;
        cL_[r] += aL * mu;
        mag_[r] += std::fabs(aL * mu);
      }
      if (aU != 0) {
        const double lam = aU >= 0 ? lamU : lamL, mu = aU >= 0 ? muU : muL;
        t.upper[r * size + j] += aU * lam;
        cU_[r] += aU * mu;
        mag_[r] += std::fabs(aU * mu);
      }
    }
  }
}

}  // namespace peat::save::detail
