// SPDX-License-Identifier: MIT
#pragma once
// The model as a graph (issue 43, item 6): its ops with their shapes and what feeds what, laid out
// in rows for drawing, and what the selected run says about each op: the verdicts of its calls
// (PEAT) or its bit classes and reliable tiles (SAVE). The workbench's Graph page draws it and
// `peat graph` prints it (text, JSON, Graphviz dot); both read it from here. No Qt, no LibTorch.
//
// Where the structure comes from:
// - a SAVE analysis: SAVE's graph of the network it analysed (a zoo model, or the ONNX file's nodes
//   as SAVE maps them): data flow;
// - a PEAT run of a zoo model SAVE has a graph of: that graph, when every recorded forward call's
//   layer names one of its nodes: data flow;
// - any other PEAT run (chargpt, a TorchScript model, a script recorded by `peat record`): the
//   recorded forward calls of its first iteration, one node per layer and op, in the order they
//   ran, then one node per op that runs on no layer of its own (the optimiser's updates, named by
//   their parameters). The session holds no data flow for these, and the graph says so (structure
//   "call order").
#include <cstdint>
#include <string>
#include <vector>

#include "core/store/session.h"

namespace peat::save {
struct Graph;
}

namespace peat::modelgraph {

struct GraphNode {
  std::string name;  // SAVE's node name ("block1.conv1"), or a recorded layer ("blocks.0.attn")
  std::string op;    // "conv2d", "linear", "softmax", ...
  std::vector<int64_t> shape;  // one sample's output (SAVE) or the recorded output's shape
  std::vector<int> inputs;     // node indices
  // Layout: the row (0 at the top: the longest path from an input) and the place in the row
  // (0, 1, ...; rows are centred on one another when drawn).
  int rank = 0;
  double slot = 0;

  // PEAT: the run's calls of this node (paths inside `GraphOverlay::callRun`), and the verdicts
  // their analysis gave them.
  std::vector<std::string> calls;
  int64_t legitimate = 0, unknown = 0, errors = 0;  // verdicts by class (detector::verdictClass)
  std::string worst;  // the most serious verdict model ("" without verdicts): an error, else unknown, else legitimate
  std::string worstCall;  // the call that got it

  // SAVE: the stored layer of this node (false: the analysis stored none, as for the input)
  bool saved = false;
  int64_t elements = 0, type2 = 0, tiles = 0, reliableTiles = 0;
  double meanVulnerableBits = 0;  // per value
  double type2Share() const { return elements ? double(type2) / double(elements) : 0; }
};

struct ModelGraph {
  std::string model;       // "lenet", or the ONNX file's path
  std::string structure;   // "data flow" or "call order"
  std::string note;        // where the structure comes from, for people
  std::string overlay;     // "verdicts", "save" or "" (nothing coloured)
  std::string overlayRun;  // the analysis run or the SAVE analysis it colours by
  std::string callRun;     // PEAT: the run whose calls the nodes list
  std::vector<GraphNode> nodes;
  int ranks = 0;
  int widestRank = 0;  // nodes in the widest row
  // PEAT: the run's calls and its analysis's verdicts that no node stands for (said, never dropped
  // silently: a call of a layer the structure does not name)
  int64_t unplacedCalls = 0, unplacedVerdicts = 0;
  int findNode(const std::string& name) const;  // -1: none
};

// The data flow of a SAVE graph, laid out.
ModelGraph dataFlowGraph(const save::Graph& g);

// The graph behind a PEAT run (a profile, playback or runtime-FI run, or an analysis run: then its
// candidate run), coloured by the verdicts of its newest analysis when it has one. Throws
// std::invalid_argument for a run the session does not hold, and one without recorded calls.
ModelGraph runGraph(const store::SessionReader& reader, const store::SessionSummary& summary, const std::string& run);

// The graph of a SAVE analysis, coloured by its layers' bit classes and reliable tiles. When the
// network cannot be rebuilt (an ONNX file moved), the stored layers in order, as the note says.
// Throws save::SaveError for an id that is no SAVE analysis of the session.
ModelGraph saveAnalysisGraph(const store::SessionReader& reader, const std::string& analysis);

// Rows and slots: rank = the longest path from a node without inputs; within a row, nodes in the
// order of their inputs' mean slot (the first in the graph's order on ties), so that a chain is a
// column and a branch sits beside it.
void layOut(ModelGraph& g);

// For `peat graph`: a table, JSON, and Graphviz dot (nodes filled by their class).
std::string graphText(const ModelGraph& g);
std::string graphJson(const ModelGraph& g);
std::string graphDot(const ModelGraph& g);

}  // namespace peat::modelgraph
