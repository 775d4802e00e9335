// SPDX-License-Identifier: MIT
// SAVE's inference engine: every op of a graph run over a batch (runNode, runAll), and one output
// element recomputed alone with the same bits (elementOf), for the recomputation verifier.
#include "core/save/graph.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "core/save/engine_simd.h"
#include "core/util/parallel.h"
#include "core/util/worker_pool.h"

// The engine's scalar arithmetic with fused multiply-adds: a clone for CPUs with FMA instructions
// (inlined, vectorised) beside the default (libm's std::fma, the same bits).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PEAT_ENGINE_CLONES __attribute__((target_clones("fma", "default")))
#else
#define PEAT_ENGINE_CLONES
#endif

namespace peat::save {

namespace {

// The transformer ops' arithmetic, shared by runNode and elementOf so that recomputing one element
// repeats the full run bit for bit: each row's statistics in one fixed order, then the element.
void layerNormStats(const float* x, int64_t w, float eps, float& mean, float& rstd) {
  float s = 0;
  for (int64_t i = 0; i < w; ++i) s += x[i];
  mean = s / float(w);
  float v = 0;
  for (int64_t i = 0; i < w; ++i) {
    const float d = x[i] - mean;
    v += d * d;
  }
  rstd = 1.0f / std::sqrt(v / float(w) + eps);
}
inline float layerNormOf(float x, float mean, float rstd, float gamma, float beta) {
  return (x - mean) * rstd * gamma + beta;
}

void softmaxStats(const float* x, int64_t n, float& max, float& sum) {
  max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
}
inline float softmaxOf(float x, float max, float sum) { return std::exp(x - max) / sum; }

inline float geluOf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
inline float sigmoidOf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Embed: the table row that id `x` names (negative ids count from the end, as ONNX's Gather), or
// nullptr for anything else: an id outside [-rows, rows), a fraction, NaN (a corrupted id).
inline const float* embedRow(const Node& n, float x) {
  const int64_t features = n.features(), rows = int64_t(n.weight.size()) / features;
  if (!(x >= -float(rows) && x < float(rows)) || x != std::floor(x)) return nullptr;
  const int64_t id = int64_t(x) < 0 ? int64_t(x) + rows : int64_t(x);
  return n.weight.data() + id * features;
}

// out[h, m, n] = sum_k a[h, m, k] * b[h, n, k], k in order.
// One output element of an average pool over one sample `x`: the window's elements summed in
// (row, column) order, padding skipped (it adds zero), divided by kernel^2 (padding counted).
inline float avgPoolElement(const Node& n, const Node& src, const float* x, int64_t e) {
  const int64_t h = src.shape[1], w = src.shape[2], oh = n.shape[1], ow = n.shape[2];
  const int64_t ch = e / (oh * ow), y = (e / ow) % oh, xx = e % ow;
  float acc = 0;
  for (int64_t ky = 0; ky < n.kernel; ++ky) {
    const int64_t iy = y * n.stride + ky - n.padding;
    if (iy < 0 || iy >= h) continue;
    for (int64_t kx = 0; kx < n.kernel; ++kx) {
      const int64_t ix = xx * n.stride + kx - n.padding;
      if (ix >= 0 && ix < w) acc += x[(ch * h + iy) * w + ix];
    }
  }
  return acc / float(n.kernel * n.kernel);
}

// Calls f(x, o, w) for every row of the batch that a LayerNorm or a Softmax normalises: x its w
// inputs, o its w outputs.
template <class F>
void forEachFeatureRow(const Node& n, int64_t batch, const float* in, float* out, F&& f) {
  const int64_t w = n.features();
  for (int64_t r = 0; r < batch * n.rows(); ++r) f(in + r * w, out + r * w, w);
}

// The engine's dot product: acc, then each a[i] b[i] added in order with one rounding (a fused
// multiply-add), as its GEMMs (engine_simd.h). Cloned for CPUs with FMA instructions; the default
// clone's std::fma gives the same bits through libm.
PEAT_ENGINE_CLONES float fmaDot(const float* a, const float* b, int64_t n, float acc) {
  for (int64_t i = 0; i < n; ++i) acc = std::fma(a[i], b[i], acc);
  return acc;
}

float matmulElement(const Node& n, int64_t k, const float* a, const float* b, int64_t e) {
  const int64_t rows = n.shape[1], cols = n.shape[2];
  const int64_t h = e / (rows * cols), m = (e / cols) % rows, c = e % cols;
  return fmaDot(a + (h * rows + m) * k, b + (h * cols + c) * k, k, 0.0f);
}

// One output of a convolution (affineElement): bias, then every tap in (channel, kernel row,
// kernel column) order, the zero padding included (its product can turn a -0 sum into +0).
PEAT_ENGINE_CLONES float convElement(const Node& n, const Node& src, const float* x, int64_t element) {
  const int64_t cg = groupChannels(n, src), h = src.shape[1], w = src.shape[2], k = n.kernel;
  const int64_t oh = n.shape[1], ow = n.shape[2];
  const int64_t o = element / (oh * ow), y = (element / ow) % oh, xx = element % ow, c0 = firstChannel(n, src, o);
  float acc = n.bias.empty() ? 0.0f : n.bias[std::size_t(o)];
  const float* wr = n.weight.data() + o * cg * k * k;
  for (int64_t c = c0; c < c0 + cg; ++c)
    for (int64_t ky = 0; ky < k; ++ky) {
      const int64_t iy = y * n.stride + ky * n.dilation - n.padding;
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t ix = xx * n.stride + kx * n.dilation - n.padding;
        const float xv = iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0f : x[(c * h + iy) * w + ix];
        acc = std::fma(*wr++, xv, acc);
      }
    }
  return acc;
}

}  // namespace

namespace {

// The output columns [x0, x1) whose input column x * stride + off lies inside [0, w).
inline void insideColumns(int64_t ow, int64_t w, int64_t stride, int64_t off, int64_t& x0, int64_t& x1) {
  x0 = std::min(ow, off >= 0 ? 0 : (-off + stride - 1) / stride);
  x1 = std::max(x0, std::min(ow, w - off > 0 ? (w - off + stride - 1) / stride : 0));
}

// im2col of output positions [p0, p1) of one sample: those columns of every row of cols (rows in
// (channel, kernel row, kernel column) order, `positions` long; the zero padding written as 0).
void unfoldPositions(const Node& n, const Node& src, const float* x, float* cols, int64_t p0, int64_t p1) {
  const int64_t ci = src.shape[0], h = src.shape[1], w = src.shape[2], k = n.kernel, st = n.stride, dl = n.dilation;
  const int64_t oh = n.shape[1], ow = n.shape[2], positions = oh * ow;
  for (int64_t c = 0; c < ci; ++c)
    for (int64_t ky = 0; ky < k; ++ky)
      for (int64_t kx = 0; kx < k; ++kx) {
        float* row = cols + ((c * k + ky) * k + kx) * positions;
        const int64_t off = kx * dl - n.padding;
        int64_t x0, x1;
        insideColumns(ow, w, st, off, x0, x1);
        for (int64_t y = p0 / ow; y < oh && y * ow < p1; ++y) {
          const int64_t a = std::max(p0 - y * ow, int64_t(0)), b = std::min(p1 - y * ow, ow);
          float* o = row + y * ow;
          const int64_t iy = y * st + ky * dl - n.padding;
          if (iy < 0 || iy >= h) {
            std::fill(o + a, o + b, 0.0f);
            continue;
          }
          const float* xr = x + (c * h + iy) * w;
          const int64_t ia = std::max(a, x0), ib = std::max(ia, std::min(b, x1));
          std::fill(o + a, o + ia, 0.0f);
          if (st == 1)
            std::copy(xr + ia + off, xr + ib + off, o + ia);
          else
            for (int64_t xx = ia; xx < ib; ++xx) o[xx] = xr[xx * st + off];
          std::fill(o + ib, o + b, 0.0f);
        }
      }
}

std::atomic<unsigned> engineWorkers{1};

// The engine's fork-joins (one or more per layer) run on workers kept between them.
util::WorkerPool& enginePool() {
  static util::WorkerPool pool;
  return pool;
}

// As util::parallelRanges, on the engine's kept workers: part p covers [count p / parts, count (p + 1) / parts).
template <class F>
void parallelRanges(int64_t count, unsigned parts, F&& body) {
  if (count <= 0) return;
  parts = unsigned(std::clamp<int64_t>(int64_t(parts), 1, count));
  enginePool().run(parts, [&](unsigned p) {
    body(count * int64_t(p) / int64_t(parts), count * int64_t(p + 1) / int64_t(parts), p);
  });
}
std::atomic<int64_t> engineMinWork{int64_t(1) << 20};

// The workers for `work` multiply-adds: one below the threshold (about a million by default: a
// thread costs more than it saves on less).
unsigned workersFor(int64_t work) { return work < engineMinWork.load() ? 1u : engineWorkers.load(); }

// Output positions [p0, p1) of every output channel of a (grouped) convolution's GEMM over the
// unfolded input `cols` (rows `positions` long): one convGemm per group.
void convPositions(const Node& n, int64_t co, int64_t taps, const float* cols, int64_t positions, float* out,
                   int64_t p0, int64_t p1) {
  for (int64_t gr = 0; gr < n.groups; ++gr)
    detail::convGemm(n.weight.data() + gr * co * taps, co, taps, cols + gr * taps * positions + p0, p1 - p0, positions,
                     n.bias.empty() ? nullptr : n.bias.data() + gr * co, out + gr * co * positions + p0);
}

// Splits [0, count) between the workers in ranges that are multiples of `unit` (whole register
// blocks of the GEMM) and calls body(first, last) for each.
template <class F>
void splitRanges(int64_t count, int64_t unit, unsigned workers, F&& body) {
  const int64_t units = (count + unit - 1) / unit;
  if (workers <= 1 || units < 2) {
    body(int64_t(0), count);
    return;
  }
  parallelRanges(units, workers, [&](int64_t a, int64_t b, unsigned) { body(a * unit, std::min(count, b * unit)); });
}

// Calls f(i) for every element i < count, split between the workers where the pass is big enough
// (about `cost` multiply-adds per element): element-wise ops give the same bits in any split.
template <class F>
void forElements(int64_t count, int64_t cost, F&& f) {
  splitRanges(count, 256, workersFor(count * cost), [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) f(i);
  });
}

// Output channels [first, last) of a depthwise convolution (one input channel per output channel)
// of one sample without im2col: each channel's input is laid out zero-padded and split by column
// into `stride` phases (phase q holds the padded columns q, q + stride, ...), so that every tap of a
// row of outputs reads consecutive elements; then every output starts at its bias and adds its taps
// in (kernel row, kernel column) order, the padding's zeros included, as convElement does.
void depthwiseChannels(const Node& n, const Node& src, const float* x, float* out, int64_t first, int64_t last) {
  const int64_t h = src.shape[1], w = src.shape[2], k = n.kernel, st = n.stride, dl = n.dilation, pad = n.padding;
  const int64_t oh = n.shape[1], ow = n.shape[2], lanes = detail::floatLanes(), reach = (k - 1) * dl;
  const int64_t rows = (oh - 1) * st + reach + 1;                             // padded rows read
  const int64_t cols = (ow + lanes - 1) / lanes * lanes + reach / st + lanes;  // per phase, with the vectors' overrun
  std::vector<int64_t> tapOffset(std::size_t(k * k));
  for (int64_t ky = 0; ky < k; ++ky)
    for (int64_t kx = 0; kx < k; ++kx)
      tapOffset[std::size_t(ky * k + kx)] = ((kx * dl) % st * rows + ky * dl) * cols + kx * dl / st;
  // Every channel writes the same places of `padded`: the padding's zeros are written once.
  std::vector<float> padded(std::size_t(st * rows * cols), 0.0f);
  const int64_t lastRow = std::min(h, rows - pad);
  for (int64_t c = first; c < last; ++c) {
    const float* xc = x + c * h * w;
    for (int64_t iy = 0; iy < lastRow; ++iy) {
      const float* from = xc + iy * w;
      if (st == 1) {  // one phase: the row as it lies
        std::copy(from, from + std::max(int64_t(0), std::min(w, cols - pad)), padded.data() + (iy + pad) * cols + pad);
        continue;
      }
      for (int64_t q = 0; q < st; ++q) {  // the input columns ix of phase q: (ix + pad) % st == q
        float* to = padded.data() + (q * rows + iy + pad) * cols;
        const int64_t ix0 = ((q - pad) % st + st) % st;
        for (int64_t ix = ix0, j = (ix0 + pad) / st; ix < w && j < cols; ix += st, ++j) to[j] = from[ix];
      }
    }
    detail::depthwisePlane(n.weight.data() + c * k * k, k * k, tapOffset.data(), n.bias.empty() ? 0.0f : n.bias[std::size_t(c)],
                           padded.data(), st * cols, oh, ow, out + c * oh * ow);
  }
}

// An element-wise pass over `count` elements, split between the workers where it is big enough.
void elementwisePass(detail::Elementwise op, const float* a, const float* b, float p, float q, float* out, int64_t count) {
  splitRanges(count, 256, workersFor(count * 4), [&](int64_t x, int64_t y) {
    detail::elementwise(op, a + x, b ? b + x : nullptr, p, q, out + x, y - x);
  });
}

// A convolution of `batch` samples: im2col and a GEMM per sample (a 1x1 kernel with stride 1 and no
// padding reads its input as it lies). Each output element's sum is the same for any worker count.
void runConv(const Node& n, const Node& src, const float* in, int64_t batch, float* out) {
  const int64_t co = n.shape[0] / n.groups, positions = n.shape[1] * n.shape[2], taps = convTaps(n, src);
  const int64_t inSize = src.size(), size = n.size(), channels = n.shape[0];
  const bool direct = n.kernel == 1 && n.stride == 1 && n.padding == 0;
  const unsigned workers = workersFor(batch * size * taps);
  if (co == 1 && taps == n.kernel * n.kernel) {  // depthwise
    if (batch >= int64_t(workers))
      parallelRanges(batch, workers, [&](int64_t a, int64_t b, unsigned) {
        for (int64_t s = a; s < b; ++s) depthwiseChannels(n, src, in + s * inSize, out + s * size, 0, channels);
      });
    else
      for (int64_t s = 0; s < batch; ++s)
        splitRanges(channels, 1, workers, [&](int64_t a, int64_t b) {
          depthwiseChannels(n, src, in + s * inSize, out + s * size, a, b);
        });
    return;
  }
  // Positions [p0, p1) of sample s: their columns of the unfolded input, then their GEMM.
  auto part = [&](int64_t s, float* cols, int64_t p0, int64_t p1) {
    const float* x = in + s * inSize;
    if (!direct) unfoldPositions(n, src, x, cols, p0, p1);
    convPositions(n, co, taps, direct ? x : cols, positions, out + s * size, p0, p1);
  };
  const std::size_t colsSize = direct ? 0 : std::size_t(taps * n.groups * positions);
  if (batch >= int64_t(workers)) {  // whole samples per worker, each with its own unfolded input
    parallelRanges(batch, workers, [&](int64_t a, int64_t b, unsigned) {
      std::unique_ptr<float[]> cols(new float[colsSize]);  // every element is written before it is read
      for (int64_t s = a; s < b; ++s) part(s, cols.get(), 0, positions);
    });
    return;
  }
  std::unique_ptr<float[]> cols(new float[colsSize]);  // one sample's positions split between the workers
  for (int64_t s = 0; s < batch; ++s)
    splitRanges(positions, 32, workers, [&](int64_t a, int64_t b) { part(s, cols.get(), a, b); });
}

// Outputs [a, b) of a linear layer on one row x: each bias, then its taps in order with one fused
// multiply-add each (as fmaDot, so as affineElement), eight outputs at a time so that eight chains
// of multiply-adds are in flight instead of one.
PEAT_ENGINE_CLONES void linearOutputs(const float* w, const float* bias, int64_t taps, const float* x, int64_t a,
                                      int64_t b, float* out) {
  int64_t o = a;
  for (; o + 8 <= b; o += 8) {
    float acc[8];
    for (int64_t i = 0; i < 8; ++i) acc[i] = bias[o + i];
    const float* row = w + o * taps;
    for (int64_t t = 0; t < taps; ++t) {
      const float xv = x[t];
      for (int64_t i = 0; i < 8; ++i) acc[i] = std::fma(row[i * taps + t], xv, acc[i]);
    }
    std::copy(acc, acc + 8, out + o);
  }
  for (; o < b; ++o) out[o] = fmaDot(w + o * taps, x, taps, bias[o]);
}

// A token-wise linear layer as one GEMM: positions are the rows of every sample.
void runLinear(const Node& n, const float* in, int64_t batch, float* out) {
  const int64_t positions = batch * n.rows(), features = n.features(), taps = int64_t(n.weight.size()) / features;
  const unsigned workers = workersFor(positions * features * taps);
  if (positions < 4) {  // a row or three (a classifier's head at batch 1): eight outputs at a time
    for (int64_t p = 0; p < positions; ++p)
      splitRanges(features, 64, workers, [&](int64_t a, int64_t b) {
        linearOutputs(n.weight.data(), n.bias.data(), taps, in + p * taps, a, b, out + p * features);
      });
    return;
  }
  std::vector<float> xt(std::size_t(taps * positions)), yt(std::size_t(features * positions));
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < taps; ++i) xt[std::size_t(i * positions + p)] = in[p * taps + i];
  if (positions >= 32 * int64_t(workers))  // each worker its own positions (its own packed panels)
    splitRanges(positions, 32, workers, [&](int64_t a, int64_t b) {
      detail::convGemm(n.weight.data(), features, taps, xt.data() + a, b - a, positions, n.bias.data(), yt.data() + a);
    });
  else
    splitRanges(features, 8, workers, [&](int64_t a, int64_t b) {
      detail::convGemm(n.weight.data() + a * taps, b - a, taps, xt.data(), positions, positions, n.bias.data() + a,
                       yt.data() + a * positions);
    });
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t o = 0; o < features; ++o) out[p * features + o] = yt[std::size_t(o * positions + p)];
}

// The product of two activations per head, out[h, m, c] = sum_k a[h, m, k] b[h, c, k], as a GEMM
// per head with b transposed: the sum starts at 0 and adds the products in k order, as matmulElement.
void runMatMul(const Node& n, int64_t k, const float* a, int64_t aSize, const float* b, int64_t bSize, int64_t batch,
               float* out) {
  const int64_t heads = n.shape[0], rows = n.shape[1], cols = n.shape[2], size = n.size();
  const unsigned workers = workersFor(batch * size * k);
  parallelRanges(batch * heads, workers, [&](int64_t first, int64_t last, unsigned) {
    std::vector<float> bt(std::size_t(k * cols));
    for (int64_t u = first; u < last; ++u) {
      const int64_t s = u / heads, h = u % heads;
      const float* bh = b + s * bSize + h * cols * k;
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t i = 0; i < k; ++i) bt[std::size_t(i * cols + c)] = bh[c * k + i];
      detail::convGemm(a + s * aSize + h * rows * k, rows, k, bt.data(), cols, cols, nullptr,
                       out + s * size + h * rows * cols);
    }
  });
}

}  // namespace

void setEngineThreads(unsigned threads, int64_t minWork) {
  engineWorkers = util::threadsOr(threads);
  engineMinWork = minWork;
}
unsigned engineThreads() { return engineWorkers.load(); }

void unfold(const Node& n, const Node& src, const float* x, float* cols) {
  unfoldPositions(n, src, x, cols, 0, n.shape[1] * n.shape[2]);
}

float affineElement(const Node& n, const Node& src, const float* x, int64_t element) {
  if (n.op == Op::Linear) {  // row `element / out` of the input, output feature `element % out`
    const int64_t out = n.features(), inSize = int64_t(n.weight.size()) / out;
    return fmaDot(n.weight.data() + (element % out) * inSize, x + (element / out) * inSize, inSize,
                  n.bias[std::size_t(element % out)]);
  }
  return convElement(n, src, x, element);  // conv2d as a GEMM over the unfolded input (im2col)
}

float elementOf(const Graph& g, int index, const std::vector<const float*>& in, int64_t e) {
  const Node& n = g.nodes[std::size_t(index)];
  const Node& src = g.nodes[std::size_t(n.inputs.at(0))];
  switch (n.op) {
    case Op::Input:
      throw SaveError("the input node has nothing to compute");
    case Op::Linear:
    case Op::Conv2d:
      return affineElement(n, src, in[0], e);
    case Op::Flatten:
      return in[0][e];
    case Op::Relu:
      return in[0][e] > 0 ? in[0][e] : 0.0f;
    case Op::Add:
      return in[0][e] + in[1][e];
    case Op::Max2:
      return std::max(in[0][e], in[1][e]);
    case Op::Select: {
      const int64_t at = n.gather[std::size_t(e)];
      if (at < 0) return 0.0f;
      if (n.inputs.size() == 1) return in[0][at];
      const std::vector<int64_t> off = selectOffsets(g, n);
      const std::size_t k = selectPart(off, at);
      return in[k][at - off[k]];
    }
    case Op::BatchNorm: {
      const int64_t ch = e / (n.size() / n.shape[0]);
      return in[0][e] * n.weight[std::size_t(ch)] + n.bias[std::size_t(ch)];
    }
    case Op::MaxPool2d: {
      const int64_t oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
      const int64_t ch = e / (oh * ow), y = (e / ow) % oh, xx = e % ow;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t ky = 0; ky < n.kernel; ++ky)
        for (int64_t kx = 0; kx < n.kernel; ++kx)
          m = std::max(m, in[0][poolInput(n, h, w, ch, y, xx, ky, kx)]);
      return m;
    }
    case Op::GlobalAvgPool: {
      const int64_t hw = src.size() / n.shape[0];
      float acc = 0;
      for (int64_t i = 0; i < hw; ++i) acc += in[0][e * hw + i];
      return acc / float(hw);
    }
    case Op::AddConst:
      return in[0][e] + n.bias[std::size_t(e)];
    case Op::Gelu:
      return geluOf(in[0][e]);
    case Op::LayerNorm: {
      const int64_t w = n.features();
      float mean, rstd;
      layerNormStats(in[0] + (e / w) * w, w, n.eps, mean, rstd);
      return layerNormOf(in[0][e], mean, rstd, n.weight[std::size_t(e % w)], n.bias[std::size_t(e % w)]);
    }
    case Op::Softmax: {
      const int64_t w = n.features();
      float max, sum;
      softmaxStats(in[0] + (e / w) * w, w, max, sum);
      return softmaxOf(in[0][e], max, sum);
    }
    case Op::MatMul:
      return matmulElement(n, src.shape[2], in[0], in[1], e);
    case Op::Sigmoid:
      return sigmoidOf(in[0][e]);
    case Op::Tanh:
      return std::tanh(in[0][e]);
    case Op::Mul:
      return in[0][e] * in[1][e];
    case Op::Clip:
      return clipOf(in[0][e], n.bias[0], n.bias[1]);
    case Op::AvgPool2d:
      return avgPoolElement(n, src, in[0], e);
    case Op::Embed: {
      const float* row = embedRow(n, in[0][e / n.features()]);
      return row ? row[e % n.features()] : std::numeric_limits<float>::quiet_NaN();
    }
  }
  return 0;
}

// One switch over every op of the graph language (about 130 lines): each case is the op's whole
// definition, kept side by side so that the exact engine and the range analysis can be read together.
void runNode(const Graph& g, int index, const std::vector<const float*>& in, int64_t batch, float* out) {
  const Node& n = g.nodes[std::size_t(index)];
  const int64_t size = n.size();
  const Node* src = n.inputs.empty() ? nullptr : &g.nodes[std::size_t(n.inputs[0])];
  const int64_t inSize = src ? src->size() : 0;
  switch (n.op) {
    case Op::Input:
      throw SaveError("the input node has nothing to run");
    case Op::Flatten:
      std::memcpy(out, in[0], std::size_t(batch * size) * sizeof(float));
      return;
    case Op::Relu:
      elementwisePass(detail::Elementwise::Relu, in[0], nullptr, 0, 0, out, batch * size);
      return;
    case Op::Add:
      elementwisePass(detail::Elementwise::Add, in[0], in[1], 0, 0, out, batch * size);
      return;
    case Op::Max2:
      elementwisePass(detail::Elementwise::Max2, in[0], in[1], 0, 0, out, batch * size);
      return;
    case Op::Select: {
      if (n.inputs.size() == 1) {
        for (int64_t s = 0; s < batch; ++s)
          for (int64_t i = 0; i < size; ++i) {
            const int64_t at = n.gather[std::size_t(i)];
            out[s * size + i] = at < 0 ? 0.0f : in[0][s * inSize + at];
          }
        return;
      }
      const std::vector<int64_t> off = selectOffsets(g, n);  // a concatenation: each input's samples
      for (int64_t i = 0; i < size; ++i) {
        const int64_t at = n.gather[std::size_t(i)];
        const std::size_t k = at < 0 ? 0 : selectPart(off, at);
        const int64_t part = off[k + 1] - off[k];
        for (int64_t s = 0; s < batch; ++s) out[s * size + i] = at < 0 ? 0.0f : in[k][s * part + at - off[k]];
      }
      return;
    }
    case Op::BatchNorm: {
      const int64_t c = n.shape[0], hw = size / c;
      splitRanges(batch * c, 1, workersFor(batch * size * 4), [&](int64_t a, int64_t b) {
        for (int64_t r = a; r < b; ++r)  // row r: sample r / c, channel r % c
          detail::elementwise(detail::Elementwise::Affine, in[0] + r * hw, nullptr, n.weight[std::size_t(r % c)],
                              n.bias[std::size_t(r % c)], out + r * hw, hw);
      });
      return;
    }
    case Op::Linear:
      runLinear(n, in[0], batch, out);
      return;
    case Op::AddConst:
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t i = 0; i < size; ++i) out[s * size + i] = in[0][s * size + i] + n.bias[std::size_t(i)];
      return;
    case Op::Gelu:
      forElements(batch * size, 32, [&](int64_t i) { out[i] = geluOf(in[0][i]); });
      return;
    case Op::Sigmoid:
      forElements(batch * size, 32, [&](int64_t i) { out[i] = sigmoidOf(in[0][i]); });
      return;
    case Op::Tanh:
      forElements(batch * size, 32, [&](int64_t i) { out[i] = std::tanh(in[0][i]); });
      return;
    case Op::Mul:
      elementwisePass(detail::Elementwise::Mul, in[0], in[1], 0, 0, out, batch * size);
      return;
    case Op::Clip:
      elementwisePass(detail::Elementwise::Clip, in[0], nullptr, n.bias[0], n.bias[1], out, batch * size);
      return;
    case Op::AvgPool2d:
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t e = 0; e < size; ++e) out[s * size + e] = avgPoolElement(n, *src, in[0] + s * inSize, e);
      return;
    case Op::Embed: {
      const int64_t f = n.features();
      for (int64_t t = 0; t < batch * inSize; ++t) {  // id t of every sample: one output row each
        const float* row = embedRow(n, in[0][t]);
        if (row)
          std::memcpy(out + t * f, row, std::size_t(f) * sizeof(float));
        else
          std::fill(out + t * f, out + (t + 1) * f, std::numeric_limits<float>::quiet_NaN());
      }
      return;
    }
    case Op::LayerNorm:
      forEachFeatureRow(n, batch, in[0], out, [&](const float* x, float* o, int64_t w) {
        float mean, rstd;
        layerNormStats(x, w, n.eps, mean, rstd);
        for (int64_t i = 0; i < w; ++i) o[i] = layerNormOf(x[i], mean, rstd, n.weight[std::size_t(i)], n.bias[std::size_t(i)]);
      });
      return;
    case Op::Softmax:
      forEachFeatureRow(n, batch, in[0], out, [](const float* x, float* o, int64_t w) {
        float max, sum;
        softmaxStats(x, w, max, sum);
        for (int64_t i = 0; i < w; ++i) o[i] = softmaxOf(x[i], max, sum);
      });
      return;
    case Op::MatMul:
      runMatMul(n, src->shape[2], in[0], inSize, in[1], g.nodes[std::size_t(n.inputs[1])].size(), batch, out);
      return;
    case Op::Conv2d:
      runConv(n, *src, in[0], batch, out);
      return;
    case Op::MaxPool2d: {
      const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src->shape[1], w = src->shape[2];
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t xx = 0; xx < ow; ++xx) {
              float m = -std::numeric_limits<float>::infinity();
              for (int64_t ky = 0; ky < n.kernel; ++ky)
                for (int64_t kx = 0; kx < n.kernel; ++kx)
                  m = std::max(m, in[0][s * inSize + poolInput(n, h, w, ch, y, xx, ky, kx)]);
              out[s * size + (ch * oh + y) * ow + xx] = m;
            }
      return;
    }
    case Op::GlobalAvgPool: {
      const int64_t c = n.shape[0], hw = inSize / c;
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t ch = 0; ch < c; ++ch) {
          float acc = 0;
          for (int64_t i = 0; i < hw; ++i) acc += in[0][s * inSize + ch * hw + i];
          out[s * size + ch] = acc / float(hw);
        }
      return;
    }
  }
}

void runAllInto(const Graph& g, const float* input, int64_t batch, std::vector<std::vector<float>>& act) {
  act.resize(g.nodes.size());
  act[0].assign(input, input + batch * g.nodes[0].size());
  for (std::size_t i = 1; i < g.nodes.size(); ++i) {
    std::vector<const float*> in;
    for (int j : g.nodes[i].inputs) in.push_back(act[std::size_t(j)].data());
    act[i].resize(std::size_t(batch * g.nodes[i].size()));
    runNode(g, int(i), in, batch, act[i].data());
  }
}

std::vector<std::vector<float>> runAll(const Graph& g, const float* input, int64_t batch) {
  std::vector<std::vector<float>> act;
  runAllInto(g, input, batch, act);
  return act;
}

}  // namespace peat::save
