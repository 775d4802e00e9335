// SPDX-License-Identifier: MIT
#pragma once
// SAVE's view of a model: a small dataflow graph of inference ops with their fp32 parameters,
// built from a checkpoint's named parameters (the zoo's names), and an fp32 inference engine over
// it whose arithmetic the range analysis bounds. No LibTorch: `peat save` runs without it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/store/tensor.h"

namespace peat::save {

class SaveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Op {
  Input, Linear, Conv2d, Relu, MaxPool2d, GlobalAvgPool, BatchNorm, Add, Flatten,
  // The range analysis rewrites max-pooling into these: a strided gather of one window position,
  // and the element-wise max of two tensors (max(a, b) = b + relu(a - b)). Select also expresses
  // reshapes and transposes (a vision transformer's head split), and with several inputs a
  // concatenation (DenseNet, ShuffleNet, Inception): see selectOffsets.
  Select, Max2,
  // Transformer ops. AddConst: x + c, element-wise (position embeddings). LayerNorm: over the last
  // dimension (eps: the node's, 1e-5 unless set), then weight (gamma) and bias (beta). Gelu: the exact (erf) form.
  // Softmax: over the last dimension. MatMul of two activations, per head h:
  // out[h, m, n] = sum_k a[h, m, k] * b[h, n, k] (b transposed: attention scores are Q K^T; the
  // values' product takes V^T from a Select).
  AddConst, LayerNorm, Gelu, Softmax, MatMul,
  // Gates: the logistic sigmoid and tanh, element-wise, and the element-wise product of two
  // tensors of one shape (no zoo model uses them yet; the analysis and the engine cover them).
  Sigmoid, Tanh, Mul,
  // Clip: min(max(x, lo), hi) with ReLU's NaN rule (NaN -> lo, as CUDA's fmaxf); ReLU6 is Clip(0, 6).
  // AvgPool2d: the mean of a k x k window (zero padding counted).
  Clip, AvgPool2d,
  // Embed: a table lookup (nn.Embedding, ONNX's Gather of a constant table by token ids): weight
  // holds the table [rows, features]; output row t is the table's row at id x[t] (an input element
  // holding an integer in [-rows, rows), negative ids counting from the end as ONNX's); any other
  // value (a fault) gives a row of NaN. Output [ids..., features].
  Embed
};
const char* opName(Op op);

struct Node {
  Op op = Op::Input;
  std::string name;
  std::vector<int> inputs;     // node indices
  std::vector<int64_t> shape;  // one sample's output: [C, H, W], [T, F] (tokens) or [F]
  // Linear: weight [out, in], bias [out], applied to each row of its input ([in] or [T, in]: a
  // token-wise linear layer), output [out] or [T, out].
  // Conv2d: weight [out, in / groups, k, k], bias [out] or empty; output channel o reads the input
  // channels of its group (see groupChannels); tap (ky, kx) of output (y, x) reads input row
  // y * stride + ky * dilation - padding (zero outside). MaxPool2d and AvgPool2d: kernel, stride
  // and padding (max-pool: padding < kernel, see poolInput; average pool: zero padding counted in
  // the divisor, as ONNX's count_include_pad = 1 and PyTorch's default). Clip: [bias[0], bias[1]].
  // BatchNorm (eval): y = x * weight[c] + bias[c], folded from gamma, beta and running statistics.
  // AddConst: bias holds c (one sample's size). LayerNorm: weight gamma, bias beta (last dim).
  std::vector<float> weight, bias;
  int64_t kernel = 0, stride = 1, padding = 0, groups = 1, dilation = 1;
  float eps = 1e-5f;  // LayerNorm's epsilon (torch's default)
  // Select: the input element of each output element (-1: the constant 0); with several inputs an
  // index into their samples laid end to end (input 0's elements first, see selectOffsets)
  std::vector<int64_t> gather;
  int64_t size() const;  // elements per sample
  int64_t features() const { return shape.empty() ? 1 : shape.back(); }  // the last dimension
  int64_t rows() const { return size() / features(); }  // rows of the last dimension
};

// One input or output of an ONNX model: its part of every sample of node 0 (the inputs laid end to
// end, in the model's input order) or of the output node (the outputs' concatenation).
struct OutputPart {
  std::string name;
  int64_t offset = 0;           // where it starts in one sample of the output node
  std::vector<int64_t> shape;   // one sample's
  // an input's own raw range (`--input-range NAME=LO,HI`), in place of the one requested for all;
  // NaN: none
  double lo = std::numeric_limits<double>::quiet_NaN(), hi = std::numeric_limits<double>::quiet_NaN();
  // one input of several that is integer: token ids in [0, tokens) (tokens > 0), or values such as
  // an attention mask (integer: its range must be given); neither is normalised
  int64_t tokens = 0;
  bool integer = false;
  // an input's own normalisation (`--input-mean NAME=...`, `--input-std NAME=...`): one value, or
  // one per channel of a [C, H, W] input (per feature of a [F] one); empty: the graph's
  std::vector<float> means, deviations;
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct Graph {
  std::string model;
  std::string batch;  // how an ONNX input's fixed first dimension was read; empty: a batch axis (1 or symbolic)
  std::vector<Node> nodes;  // topological order; node 0 is the input
  int output = -1;
  // The dataset's normalisation, applied before node 0: x = (pixel - mean) / deviation.
  float inputMean = 0, inputDeviation = 1;
  // Per channel of a [C, H, W] input instead (ImageNet-style): C values each, or empty.
  std::vector<float> channelMeans, channelDeviations;
  float meanOf(int64_t element) const;       // the normalisation of input element `element`
  float deviationOf(int64_t element) const;
  int64_t parameterCount() const;
  // > 0: node 0 holds token ids (an integer ONNX input read by embeddings), each an integer in
  // [0, tokens); no normalisation applies, and the analysed input box is that range.
  int64_t tokens = 0;
  // A model with several outputs: each one's name, place and shape in the output node (a Select
  // that lays them end to end); empty for a model with one output.
  std::vector<OutputPart> outputs;
  // An ONNX model's inputs: each one's name, place and shape in node 0 (one entry for a model with
  // one input; several laid end to end, node 0 then being [total] and each input a select of it);
  // empty for the zoo's graphs.
  std::vector<OutputPart> inputs;
};

using InputPart = OutputPart;

// The analysed input box of `g` for a requested [lo, hi]: token ids span [0, tokens - 1] whatever
// was asked (they are not pixels), a float input the range requested.
inline void fitInputRange(const Graph& g, double& lo, double& hi) {
  if (g.tokens > 0) lo = 0, hi = double(g.tokens - 1);
}

// The raw range of input element `element` (of one sample of node 0): its input's own where one
// was given for it by name, else [lo, hi] as fitInputRange makes it.
inline void elementRange(const Graph& g, int64_t element, double& lo, double& hi) {
  fitInputRange(g, lo, hi);
  for (const OutputPart& p : g.inputs)
    if (element >= p.offset && element < p.offset + p.size()) {
      if (p.tokens > 0) lo = 0, hi = double(p.tokens - 1);
      else if (!std::isnan(p.lo)) lo = p.lo, hi = p.hi;
    }
}

// A part named `name` at `offset` of one sample, of that shape, with no range or normalisation of its own.
inline OutputPart makePart(std::string name, int64_t offset, std::vector<int64_t> shape) {
  OutputPart p;
  p.name = std::move(name);
  p.offset = offset;
  p.shape = std::move(shape);
  return p;
}

// The input part (of several) that holds element `element` of node 0; nullptr for a model with one.
inline const OutputPart* inputPartOf(const Graph& g, int64_t element) {
  if (g.inputs.size() < 2) return nullptr;
  for (const OutputPart& p : g.inputs)
    if (element >= p.offset && element < p.offset + p.size()) return &p;
  return nullptr;
}

// One of several inputs' normalisation: its own means and deviations (one, or one per channel), or
// else the graph's for its first element (one value).
inline std::pair<std::vector<float>, std::vector<float>> partNormalisation(const Graph& g, const OutputPart& p) {
  return {p.means.empty() ? std::vector<float>{g.meanOf(p.offset)} : p.means,
          p.deviations.empty() ? std::vector<float>{g.deviationOf(p.offset)} : p.deviations};
}

// " (input 'NAME', element k)" for an element of one of several inputs; "" for a model with one.
inline std::string inputElementText(const Graph& g, int64_t element) {
  const OutputPart* p = inputPartOf(g, element);
  return p ? " (input '" + p->name + "', element " + std::to_string(element - p->offset) + ")" : "";
}

// The stem of a SAVE result's name for a model: the zoo name, or an ONNX file's name without its
// directory and with characters a result name cannot hold replaced ("/data/my net.onnx" -> "my-net.onnx").
std::string resultBase(const std::string& model);

// The graph of a zoo model ("mlp", "lenet", "resnet", "vit") from its parameters (and batch-norm
// buffers), by their zoo names. Throws SaveError for a model or op SAVE has no transfer function
// for (naming it), and for a missing or misshapen parameter.
Graph zooGraph(const std::string& model, const std::map<std::string, store::Tensor>& parameters);

// The same with seeded random parameters wherever `parameters` lacks one (randomSeed != 0).
Graph zooGraph(const std::string& model, const std::map<std::string, store::Tensor>& parameters, uint64_t randomSeed);

// A graph with seeded random weights: any zoo model, "resnet18" (ResNet-18's layers on 3x224x224
// inputs, for timing the selection at that size) or "grouped" (dilated, depthwise and grouped
// convolutions, clips and a padded average pool on 1x28x28 inputs, for the tests).
Graph randomGraph(const std::string& model, uint64_t seed);

// Reads the parameters of `run`'s checkpoint `iteration` (-1: the last one) from a session file.
std::map<std::string, store::Tensor> loadCheckpoint(const std::string& path, const std::string& run = "train",
                                                    int64_t iteration = -1);

// The input element that window position (ky, kx) of max-pool output (ch, y, x) reads, for an
// input of h x w. A padding position reads the nearest element of the same window instead (its
// index clamped): the window's maximum is unchanged (max-pooling pads with -inf), and every window
// holds a real element because padding < kernel and, in ceil mode (an extra window at the right
// and bottom edges, ONNX's ceil_mode=1), each window starts inside the input or its left padding.
// Every user of a max-pool's windows goes through here.
inline int64_t poolInput(const Node& n, int64_t h, int64_t w, int64_t ch, int64_t y, int64_t x, int64_t ky, int64_t kx) {
  int64_t r = y * n.stride + ky - n.padding, c = x * n.stride + kx - n.padding;
  r = r < 0 ? 0 : r > h - 1 ? h - 1 : r;
  c = c < 0 ? 0 : c > w - 1 ? w - 1 : c;
  return (ch * h + r) * w + c;
}

// Conv2d geometry: the input channels per group, the taps of one output element (its GEMM's inner
// dimension) and the first input channel that output channel `o` reads.
inline int64_t groupChannels(const Node& n, const Node& src) { return src.shape[0] / n.groups; }
inline int64_t convTaps(const Node& n, const Node& src) { return groupChannels(n, src) * n.kernel * n.kernel; }
inline int64_t firstChannel(const Node& n, const Node& src, int64_t o) {
  return o / (n.shape[0] / n.groups) * groupChannels(n, src);
}

// Where each input of a Select starts in its gather's numbering (its inputs' samples laid end to
// end), one more entry holding the total: gather value `at` reads input k, element at - off[k], for
// the k with off[k] <= at < off[k + 1] (selectPart finds it).
std::vector<int64_t> selectOffsets(const Graph& g, const Node& n);
inline std::size_t selectPart(const std::vector<int64_t>& off, int64_t at) {
  std::size_t k = 0;
  while (k + 2 < off.size() && at >= off[k + 1]) ++k;
  return k;
}
// Back through the Select `n` (gradients, sensitivities): each output element's `out[i]` is added to
// the input element it gathers, in `back` (one vector per node); a zero gathers nothing.
template <class T>
void addBackThroughSelect(const Graph& g, const Node& n, const std::vector<T>& out, std::vector<std::vector<T>>& back) {
  const std::vector<int64_t> off = selectOffsets(g, n);  // several inputs: a concatenation
  for (std::size_t i = 0; i < out.size(); ++i)
    if (n.gather[i] >= 0) {
      const std::size_t k = selectPart(off, n.gather[i]);
      back[std::size_t(n.inputs[k])][std::size_t(n.gather[i] - off[k])] += out[i];
    }
}

// The engine's clip (ReLU6): NaN goes to the lower end, as its ReLU maps NaN to 0.
inline float clipOf(float x, float lo, float hi) { return x > lo ? (x < hi ? x : hi) : lo; }

// The engine's workers for its convolutions, linear layers and products of activations (1 unless
// set; 0 asks for every core), for nodes of at least `minWork` multiply-adds (smaller ones run on
// the calling thread). The results are the same bits for any count: each output element's sum
// keeps its order whichever worker computes it.
void setEngineThreads(unsigned threads, int64_t minWork = int64_t(1) << 20);
unsigned engineThreads();

// fp32 inference. Every node's output for `batch` samples, [batch * node.size()] each, in node
// order. The loops and their summation order are fixed, so results are bit-for-bit reproducible.
std::vector<std::vector<float>> runAll(const Graph& g, const float* input, int64_t batch);
// The same into `act`, reusing the memory it holds (a warm engine: no allocation when the batch is
// the same as before).
void runAllInto(const Graph& g, const float* input, int64_t batch, std::vector<std::vector<float>>& act);

// First index of the largest logit; -1 when a logit is NaN or infinite (a corrupted output).
int topClass(const float* logits, int64_t n);
// Top-1 of one sample of g's output node: of its first output where the model has several
// (Graph::outputs: a classifier's logits first), else of all of it; classCount: how many classes.
int topClassOf(const Graph& g, const float* sampleOutput);
int64_t classCount(const Graph& g);

// One output element of a linear or conv2d node for one sample `x` of its input: the very
// arithmetic runNode uses, so a partial recomputation equals a full one bit for bit.
float affineElement(const Node& n, const Node& input, const float* x, int64_t element);

// im2col of one sample `x` of a conv node's input: cols[tap][position], taps in (channel, kernel
// row, kernel column) order, the zero padding included.
void unfold(const Node& n, const Node& src, const float* x, float* cols);

// One output element of any node for one sample, from pointers to that sample's inputs: the same
// arithmetic as runNode (for verification by recomputation).
float elementOf(const Graph& g, int node, const std::vector<const float*>& inputs, int64_t element);

// One node's output from its inputs' outputs (for recomputing part of a network).
void runNode(const Graph& g, int node, const std::vector<const float*>& inputs, int64_t batch, float* out);

}  // namespace peat::save
