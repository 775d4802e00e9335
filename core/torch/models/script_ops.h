// SPDX-License-Identifier: MIT
#pragma once
// The peat:: ops a rewritten TorchScript graph calls (core/torch/models/script_rewriter.h): each
// sends its call through the kernel slot of the forward in progress on this thread.
#include "core/torch/ops/dispatcher.h"

namespace peat::models {

// Makes `dispatcher` the slot of the peat:: ops this thread runs while it lives (one model forward);
// the backward calls find theirs in their autograd context.
class SlotScope {
 public:
  explicit SlotScope(ops::Dispatcher* dispatcher);
  ~SlotScope();
  SlotScope(const SlotScope&) = delete;
  SlotScope& operator=(const SlotScope&) = delete;

 private:
  ops::Dispatcher* saved_;
};

}  // namespace peat::models
