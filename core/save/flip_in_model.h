// SPDX-License-Identifier: MIT
#pragma once
// "Flip in the model": one activation of one image with some of its bits flipped, run through the
// rest of the network with the engine's own arithmetic (bit-identical to a full inference), and what
// SAVE's checks make of it:
//  - the range check: the flipped value, and every value computed from it, against the sound range
//    the analysis stored for its tensor (as fp32 bounds that contain it, as the runtime checks);
//  - the recomputation: a type-2 value in unreliable memory is recomputed and compared outside its
//    robust bits, so flipping any bit that is not robust there is detected;
//  - a value in reliable memory cannot be flipped by a memory fault at all (the flip is still run,
//    to show what it would do).
// For teaching and exploring; campaigns (core/save/campaign.h) measure the same checks at scale.
#include <cstdint>
#include <string>
#include <vector>

#include "core/save/graph.h"
#include "core/save/layer_map.h"
#include "core/store/session.h"

namespace peat::save {

struct ModelFlip {
  std::string layer;
  int64_t element = 0, image = 0;
  uint32_t mask = 0;  // the bits flipped (bit 31: the sign)
  int label = -1;     // the image's class (-1: not known)
  float before = 0, after = 0;  // the value in this image, clean and flipped
  double lo = 0, hi = 0;        // its sound range
  uint32_t robustMask = 0, rangingMask = 0;  // its bits' classes
  bool reliable = false;        // its tile sits in reliable memory
  bool outOfRange = false;      // the flipped value fails its range check
  std::string firstViolation;   // the first tensor (this one or one computed from it) failing its range check; "" none
  int64_t violations = 0;       // values of this and later tensors outside their ranges
  bool recomputed = false;      // type 2 in unreliable memory: SAVE recomputes and compares it
  bool recomputeCatches = false;  // ... and a flipped bit is one it compares (not robust)
  bool caught() const { return outOfRange || recomputeCatches || violations > 0; }
  std::vector<float> logitsBefore, logitsAfter;
  int classBefore = -1, classAfter = -1;  // top-1 (-1: a logit is NaN or infinite)
  double seconds = 0;
};

// `layers`: the analysis's layers (their ranges, bit classes and tiles, by node name: a node with no
// layer is not range-checked); `image`: one normalised input. Throws SaveError for a layer the graph
// or the analysis does not have, an element outside it, or mask 0.
ModelFlip flipInModel(const Graph& g, const std::vector<LayerMap>& layers, const float* image, int label,
                      const std::string& layer, int64_t element, uint32_t mask);

// The same from a session: the analysed network rebuilt from its stored source (its model and
// weights files must still be where the analysis found them), its layers read, and test image
// `image` of `data` (as loadDataSet; "" Fashion-MNIST) within the analysed input box.
ModelFlip flipInModel(const store::SessionReader& reader, const std::string& analysis, const std::string& layer,
                      int64_t element, uint32_t mask, int64_t image, const std::string& data = std::string());

}  // namespace peat::save
