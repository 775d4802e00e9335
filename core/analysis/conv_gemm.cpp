// SPDX-License-Identifier: MIT
// Convolutions as the GEMMs they are (ConvGemm, session_analysis.h): forward, grad_weight and
// grad_input calls rebuilt from their recorded operands, so that the detector's bounds and format
// replays apply to them as to linear and matmul calls.
#include "core/analysis/session_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

namespace peat::analyzer {

namespace {
// A recorded parameter of a conv call, or its default when the profiler left it out.
int64_t paramOr(const std::map<std::string, int64_t>& params, const char* key, int64_t fallback) {
  const auto it = params.find(key);
  return it == params.end() ? fallback : it->second;
}
// A conv call's groups, stride, padding and dilation (height, then width).
struct ConvGeometry {
  int64_t groups, sh, sw, ph, pw, dh, dw;
};
ConvGeometry geometryOf(const std::map<std::string, int64_t>& params) {
  const int64_t sh = paramOr(params, "stride", 1), ph = paramOr(params, "padding", 0), dh = paramOr(params, "dilation_h", 1);
  return {paramOr(params, "groups", 1),          sh, paramOr(params, "stride_w", sh), ph, paramOr(params, "padding_w", ph),
          dh, paramOr(params, "dilation_w", dh)};
}
// im2col of x [N, Cin, H, W] for each of G groups: [G, N Ho Wo, Cin/G kh kw], 0 where a tap falls in
// the padding. Row (g, n, oy, ox) is the window of output position (oy, ox) over group g's channels.
std::vector<float> im2colGroups(const float* x, const std::vector<uint64_t>& sx, uint64_t G, uint64_t kh, uint64_t kw,
                                uint64_t ho, uint64_t wo, const ConvGeometry& c) {
  const uint64_t batch = sx[0], cin = sx[1], h = sx[2], wd = sx[3], cinG = cin / G, taps = cinG * kh * kw;
  const uint64_t m = batch * ho * wo;
  std::vector<float> out(G * m * taps, 0.0f);
  for (uint64_t g = 0; g < G; ++g)
    for (uint64_t n = 0; n < batch; ++n)
      for (uint64_t oy = 0; oy < ho; ++oy)
        for (uint64_t ox = 0; ox < wo; ++ox) {
          float* row = out.data() + (g * m + (n * ho + oy) * wo + ox) * taps;
          for (uint64_t ci = 0; ci < cinG; ++ci)
            for (uint64_t ky = 0; ky < kh; ++ky)
              for (uint64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = int64_t(oy) * c.sh - c.ph + int64_t(ky) * c.dh;
                const int64_t ix = int64_t(ox) * c.sw - c.pw + int64_t(kx) * c.dw;
                if (iy >= 0 && iy < int64_t(h) && ix >= 0 && ix < int64_t(wd))
                  row[(ci * kh + ky) * kw + kx] = x[((n * cin + g * cinG + ci) * h + uint64_t(iy)) * wd + uint64_t(ix)];
              }
        }
  return out;
}
}  // namespace

std::vector<float> ConvGemm::toGemm(const std::vector<float>& y) const {
  std::vector<float> out(y.size());
  const uint64_t perGroup = cout / groups;
  for (uint64_t b = 0; b < n; ++b)
    for (uint64_t c = 0; c < cout; ++c) {
      const uint64_t g = c / perGroup, cg = c % perGroup;
      for (uint64_t p = 0; p < positions; ++p)
        out[((g * n + b) * positions + p) * perGroup + cg] = y[(b * cout + c) * positions + p];
    }
  return out;
}

std::optional<ConvGemm> convGemm(const float* x, const std::vector<uint64_t>& sx, const float* w,
                                 const std::vector<uint64_t>& sw, const float* biasData, std::size_t biasSize,
                                 const std::map<std::string, int64_t>& params, const std::vector<uint64_t>& outShape) {
  const ConvGeometry geometry = geometryOf(params);
  const int64_t groups = geometry.groups;
  if (paramOr(params, "variant", 0) != 0 || groups < 1 || outShape.size() != 4) return std::nullopt;
  if (sx.size() != 4 || sw.size() != 4 || outShape[1] != sw[0]) return std::nullopt;
  const uint64_t G = uint64_t(groups);
  if (sx[1] % G != 0 || sw[0] % G != 0 || sw[1] * G != sx[1]) return std::nullopt;
  const uint64_t batch = sx[0], cin = sx[1], kh = sw[2], kw = sw[3], ho = outShape[2], wo = outShape[3];
  const uint64_t cinG = cin / G, nOut = sw[0], nOutG = nOut / G;
  const uint64_t m = batch * ho * wo, k = cinG * kh * kw;
  if (double(G) * double(m) * double(k) * double(nOutG) > 2e9) return std::nullopt;  // the bound alone would cost more than the call
  // a [G, m, k] and b [G, k, nOutG]
  std::vector<float> a = im2colGroups(x, sx, G, kh, kw, ho, wo, geometry);
  std::vector<float> bt(G * k * nOutG);
  for (uint64_t g = 0; g < G; ++g)
    for (uint64_t o = 0; o < nOutG; ++o)
      for (uint64_t q = 0; q < k; ++q) bt[(g * k + q) * nOutG + o] = w[(g * nOutG + o) * k + q];
  const bool hasBias = biasData && biasSize == nOut;
  ConvGemm out;
  if (G == 1) {
    out.bound = detector::gemmBound(std::move(a), std::move(bt), int64_t(m), int64_t(k), int64_t(nOut), hasBias ? biasData : nullptr);
  } else {
    out.bound = detector::batchedGemmBound(a.data(), bt.data(), int64_t(G), int64_t(m), int64_t(k), int64_t(nOutG), false, false);
    if (hasBias) out.bound.bias.assign(biasData, biasData + nOut);  // [G, Cout/G]: each group's own channels
  }
  out.n = batch;
  out.cout = nOut;
  out.positions = ho * wo;
  out.groups = G;
  return out;
}

std::optional<detector::GemmBound> convGradWeightGemm(const float* dy, const std::vector<uint64_t>& sdy, const float* x,
                                                      const std::vector<uint64_t>& sx,
                                                      const std::map<std::string, int64_t>& params,
                                                      const std::vector<uint64_t>& outShape) {
  const ConvGeometry geometry = geometryOf(params);
  const int64_t groups = geometry.groups;
  if (groups < 1 || sdy.size() != 4 || sx.size() != 4 || outShape.size() != 4 || sdy[0] != sx[0]) return std::nullopt;
  const uint64_t G = uint64_t(groups), batch = sx[0], cin = sx[1];
  const uint64_t cout = sdy[1], ho = sdy[2], wo = sdy[3], kh = outShape[2], kw = outShape[3];
  if (cin % G != 0 || cout % G != 0 || outShape[0] != cout || outShape[1] * G != cin) return std::nullopt;
  if (uint64_t(paramOr(params, "k_h", int64_t(kh))) != kh || uint64_t(paramOr(params, "k_w", int64_t(kw))) != kw) return std::nullopt;
  const uint64_t cinG = cin / G, coutG = cout / G, positions = ho * wo, k = batch * positions, taps = cinG * kh * kw;
  if (double(G) * double(coutG) * double(k) * double(taps) > 2e9) return std::nullopt;
  // a [G, coutG, k] = dY_g, b [G, k, taps] = im2col(x_g)^T
  std::vector<float> a(G * coutG * k);
  for (uint64_t g = 0; g < G; ++g)
    for (uint64_t o = 0; o < coutG; ++o)
      for (uint64_t n = 0; n < batch; ++n)
        for (uint64_t p = 0; p < positions; ++p)
          a[(g * coutG + o) * k + n * positions + p] = dy[(n * cout + g * coutG + o) * positions + p];
  std::vector<float> b = im2colGroups(x, sx, G, kh, kw, ho, wo, geometry);
  if (G == 1) return detector::gemmBound(std::move(a), std::move(b), int64_t(coutG), int64_t(k), int64_t(taps));
  return detector::batchedGemmBound(a.data(), b.data(), int64_t(G), int64_t(coutG), int64_t(k), int64_t(taps), false, false);
}

std::optional<ConvGemm> convGradInputGemm(const float* dy, const std::vector<uint64_t>& sdy, const float* w,
                                          const std::vector<uint64_t>& sw, const std::map<std::string, int64_t>& params,
                                          const std::vector<uint64_t>& outShape) {
  const auto [groups, sh, sw_, ph, pw, dh, dw] = geometryOf(params);
  if (groups < 1 || sdy.size() != 4 || sw.size() != 4 || outShape.size() != 4 || sdy[0] != outShape[0]) return std::nullopt;
  const uint64_t G = uint64_t(groups), batch = sdy[0], cout = sdy[1], ho = sdy[2], wo = sdy[3];
  const uint64_t cin = outShape[1], h = outShape[2], wd = outShape[3], kh = sw[2], kw = sw[3];
  if (cout % G != 0 || cin % G != 0 || sw[0] != cout || sw[1] * G != cin) return std::nullopt;
  if (sh < 1 || sw_ < 1) return std::nullopt;
  const uint64_t cinG = cin / G, coutG = cout / G, positions = h * wd, m = batch * positions, k = coutG * kh * kw;
  if (double(G) * double(m) * double(k) * double(cinG) > 2e9) return std::nullopt;  // the bound alone would cost more than the call
  // a [G, m, k]: row (n, iy, ix), column (o, ky, kx) holds dY[n, o, oy, ox] for the output position
  // whose window puts tap (ky, kx) on (iy, ix), else 0; b [G, k, cinG] = w_g as [Cout/G kh kw, Cin/G]
  std::vector<float> a(G * m * k, 0.0f), b(G * k * cinG);
  for (uint64_t g = 0; g < G; ++g)
    for (uint64_t n = 0; n < batch; ++n)
      for (uint64_t iy = 0; iy < h; ++iy)
        for (uint64_t ix = 0; ix < wd; ++ix) {
          float* row = a.data() + (g * m + (n * h + iy) * wd + ix) * k;
          for (uint64_t ky = 0; ky < kh; ++ky) {
            const int64_t ty = int64_t(iy) + ph - int64_t(ky) * dh;
            if (ty < 0 || ty % sh != 0 || ty / sh >= int64_t(ho)) continue;
            for (uint64_t kx = 0; kx < kw; ++kx) {
              const int64_t tx = int64_t(ix) + pw - int64_t(kx) * dw;
              if (tx < 0 || tx % sw_ != 0 || tx / sw_ >= int64_t(wo)) continue;
              const uint64_t oy = uint64_t(ty / sh), ox = uint64_t(tx / sw_);
              for (uint64_t o = 0; o < coutG; ++o)
                row[(o * kh + ky) * kw + kx] = dy[((n * cout + g * coutG + o) * ho + oy) * wo + ox];
            }
          }
        }
  for (uint64_t g = 0; g < G; ++g)
    for (uint64_t o = 0; o < coutG; ++o)
      for (uint64_t ci = 0; ci < cinG; ++ci)
        for (uint64_t t = 0; t < kh * kw; ++t)
          b[(g * k + o * kh * kw + t) * cinG + ci] = w[((g * coutG + o) * cinG + ci) * kh * kw + t];
  ConvGemm out;
  out.bound = G == 1 ? detector::gemmBound(std::move(a), std::move(b), int64_t(m), int64_t(k), int64_t(cinG))
                     : detector::batchedGemmBound(a.data(), b.data(), int64_t(G), int64_t(m), int64_t(k), int64_t(cinG), false, false);
  out.n = batch;
  out.cout = cin;
  out.positions = positions;
  out.groups = G;
  return out;
}

}  // namespace peat::analyzer
