// SPDX-License-Identifier: MIT
#pragma once
// What a recorded call is, for displays, from what the session stores with it ("op" and its
// "param.NAME" attributes), without LibTorch: the op kind and its variant, each real parameter
// decoded from the bits of a double stored under "NAME_f64", and each input named by its role
// (x, gamma, dy, mask, ids, ...). The vocabulary is core/torch/ops/op_types.h's, spelled as there;
// each op's inputs per variant are those of core/torch/kernels/golden.cpp (docs/models.md).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace peat::store {

// One parameter of a call as shown.
struct CallParameter {
  std::string name;        // "eps", "lr", "dim" (a real parameter without its "_f64")
  std::string text;        // the value as shown: "1e-05", "0.003", "-1"
  std::string meaning;     // what an integer code means ("tanh form", "no gamma"); often empty
  bool real = false;       // decoded from the bits of a double
  double value = 0;        // the value (an integer one converted)
  bool byDefault = false;  // not stored with the call: the value the op takes without it
  bool geometry = false;   // a size the call's tensors show too (in_h, k_w, num_weights)
};

// One input of a call: the dataset "input_<i>" and its role.
struct CallInput {
  std::string name;     // "x", "gamma", "dy", "mask", "ids"
  std::string meaning;  // "the gradient of the output", "dropout's recorded mask (0 or 1/(1-p))"
};

struct CallDescription {
  std::string op;            // as stored ("layernorm")
  bool knownOp = false;      // one of opNames()
  std::string variant;       // "forward", "grad_input", "grad_weight", "grad_bias", "update"; "" when
                             // the call stores none (sessions before op-wise routing), "variant 9" if unknown
  bool knownVariant = false;  // the op has this variant: inputs and output are named
  std::string summary;       // "layer norm, gradient of gamma"
  std::string formula;       // "dGamma = sum dy * x_hat"; may be empty
  std::vector<CallInput> inputs;  // input_0, input_1, ... in order; empty unless knownVariant
  std::string output;             // what the output holds ("y", "dBeta", "p', m', v'" stacked)
  std::vector<CallParameter> parameters;  // the op's own in a fixed order, then any other by name

  // "layer norm, gradient of gamma (dGamma = sum dy * x_hat)"; the op's name when nothing is known.
  std::string text() const;
  // "layernorm grad_bias"; `phase` ("forward", "backward") stands in for a variant not stored.
  std::string kind(const std::string& phase = {}) const;
  // "p 0.1", "lr 0.003, beta1 0.9, ..., step 1": the stored parameters (defaults and geometry only
  // when asked), each as "name text".
  std::string parameterLine(bool withDefaults = false, bool withGeometry = false) const;
  // The role of input dataset `tensor` ("input_2" -> "gamma"); "" when none is known.
  std::string roleOf(const std::string& tensor) const;
};

CallDescription describeCall(const std::string& op, const std::map<std::string, int64_t>& params);

// The double whose bits a "NAME_f64" parameter stores.
double realFromBits(int64_t bits);
// The shortest text that reads back as `value` ("1e-05", "0.003", "0.1", "inf").
std::string realText(double value);

// The op vocabulary as the CLI spells it (`--op`, `--record-ops`), in op_types.h's order.
const std::vector<std::string>& opNames();
// One line on what an op computes ("layer norm over the last dimensions"); "" for an unknown op.
std::string opSummary(const std::string& op);
// The ops whose forward is a GEMM (linear, conv2d, matmul): the default of `--record-ops`.
bool isGemmOpName(const std::string& op);

}  // namespace peat::store
