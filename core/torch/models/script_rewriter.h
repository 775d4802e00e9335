// SPDX-License-Identifier: MIT
#pragma once
// The graph rewrite that routes a TorchScript model's kernels through the slot: each node the slot
// has an op for becomes the peat:: op (core/torch/models/script_ops.h), each other compute node is
// listed as left on ATen with its reason (docs/models.md).
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

#include "core/torch/models/script_model.h"

namespace peat::models {

// Rewrites `graph` (the module's inlined forward) in place; fuseAttention: attention as one call
// where the graph allows (--attention fused). Returns every site, routed or not.
std::vector<ScriptSite> rewriteForSlot(torch::jit::Module& module, std::shared_ptr<torch::jit::Graph> graph,
                                       bool fuseAttention);
// Whether an ATen kind left unrouted is one of the plain compute kernels (add, mul, pools, ...) that
// routing summaries count by kind rather than name one by one.
bool isOtherComputeKind(const std::string& atenKind);
// Whether a block still calls methods or functions (Inline has more to do).
bool hasCalls(torch::jit::Block* block);

}  // namespace peat::models
