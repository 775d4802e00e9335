// SPDX-License-Identifier: MIT
#include "core/save/mixed.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/fp/format.h"

namespace peat::save {

void MixedOperands::assign(const float* values, int64_t n) {
  mant.resize(std::size_t(n));
  exp.resize(std::size_t(n));
  sign.resize(std::size_t(n));
  finite = true;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = fp::bitsOf(values[i]), e = (b >> 23) & 0xff, f = b & 0x7fffff;
    finite = finite && e != 0xff;
    mant[std::size_t(i)] = (e ? f | 0x800000u : f) >> 8;  // value = mant 2^(exp - 142) + less than one unit
    exp[std::size_t(i)] = e ? int64_t(e) : 1;
    sign[std::size_t(i)] = b >> 31 ? ~uint64_t(0) : 0;
  }
}

MixedChecker::MixedChecker(const Graph& g, int node, const NodeRange& input)
    : n_(g.nodes[std::size_t(node)]), src_(g.nodes[std::size_t(n_.inputs.at(0))]) {
  if (n_.op != Op::Linear && n_.op != Op::Conv2d) throw SaveError("mixed-precision checks need a linear or conv node");
  channels_ = n_.op == Op::Linear ? n_.features() : n_.shape[0];
  taps_ = int64_t(n_.weight.size()) / channels_;
  w_.assign(n_.weight.data(), int64_t(n_.weight.size()));
  // The largest |x| each tap can see on the analysed range (a conv tap reads one input channel;
  // for a conv, over every input channel: output channel o reads the block of its group).
  const bool linear = n_.op == Op::Linear;
  const std::size_t span = linear ? 1 : std::size_t(n_.kernel * n_.kernel);
  std::vector<double> tapMax(linear ? std::size_t(taps_) : std::size_t(src_.shape[0]) * span, 0.0);
  double maxX = 0, maxW = 0;
  for (std::size_t i = 0; i < input.lo.size(); ++i) {
    const std::size_t t = linear ? i % std::size_t(taps_) : (i / std::size_t(src_.shape[1] * src_.shape[2])) * span;
    for (std::size_t k = 0; k < span; ++k) tapMax[t + k] = std::max(tapMax[t + k], magnitude(input, i));
    maxX = std::max(maxX, magnitude(input, i));
  }
  for (float w : n_.weight) maxW = std::max(maxW, double(std::fabs(w)));
  // A product with a subnormal operand loses up to one unit of 2^-141 times the other operand.
  subnormal_ = double(taps_) * 0x1p-140 * (maxW + maxX + 1);
  const double rel = 0x1p-14 + gamma32(taps_ + 1) + double(taps_) * 0x1p-31 + 1e-12;
  for (int64_t o = 0; o < channels_; ++o) {
    double s = n_.bias.empty() ? 0.0 : std::fabs(n_.bias[std::size_t(o)]);
    const std::size_t t0 = linear ? 0 : std::size_t(firstChannel(n_, src_, o)) * span;
    for (int64_t t = 0; t < taps_; ++t) s += std::fabs(n_.weight[std::size_t(o * taps_ + t)]) * tapMax[t0 + std::size_t(t)];
    worst_ = std::max(worst_, rel * s * (1 + 0x1p-13) + subnormal_);
  }
}

bool MixedChecker::outside(double y, double bias, int64_t acc, uint64_t abs, int64_t emax) const {
  const double unit = std::ldexp(1.0, int(emax) - 284);
  const double recomputed = bias + double(acc) * unit;
  const double sum = (double(abs) + double(taps_)) * unit * (1 + 0x1p-13);  // >= sum |w x|
  const double bound = 0x1p-14 * sum + double(taps_) * unit + subnormal_ +
                       gamma32(taps_ + 1) * (std::fabs(bias) + sum) + double(taps_ + 1) * kTiny32 +
                       1e-12 * (std::fabs(recomputed) + std::fabs(bias) + sum);
  return !(std::fabs(y - recomputed) <= bound);  // NaN fails
}

bool MixedChecker::mismatch(const float* x, const float* y, int64_t batch, const std::vector<uint32_t>& mask) {
  const int64_t size = n_.size(), inSize = src_.size();
  const bool linear = n_.op == Op::Linear;
  const int64_t rows = linear ? n_.rows() : 1, positions = linear ? batch * rows : size / channels_;
  const int64_t rowsUnfolded = linear ? taps_ : src_.shape[0] * n_.kernel * n_.kernel;  // every input channel's taps
  unfolded_.resize(std::size_t(rowsUnfolded * positions));
  acc_.resize(std::size_t(positions));
  abs_.resize(std::size_t(positions));
  emax_.resize(std::size_t(positions));
  for (int64_t s = 0; s < (linear ? 1 : batch); ++s) {
    if (linear) {  // positions are the rows of every sample: [taps][positions]
      for (int64_t p = 0; p < positions; ++p)
        for (int64_t t = 0; t < taps_; ++t) unfolded_[std::size_t(t * positions + p)] = x[p * taps_ + t];
    } else {
      unfold(n_, src_, x + s * inSize, unfolded_.data());
    }
    cols_.assign(unfolded_.data(), int64_t(unfolded_.size()));
    if (!cols_.finite) return true;
    for (int64_t o = 0; o < channels_; ++o) {
      const int64_t c0 = linear ? 0 : firstChannel(n_, src_, o) * n_.kernel * n_.kernel * positions;  // its group's rows
      detail::mixedDot(w_.mant.data() + o * taps_, w_.exp.data() + o * taps_, w_.sign.data() + o * taps_, taps_,
                       cols_.mant.data() + c0, cols_.exp.data() + c0, cols_.sign.data() + c0, positions, acc_.data(),
                       abs_.data(), emax_.data());
      const double bias = n_.bias.empty() ? 0.0 : n_.bias[std::size_t(o)];
      for (int64_t p = 0; p < positions; ++p) {
        const int64_t e = linear ? (p % rows) * channels_ + o : o * positions + p;  // one sample's element
        if (!mask[std::size_t(e)]) continue;
        const int64_t sample = linear ? p / rows : s;
        if (outside(y[sample * size + e], bias, acc_[std::size_t(p)], abs_[std::size_t(p)], emax_[std::size_t(p)]))
          return true;
      }
    }
  }
  return false;
}

bool MixedChecker::mismatchAt(const float* x, const float* y, int64_t batch, const std::vector<int64_t>& elements) {
  const int64_t size = n_.size(), inSize = src_.size();
  const bool linear = n_.op == Op::Linear;
  std::vector<float>& taps = unfolded_;
  taps.resize(std::size_t(taps_));
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t e : elements) {
      const float* xs = x + s * inSize;
      int64_t o;
      if (linear) {
        o = e % channels_;
        std::copy(xs + (e / channels_) * taps_, xs + (e / channels_ + 1) * taps_, taps.begin());
      } else {  // this element's column of the unfolded input
        const int64_t cg = groupChannels(n_, src_), h = src_.shape[1], w = src_.shape[2], k = n_.kernel;
        const int64_t oh = n_.shape[1], ow = n_.shape[2], yy = (e / ow) % oh, xx = e % ow;
        o = e / (oh * ow);
        const int64_t c0 = firstChannel(n_, src_, o);
        std::size_t t = 0;
        for (int64_t c = c0; c < c0 + cg; ++c)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t iy = yy * n_.stride + ky * n_.dilation - n_.padding;
              const int64_t ix = xx * n_.stride + kx * n_.dilation - n_.padding;
              taps[t++] = iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0f : xs[(c * h + iy) * w + ix];
            }
      }
      cols_.assign(taps.data(), taps_);
      if (!cols_.finite) return true;
      const std::size_t w0 = std::size_t(o * taps_);
      int64_t top = std::numeric_limits<int32_t>::min();
      for (std::size_t t = 0; t < std::size_t(taps_); ++t) top = std::max(top, w_.exp[w0 + t] + cols_.exp[t]);
      int64_t acc = 0;
      uint64_t abs = 0;
      for (std::size_t t = 0; t < std::size_t(taps_); ++t)
        detail::mixedStep(w_.mant[w0 + t], w_.exp[w0 + t], w_.sign[w0 + t], cols_.mant[t], cols_.exp[t], cols_.sign[t], top,
                          acc, abs);
      if (outside(y[s * size + e], n_.bias.empty() ? 0.0 : n_.bias[std::size_t(o)], acc, abs, top)) return true;
    }
  return false;
}

}  // namespace peat::save
