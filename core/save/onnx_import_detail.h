// SPDX-License-Identifier: MIT
#pragma once
// What the ONNX importer's files share, private to libpeat_onnx.so: onnx_import.cpp (the entry
// point, the walk over the graph, names and shapes), onnx_load.cpp (the file, its initializers and
// its input), onnx_fold.cpp (constant folding), onnx_moves.cpp (ops that move elements),
// onnx_map.cpp (the operator table) and onnx_patterns.cpp (multi-node patterns).
#include <onnx/checker.h>  // first: it selects the onnx-ml protobuf
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/save/graph_builder.h"
#include "core/save/onnx_model.h"

namespace peat::save::onnx_import {

inline constexpr int64_t kNewestOpset = 17;      // libonnx 1.12 checks up to here
inline constexpr int64_t kNewestLowered = 24;    // opsets 18-24 are lowered to 17 (onnx_opset.cpp)

// Rewrites a model of opset 18-21 into its opset-17 form (onnx_opset.cpp); throws SaveError naming
// a node that has none.
void lowerToOpset17(onnx::ModelProto& model, const std::string& path);

struct Constant {
  std::vector<int64_t> dims;
  std::vector<float> values;     // FLOAT tensors
  std::vector<int64_t> integers;  // INT64 tensors (shapes, axes)
  bool isFloat = false;
};

// --- index arithmetic over row-major dims (the importer evaluates shapes and moves elements with it)

// A model file from someone else may fold a Range to 2^40 or a ConstantOfShape of 2^30 elements:
// every constant folded at import, and every element move's index map, is sized before anything is
// allocated and refused past these (shape arithmetic, masks and token tables are far smaller; the
// largest activation SAVE analyses is far below the moves' limit).
constexpr int64_t kFoldElements = int64_t(1) << 22;  // 4M: a 2048x2048 mask
constexpr int64_t kMoveElements = int64_t(1) << 26;  // 64M: a 512 MiB index map
// All constants folded at import together, beyond the elements of the model's own initializers (a
// transposed weight is as large as the weight): a chain of 40 Concats doubling a 1-element
// constant each folded under the per-node limits until it held 2.1 GB.
constexpr int64_t kFoldTotal = int64_t(1) << 23;  // 8M

// DIMS' element count; SaveError naming WHAT when a dimension is negative, the product overflows or
// it passes LIMIT.
inline int64_t boundedCount(const std::vector<int64_t>& dims, int64_t limit, const std::string& what) {
  int64_t n = 1;
  for (int64_t x : dims) {
    if (x < 0) throw SaveError(what + " with a negative dimension (" + std::to_string(x) + ")");
    if (x != 0 && n > limit / x)
      throw SaveError(what + " of more than " + std::to_string(limit) + " elements, the most SAVE makes at import");
    n *= x;
  }
  if (n > limit) throw SaveError(what + " of more than " + std::to_string(limit) + " elements, the most SAVE makes at import");
  return n;
}

inline int64_t countOf(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

inline std::vector<int64_t> stridesOf(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// numpy broadcasting of two shapes; false if they do not broadcast
inline bool broadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>& out) {
  const std::size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())], y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    out[i] = std::max(x, y);
  }
  return true;
}

// the flat index in a tensor of dims `from` that broadcasts to output coordinate `coord` of dims `to`
inline int64_t broadcastIndex(const std::vector<int64_t>& from, const std::vector<int64_t>& to,
                              const std::vector<int64_t>& coord) {
  int64_t at = 0, stride = 1;
  for (std::size_t i = from.size(); i-- > 0;) {
    const std::size_t j = i + (to.size() - from.size());
    at += (from[i] == 1 ? 0 : coord[j]) * stride;
    stride *= from[i];
  }
  return at;
}

inline std::vector<int64_t> coordOf(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (std::size_t i = dims.size(); i-- > 0;) {
    c[i] = flat % dims[i];
    flat /= dims[i];
  }
  return c;
}

inline int64_t axisOf(int64_t axis, std::size_t rank) { return axis < 0 ? axis + int64_t(rank) : axis; }

// The gather of an op that maps each output coordinate axis by axis to an input coordinate
// (a Pad, a nearest Resize): output element e of dims `out` takes the input element (of dims `in`)
// whose coordinate on axis k is source(k, e's coordinate on k), or none (-1: a zero) where one lies outside.
template <typename Source>
std::vector<int64_t> axisWiseGather(const std::vector<int64_t>& in, const std::vector<int64_t>& out, Source source) {
  const std::vector<int64_t> st = stridesOf(in);
  std::vector<int64_t> gather(std::size_t(countOf(out)));
  for (int64_t e = 0; e < countOf(out); ++e) {
    const std::vector<int64_t> c = coordOf(e, out);
    int64_t at = 0;
    for (std::size_t k = 0; k < out.size() && at >= 0; ++k) {
      const int64_t i = source(k, c[k]);
      at = i < 0 || i >= in[k] ? -1 : at + i * st[k];
    }
    gather[std::size_t(e)] = at;
  }
  return gather;
}

// Maps one ONNX model onto SAVE's graph, node by node in the graph's order; every node SAVE cannot
// bound is refused with its reason, and all of them are reported at once.
// An ONNX element type's name ("float32", "int64", ...).
std::string typeName(int t);

class Importer {
 public:
  Importer(const std::string& path, const std::map<std::string, store::Tensor>* replacements)
      : path_(path), replacements_(replacements), b_(g_, params_) {}

  Graph run();  // throws SaveError

 private:
  Graph mapped();

 private:
  struct OpMapping;  // a row of the operator table (onnx_map.cpp)
  using IndexMap = void (Importer::*)(const onnx::NodeProto& n, const std::vector<int64_t>& d,
                                      std::vector<int64_t>& out, std::vector<int64_t>& gather);
  using Folder = std::optional<Constant> (Importer::*)(const onnx::NodeProto& n,
                                                       const std::vector<const Constant*>& in);

  // --- the file, its initializers and its input (onnx_load.cpp)
  void load();
  void identityGathers();  // Gathers by every index in order: Reshapes
  void readExternal(onnx::TensorProto& t);
  Constant decode(const onnx::TensorProto& t, const char* what);
  void replace();
  void input();
  std::vector<int64_t> sampleShape(const onnx::ValueInfoProto& in, int first) const;
  // an integer input: token ids, or (`several`: beside other inputs) values such as a mask
  void tokenInput(const std::string& name, const std::string& type, bool several);
  bool mapIntegerValue(const onnx::NodeProto& n);  // onnx_map.cpp: nodes reading an integer input's values
  void embedding(const onnx::NodeProto& n);  // onnx_moves.cpp: Gather of a constant table by token ids
  void checkDeclaredOutput(const onnx::ValueInfoProto& out, int node) const;
  // "" when a model whose input fixes its first dimension computes each sample alone; else why
  // not (onnx_batch.cpp)
  std::string mixesSamples(const std::vector<std::string>& inputs);
  std::string sampleCheck(onnx::ModelProto m, const std::vector<std::string>& inputs, int& patched,
                          std::vector<int64_t>& target) const;
  bool putShapeValues(onnx::ModelProto& m) const;
  static void putReshapeTarget(onnx::ModelProto& m, int node, const std::string& name, const std::vector<int64_t>& target);

  // --- helpers for nodes (onnx_import.cpp)
  static const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const char* name);
  static int64_t intAttr(const onnx::NodeProto& n, const char* name, int64_t fallback);
  static float floatAttr(const onnx::NodeProto& n, const char* name, float fallback);
  static std::vector<int64_t> intsAttr(const onnx::NodeProto& n, const char* name);
  std::string nameOf(const onnx::NodeProto& n);
  void refuse(const onnx::NodeProto& n, const std::string& why);
  bool isActivation(const std::string& v) const { return values_.count(v) > 0; }
  const Constant* constant(const std::string& v) const {
    auto it = constants_.find(v);
    return it == constants_.end() ? nullptr : &it->second;
  }
  bool weight(const onnx::NodeProto& n, const std::string& value, const std::string& as,
              std::vector<int64_t> wantDims = {});
  static store::Tensor tensorOf(const std::vector<float>& v, const std::vector<int64_t>& dims);
  int64_t perSample(int v) const { return b_.node(v).size(); }
  void node(const onnx::NodeProto& n);
  std::vector<int64_t> dimsOf(const std::string& v) const;
  static std::vector<int64_t> sampleShape(const std::vector<int64_t>& d);
  int shaped(const std::string& name, int x, const std::vector<int64_t>& shape);
  int gathered(const std::string& name, int x, const std::vector<int64_t>& shape, std::vector<int64_t> gather);
  std::pair<int, int64_t> traced(int x, int64_t e) const;
  int selectOf(const std::string& name, int fallback, const std::vector<int64_t>& shape,
               const std::vector<std::pair<int, int64_t>>& from);
  void pruneDeadNodes();
  void setActivation(const std::string& v, const std::string& name, int node, const std::vector<int64_t>& dims);

  // --- constant folding (onnx_fold.cpp)
  std::vector<int64_t> ints(const onnx::NodeProto& n, int input);
  bool fold(const onnx::NodeProto& n);
  std::optional<Constant> foldShape(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldCast(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldElementwise(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldUnary(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldWhere(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldConstantOfShape(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldRange(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldScatterND(const onnx::NodeProto& n, const std::vector<const Constant*>& in);
  std::optional<Constant> foldMove(const onnx::NodeProto& n, const std::vector<const Constant*>& in);

  // --- ops that move elements, of constants and activations alike (onnx_moves.cpp)
  bool moveIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                   std::vector<int64_t>& gather);
  void reshapeIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                      std::vector<int64_t>& gather);
  void flattenIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                      std::vector<int64_t>& gather);
  void squeezeIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                      std::vector<int64_t>& gather);
  void transposeIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                        std::vector<int64_t>& gather);
  void sliceIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                    std::vector<int64_t>& gather);
  void gatherIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                     std::vector<int64_t>& gather);
  void expandIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                     std::vector<int64_t>& gather);
  void concatIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                     std::vector<int64_t>& gather);
  void move(const onnx::NodeProto& n);
  void concatActivations(const onnx::NodeProto& n);
  int concatConstants(const onnx::NodeProto& n, int part, int v, const std::vector<int64_t>& out);
  void split(const onnx::NodeProto& n);

  // --- the operator table and its mappers (onnx_map.cpp); a mapper sets the node's outputs or
  // refuses the node
  static const OpMapping* mappingOf(const std::string& op);
  static bool keepsShape(const std::string& op);
  static std::string unreadAttribute(const onnx::NodeProto& n);
  void nodeInner(const onnx::NodeProto& n);
  void mapIdentity(const onnx::NodeProto& n);
  bool foldConstants(const onnx::NodeProto& n);
  void mapOperator(const onnx::NodeProto& n);
  void mapConstantFirst(const onnx::NodeProto& n);
  int first(const onnx::NodeProto& n) const { return values_.at(n.input(0)); }
  void mapConv(const onnx::NodeProto& n);
  void mapResize(const onnx::NodeProto& n);  // onnx_resize.cpp
  void mapConvTranspose(const onnx::NodeProto& n);
  void mapRecurrent(const onnx::NodeProto& n);  // onnx_rnn.cpp: RNN, GRU, LSTM
  int convPatches(const onnx::NodeProto& n, int x, int64_t extraPad = 0);  // onnx_conv.cpp
  void mapGemm(const onnx::NodeProto& n);
  void mapMatMul(const onnx::NodeProto& n);
  void mapBinary(const onnx::NodeProto& n);
  void mapRelu(const onnx::NodeProto& n);
  void mapSigmoid(const onnx::NodeProto& n);
  void mapTanh(const onnx::NodeProto& n);
  void mapSoftmax(const onnx::NodeProto& n);
  void mapMaxPool(const onnx::NodeProto& n);
  void mapClip(const onnx::NodeProto& n);
  void mapAveragePool(const onnx::NodeProto& n);
  void mapGlobalAveragePool(const onnx::NodeProto& n);
  void mapBatchNormalization(const onnx::NodeProto& n);
  void mapLayerNormalization(const onnx::NodeProto& n);
  void mapHardSigmoid(const onnx::NodeProto& n);
  void mapHardSwish(const onnx::NodeProto& n);
  void mapReduceMean(const onnx::NodeProto& n);
  int hardSigmoid(const std::string& name, int x, float alpha, float beta);
  int avgPool(const onnx::NodeProto& n, int x, int64_t extra);
  int conv(const onnx::NodeProto& n, int x, int64_t extraPad = 0);
  int gemm(const onnx::NodeProto& n, int x);
  void matmulActivations(const onnx::NodeProto& n);
  void binary(const onnx::NodeProto& n, const std::string& a, const std::string& other);
  void scale(const onnx::NodeProto& n, const std::string& a, int x, const Constant& c);
  void addConstant(const onnx::NodeProto& n, int x, const Constant& c, const std::vector<int64_t>& cdims);
  bool expandConstant(const onnx::NodeProto& n, const std::vector<int64_t>& shape, const Constant& c,
                      const std::vector<int64_t>& cdims, std::vector<float>& expanded);
  void binaryActivations(const onnx::NodeProto& n, const std::string& a, const std::string& other);
  int negate(const std::string& name, int x);

  // --- patterns over several nodes (onnx_patterns.cpp)
  bool mapGeluChain(const onnx::NodeProto& n, const std::string& name);
  bool mapLayerNormChain(const onnx::NodeProto& n, const std::string& name);
  bool matchLayerNorm(const onnx::NodeProto& mean);
  bool matchGelu(const onnx::NodeProto& div);
  void pad(const onnx::NodeProto& n);
  void mapAfterZeroPad(const onnx::NodeProto& n);
  bool foldIntoLinearBias(const onnx::NodeProto& n, const std::string& a, int x, const Constant& c,
                          const std::vector<int64_t>& cdims);
  bool maskInfinities(const onnx::NodeProto& n, std::vector<float>& expanded);

  int64_t opset_ = kNewestOpset;
  int64_t fixedBatch_ = 0;    // the input's fixed first dimension, read as a batch
  bool wholeSample_ = false;  // the input's first dimension is no batch: the whole input is a sample
  std::string path_;
  const std::map<std::string, store::Tensor>* replacements_;
  onnx::ModelProto model_;
  Graph g_;
  std::map<std::string, store::Tensor> params_;
  detail::Builder b_;
  std::map<std::string, Constant> constants_;
  int64_t foldBudget_ = kFoldTotal;        // kFoldTotal plus the initializers' elements (mapped())
  int64_t folded_ = 0;                     // elements of the constants folded so far
  int64_t moveLimit_ = kMoveElements;      // the largest element move: less while folding constants
  std::string moveWhat_ = "an element move";  // and what its error calls it
  std::map<std::string, int> values_, biasFree_, consumers_;
  std::set<std::string> tokenInputs_;    // integer inputs read as token ids
  std::set<std::string> integerInputs_;  // integer inputs read as values (masks), beside other inputs
  std::set<std::string> unreadInputs_;   // of those, the ones no node reads but Shape
  std::set<std::string> integerValues_;  // activations holding an integer input's values, not yet cast
  std::map<std::string, std::pair<int, int64_t>> zeroPad_;  // a Pad's output: its input and padding
  std::map<std::string, std::vector<int64_t>> dims_;        // full ONNX dims of activations (batch 1)
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;
  std::set<std::string> geluInside_;                      // values inside an erf GELU chain
  std::map<std::string, std::string> geluEnd_;            // the chain's last value -> its input
  struct DecomposedLayerNorm {
    std::string input;               // the normalised value
    float eps = 1e-5f;
    std::vector<float> gamma, beta;  // [width] or one value; empty: 1 and 0
  };
  std::set<std::string> layerNormInside_;                      // values inside a decomposed layer norm
  std::map<std::string, DecomposedLayerNorm> layerNormEnd_;    // the chain's last value -> the layer norm
  int concatPart_ = 0;                                    // the Concat input moveIndices places
  std::set<std::string> poisoned_, nonFloat_, shape1x1_;
  std::map<std::string, std::string> typeOf_;
  std::vector<std::string> unsupported_;
  std::map<const onnx::NodeProto*, std::string> names_;
  std::map<std::string, int> nameCount_;
};

}  // namespace peat::save::onnx_import
