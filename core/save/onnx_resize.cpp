// SPDX-License-Identifier: MIT
// ONNX's Resize (opset 11 and later; Upsample's and opset 10's asymmetric form too) onto SAVE's
// existing ops: nearest is one gather (exact, a Select); linear and cubic are separable, so each
// resized axis is a linear layer whose weights are that axis' interpolation matrix (rows summing
// to 1), between transposes that bring the axis last. The range analysis bounds linear layers
// soundly whatever their weights, so nothing new needs a transfer function. The coordinates follow
// onnxruntime's CPU kernel (float arithmetic, the same clamping), the reference the tests use.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <cmath>

namespace peat::save::onnx_import {

namespace {

struct ResizeSettings {
  std::string mode = "nearest", transform = "half_pixel", nearest = "round_prefer_floor";
  float cubicA = -0.75f, extrapolation = 0.0f;
  bool excludeOutside = false;
};

// The input coordinate of output index `o` along an axis of `in` elements resized to `out` with
// `scale`, as onnxruntime computes it; false where tf_crop_and_resize extrapolates.
bool originalCoordinate(const ResizeSettings& s, int64_t o, int64_t in, int64_t out, float scale, float roiStart,
                        float roiEnd, float& x) {
  const float xr = float(o), lin = float(in), lout = float(out);
  const std::string& t = s.transform;
  if (t == "half_pixel") x = (xr + 0.5f) / scale - 0.5f;
  else if (t == "pytorch_half_pixel") x = out > 1 ? (xr + 0.5f) / scale - 0.5f : 0.0f;
  else if (t == "align_corners") x = out == 1 ? 0.0f : xr * (lin - 1) / (lout - 1);
  else if (t == "asymmetric") x = xr / scale;
  else if (t == "half_pixel_symmetric") {
    const float adjustment = lout / (scale * lin), center = lin / 2;
    x = center * (1 - adjustment) + (xr + 0.5f) / scale - 0.5f;
  } else {  // tf_crop_and_resize
    x = out > 1 ? roiStart * (lin - 1) + (xr * (roiEnd - roiStart) * (lin - 1)) / (lout - 1)
                : 0.5f * (roiStart + roiEnd) * (lin - 1);
    if (x < 0 || x > lin - 1) return false;
  }
  return true;
}

int64_t nearestIndex(const ResizeSettings& s, float x, bool downsampling) {
  const std::string& m = s.nearest;
  if (m == "floor") return int64_t(std::floor(x));
  if (m == "ceil") return int64_t(std::ceil(x));
  if (m == "round_prefer_ceil") return int64_t(std::round(x));
  // round_prefer_floor (onnxruntime's: a tie rounds down; "simple" is Resize-10's: ceil when downsampling)
  if (m == "simple") return downsampling ? int64_t(std::ceil(x)) : int64_t(x);
  return x == float(int64_t(x)) + 0.5f ? int64_t(x) : int64_t(std::round(x));
}

float cubicWeight(float t, float a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0.0f;
}

}  // namespace

void Importer::mapResize(const onnx::NodeProto& n) {
  const std::string name = nameOf(n);
  const int x = first(n);
  const std::vector<int64_t> d = dimsOf(n.input(0));
  const std::size_t rank = d.size();
  const bool upsample = n.op_type() == "Upsample" || opset_ < 11;  // X, scales; asymmetric coordinates
  ResizeSettings s;
  if (const auto* a = attribute(n, "mode")) s.mode = a->s();
  if (const auto* a = attribute(n, "coordinate_transformation_mode")) s.transform = a->s();
  if (const auto* a = attribute(n, "nearest_mode")) s.nearest = a->s();
  if (upsample) {
    s.transform = "asymmetric";
    s.nearest = n.op_type() == "Upsample" ? "floor" : "simple";
  }
  s.cubicA = floatAttr(n, "cubic_coeff_a", -0.75f);
  s.extrapolation = floatAttr(n, "extrapolation_value", 0.0f);
  s.excludeOutside = intAttr(n, "exclude_outside", 0) != 0;
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic" && s.mode != "bilinear")
    return refuse(n, "mode '" + s.mode + "' is not one ONNX defines");
  if (s.mode == "bilinear") s.mode = "linear";  // Upsample-7's name
  static const std::set<std::string> transforms{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                "tf_crop_and_resize", "half_pixel_symmetric"};
  if (!transforms.count(s.transform))
    return refuse(n, "coordinate_transformation_mode '" + s.transform + "' is not one ONNX defines");
  static const std::set<std::string> nearestModes{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"};
  if (!nearestModes.count(s.nearest)) return refuse(n, "nearest_mode '" + s.nearest + "' is not one ONNX defines");
  if (intAttr(n, "antialias", 0) != 0) return refuse(n, "antialias=1 (a downsampling filter) is not mapped");
  if (const auto* a = attribute(n, "keep_aspect_ratio_policy"); a && a->s() != "stretch")
    return refuse(n, "keep_aspect_ratio_policy '" + a->s() + "' is not mapped");

  // scales or sizes (constants: exporters compute them from Shape, which folds), per axis
  const auto input = [&](int i) -> const std::string* {
    return n.input_size() > i && !n.input(i).empty() ? &n.input(i) : nullptr;
  };
  std::vector<int64_t> axes = intsAttr(n, "axes");
  for (int64_t& a : axes) a = axisOf(a, rank);
  if (axes.empty())
    for (std::size_t i = 0; i < rank; ++i) axes.push_back(int64_t(i));
  std::vector<float> scales(rank, 1.0f), roiStart(rank, 0.0f), roiEnd(rank, 1.0f);
  std::vector<int64_t> out = d;
  const std::string* scalesIn = upsample ? input(1) : input(2);
  const std::string* sizesIn = upsample ? nullptr : input(3);
  const Constant* sc = scalesIn ? constant(*scalesIn) : nullptr;
  const Constant* sz = sizesIn ? constant(*sizesIn) : nullptr;
  if ((scalesIn && !sc) || (sizesIn && !sz)) return refuse(n, "its scales or sizes are not constants");
  if (n.op_type() == "Upsample" && !scalesIn) {  // Upsample-7: scales as an attribute
    const auto* a = attribute(n, "scales");
    if (!a) return refuse(n, "it has no scales");
    for (std::size_t i = 0; i < rank && i < std::size_t(a->floats_size()); ++i) scales[i] = a->floats(int(i));
  }
  if (sz && !sz->integers.empty()) {
    if (sz->integers.size() != axes.size()) return refuse(n, "its sizes do not name every axis");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const std::size_t a = std::size_t(axes[i]);
      out[a] = sz->integers[i];
      scales[a] = float(out[a]) / float(d[a]);
    }
  } else if (sc && !sc->values.empty()) {
    if (sc->values.size() != axes.size()) return refuse(n, "its scales do not name every axis");
    for (std::size_t i = 0; i < axes.size(); ++i) scales[std::size_t(axes[i])] = sc->values[i];
  }
  if (!(sz && !sz->integers.empty()))
    for (std::size_t a = 0; a < rank; ++a) {
      out[a] = int64_t(scales[a] * float(d[a]));
      // ONNX's definition (its reference and test data) takes the output length as scale x length,
      // onnxruntime as the whole output length: they differ where the product is not whole and the
      // coordinates use the length. Refused rather than computed one way or the other.
      if ((s.transform == "align_corners" || s.transform == "tf_crop_and_resize") && float(out[a]) != scales[a] * float(d[a]))
        return refuse(n, s.transform + " with a scale whose output length is not whole (" + std::to_string(d[a]) + " x " +
                             std::to_string(scales[a]) + ") is computed differently by ONNX's reference and onnxruntime; "
                             "give sizes instead of scales");
    }
  if (s.transform == "tf_crop_and_resize") {
    const Constant* roi = input(1) ? constant(*input(1)) : nullptr;
    if (!roi || roi->values.size() != 2 * axes.size()) return refuse(n, "tf_crop_and_resize without a constant roi");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      roiStart[std::size_t(axes[i])] = roi->values[i];
      roiEnd[std::size_t(axes[i])] = roi->values[i + axes.size()];
    }
  }
  for (std::size_t a = 0; a < rank; ++a) {
    if (!(scales[a] > 0) || out[a] < 1) return refuse(n, "axis " + std::to_string(a) + " resizes to nothing");
    if (countOf(out) > (int64_t(1) << 28)) return refuse(n, "its output holds more than 2^28 elements");
  }

  // each axis as a matrix [out, in] (row o: the weights of input elements for output o) and a bias
  // (tf_crop_and_resize's extrapolation value where a row lies outside); identity axes are skipped
  struct AxisMap {
    std::vector<float> weight, bias;
    std::vector<int64_t> nearest;  // nearest mode: the input index of each output index (-1: outside)
  };
  std::vector<AxisMap> maps(rank);
  std::vector<bool> resized(rank, false);
  for (std::size_t a = 0; a < rank; ++a) {
    const int64_t in = d[a], o = out[a];
    AxisMap& m = maps[a];
    m.weight.assign(std::size_t(o * in), 0.0f);
    m.bias.assign(std::size_t(o), 0.0f);
    m.nearest.assign(std::size_t(o), -1);
    for (int64_t k = 0; k < o; ++k) {
      float xo = 0;
      float* row = m.weight.data() + k * in;
      if (!originalCoordinate(s, k, in, o, scales[a], roiStart[a], roiEnd[a], xo)) {
        m.bias[std::size_t(k)] = s.extrapolation;
        continue;
      }
      if (s.mode == "nearest") {
        const int64_t i = std::clamp<int64_t>(nearestIndex(s, xo, scales[a] < 1), 0, in - 1);
        m.nearest[std::size_t(k)] = i;
        row[i] = 1.0f;
      } else if (s.mode == "linear") {
        const float c = std::max(0.0f, std::min(xo, float(in - 1)));
        const int64_t i1 = std::min(int64_t(c), in - 1), i2 = std::min(i1 + 1, in - 1);
        float w1 = std::fabs(c - float(i2)), w2 = std::fabs(c - float(i1));
        if (i1 == i2) w1 = w2 = 0.5f;
        row[i1] += w1;
        row[i2] += w2;
      } else {  // cubic: four points around floor(x), edge-clamped
        const float f = std::floor(xo), r = xo - f;
        float w[4] = {cubicWeight(1 + r, s.cubicA), cubicWeight(r, s.cubicA), cubicWeight(1 - r, s.cubicA),
                      cubicWeight(2 - r, s.cubicA)};
        if (s.excludeOutside) {
          float sum = 0;
          for (int j = 0; j < 4; ++j) {
            const int64_t i = int64_t(f) - 1 + j;
            if (i < 0 || i >= in) w[j] = 0;
            sum += w[j];
          }
          for (float& v : w) v = sum != 0 ? v / sum : 0;
        }
        for (int j = 0; j < 4; ++j) row[std::clamp<int64_t>(int64_t(f) - 1 + j, 0, in - 1)] += w[j];
      }
    }
    bool identity = o == in;
    for (int64_t k = 0; identity && k < o; ++k)
      for (int64_t i = 0; identity && i < in; ++i)
        identity = m.weight[std::size_t(k * in + i)] == (k == i ? 1.0f : 0.0f) && m.bias[std::size_t(k)] == 0.0f;
    resized[a] = !identity;
  }
  if (!wholeSample_ && resized[0]) return refuse(n, "it resizes the batch axis (SAVE runs one sample at a time)");

  if (s.mode == "nearest") {  // one gather
    if (s.extrapolation != 0.0f)
      for (const AxisMap& m : maps)
        for (int64_t i : m.nearest)
          if (i < 0) return refuse(n, "a nearest crop that extrapolates a value other than 0 is not mapped");
    std::vector<int64_t> gather =
        axisWiseGather(d, out, [&](std::size_t a, int64_t c) { return maps[a].nearest[std::size_t(c)]; });
    return setActivation(n.output(0), name, gathered(name, x, sampleShape(out), std::move(gather)), out);
  }
  // linear and cubic: one linear layer per resized axis, that axis brought last by a transpose
  int v = x;
  std::vector<int64_t> cd = d;
  const auto swapLast = [&](int value, std::vector<int64_t>& dims, std::size_t a, const std::string& tag) {
    std::vector<int64_t> swapped = dims;
    std::swap(swapped[a], swapped[rank - 1]);
    const std::vector<int64_t> st = stridesOf(dims);
    std::vector<int64_t> gather(std::size_t(countOf(swapped)));
    for (int64_t e = 0; e < countOf(swapped); ++e) {
      std::vector<int64_t> c = coordOf(e, swapped);
      std::swap(c[a], c[rank - 1]);
      int64_t at = 0;
      for (std::size_t i = 0; i < rank; ++i) at += c[i] * st[i];
      gather[std::size_t(e)] = at;
    }
    dims = swapped;
    return gathered(name + tag, value, sampleShape(dims), std::move(gather));
  };
  for (std::size_t a = rank; a-- > 0;) {
    if (!resized[a]) continue;
    const std::string axis = name + ".axis" + std::to_string(a);
    if (a != rank - 1) v = swapLast(v, cd, a, ".axis" + std::to_string(a) + ".last");
    const int64_t in = cd[rank - 1], o = out[a];
    params_[axis + ".weight"] = tensorOf(maps[a].weight, {o, in});
    params_[axis + ".bias"] = tensorOf(maps[a].bias, {o});
    const int64_t rows = countOf(cd) / in;
    v = b_.linear(axis, shaped(axis + ".rows", v, rows == 1 ? std::vector<int64_t>{in} : std::vector<int64_t>{rows, in}), o);
    cd[rank - 1] = o;
    if (a != rank - 1) v = swapLast(v, cd, a, ".axis" + std::to_string(a) + ".back");
  }
  setActivation(n.output(0), name, v, cd);
}

}  // namespace peat::save::onnx_import
