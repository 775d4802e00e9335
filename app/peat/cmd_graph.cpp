// SPDX-License-Identifier: MIT
// `peat graph`: the model as a graph (core/modelgraph), of a session's run (coloured by its
// verdicts), of a SAVE analysis (by its bit classes), or of a model alone; as a table, JSON or
// Graphviz dot (`peat graph S.h5 --run bf16 --dot | dot -Tsvg > g.svg`).
#include <iostream>
#include <stdexcept>

#include "app/peat/commands.h"
#include "core/modelgraph/model_graph.h"
#include "core/save/graph.h"
#include "core/save/model_source.h"
#include "core/store/session.h"

namespace peat::cli {

int runGraph(const GraphOptions& o) {
  modelgraph::ModelGraph g;
  if (!o.model.empty()) {
    if (!o.session.empty() || !o.run.empty() || !o.save.empty())
      throw std::invalid_argument("give a session (with --run or --save) or --model, not both");
    save::ModelSource source;
    source.model = o.model;
    if (o.model.find(".onnx") == std::string::npos) source.randomSeed = 1;  // a zoo model: the structure only
    g = modelgraph::dataFlowGraph(save::buildGraph(source));
    g.note = "data flow of " + o.model + " as SAVE maps it";
  } else {
    if (o.session.empty()) throw std::invalid_argument("give a session file (with --run or --save) or --model");
    if (o.run.empty() == o.save.empty()) throw std::invalid_argument("give one of --run RUN and --save ANALYSIS");
    store::SessionReader reader(o.session);
    if (!o.save.empty()) {
      g = modelgraph::saveAnalysisGraph(reader, o.save);
    } else {
      const store::SessionSummary summary = reader.summaryWithoutTensors();
      g = modelgraph::runGraph(reader, summary, o.run);
    }
  }
  std::cout << (o.json ? modelgraph::graphJson(g) : o.dot ? modelgraph::graphDot(g) : modelgraph::graphText(g));
  return 0;
}

}  // namespace peat::cli
