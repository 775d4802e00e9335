// SPDX-License-Identifier: MIT
#pragma once
// What the range analysis's files share (ranges.cpp, ranges_interval.cpp, ranges_symbolic.cpp,
// ranges_ascent.cpp, and check_bits.cpp's delta bounds): private to core/save, not part of the
// public API in ranges.h.
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/save/graph.h"
#include "core/save/ranges.h"
#include "core/util/parallel.h"

namespace peat::save::detail {

// The analysis itself runs in double; this relative margin covers its own rounding, which is
// smaller than the fp32 error bounds it adds by a factor of 2^29 = u_32 / u_64 (widenByRounding).
inline constexpr double kDoubleMargin = 1e-9;

// Runs body(first, last) over [0, count) split between the cores (for the big layers only).
template <class F>
void parallelFor(int64_t count, int64_t work, F&& body) {
  const unsigned cores = util::hardwareThreads();
  if (cores == 1 || work < (int64_t(1) << 20) || count < 2) {
    body(int64_t(0), count);
    return;
  }
  util::parallelRanges(count, cores, [&](int64_t first, int64_t last, unsigned) { body(first, last); });
}

// Calls f(w, i) for every tap of output element j of a conv node that reads the input (the zero
// padding is skipped), in (channel, kernel row, kernel column) order over the channels of j's
// group: w indexes the weights, i the input.
template <class F>
inline void forEachTap(const Node& n, const Node& src, int64_t j, F&& f) {
  const int64_t cg = groupChannels(n, src), h = src.shape[1], w = src.shape[2], k = n.kernel;
  const int64_t oh = n.shape[1], ow = n.shape[2];
  const int64_t o = j / (oh * ow), y = (j / ow) % oh, xx = j % ow, c0 = firstChannel(n, src, o);
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t ky = 0; ky < k; ++ky) {
      const int64_t iy = y * n.stride + ky * n.dilation - n.padding;
      if (iy < 0 || iy >= h) continue;
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t ix = xx * n.stride + kx * n.dilation - n.padding;
        if (ix < 0 || ix >= w) continue;
        f(std::size_t(((o * cg + c) * k + ky) * k + kx), std::size_t(((c0 + c) * h + iy) * w + ix));
      }
    }
}

// Calls f(i) for every input element that the window of average-pool output element j reads (the
// zero padding is skipped).
template <class F>
inline void forEachPoolTap(const Node& n, const Node& src, int64_t j, F&& f) {
  const int64_t h = src.shape[1], w = src.shape[2], oh = n.shape[1], ow = n.shape[2];
  const int64_t ch = j / (oh * ow), y = (j / ow) % oh, xx = j % ow;
  for (int64_t ky = 0; ky < n.kernel; ++ky) {
    const int64_t iy = y * n.stride + ky - n.padding;
    if (iy < 0 || iy >= h) continue;
    for (int64_t kx = 0; kx < n.kernel; ++kx) {
      const int64_t ix = xx * n.stride + kx - n.padding;
      if (ix >= 0 && ix < w) f(std::size_t((ch * h + iy) * w + ix));
    }
  }
}

// Back through the average pool `n` over `src` (gradients, sensitivities): each output element's
// `out[j]`, divided by the window's size, is added to every input element of `back` it reads.
template <class T>
void addBackThroughAvgPool(const Node& n, const Node& src, const std::vector<T>& out, std::vector<T>& back) {
  const T k2 = T(n.kernel * n.kernel);
  for (std::size_t j = 0; j < out.size(); ++j)
    if (out[j] != 0) forEachPoolTap(n, src, int64_t(j), [&](std::size_t i) { back[i] += out[j] / k2; });
}

inline bool isAffine(Op op) {
  return op == Op::Linear || op == Op::Conv2d || op == Op::BatchNorm || op == Op::Add || op == Op::GlobalAvgPool ||
         op == Op::AddConst || op == Op::AvgPool2d;
}

// Plain interval arithmetic for one node (exact real intervals, then widened by the rounding radius).
NodeRange intervalStep(const Graph& g, int index, const std::vector<NodeRange>& r);

// d(node element)/d(input) for one sample whose activations are `act`.
std::vector<float> inputGradient(const Graph& g, const std::vector<std::vector<float>>& act, int node,
                                 std::size_t element);

// Linear bounds over a block of `rows` target elements: coefficients on each node still to be
// substituted, plus constants. `mag` accumulates the magnitude of everything summed, for the
// final margin against the double arithmetic's own rounding.
struct Bounds {
  std::vector<double> lower, upper;  // rows x node size
};

class BackSubstitution {
 public:
  BackSubstitution(const Graph& g, const std::vector<NodeRange>& r, const std::vector<NodeRange>& diff,
                   const std::vector<int>& level, int depth)
      : g_(g), r_(r), diff_(diff), level_(level), depth_(depth) {}

  // Bounds of elements [first, first + rows) of node v.
  void run(int v, std::size_t first, std::size_t rows, double* lo, double* hi);

 private:
  void start(std::size_t rows);
  void set(int v, std::size_t first, double coefficient);
  void finish(int top, double* lo, double* hi);
  std::vector<double> zeros(std::size_t n);
  Bounds& at(int u);
  void concretise(int u, const Bounds& b, std::vector<double>& cL, std::vector<double>& cU,
                  std::vector<double>& magnitudes) const;
  void addConstants(std::size_t r, double aL, double aU, double bias, double radius);

  // expand() substitutes node u's bounds into its inputs' (one function per op family below).
  void expand(int u, const Bounds& b);
  void expandCopy(int input, const Bounds& b, std::size_t count);
  void expandRelu(const Node& n, const Bounds& b);
  void expandSelect(const Node& n, const Bounds& b);
  void expandMax2(int u, const Bounds& b);
  void expandLinear(const Node& n, const Bounds& b, const std::vector<double>& radius);
  void expandAddConst(const Node& n, const Bounds& b, const std::vector<double>& radius);
  void expandConv(const Node& n, const Bounds& b, const std::vector<double>& radius);
  void expandBatchNorm(const Node& n, const Bounds& b, const std::vector<double>& radius);
  void expandAdd(const Node& n, const Bounds& b, const std::vector<double>& radius);
  void expandGlobalAvgPool(const Node& n, const Bounds& b, const std::vector<double>& radius);
  void expandAvgPool(const Node& n, const Bounds& b, const std::vector<double>& radius);
  void expandClip(const Node& n, const Bounds& b);

  const Graph& g_;
  const std::vector<NodeRange>& r_;
  const std::vector<NodeRange>& diff_;  // Max2 nodes: bounds of a - b
  const std::vector<int>& level_;
  int depth_;
  std::size_t rows_ = 0;
  std::map<int, Bounds> pending_;
  std::vector<std::vector<double>> spare_;
  std::vector<double> cL_, cU_, mag_;
};

}  // namespace peat::save::detail
