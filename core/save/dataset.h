// SPDX-License-Identifier: MIT
#pragma once
// Labelled inputs for SAVE's campaigns and check-bits, without LibTorch: Fashion-MNIST (resized to
// the model's input if it is not 1x28x28) or the user's own test data from an HDF5 file or .npy files.
#include <cstdint>
#include <string>
#include <vector>

#include "core/save/graph.h"

namespace peat::save {

struct DataSet {
  std::string name;                // "fashion-mnist 3x64x64", or the user's file and split
  int64_t count = 0;
  std::vector<float> normalised;   // count * input size, after the graph's normalisation
  std::vector<int32_t> labels;     // count classes
};

// The first `count` samples of `split` ("train" or "test") of `spec`:
//   "" or "fashion-mnist"  Fashion-MNIST pixels / 255, resized bilinearly (half-pixel centres, as
//                          PyTorch's interpolate with align_corners=False) to the model's [C, H, W]
//                          input, the channel repeated;
//   "fashion-mnist:CxHxW"  the same at a stated geometry (it must be the model's);
//   FILE.h5                datasets SPLIT/x ([N, input shape], raw values) and SPLIT/y ([N] classes);
//   DIR                    DIR/SPLIT_x.npy and DIR/SPLIT_y.npy.
// Raw values are normalised by the graph (its mean and deviation). Every raw value must lie in the
// analysed input box [lo, hi] (the ranges are sound only there), every label in [0, classes): else
// std::invalid_argument with one line naming the file, the shapes or the first bad sample.
// `atMost`: fewer samples than `count` are taken if that is all the split has.
DataSet loadDataSet(const Graph& g, const std::string& spec, const std::string& split, int64_t count, double lo,
                    double hi, bool atMost = false);

// Bilinear resizing of `channels` planes of h x w to oh x ow (half-pixel centres, edges clamped).
std::vector<float> resizeBilinear(const float* x, int64_t channels, int64_t h, int64_t w, int64_t oh, int64_t ow);

}  // namespace peat::save
