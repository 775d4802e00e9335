// SPDX-License-Identifier: MIT
#pragma once
// The op-wise candidates (softmax, layer norm, GELU, Adam, embedding, dropout, backward scaling):
// kernels/registry.cpp lists them with their options; op_candidates.cpp describes each.
#include <map>
#include <memory>
#include <string>

#include "core/torch/kernels/kernel.h"

namespace peat::kernels {

// The candidate `name` ("softmax-online", "layernorm-onepass", ...), named `text` (its spec), with
// its numeric options ("degree", "scale"); nullptr when `name` is not an op candidate.
std::unique_ptr<Kernel> makeOpCandidate(const std::string& name, const std::string& text,
                                        const std::map<std::string, double>& numbers);

}  // namespace peat::kernels
