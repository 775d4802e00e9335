// SPDX-License-Identifier: MIT
// Convolutions SAVE's Conv2d node does not take (1-D and 3-D ones, kernels that are not square,
// unequal strides, padding or dilations, ConvTranspose) as what they are: a gather of each output
// position's patch (zero where it reads padding, or between a transposed convolution's input
// positions) and one linear layer over the patches, the weights those of the kernel. Both ops
// have sound transfer functions, so the bounds stay sound; the patches cost memory (a patch per
// output position), bounded below.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

namespace peat::save::onnx_import {

int Importer::convPatches(const onnx::NodeProto& n, int x, int64_t extraPad) {
  const std::string name = nameOf(n);
  const bool transposed = n.op_type() == "ConvTranspose";
  const Constant* w = constant(n.input(1));
  const std::vector<int64_t> d = dimsOf(n.input(0));  // [B, C, spatial...]
  const auto no = [&](const std::string& why) {
    refuse(n, why);
    return -1;
  };
  if (!w || !w->isFloat || w->dims.size() < 3 || w->dims.size() != d.size())
    return no("its weight is not a float32 initializer of its input's rank");
  if (intAttr(n, "group", 1) != 1)
    return no("a grouped convolution is mapped only in 2-D with a square kernel and equal strides, padding and dilations");
  const std::size_t rank = d.size() - 2;
  const int64_t batch = d[0], channels = d[1];
  const int64_t out = transposed ? w->dims[1] : w->dims[0];
  if ((transposed ? w->dims[0] : w->dims[1]) != channels) return no("its weight does not fit its input");
  const std::vector<int64_t> kernel(w->dims.begin() + 2, w->dims.end());
  const auto listed = [&](const char* attr, int64_t fallback, std::size_t size) {
    std::vector<int64_t> v = intsAttr(n, attr);
    if (v.empty()) v.assign(size, fallback);
    return v;
  };
  const std::vector<int64_t> strides = listed("strides", 1, rank), dilations = listed("dilations", 1, rank);
  std::vector<int64_t> pads = listed("pads", 0, 2 * rank), outputPadding = listed("output_padding", 0, rank);
  const std::vector<int64_t> outputShape = intsAttr(n, "output_shape");
  if (strides.size() != rank || dilations.size() != rank || pads.size() != 2 * rank || outputPadding.size() != rank)
    return no("its strides, dilations, pads or output_padding do not name every spatial axis");
  const std::string autoPad = attribute(n, "auto_pad") ? attribute(n, "auto_pad")->s() : "NOTSET";
  if (autoPad != "NOTSET" && autoPad != "VALID" && !(transposed && !outputShape.empty()))
    return no("auto_pad=" + autoPad + " is not mapped (export with explicit pads)");
  if (autoPad == "VALID") pads.assign(2 * rank, 0);
  std::vector<int64_t> spatial(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[rank + i] < 0 || kernel[i] < 1)
      return no("a stride, dilation, padding or kernel out of range");
    pads[i] += extraPad;
    pads[rank + i] += extraPad;
    const int64_t span = dilations[i] * (kernel[i] - 1) + 1, in = d[2 + i];
    if (transposed && !outputShape.empty()) {  // pads follow from the shape asked for
      if (outputShape.size() != rank) return no("its output_shape does not name every spatial axis");
      const int64_t total = strides[i] * (in - 1) + outputPadding[i] + span - outputShape[i];
      if (total < 0) return no("its output_shape is larger than the input reaches");
      const bool upper = autoPad != "SAME_LOWER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[rank + i] = total - pads[i];
    }
    spatial[i] = transposed ? strides[i] * (in - 1) + outputPadding[i] + span - pads[i] - pads[rank + i]
                            : (in + pads[i] + pads[rank + i] - span) / strides[i] + 1;
    if (spatial[i] < 1) return no("its output is empty");
  }
  const int64_t taps = countOf(kernel), positions = countOf(spatial), rows = batch * positions, cols = channels * taps;
  constexpr int64_t kMaxPatchElements = int64_t(1) << 28;
  if (cols > 0 && rows > kMaxPatchElements / cols)
    return no("its patches would hold more than 2^28 values (" + std::to_string(rows) + " x " + std::to_string(cols) + ")");

  // the patches: row (b, output position), column (input channel, kernel tap)
  const std::vector<int64_t> inStrides = stridesOf(d);
  std::vector<int64_t> gather(std::size_t(rows * cols), -1);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t l = 0; l < positions; ++l) {
      const std::vector<int64_t> o = coordOf(l, spatial);
      for (int64_t t = 0; t < taps; ++t) {
        const std::vector<int64_t> k = coordOf(t, kernel);
        int64_t at = b * inStrides[0];
        for (std::size_t i = 0; i < rank && at >= 0; ++i) {
          int64_t in;
          if (transposed) {  // output o reads input i where o = i * stride - pad + k * dilation
            const int64_t s = o[i] + pads[i] - k[i] * dilations[i];
            in = s >= 0 && s % strides[i] == 0 ? s / strides[i] : -1;
          } else {
            in = o[i] * strides[i] - pads[i] + k[i] * dilations[i];
          }
          at = in >= 0 && in < d[2 + i] ? at + in * inStrides[2 + i] : -1;
        }
        if (at < 0) continue;
        for (int64_t c = 0; c < channels; ++c)
          gather[std::size_t((b * positions + l) * cols + c * taps + t)] = at + c * inStrides[1];
      }
    }
  // the weights [out, channels * taps]: Conv's [out, C, k...] as it is, ConvTranspose's [C, out, k...] transposed
  std::vector<float> weight(std::size_t(out * cols));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t t = 0; t < taps; ++t)
        weight[std::size_t(o * cols + c * taps + t)] =
            w->values[std::size_t(transposed ? (c * out + o) * taps + t : (o * channels + c) * taps + t)];
  std::vector<float> bias(std::size_t(out), 0.0f);
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Constant* c = constant(n.input(2));
    if (!c || !c->isFloat || int64_t(c->values.size()) != out) return no("its bias is not a float32 initializer of its output channels");
    bias = c->values;
  }
  params_[name + ".weight"] = tensorOf(weight, {out, cols});
  params_[name + ".bias"] = tensorOf(bias, {out});
  const int patches = gathered(name + ".patches", x, rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols},
                               std::move(gather));
  const int lin = b_.linear(name, patches, out);  // [rows, out]
  // back to [B, out, spatial...]
  std::vector<int64_t> dims{batch, out};
  dims.insert(dims.end(), spatial.begin(), spatial.end());
  std::vector<int64_t> back(std::size_t(countOf(dims)));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t l = 0; l < positions; ++l)
        back[std::size_t((b * out + o) * positions + l)] = (b * positions + l) * out + o;
  const int result = gathered(name + ".out", lin, sampleShape(dims), std::move(back));
  dims_[n.output(0)] = dims;
  return result;
}

}  // namespace peat::save::onnx_import
