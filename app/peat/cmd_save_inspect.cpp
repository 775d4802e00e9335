// SPDX-License-Identifier: MIT
// peat save inspect: the graph of a model, op by op.
#include <algorithm>
#include <cstdio>
#include <string>

#include "app/peat/cmd_save.h"
#include "app/peat/commands.h"
#include "core/save/command_settings.h"
#include "core/save/onnx_model.h"
#include "core/save/result_json.h"

namespace peat::cli {

int runSaveInspect(const SaveAnalyzeOptions& o) {
  SaveAnalyzeOptions withSeed = o;
  if (!save::isOnnxModel(o.model) && o.weights.empty() && o.randomWeights == 0) withSeed.randomWeights = 1;  // shapes only
  const save::Graph g = save::modelGraph(withSeed);
  if (o.json) {
    printJson([&](JsonWriter& j) { save::writeGraphJson(j, g); });
    return 0;
  }
  std::printf("SAVE graph of %s: %zu ops, %lld parameters, input %s, output '%s' (%s)\n", g.model.c_str(), g.nodes.size(),
              (long long)g.parameterCount(), save::dimsText(g.nodes[0].shape).c_str(), g.nodes[std::size_t(g.output)].name.c_str(),
              save::dimsText(g.nodes[std::size_t(g.output)].shape).c_str());
  if (g.inputs.size() > 1)
    std::printf("%zu inputs, laid end to end in the input node: %s\n", g.inputs.size(), save::partsText(g.inputs).c_str());
  if (!g.outputs.empty())
    std::printf("%zu outputs, laid end to end in the output node: %s\n", g.outputs.size(), save::partsText(g.outputs).c_str());
  if (!g.batch.empty()) std::printf("%s\n", g.batch.c_str());
  if (g.tokens > 0) std::printf("the input holds token ids in [0, %lld] (the embedding tables' rows)\n", (long long)(g.tokens - 1));
  int width = 12;
  for (const save::Node& n : g.nodes) width = std::max(width, int(n.name.size()));
  std::printf("%5s  %-*s %-14s %-14s %-10s %s\n", "#", width, "name", "op", "shape", "inputs", "weights / details");
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    const save::Node& n = g.nodes[v];
    std::string inputs;
    for (int i : n.inputs) inputs += (inputs.empty() ? "" : ",") + std::to_string(i);
    std::string extra = n.weight.empty() && n.bias.empty() ? "" : std::to_string(n.weight.size() + n.bias.size()) + " weights";
    const std::string d = save::nodeDetails(n);
    if (!d.empty()) extra += (extra.empty() ? "" : "; ") + d;
    std::printf("%5zu  %-*s %-14s %-14s %-10s %s\n", v, width, n.name.c_str(), save::opName(n.op), save::dimsText(n.shape).c_str(),
                inputs.c_str(), extra.c_str());
  }
  return 0;
}

}  // namespace peat::cli
