// SPDX-License-Identifier: MIT
#include "core/modelgraph/model_graph.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include "core/analysis/call_view.h"
#include "core/analysis/session_analysis.h"
#include "core/catalog/catalog.h"
#include "core/detector/detector.h"
#include "core/save/analysis_record.h"
#include "core/save/graph.h"
#include "core/save/model_source.h"
#include "core/util/json_writer.h"
#include "core/util/text.h"

namespace peat::modelgraph {

int ModelGraph::findNode(const std::string& name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return int(i);
  return -1;
}

ModelGraph dataFlowGraph(const save::Graph& g) {
  ModelGraph out;
  out.model = g.model;
  out.structure = "data flow";
  for (const save::Node& n : g.nodes) {
    GraphNode node;
    node.name = n.name;
    node.op = save::opName(n.op);
    node.shape = n.shape;
    node.inputs = n.inputs;
    out.nodes.push_back(std::move(node));
  }
  layOut(out);
  return out;
}

void layOut(ModelGraph& g) {
  const std::size_t n = g.nodes.size();
  // rank: the longest path from a node without inputs (inputs come first: a topological order,
  // which SAVE's graphs and the call-order graph both are; a later input is ignored)
  for (std::size_t i = 0; i < n; ++i) {
    int rank = 0;
    for (int in : g.nodes[i].inputs)
      if (in >= 0 && std::size_t(in) < i) rank = std::max(rank, g.nodes[std::size_t(in)].rank + 1);
    g.nodes[i].rank = rank;
  }
  g.ranks = 0;
  for (const GraphNode& node : g.nodes) g.ranks = std::max(g.ranks, node.rank + 1);
  std::vector<std::vector<int>> rows(std::size_t(g.ranks));
  for (std::size_t i = 0; i < n; ++i) rows[std::size_t(g.nodes[i].rank)].push_back(int(i));
  g.widestRank = 0;
  for (std::vector<int>& row : rows) {
    // each node where its inputs are, on average; the graph's order on ties
    std::vector<std::pair<double, int>> keyed;
    for (int i : row) {
      const GraphNode& node = g.nodes[std::size_t(i)];
      double sum = 0;
      int count = 0;
      for (int in : node.inputs)
        if (in >= 0 && in < i) {
          sum += g.nodes[std::size_t(in)].slot;
          ++count;
        }
      keyed.push_back({count ? sum / count : 0.0, i});
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    // slots in that order, centred on the inputs' mean where the row has room: a chain stays a column
    const double width = double(keyed.size());
    const double centre = keyed.empty() ? 0 : (keyed.front().first + keyed.back().first) / 2;
    for (std::size_t k = 0; k < keyed.size(); ++k)
      g.nodes[std::size_t(keyed[k].second)].slot = std::max(0.0, centre - (width - 1) / 2) + double(k);
    g.widestRank = std::max(g.widestRank, int(row.size()));
  }
}

namespace {

// How serious a verdict is: an error before unknown before a legitimate rounding before exact.
int severity(const std::string& model) {
  const std::string cls = detector::verdictClass(model);
  if (cls == "error") return 3;
  if (cls == "unknown") return 2;
  return model == "exact" ? 0 : 1;
}

const store::RunInfo* findRun(const store::SessionSummary& summary, const std::string& name) {
  for (const store::RunInfo& r : summary.runs)
    if (r.name == name) return &r;
  return nullptr;
}

std::string attribute(const store::RunInfo* run, const char* name) {
  if (!run) return std::string();
  const auto it = run->attributes.find(name);
  return it == run->attributes.end() ? std::string() : it->second;
}

// The SAVE node a recorded call of `layer` and `op` stands for: the node of that name, else the
// first node under it ("blocks.0.attn" -> "blocks.0.attn.softmax") whose op is the call's; -1: none.
int nodeOfLayer(const ModelGraph& g, const std::string& layer, const std::string& op) {
  if (const int exact = g.findNode(layer); exact >= 0) return exact;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (n.name.size() > layer.size() && n.name.compare(0, layer.size(), layer) == 0 && n.name[layer.size()] == '.' &&
        n.op == op)
      return int(i);
  }
  return -1;
}

// The recorded output's shape of a call (its tensor "output", else its last one).
std::vector<int64_t> outputShape(const store::SessionReader& reader, const std::string& run, const std::string& call) {
  const std::vector<store::TensorInfo> tensors = reader.callTensors(run, call);
  const store::TensorInfo* out = tensors.empty() ? nullptr : &tensors.back();
  for (const store::TensorInfo& t : tensors)
    if (t.name == "output") out = &t;
  std::vector<int64_t> shape;
  if (out)
    for (uint64_t d : out->shape) shape.push_back(int64_t(d));
  return shape;
}

// The first iteration that holds calls.
const store::IterationInfo* firstIteration(const store::RunInfo& run) {
  for (const store::IterationInfo& it : run.iterations)
    if (!it.calls.empty()) return &it;
  return nullptr;
}

// One node per layer and op of the first iteration's forward calls (all its calls when none is a
// forward one), in the order they ran, each fed by the one before.
ModelGraph callOrderGraph(const store::SessionReader& reader, const store::RunInfo& run, const std::string& model) {
  ModelGraph out;
  out.model = model;
  out.structure = "call order";
  const store::IterationInfo* first = firstIteration(run);
  if (!first) throw std::invalid_argument("run '" + run.name + "' holds no recorded calls to draw a graph of");
  // a node named `name` for call c's op, fed by the node before it
  const auto appendAfterLast = [&](const std::string& name, const store::CallInfo& c) {
    GraphNode node;
    node.name = name;
    node.op = c.id.op;
    node.shape = outputShape(reader, run.name, c.path);
    if (!out.nodes.empty()) node.inputs.push_back(int(out.nodes.size()) - 1);
    out.nodes.push_back(std::move(node));
  };
  bool anyForward = false;
  for (const store::CallInfo& c : first->calls) anyForward = anyForward || c.id.phase == store::Phase::Forward;
  for (const store::CallInfo& c : first->calls) {
    if (anyForward && c.id.phase != store::Phase::Forward) continue;
    bool seen = false;
    for (const GraphNode& n : out.nodes) seen = seen || (n.name == c.id.layer && n.op == c.id.op);
    if (seen) continue;
    appendAfterLast(c.id.layer, c);
  }
  // ops that never run forward on a layer of their own (the optimiser's updates, named by their
  // parameters): one node per op after the rest, as a training step ends
  for (const store::CallInfo& c : first->calls) {
    bool placed = false;
    for (const GraphNode& n : out.nodes) placed = placed || n.name == c.id.layer || n.name == c.id.op;
    if (placed) continue;
    appendAfterLast(c.id.op, c);
  }
  layOut(out);
  return out;
}

// The node of a recorded call: its layer and op (data flow: nodeOfLayer), else its layer's first
// node, else (call order) the node of its op that runs on no layer of its own.
int nodeOfCall(const ModelGraph& g, const store::CallId& id) {
  if (g.structure == "data flow") return nodeOfLayer(g, id.layer, id.op);
  int layerOnly = -1, opOnly = -1;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name == id.op && g.nodes[i].op == id.op && opOnly < 0) opOnly = int(i);
    if (g.nodes[i].name != id.layer) continue;
    if (g.nodes[i].op == id.op) return int(i);
    if (layerOnly < 0) layerOnly = int(i);
  }
  return layerOnly >= 0 ? layerOnly : opOnly;
}

}  // namespace

ModelGraph runGraph(const store::SessionReader& reader, const store::SessionSummary& summary, const std::string& name) {
  const store::RunInfo* run = findRun(summary, name);
  if (!run) throw std::invalid_argument("the session holds no run '" + name + "'");
  std::string analysisRun;
  if (run->spec.kind == "analysis") {
    analysisRun = name;
    run = findRun(summary, analyzer::candidateRunOf(summary, name));
    if (!run) throw std::invalid_argument("analysis run '" + name + "' names no run of this session that it analysed");
  } else {
    analysisRun = analyzer::analysisRunOf(summary, name);
  }
  // the structure from the recording the run replayed (a playback may hold a few of its calls), else its own
  const store::RunInfo* recorded = findRun(summary, attribute(run, "source_run"));
  if (!recorded || !firstIteration(*recorded)) recorded = run;
  if (!recorded || !firstIteration(*recorded))
    throw std::invalid_argument("run '" + run->name + "' holds no recorded calls to draw a graph of");

  const std::string model = summary.provenance.model;
  ModelGraph g;
  const catalog::ZooModel* zoo = catalog::zooModel(model);
  if (zoo && zoo->saveGraph) {
    g = dataFlowGraph(save::randomGraph(model, 1));
    bool all = true;
    for (const store::CallInfo& c : firstIteration(*recorded)->calls)
      if (c.id.phase == store::Phase::Forward && nodeOfLayer(g, c.id.layer, c.id.op) < 0) all = false;
    if (all) g.note = "data flow of the zoo's " + model + " (SAVE's graph of it); the recorded calls sit on the ops they ran";
    else g = ModelGraph();
  }
  if (g.nodes.empty()) {
    g = callOrderGraph(reader, *recorded, model);
    g.note = "the recorded forward calls of the first iteration, in the order they ran: the session holds no data flow"
             " for " + (model.empty() ? std::string("this model") : model);
  }
  g.model = model;
  g.callRun = run->name;

  // every call of the run on its node; paths the run does not list (a call its kernel failed) by
  // the recorded run's call of that path
  std::map<std::string, int> nodeOf;
  for (const store::RunInfo* r : {recorded, run})
    for (const store::IterationInfo& it : r->iterations)
      for (const store::CallInfo& c : it.calls) {
        const int node = nodeOfCall(g, c.id);
        if (node >= 0) nodeOf[c.path] = node;
      }
  for (const store::IterationInfo& it : run->iterations)
    for (const store::CallInfo& c : it.calls) {
      if (const auto at = nodeOf.find(c.path); at != nodeOf.end()) g.nodes[std::size_t(at->second)].calls.push_back(c.path);
      else ++g.unplacedCalls;
    }

  if (!analysisRun.empty()) {
    g.overlay = "verdicts";
    g.overlayRun = analysisRun;
    std::map<int, double> worstConfidence;
    for (const store::Verdict& v : reader.verdicts(analysisRun)) {
      const auto at = nodeOf.find(v.call);
      if (at == nodeOf.end()) {
        ++g.unplacedVerdicts;
        continue;
      }
      GraphNode& node = g.nodes[std::size_t(at->second)];
      const std::string cls = detector::verdictClass(v.model);
      ++(cls == "error" ? node.errors : cls == "unknown" ? node.unknown : node.legitimate);
      if (std::find(node.calls.begin(), node.calls.end(), v.call) == node.calls.end()) node.calls.push_back(v.call);
      const bool worse = node.worst.empty() || severity(v.model) > severity(node.worst) ||
                         (severity(v.model) == severity(node.worst) && v.confidence > worstConfidence[at->second]);
      if (worse) {
        node.worst = v.model;
        node.worstCall = v.call;
        worstConfidence[at->second] = v.confidence;
      }
    }
  }
  return g;
}

ModelGraph saveAnalysisGraph(const store::SessionReader& reader, const std::string& id) {
  const save::StoredAnalysis a = save::loadAnalysis(reader, id);
  ModelGraph g;
  std::string why;
  try {
    const catalog::ZooModel* zoo = catalog::zooModel(a.source.model);
    if (zoo) {
      g = dataFlowGraph(save::randomGraph(a.source.model, 1));  // the structure: the weights do not change it
      g.note = "data flow of the zoo's " + a.source.model + " as SAVE analysed it";
    } else {
      save::ModelSource structure = a.source;  // the file's own nodes; a checkpoint only replaces weights
      structure.weights.clear();
      structure.randomSeed = 0;
      g = dataFlowGraph(save::buildGraph(structure));
      g.note = "data flow of " + a.source.model + " as SAVE maps its nodes";
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (g.nodes.empty()) {  // the stored layers in their order
    for (const save::StoredLayer& l : a.layers) {
      GraphNode node;
      node.name = l.name;
      node.op = l.op;
      if (!g.nodes.empty()) node.inputs.push_back(int(g.nodes.size()) - 1);
      g.nodes.push_back(std::move(node));
    }
    g.structure = "stored order";
    layOut(g);
    g.note = "the analysis's layers in the order it stored them: the network could not be rebuilt (" + why + ")";
  }
  g.model = a.model;
  g.overlay = "save";
  g.overlayRun = id;
  for (const save::StoredLayer& l : a.layers) {
    const int at = g.findNode(l.name);
    if (at < 0) continue;
    GraphNode& node = g.nodes[std::size_t(at)];
    node.saved = true;
    node.elements = l.elements;
    node.type2 = l.type2;
    node.tiles = l.tilesDown * l.tilesAcross;
    node.reliableTiles = std::count(l.tileReliable.begin(), l.tileReliable.end(), uint8_t(1));
    node.meanVulnerableBits = l.elements ? l.vulnerableBits / double(l.elements) : 0;
  }
  return g;
}

namespace {
std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

std::string fixed(double v, int digits) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

// What the overlay says of a node, in a few words ("" when nothing).
std::string overlayText(const ModelGraph& g, const GraphNode& n) {
  if (g.overlay == "verdicts") {
    if (n.worst.empty()) return n.calls.empty() ? "" : std::to_string(n.calls.size()) + " calls, no verdict";
    return n.worst + " (" + std::to_string(n.errors) + " error, " + std::to_string(n.unknown) + " unknown, " +
           std::to_string(n.legitimate) + " legitimate)";
  }
  if (g.overlay == "save" && n.saved)
    return "type-2 " + fixed(100 * n.type2Share(), 1) + "%, " + fixed(n.meanVulnerableBits, 2) + " vulnerable bits/value, " +
           std::to_string(n.reliableTiles) + "/" + std::to_string(n.tiles) + " tiles reliable";
  return "";
}

std::string dotQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}
}  // namespace

std::string graphText(const ModelGraph& g) {
  std::ostringstream o;
  // names from a file pass util::printable: no escape sequence reaches the terminal
  o << "Graph of " << util::printable(g.model) << ": " << g.nodes.size() << " ops, " << g.structure << " ("
    << util::printable(g.note) << ")\n";
  if (!g.overlay.empty())
    o << (g.overlay == "save" ? "SAVE analysis " : "verdicts of ") << util::printable(g.overlayRun)
      << (g.callRun.empty() ? "" : ", calls of run " + util::printable(g.callRun)) << "\n";
  if (g.unplacedCalls || g.unplacedVerdicts)
    o << g.unplacedCalls << " calls and " << g.unplacedVerdicts << " verdicts belong to no op drawn\n";
  o << "    #  row  name                         op             shape            inputs    ";
  o << (g.overlay.empty() ? "" : g.overlay == "save" ? "bits" : "verdicts") << "\n";
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    std::string inputs;
    for (int in : n.inputs) inputs += (inputs.empty() ? "" : ",") + std::to_string(in);
    char line[256];
    std::snprintf(line, sizeof line, "%5zu  %3d  %-28s %-14s %-16s %-9s ", i, n.rank, util::printable(n.name).c_str(),
                  util::printable(n.op).c_str(),
                  shapeText(n.shape).c_str(), inputs.c_str());
    o << line << util::printable(overlayText(g, n)) << "\n";
  }
  return o.str();
}

std::string graphJson(const ModelGraph& g) {
  std::ostringstream o;
  JsonWriter j(o);
  j.beginObject().field("model", g.model).field("structure", g.structure).field("note", g.note);
  j.field("overlay", g.overlay).field("overlay_run", g.overlayRun).field("call_run", g.callRun);
  j.field("unplaced_calls", g.unplacedCalls).field("unplaced_verdicts", g.unplacedVerdicts);
  j.key("nodes").beginArray();
  for (const GraphNode& n : g.nodes) {
    j.beginObject().field("name", n.name).field("op", n.op).field("rank", n.rank).field("slot", n.slot);
    j.key("shape").beginArray();
    for (int64_t d : n.shape) j.value(d);
    j.endArray().key("inputs").beginArray();
    for (int in : n.inputs) j.value(in);
    j.endArray();
    if (!g.callRun.empty()) j.field("calls", int64_t(n.calls.size()));
    if (g.overlay == "verdicts") {
      j.field("worst", n.worst).field("worst_call", n.worstCall);
      j.field("errors", n.errors).field("unknown", n.unknown).field("legitimate", n.legitimate);
    } else if (g.overlay == "save" && n.saved) {
      j.field("elements", n.elements).field("type2", n.type2).field("mean_vulnerable_bits", n.meanVulnerableBits);
      j.field("tiles", n.tiles).field("reliable_tiles", n.reliableTiles);
    }
    j.endObject();
  }
  j.endArray().endObject();
  o << "\n";
  return o.str();
}

std::string graphDot(const ModelGraph& g) {
  std::ostringstream o;
  o << "digraph " << dotQuote(g.model) << " {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\"];\n";
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    std::string label = n.name + "\n" + n.op + (n.shape.empty() ? "" : " " + shapeText(n.shape));
    const std::string extra = overlayText(g, n);
    if (!extra.empty()) label += "\n" + extra;
    std::string fill;  // Okabe and Ito: vermillion (error), orange (unknown), bluish green (legitimate)
    if (g.overlay == "verdicts" && !n.worst.empty()) {
      const std::string cls = detector::verdictClass(n.worst);
      fill = cls == "error" ? "#d55e00" : cls == "unknown" ? "#e69f00" : "#009e73";
    }
    o << "  n" << i << " [label=" << dotQuote(label) << (fill.empty() ? "" : ", fillcolor=\"" + fill + "\"") << "];\n";
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (int in : g.nodes[i].inputs) o << "  n" << in << " -> n" << i << ";\n";
  o << "}\n";
  return o.str();
}

}  // namespace peat::modelgraph
