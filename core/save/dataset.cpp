// SPDX-License-Identifier: MIT
#include "core/save/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "core/data/datasets.h"
#include "core/io/tensor_source.h"

namespace peat::save {

namespace {

std::string shapeText(const std::vector<int64_t>& s) {
  std::string t;
  for (int64_t d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
  return t.empty() ? "a scalar" : t;
}

std::string numberText(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

}  // namespace

std::vector<float> resizeBilinear(const float* x, int64_t channels, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  std::vector<float> out(std::size_t(channels * oh * ow));
  // source coordinate of output index o: (o + 0.5) * in / out - 0.5, clamped at 0
  auto source = [](int64_t o, int64_t in, int64_t n, int64_t& i0, int64_t& i1, float& t) {
    const float scale = float(in) / float(n);
    float s = (float(o) + 0.5f) * scale - 0.5f;
    if (s < 0) s = 0;
    i0 = std::min<int64_t>(int64_t(s), in - 1);
    i1 = std::min<int64_t>(i0 + 1, in - 1);
    t = s - float(i0);
  };
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t y = 0; y < oh; ++y) {
      int64_t y0, y1;
      float ty;
      source(y, h, oh, y0, y1, ty);
      for (int64_t xx = 0; xx < ow; ++xx) {
        int64_t x0, x1;
        float tx;
        source(xx, w, ow, x0, x1, tx);
        const float* p = x + c * h * w;
        const float top = (1 - tx) * p[y0 * w + x0] + tx * p[y0 * w + x1];
        const float bottom = (1 - tx) * p[y1 * w + x0] + tx * p[y1 * w + x1];
        out[std::size_t((c * oh + y) * ow + xx)] = (1 - ty) * top + ty * bottom;
      }
    }
  return out;
}

DataSet loadDataSet(const Graph& g, const std::string& spec, const std::string& split, int64_t count, double lo,
                    double hi, bool atMost) {
  const std::vector<int64_t>& in = g.nodes[0].shape;
  const int64_t size = g.nodes[0].size(), classes = classCount(g);
  DataSet d;
  std::vector<float> raw;
  const std::string builtin = "fashion-mnist";
  if (spec.empty() || spec == builtin || spec.rfind(builtin + ":", 0) == 0) {
    if (g.tokens > 0)
      throw std::invalid_argument("model " + g.model + " takes token ids, not images: give its data (--data FILE.h5 or DIR)");
    if (g.inputs.size() > 1)
      throw std::invalid_argument("model " + g.model + " takes " + std::to_string(g.inputs.size()) +
                                  " inputs, not one image: give its data (--data FILE.h5 or DIR, each sample's inputs "
                                  "end to end)");
    std::vector<int64_t> want = in;
    if (spec.size() > builtin.size()) {
      want.clear();
      const std::string geometry = spec.substr(builtin.size() + 1);
      std::size_t at = 0;
      while (at <= geometry.size()) {
        const std::size_t x = geometry.find('x', at);
        const std::string item = geometry.substr(at, x == std::string::npos ? std::string::npos : x - at);
        char* end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end || v <= 0 || v > 4096)
          throw std::invalid_argument("--data " + spec + ": write fashion-mnist:CxHxW, e.g. fashion-mnist:3x64x64");
        want.push_back(v);
        if (x == std::string::npos) break;
        at = x + 1;
      }
      if (want != in)
        throw std::invalid_argument("--data " + spec + ": model " + g.model + " takes " + shapeText(in) + " inputs");
    }
    if (in.size() != 3)
      throw std::invalid_argument("Fashion-MNIST images do not fit model " + g.model + "'s " + shapeText(in) +
                                  " input: give its own data with --data FILE.h5 or a folder of .npy files");
    const data::ImageSet set = data::loadFashionMnist(split == "train" ? "train" : "t10k");
    if (atMost) count = std::min(count, set.count);
    if (count > set.count)
      throw std::invalid_argument("Fashion-MNIST's " + split + " split has " + std::to_string(set.count) + " images, not " +
                                  std::to_string(count));
    const int64_t plane = set.rows * set.cols;
    raw.resize(std::size_t(count * size));
    std::vector<float> one(static_cast<std::size_t>(plane));
    for (int64_t s = 0; s < count; ++s) {
      for (int64_t i = 0; i < plane; ++i) one[std::size_t(i)] = float(set.pixels[std::size_t(s * plane + i)]) / 255.0f;
      const std::vector<float> resized = in[1] == set.rows && in[2] == set.cols
                                             ? one
                                             : resizeBilinear(one.data(), 1, set.rows, set.cols, in[1], in[2]);
      for (int64_t c = 0; c < in[0]; ++c)
        std::copy(resized.begin(), resized.end(), raw.begin() + s * size + c * in[1] * in[2]);
    }
    d.labels.assign(set.labels.begin(), set.labels.begin() + count);  // bytes to classes
    d.name = builtin + " " + shapeText(in);
  } else {
    auto read = [&](const std::string& part) { return io::readSource(io::splitSource(spec, split, part)); };
    const io::FloatTensor x = read("x"), y = read("y");
    const std::vector<uint64_t>& xs = x.shape();
    std::vector<int64_t> sample(xs.begin() + (xs.empty() ? 0 : 1), xs.end());
    if (xs.empty() || sample != in)
      throw std::invalid_argument("data '" + spec + "': " + split + "/x holds samples of " + shapeText(sample) +
                                  " but model " + g.model + " takes " + shapeText(in) + " (as [N, " + shapeText(in) + "])");
    if (y.shape().size() != 1 || y.shape()[0] != xs[0])
      throw std::invalid_argument("data '" + spec + "': " + split + "/y must hold one class per sample of " + split + "/x (" +
                                  std::to_string(xs[0]) + ")");
    if (atMost) count = std::min(count, int64_t(xs[0]));
    if (int64_t(xs[0]) < count)
      throw std::invalid_argument("data '" + spec + "': " + split + " has " + std::to_string(xs[0]) + " samples, not " +
                                  std::to_string(count));
    raw.assign(x.data(), x.data() + count * size);
    d.labels.resize(std::size_t(count));
    for (int64_t s = 0; s < count; ++s) {
      const float v = y.data()[s];
      if (!(v >= 0) || v != std::floor(v) || v >= float(classes))
        throw std::invalid_argument("data '" + spec + "': " + split + "/y[" + std::to_string(s) + "] = " + numberText(v) +
                                    " is not a class of model " + g.model + " (0.." + std::to_string(classes - 1) + ")");
      d.labels[std::size_t(s)] = int32_t(v);
    }
    d.name = spec + " (" + split + ")";
  }
  fitInputRange(g, lo, hi);  // token ids: integers in the tables' rows
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const int64_t element = int64_t(i) % size;
    double l = lo, h = hi;
    elementRange(g, element, l, h);  // an input's own range, where one was named
    const OutputPart* part = inputPartOf(g, element);
    const bool whole = g.tokens > 0 || (part && (part->tokens > 0 || part->integer));
    if (raw[i] >= l && raw[i] <= h && (!whole || raw[i] == std::floor(raw[i]))) continue;
    const std::string where = inputElementText(g, element);
    throw std::invalid_argument("data '" + (spec.empty() ? builtin : spec) + "': " + split + "/x sample " +
                                std::to_string(int64_t(i) / size) + where + " holds " + numberText(raw[i]) +
                                (whole && raw[i] >= l && raw[i] <= h ? std::string(", not an integer")
                                                                     : ", outside the analysed input range [" + numberText(l) +
                                                                           ", " + numberText(h) + "] (--input-range)") +
                                ": SAVE's ranges hold only inside it");
  }
  d.count = count;
  d.normalised.resize(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const int64_t e = int64_t(i) % size;
    d.normalised[i] = (raw[i] - g.meanOf(e)) / g.deviationOf(e);
  }
  return d;
}

}  // namespace peat::save
