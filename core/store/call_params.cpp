// SPDX-License-Identifier: MIT
#include "core/store/call_params.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>

namespace peat::store {

namespace {

const char* const kVariants[] = {"forward", "grad_input", "grad_weight", "grad_bias", "update"};

// An input only some calls of the op have: layer norm's gamma and beta (params "weight", "bias").
enum class When { Always, Weight, Bias, Mask, Dropout };

struct InputSpec {
  const char* name;
  const char* meaning;
  When when = When::Always;
};

struct VariantSpec {
  int variant;
  const char* summary;
  const char* formula;
  std::vector<InputSpec> inputs;
  const char* output;
};

struct ParamSpec {
  const char* name;
  bool real = false;
  bool hasDefault = false;
  double fallback = 0;  // the value the op takes when the call does not store it
  bool geometry = false;
};

struct OpSpec {
  const char* name;
  const char* summary;
  std::vector<ParamSpec> params;
  std::vector<VariantSpec> variants;
};

// Roles that several ops share.
const InputSpec kX{"x", "the input"}, kDy{"dy", "the gradient of the output"}, kY{"y", "the forward output"};
const InputSpec kWeight{"weight", "W"}, kBias{"bias", "b"};
const InputSpec kMask{"mask", "the recorded mask: 0 or 1/(1-p)"};

enum : int { Forward = 0, GradInput = 1, GradWeight = 2, GradBias = 3, Update = 4 };

// In op_types.h's order (OpKind); inputs per variant as core/torch/kernels/golden.cpp reads them.
const std::vector<OpSpec>& opSpecs() {
  static const std::vector<OpSpec> specs{
      {"linear", "fully connected layer, a GEMM", {},
       {{Forward, "linear layer", "y = x W^T + b", {kX, kWeight, kBias}, "y"},
        {GradInput, "linear layer, gradient of the input", "dX = dY W", {kDy, kWeight}, "dX"},
        {GradWeight, "linear layer, gradient of the weight", "dW = dY^T X", {kDy, kX}, "dW"}}},
      {"conv2d", "2-D convolution, a GEMM by im2col",
       {{"stride"}, {"padding"}, {"stride_w"}, {"padding_w"}, {"dilation_h"}, {"dilation_w"}, {"groups"},
        {"in_h", false, false, 0, true}, {"in_w", false, false, 0, true}, {"k_h", false, false, 0, true},
        {"k_w", false, false, 0, true}},
       {{Forward, "2-D convolution", "y = conv(x, W) + b", {kX, kWeight, kBias}, "y"},
        {GradInput, "2-D convolution, gradient of the input", "a transposed convolution of dY with W", {kDy, kWeight},
         "dX"},
        {GradWeight, "2-D convolution, gradient of the weight", "a correlation of dY with X", {kDy, kX}, "dW"}}},
      {"matmul", "matrix product, batched or not, a GEMM", {},
       {{Forward, "matrix product", "C = A B", {{"a", "A"}, {"b", "B"}}, "C"},
        {GradInput, "matrix product, gradient of A", "dA = dC B^T", {{"dc", "the gradient of C"}, {"b", "B"}}, "dA"},
        {GradWeight, "matrix product, gradient of B", "dB = A^T dC", {{"a", "A"}, {"dc", "the gradient of C"}}, "dB"}}},
      {"softmax", "softmax along a dimension", {{"dim", false, true, -1}},
       {{Forward, "softmax", "y = exp(x - max) / sum exp(x - max)", {kX}, "y"},
        {GradInput, "softmax, gradient of the input", "dx = y (dy - sum dy y)", {kDy, kY}, "dx"}}},
      {"layernorm", "layer norm over the last dimensions",
       {{"normalized", false, true, 1}, {"eps", true, true, 1e-5}, {"weight", false, true, 1}, {"bias", false, true, 1}},
       {{Forward, "layer norm", "y = (x - mean) / sqrt(var + eps) * gamma + beta",
         {kX, {"gamma", "the scale", When::Weight}, {"beta", "the shift", When::Bias}}, "y"},
        {GradInput, "layer norm, gradient of the input",
         "dX = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + eps), g = gamma dy",
         {kDy, kX, {"gamma", "the scale", When::Weight}}, "dX"},
        {GradWeight, "layer norm, gradient of gamma", "dGamma = sum dy * x_hat", {kDy, kX}, "dGamma"},
        {GradBias, "layer norm, gradient of beta", "dBeta = sum dy", {kDy}, "dBeta"}}},
      {"gelu", "GELU activation (erf or tanh form)", {{"approximate", false, true, 0}},
       {{Forward, "GELU", "y = x Phi(x)", {kX}, "y"},
        {GradInput, "GELU, gradient of the input", "dx = dy GELU'(x)", {kDy, kX}, "dx"}}},
      {"relu", "ReLU activation", {},
       {{Forward, "ReLU", "y = max(x, 0)", {kX}, "y"},
        {GradInput, "ReLU, gradient of the input", "dx = dy where y > 0", {kDy, kY}, "dx"}}},
      {"add", "element-wise addition", {}, {{Forward, "addition", "y = a + b", {{"a", "A"}, {"b", "B"}}, "y"}}},
      {"embedding", "embedding lookup (its backward a scatter-add)",
       {{"padding_idx", false, true, -1}, {"scale_grad_by_freq", false, true, 0}, {"num_weights", false, false, 0, true}},
       {{Forward, "embedding lookup", "y = table[ids]",
         {{"ids", "the token ids (int64)"}, {"table", "the embedding table"}}, "y"},
        {GradWeight, "embedding, gradient of the table", "a scatter-add of dy's rows at ids",
         {kDy, {"ids", "the token ids (int64)"}}, "dTable"}}},
      {"batchnorm", "batch norm", {{"training"}},
       {{Forward, "batch norm", "y = (x - mean) / sqrt(var + 1e-5) * gamma + beta",
         {kX, {"gamma", "the scale"}, {"beta", "the shift"}, {"running_mean", "the running mean"},
          {"running_var", "the running variance"}},
         "y"}}},
      {"maxpool2d", "2-D max pooling", {{"kernel"}, {"stride"}},
       {{Forward, "2-D max pooling", "", {kX}, "y"}}},
      {"avgpool2d", "global average pooling", {},
       {{Forward, "global average pooling", "y = mean of x over height and width", {kX}, "y"}}},
      {"log_softmax", "log-softmax along a dimension", {{"dim", false, true, -1}},
       {{Forward, "log-softmax", "y = x - max - log sum exp(x - max)", {kX}, "y"},
        {GradInput, "log-softmax, gradient of the input", "dx = dy - exp(y) sum dy", {kDy, kY}, "dx"}}},
      {"silu", "SiLU activation", {},
       {{Forward, "SiLU", "y = x sigmoid(x)", {kX}, "y"},
        {GradInput, "SiLU, gradient of the input", "dx = dy SiLU'(x)", {kDy, kX}, "dx"}}},
      {"tanh", "tanh activation", {},
       {{Forward, "tanh", "y = tanh(x)", {kX}, "y"},
        {GradInput, "tanh, gradient of the input", "dx = dy (1 - y^2)", {kDy, kY}, "dx"}}},
      {"sigmoid", "sigmoid activation", {},
       {{Forward, "sigmoid", "y = 1 / (1 + exp(-x))", {kX}, "y"},
        {GradInput, "sigmoid, gradient of the input", "dx = dy y (1 - y)", {kDy, kY}, "dx"}}},
      {"dropout", "dropout with its recorded mask", {{"p", true}},
       {{Forward, "dropout", "y = x * mask", {kX, kMask}, "y"},
        {GradInput, "dropout, gradient of the input", "dx = dy * mask", {kDy, kMask}, "dx"}}},
      {"cross_entropy", "mean cross-entropy of logits and class ids", {{"ignore_index", false, true, -100}},
       {{Forward, "cross-entropy loss", "loss = mean over rows of -log softmax(logits)[id]",
         {{"logits", "the logits [N, C]"}, {"ids", "the class ids [N] (int64)"}}, "loss"},
        {GradInput, "cross-entropy, gradient of the logits", "dLogits = dLoss (softmax(logits) - onehot(ids)) / N",
         {{"dloss", "the loss's gradient [1]"}, {"logits", "the logits [N, C]"}, {"ids", "the class ids [N] (int64)"}},
         "dLogits"}}},
      {"sgd", "SGD update with momentum", {{"lr", true}, {"momentum", true}},
       {{Update, "SGD update: new parameter and momentum buffer stacked",
         "buf' = momentum buf + g, p' = p - lr buf'",
         {{"p", "the parameter"}, {"g", "its gradient"}, {"buf", "the momentum buffer"}},
         "p', buf'"}}},
      {"adam", "Adam update", {{"lr", true}, {"beta1", true}, {"beta2", true}, {"eps", true}, {"step"}},
       {{Update, "Adam update: new parameter, m and v stacked",
         "m' = beta1 m + (1 - beta1) g, v' = beta2 v + (1 - beta2) g^2, "
         "p' = p - lr (m' / c1) / (sqrt(v' / c2) + eps), c_i = 1 - beta_i^step",
         {{"p", "the parameter"}, {"g", "its gradient"}, {"m", "the first moment"}, {"v", "the second moment"}},
         "p', m', v'"}}},
      {"attention", "scaled dot-product attention, one call",
       {{"scale", true}, {"causal", false, true, 0}, {"mask", false, true, 0}, {"dropout", false, true, 0}, {"p", true},
        {"wrt", false, true, 0}},
       {{Forward, "attention", "o = (softmax(scale q k^T + mask) keep) v",
         {{"q", "the queries"}, {"k", "the keys"}, {"v", "the values"}, {"mask", "the additive mask", When::Mask},
          {"keep", "the dropout's multipliers of the probabilities", When::Dropout}},
         "o"},
        {GradInput, "attention, gradient of q, k or v (wrt 0, 1, 2)",
         "dq, dk or dv of o = (softmax(scale q k^T + mask) keep) v",
         {{"do", "the gradient of o"}, {"q", "the queries"}, {"k", "the keys"}, {"v", "the values"},
          {"mask", "the additive mask", When::Mask}, {"keep", "the dropout's multipliers", When::Dropout}},
         "dq | dk | dv"}}},
  };
  return specs;
}

const OpSpec* findOp(const std::string& op) {
  for (const OpSpec& s : opSpecs())
    if (op == s.name) return &s;
  return nullptr;
}

// What an integer code of an op means; "" where the number says it.
std::string codeMeaning(const std::string& op, const std::string& name, int64_t v) {
  if (name == "approximate") return v ? "tanh form" : "exact (erf)";
  if (op == "layernorm" && name == "weight") return v ? "with gamma" : "no gamma";
  if (op == "layernorm" && name == "bias") return v ? "with beta" : "no beta";
  if (name == "dim" && v == -1) return "the last";
  if (name == "padding_idx" && v < 0) return "none";
  if (name == "training") return v ? "batch statistics" : "running statistics";
  if (op == "attention" && name == "causal") return v ? "causal" : "not causal";
  if (op == "attention" && name == "mask") return v ? "an additive mask" : "no mask";
  if (op == "attention" && name == "dropout") return v ? "dropout on the probabilities" : "no dropout";
  if (op == "attention" && name == "wrt") return v == 0 ? "dq" : v == 1 ? "dk" : "dv";
  if (name == "scale_grad_by_freq") return v ? "scaled by frequency" : "not scaled";
  return {};
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

CallParameter integerParameter(const std::string& op, const std::string& name, int64_t v) {
  CallParameter p;
  p.name = name;
  p.text = std::to_string(v);
  p.value = double(v);
  p.meaning = codeMeaning(op, name, v);
  return p;
}

CallParameter realParameter(const std::string& name, double v) {
  CallParameter p;
  p.name = name;
  p.real = true;
  p.value = v;
  p.text = realText(v);
  return p;
}

}  // namespace

double realFromBits(int64_t bits) {
  double v = 0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

std::string realText(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // whole numbers below 1e15 without an exponent (10000, not 1e+04); small ones keep it (1e-05)
  const double magnitude = std::fabs(value);
  const int whole = magnitude >= 1 && magnitude < 1e15 ? int(std::floor(std::log10(magnitude))) + 1 : 1;
  char buffer[40];
  for (int digits = whole; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

const std::vector<std::string>& opNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const OpSpec& s : opSpecs()) out.push_back(s.name);
    return out;
  }();
  return names;
}

std::string opSummary(const std::string& op) {
  const OpSpec* s = findOp(op);
  return s ? s->summary : std::string();
}

bool isGemmOpName(const std::string& op) { return op == "linear" || op == "conv2d" || op == "matmul"; }

CallDescription describeCall(const std::string& op, const std::map<std::string, int64_t>& params) {
  CallDescription d;
  d.op = op;
  const OpSpec* spec = findOp(op);
  d.knownOp = spec != nullptr;
  const auto variant = params.find("variant");
  const VariantSpec* vs = nullptr;
  if (variant != params.end()) {
    const int64_t v = variant->second;
    d.variant = v >= 0 && v < int64_t(std::size(kVariants)) ? kVariants[v] : "variant " + std::to_string(v);
    if (spec)
      for (const VariantSpec& s : spec->variants)
        if (s.variant == v) vs = &s;
  }
  d.knownVariant = vs != nullptr;
  const auto stored = [&](const std::string& key, int64_t fallback) {
    const auto it = params.find(key);
    return it == params.end() ? fallback : it->second;
  };
  if (vs) {
    d.summary = vs->summary;
    d.formula = vs->formula;
    if (op == "gelu" && vs->variant == Forward && stored("approximate", 0))
      d.formula = "y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))";
    for (const InputSpec& in : vs->inputs) {
      if ((in.when == When::Weight && !stored("weight", 1)) || (in.when == When::Bias && !stored("bias", 1)) ||
          (in.when == When::Mask && !stored("mask", 0)) || (in.when == When::Dropout && !stored("dropout", 0)))
        continue;
      d.inputs.push_back({in.name, in.meaning});
    }
    d.output = vs->output;
  } else if (spec) {
    d.summary = spec->summary;
  }
  // the op's own parameters first, in its order; a default shown only where the op has one
  std::set<std::string> shown{"variant"};
  if (spec)
    for (const ParamSpec& ps : spec->params) {
      const std::string key = ps.real ? std::string(ps.name) + "_f64" : std::string(ps.name);
      const auto it = params.find(key);
      CallParameter p;
      if (it != params.end()) {
        p = ps.real ? realParameter(ps.name, realFromBits(it->second)) : integerParameter(op, ps.name, it->second);
      } else if (ps.hasDefault) {
        p = ps.real ? realParameter(ps.name, ps.fallback) : integerParameter(op, ps.name, int64_t(ps.fallback));
        p.byDefault = true;
      } else {
        continue;
      }
      p.geometry = ps.geometry;
      d.parameters.push_back(p);
      shown.insert(key);
    }
  for (const auto& [key, value] : params) {
    if (shown.count(key)) continue;
    if (endsWith(key, "_f64")) d.parameters.push_back(realParameter(key.substr(0, key.size() - 4), realFromBits(value)));
    else d.parameters.push_back(integerParameter(op, key, value));
  }
  return d;
}

std::string CallDescription::text() const {
  if (summary.empty()) return op;
  return formula.empty() ? summary : summary + " (" + formula + ")";
}

std::string CallDescription::kind(const std::string& phase) const {
  const std::string second = variant.empty() ? phase : variant;
  return second.empty() ? op : op + " " + second;
}

std::string CallDescription::parameterLine(bool withDefaults, bool withGeometry) const {
  std::string out;
  for (const CallParameter& p : parameters) {
    if ((p.byDefault && !withDefaults) || (p.geometry && !withGeometry)) continue;
    out += (out.empty() ? "" : ", ") + p.name + " " + p.text;
  }
  return out;
}

std::string CallDescription::roleOf(const std::string& tensor) const {
  if (!knownVariant) return {};
  const std::string prefix = "input_";
  if (tensor.size() <= prefix.size() || tensor.compare(0, prefix.size(), prefix) != 0) return {};
  char* end = nullptr;
  const unsigned long i = std::strtoul(tensor.c_str() + prefix.size(), &end, 10);
  if (*end != '\0' || i >= inputs.size()) return {};
  return inputs[i].name;
}

}  // namespace peat::store
