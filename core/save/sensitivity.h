// SPDX-License-Identifier: MIT
#pragma once
// How far a change in one stored value can move the logits, soundly, for every input in the box:
// the basis of SAVE's output criterion (a bit is robust when its flip cannot move any logit by
// more than epsilon), for activations and for weights alike.
//
// For each logit k a backward pass bounds |d logit_k / d value| by the products of the ops' local
// bounds (|W| for linear and conv, |scale| for batch norm, 1 for ReLU, clip, max-pooling and the
// moves, 1/k^2 for pooling windows, 1/4 for sigmoid and softmax, 1.13 for GELU); every such local
// bound holds for any finite change, not only an infinitesimal one (the ops are Lipschitz with those
// constants), so S(e) * |delta| bounds the exact logits' move for a change delta in value e.
// Layer norm and products of two activations have no such constant: graphs with them are refused.
#include <string>
#include <vector>

#include "core/save/graph.h"
#include "core/save/ranges.h"

namespace peat::save {

struct Sensitivity {
  std::vector<std::vector<double>> activation;  // [node][element]: max over logits of the bound per unit change
  std::vector<std::vector<double>> weight;      // [node]: per weight of a linear/conv node, then per bias
  // The fp32 runs' own rounding: the ops from node v on round the logits by at most
  // roundingFrom[v] for every input in the box (an activation flip at v: roundingFrom[v + 1]; a
  // weight flip at v: roundingFrom[v]); rounding = roundingFrom[0]. A perturbed run rounds within
  // (1 + growth) times the same (see docs/save.md).
  std::vector<double> roundingFrom;
  double rounding = 0, growth = 0;
  double seconds = 0;
};

// Throws SaveError naming the first op that has no Lipschitz bound here (layer norm, attention
// products, element-wise products).
Sensitivity sensitivityOf(const Graph& g, const std::vector<NodeRange>& ranges);

// The largest change a flip may make for the logits to stay within epsilon: a change delta is
// harmless when s * |delta| * (1 + growth) + 2 * rounding * (1 + growth) <= epsilon, `rounding`
// that of the ops the change passes through (roundingFrom). Returns the bound on |delta| for a
// value of sensitivity s (infinity for s = 0, 0 when nothing is allowed).
double allowedChange(const Sensitivity& sens, double rounding, double s, double epsilon);

}  // namespace peat::save
