// SPDX-License-Identifier: MIT
// The small definitions of session.h and tensor.h that belong to neither the writer nor the reader.
// The rest: session_writer.cpp, session_reader.cpp, session_verify.cpp and session_common.cpp.
#include "core/store/session.h"

#include <algorithm>

#include "core/store/tensor.h"

namespace peat::store {

const char* phaseName(Phase p) { return p == Phase::Forward ? "forward" : "backward"; }

const char* runStatusName(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Complete: return "complete";
    case RunStatus::Cancelled: return "cancelled";
    case RunStatus::Failed: return "failed";
  }
  return "?";
}

uint64_t TensorView::elementCount() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

uint64_t Tensor::elementCount() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

int64_t RunInfo::completeIterations() const {
  int64_t n = 0;
  for (const IterationInfo& it : iterations) n += it.complete ? 1 : 0;
  return n;
}

int64_t RunInfo::callCount() const {
  int64_t n = 0;
  for (const IterationInfo& it : iterations) n += int64_t(it.calls.size());
  return n;
}

std::vector<std::string> SessionSummary::saveLayersOf(const std::string& id) const {
  std::vector<std::string> layers;
  for (const std::string& other : saveResults) {
    if (other.rfind(id + ".", 0) != 0) continue;
    if (const auto rows = packedSaveLayers.find(other); rows != packedSaveLayers.end())
      layers.insert(layers.end(), rows->second.begin(), rows->second.end());
    else
      layers.push_back(other.substr(id.size() + 1));
  }
  std::sort(layers.begin(), layers.end());
  return layers;
}

}  // namespace peat::store
