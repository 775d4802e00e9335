// SPDX-License-Identifier: MIT
#include "core/torch/ops/dispatcher.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace peat::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

Dispatcher* dispatcherOf(AutogradContext* ctx) {
  return reinterpret_cast<Dispatcher*>(ctx->saved_data["dispatcher"].toInt());
}

// What every backward starts from: the dispatcher and the layer its forward saved, the tensors it
// saved, and the gradient of the output (contiguous).
struct BackwardInputs {
  BackwardInputs(AutogradContext* ctx, const variable_list& grads)
      : d(dispatcherOf(ctx)), layer(ctx->saved_data["layer"].toStringRef()), saved(ctx->get_saved_variables()),
        dy(grads[0].contiguous()) {}
  Dispatcher* d;
  std::string layer;
  variable_list saved;
  at::Tensor dy;
};

at::Tensor orUndefined(bool present, const at::Tensor& t) { return present ? t : at::Tensor(); }

// Custom autograd functions cannot take undefined tensors in LibTorch 1.13: "no bias" travels as an
// empty tensor, and its gradient comes back undefined.
at::Tensor biasArgument(const at::Tensor& b) { return b.defined() ? b : at::empty({0}); }

// Training-mode dropout's multipliers for a tensor of `shape`, drawn as ATen's CPU dropout draws
// them (the same generator calls): 0 or 1/(1-p); for p = 1 zeros, with no draw, as ATen.
at::Tensor dropoutMultipliers(at::IntArrayRef shape, double p) {
  at::NoGradGuard noGrad;
  return p >= 1 ? at::zeros(shape) : at::empty(shape).bernoulli_(1 - p).div_(1 - p);
}
bool hasBias(const at::Tensor& b) { return b.defined() && b.numel() > 0; }

struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                            int64_t dispatcher, const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["bias"] = hasBias(b);
    ctx->save_for_backward({x, w});
    OpCall call{OpKind::Linear, Variant::Forward, {x, w}, {}};
    if (hasBias(b)) call.inputs.push_back(b);
    return reinterpret_cast<Dispatcher*>(dispatcher)->run(layer, call, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dy] = BackwardInputs(ctx, grads);
    // Only the GEMMs autograd asks for run (a first layer's input needs no gradient), as in ATen.
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = d->run(layer, {OpKind::Linear, Variant::GradInput, {dy, saved[1]}, {}}, true);
    if (ctx->needs_input_grad(1)) dw = d->run(layer, {OpKind::Linear, Variant::GradWeight, {dy, saved[0]}, {}}, true);
    at::Tensor db = orUndefined(ctx->saved_data["bias"].toBool(), dy.reshape({-1, dy.size(-1)}).sum(0));
    return {dx, dw, db, at::Tensor(), at::Tensor()};
  }
};

ConvGeometry geometryOf(const std::vector<int64_t>& v) { return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]}; }

struct Conv2dFunction : torch::autograd::Function<Conv2dFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                            std::vector<int64_t> geometry, int64_t dispatcher, const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["bias"] = hasBias(b);
    ctx->saved_data["geometry"] = geometry;
    ctx->save_for_backward({x, w});
    OpCall call{OpKind::Conv2d, Variant::Forward, {x, w}, {}};
    setConvGeometry(call, geometryOf(geometry));
    if (hasBias(b)) call.inputs.push_back(b);
    return reinterpret_cast<Dispatcher*>(dispatcher)->run(layer, call, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dy] = BackwardInputs(ctx, grads);
    const ConvGeometry g = geometryOf(ctx->saved_data["geometry"].toIntVector());
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      OpCall call{OpKind::Conv2d, Variant::GradInput, {dy, w}, {{"in_h", x.size(2)}, {"in_w", x.size(3)}}};
      setConvGeometry(call, g);
      dx = d->run(layer, call, true);
    }
    if (ctx->needs_input_grad(1)) {
      OpCall call{OpKind::Conv2d, Variant::GradWeight, {dy, x}, {{"k_h", w.size(2)}, {"k_w", w.size(3)}}};
      setConvGeometry(call, g);
      dw = d->run(layer, call, true);
    }
    at::Tensor db = orUndefined(ctx->saved_data["bias"].toBool(), dy.sum({0, 2, 3}));
    return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct MatmulFunction : torch::autograd::Function<MatmulFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, int64_t dispatcher,
                            const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->save_for_backward({a, b});
    return reinterpret_cast<Dispatcher*>(dispatcher)->run(layer, {OpKind::Matmul, Variant::Forward, {a, b}, {}}, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dc] = BackwardInputs(ctx, grads);
    at::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = d->run(layer, {OpKind::Matmul, Variant::GradInput, {dc, saved[1]}, {}}, true);
    if (ctx->needs_input_grad(1)) db = d->run(layer, {OpKind::Matmul, Variant::GradWeight, {saved[0], dc}, {}}, true);
    return {da, db, at::Tensor(), at::Tensor()};
  }
};

// An op call's integer parameters through an autograd context (as "key=value;" text).
std::string encodeParams(const std::map<std::string, int64_t>& params) {
  std::string out;
  for (const auto& [k, v] : params) out += k + "=" + std::to_string(v) + ";";
  return out;
}
std::map<std::string, int64_t> decodeParams(const std::string& text) {
  std::map<std::string, int64_t> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t eq = text.find('=', start), end = text.find(';', start);
    out[text.substr(start, eq - start)] = std::stoll(text.substr(eq + 1, end - eq - 1));
    start = end + 1;
  }
  return out;
}

// An op whose backward is one GradInput call from (dy, kept): activations, softmax and log-softmax
// (kept: x or y, as ATen's own backward keeps it) and dropout (kept: the mask, an input that needs
// no gradient).
struct OneGradientFunction : torch::autograd::Function<OneGradientFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& mask, int64_t kind,
                            const std::string& params, bool keepOutput, int64_t dispatcher, const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["params"] = params;
    OpCall call{OpKind(kind), Variant::Forward, {x}, decodeParams(params)};
    if (mask.numel() > 0) call.inputs.push_back(mask);
    at::Tensor y = reinterpret_cast<Dispatcher*>(dispatcher)->run(layer, call, false);
    ctx->save_for_backward({mask.numel() > 0 ? mask : keepOutput ? y : x});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dy] = BackwardInputs(ctx, grads);
    at::Tensor dx;
    if (ctx->needs_input_grad(0))
      dx = d->run(layer,
                  {OpKind(ctx->saved_data["kind"].toInt()), Variant::GradInput, {dy, saved[0]},
                   decodeParams(ctx->saved_data["params"].toStringRef())},
                  true);
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Layer norm: GradInput dX (dy, x[, gamma]), GradWeight dGamma (dy, x), GradBias dBeta (dy).
struct LayerNormFunction : torch::autograd::Function<LayerNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                            const std::string& params, int64_t dispatcher, const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["params"] = params;
    ctx->save_for_backward({x, gamma});
    OpCall call{OpKind::LayerNorm, Variant::Forward, {x}, decodeParams(params)};
    if (gamma.numel() > 0) call.inputs.push_back(gamma);
    if (beta.numel() > 0) call.inputs.push_back(beta);
    return reinterpret_cast<Dispatcher*>(dispatcher)->run(layer, call, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dy] = BackwardInputs(ctx, grads);
    const auto params = decodeParams(ctx->saved_data["params"].toStringRef());
    const at::Tensor& x = saved[0];
    const at::Tensor& gamma = saved[1];
    at::Tensor dx, dgamma, dbeta;
    if (ctx->needs_input_grad(0)) {
      OpCall call{OpKind::LayerNorm, Variant::GradInput, {dy, x}, params};
      if (gamma.numel() > 0) call.inputs.push_back(gamma);
      dx = d->run(layer, call, true);
    }
    if (ctx->needs_input_grad(1)) dgamma = d->run(layer, {OpKind::LayerNorm, Variant::GradWeight, {dy, x}, params}, true);
    if (ctx->needs_input_grad(2)) dbeta = d->run(layer, {OpKind::LayerNorm, Variant::GradBias, {dy}, params}, true);
    return {dx, dgamma, dbeta, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Scaled dot-product attention as one call: forward (q, k, v[, mask][, keep]); GradInput (dO, q, k,
// v[, mask][, keep]) three times, "wrt" 0, 1, 2 for dq, dk, dv. The mask and the dropout's multipliers
// take no gradient.
struct AttentionFunction : torch::autograd::Function<AttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask, const at::Tensor& keep, const std::string& params, int64_t dispatcher,
                            const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["params"] = params;
    ctx->save_for_backward({q, k, v, mask, keep});
    OpCall call{OpKind::Attention, Variant::Forward, {q, k, v}, decodeParams(params)};
    if (mask.numel() > 0) call.inputs.push_back(mask);
    if (keep.numel() > 0) call.inputs.push_back(keep);
    return reinterpret_cast<Dispatcher*>(dispatcher)->run(layer, call, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dO] = BackwardInputs(ctx, grads);
    variable_list out(8);
    for (int64_t wrt = 0; wrt < 3; ++wrt) {
      if (!ctx->needs_input_grad(std::size_t(wrt))) continue;
      OpCall call{OpKind::Attention, Variant::GradInput, {dO, saved[0], saved[1], saved[2]},
                  decodeParams(ctx->saved_data["params"].toStringRef())};
      if (saved[3].numel() > 0) call.inputs.push_back(saved[3]);
      if (saved[4].numel() > 0) call.inputs.push_back(saved[4]);
      if (wrt) call.params["wrt"] = wrt;
      out[std::size_t(wrt)] = d->run(layer, call, true);
    }
    return out;
  }
};

// Embedding: forward (ids, table); GradWeight (dy, ids), a scatter-add into a [num_weights, D] table.
struct EmbeddingFunction : torch::autograd::Function<EmbeddingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& table, const at::Tensor& ids, int64_t paddingIdx,
                            int64_t dispatcher, const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["rows"] = table.size(0);
    ctx->saved_data["padding"] = paddingIdx;
    ctx->save_for_backward({ids});
    OpCall call{OpKind::Embedding, Variant::Forward, {ids, table}, {}};
    if (paddingIdx >= 0) call.params["padding_idx"] = paddingIdx;
    return reinterpret_cast<Dispatcher*>(dispatcher)->run(layer, call, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dy] = BackwardInputs(ctx, grads);
    at::Tensor dtable;
    if (ctx->needs_input_grad(0)) {
      OpCall call{OpKind::Embedding, Variant::GradWeight, {dy, saved[0]}, {{"num_weights", ctx->saved_data["rows"].toInt()}}};
      if (ctx->saved_data["padding"].toInt() >= 0) call.params["padding_idx"] = ctx->saved_data["padding"].toInt();
      dtable = d->run(layer, call, true);
    }
    return {dtable, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Mean cross-entropy over logits [N, C] and ids [N]: the loss as [1]; GradInput (dLoss, logits, ids).
struct CrossEntropyFunction : torch::autograd::Function<CrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& target,
                            int64_t dispatcher, const std::string& layer) {
    ctx->saved_data["dispatcher"] = dispatcher;
    ctx->saved_data["layer"] = layer;
    ctx->save_for_backward({logits, target});
    return reinterpret_cast<Dispatcher*>(dispatcher)
        ->run(layer, {OpKind::CrossEntropy, Variant::Forward, {logits, target}, {}}, false)
        .reshape({});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [d, layer, saved, dloss] = BackwardInputs(ctx, grads);
    at::Tensor dlogits;
    if (ctx->needs_input_grad(0))
      dlogits = d->run(layer, {OpKind::CrossEntropy, Variant::GradInput, {dloss.reshape({1}), saved[0], saved[1]}, {}}, true);
    return {dlogits, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Forward: the candidate's exact values. Backward: the gradient goes to golden's graph.
struct StraightThrough : torch::autograd::Function<StraightThrough> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& golden, const at::Tensor& candidate) {
    (void)golden;
    return candidate.clone();
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

int64_t self(Dispatcher* d) { return reinterpret_cast<int64_t>(d); }

}  // namespace

Dispatcher::Dispatcher() = default;
Dispatcher::~Dispatcher() = default;

void Dispatcher::beginIteration(int64_t iteration) {
  iteration_ = iteration;
  callIndex_ = 0;
}

void Dispatcher::setSubstitution(std::optional<SubstitutionPolicy> policy) {
  policy_ = std::move(policy);
  matching_ = 0;
  if (policy_) policyRng_.seed(policy_->seed);
}

void Dispatcher::addObserver(CallObserver* observer) { observers_.push_back(observer); }
void Dispatcher::removeObserver(CallObserver* observer) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

std::vector<Substitution> Dispatcher::takeSubstitutions() {
  std::vector<Substitution> out;
  out.swap(substitutions_);
  return out;
}

std::vector<kernels::Injection> Dispatcher::takeInjections() {
  std::vector<kernels::Injection> out;
  out.swap(injections_);
  return out;
}

bool Dispatcher::shouldSubstitute(const OpCall& call, const std::string& layer, bool backward) {
  const OpKind kind = call.kind;
  if (!policy_ || !policy_->candidate->supports(kind, call.variant, call.params)) return false;
  if (policy_->op && *policy_->op != kind) return false;
  if (!policy_->layer.empty() && policy_->layer != layer) return false;
  if (backward ? !policy_->backward : !policy_->forward) return false;
  ++matching_;
  if (policy_->probability > 0) return std::uniform_real_distribution<double>(0, 1)(policyRng_) < policy_->probability;
  return policy_->every > 0 && matching_ % policy_->every == 0;
}

at::Tensor Dispatcher::run(const std::string& layer, const OpCall& call, bool backward) {
  const store::CallId id{layer, opName(call.kind), backward ? store::Phase::Backward : store::Phase::Forward,
                         iteration_, callIndex_++};
  at::Tensor golden = kernels::runGolden(call);
  at::Tensor out = golden;
  if (shouldSubstitute(call, layer, backward)) {
    OpCall detached = call;
    for (at::Tensor& t : detached.inputs)
      if (t.defined()) t = t.detach();
    const kernels::CallContext ctx{"it " + std::to_string(id.iteration) + " call " + std::to_string(id.callIndex) + " " +
                                       layer + " " + id.op + " " + variantName(call.variant),
                                   id.iteration, id.callIndex};
    at::Tensor candidate;
    try {
      candidate = policy_->candidate->run(detached, ctx).contiguous();
    } catch (const kernels::KernelCallFailed& e) {
      // The candidate crashed, hung or wrote out of bounds in its kernel host: this call keeps
      // golden's output, and the run records the failure (docs/plugins.md).
      substitutions_.push_back({id, call.variant, {}, e.outcome(), e.what()});
      policy_->candidate->takeInjections();
      for (CallObserver* o : observers_) o->onCall(id, call, golden);
      return golden;
    }
    const at::Tensor g = golden.detach().contiguous();
    if (candidate.sizes() != g.sizes()) {  // never compared element by element past its end
      std::ostringstream why;
      why << "kernel '" << policy_->candidate->name() << "' returned " << candidate.sizes() << " where golden is "
          << g.sizes();
      substitutions_.push_back({id, call.variant, {}, "wrong_shape", why.str()});
      policy_->candidate->takeInjections();
      for (CallObserver* o : observers_) o->onCall(id, call, golden);
      return golden;
    }
    substitutions_.push_back({id, call.variant,
                              analyzer::summarize(g.data_ptr<float>(), candidate.data_ptr<float>(), uint64_t(g.numel())),
                              "ok", ""});
    for (kernels::Injection& inj : policy_->candidate->takeInjections()) injections_.push_back(std::move(inj));
    // The candidate's values flow on; element-wise ops keep golden's gradient path.
    out = golden.requires_grad() ? StraightThrough::apply(golden, candidate) : candidate;
  }
  for (CallObserver* o : observers_) o->onCall(id, call, golden);
  return out;
}

at::Tensor Dispatcher::elementwise(const std::string& layer, OpCall call) { return run(layer, call, false); }

at::Tensor Dispatcher::linear(const std::string& layer, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return LinearFunction::apply(x, w, biasArgument(b), self(this), layer);
}

at::Tensor Dispatcher::conv2d(const std::string& layer, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                              int64_t stride, int64_t padding) {
  ConvGeometry g;
  g.strideH = g.strideW = stride;
  g.padH = g.padW = padding;
  return conv2d(layer, x, w, b, g);
}

at::Tensor Dispatcher::conv2d(const std::string& layer, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                              const ConvGeometry& g) {
  const std::vector<int64_t> geometry{g.strideH, g.strideW, g.padH, g.padW, g.dilationH, g.dilationW, g.groups};
  return Conv2dFunction::apply(x, w, biasArgument(b), geometry, self(this), layer);
}

at::Tensor Dispatcher::matmul(const std::string& layer, const at::Tensor& a, const at::Tensor& b) {
  return MatmulFunction::apply(a, b, self(this), layer);
}

at::Tensor Dispatcher::oneGradient(const std::string& layer, OpKind kind, const at::Tensor& x,
                                   const std::map<std::string, int64_t>& params, bool keepOutput) {
  return OneGradientFunction::apply(x, at::empty({0}), int64_t(kind), encodeParams(params), keepOutput, self(this), layer);
}

at::Tensor Dispatcher::relu(const std::string& layer, const at::Tensor& x) { return oneGradient(layer, OpKind::Relu, x, {}, true); }
at::Tensor Dispatcher::gelu(const std::string& layer, const at::Tensor& x, bool tanhApproximation) {
  std::map<std::string, int64_t> params;
  if (tanhApproximation) params["approximate"] = 1;
  return oneGradient(layer, OpKind::Gelu, x, params, false);
}
at::Tensor Dispatcher::silu(const std::string& layer, const at::Tensor& x) { return oneGradient(layer, OpKind::Silu, x, {}, false); }
at::Tensor Dispatcher::tanh(const std::string& layer, const at::Tensor& x) { return oneGradient(layer, OpKind::Tanh, x, {}, true); }
at::Tensor Dispatcher::sigmoid(const std::string& layer, const at::Tensor& x) {
  return oneGradient(layer, OpKind::Sigmoid, x, {}, true);
}
at::Tensor Dispatcher::softmax(const std::string& layer, const at::Tensor& x, int64_t dim) {
  std::map<std::string, int64_t> params;
  if (dim != -1 && dim != x.dim() - 1) params["dim"] = dim < 0 ? dim + x.dim() : dim;
  return oneGradient(layer, OpKind::Softmax, x, params, true);
}
at::Tensor Dispatcher::logSoftmax(const std::string& layer, const at::Tensor& x, int64_t dim) {
  std::map<std::string, int64_t> params;
  if (dim != -1 && dim != x.dim() - 1) params["dim"] = dim < 0 ? dim + x.dim() : dim;
  return oneGradient(layer, OpKind::LogSoftmax, x, params, true);
}
at::Tensor Dispatcher::dropout(const std::string& layer, const at::Tensor& x, double p) {
  if (p <= 0) return x;
  // The mask ATen's CPU dropout draws (the same generator calls), kept as an input of the call, so
  // that a replay multiplies by what training did and a candidate sees the mask it was given.
  const at::Tensor mask = dropoutMultipliers(x.sizes(), p);
  OpCall probe{OpKind::Dropout, Variant::Forward, {}, {}};
  probe.setReal("p", p);
  return OneGradientFunction::apply(x, mask, int64_t(OpKind::Dropout), encodeParams(probe.params), false, self(this),
                                    layer);
}
at::Tensor Dispatcher::layerNorm(const std::string& layer, const at::Tensor& x, const at::Tensor& gamma,
                                 const at::Tensor& beta, int64_t normalizedDims, double eps) {
  OpCall call{OpKind::LayerNorm, Variant::Forward, {}, {}};
  if (normalizedDims != 1) call.params["normalized"] = normalizedDims;
  if (eps != 1e-5) call.setReal("eps", eps);
  if (!hasBias(gamma)) call.params["weight"] = 0;
  if (!hasBias(beta)) call.params["bias"] = 0;
  return LayerNormFunction::apply(x, biasArgument(gamma), biasArgument(beta), encodeParams(call.params), self(this), layer);
}
at::Tensor Dispatcher::attention(const std::string& layer, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const at::Tensor& mask, double scale, bool causal,
                                 double dropout) {
  OpCall call{OpKind::Attention, Variant::Forward, {}, {}};
  if (scale != 1.0) call.setReal("scale", scale);
  if (causal) call.params["causal"] = 1;
  if (mask.defined() && mask.numel() > 0) call.params["mask"] = 1;
  at::Tensor keep = at::empty({0});
  if (dropout > 0) {
    // for the probabilities [.., Tq, Tk], where the unfused graph's dropout draws them; an input of the call
    std::vector<int64_t> shape = at::infer_size(q.sizes().slice(0, std::size_t(q.dim() - 2)),
                                                k.sizes().slice(0, std::size_t(k.dim() - 2)));
    shape.insert(shape.end(), {q.size(-2), k.size(-2)});
    keep = dropoutMultipliers(shape, dropout);
    call.params["dropout"] = 1;
    call.setReal("p", dropout);
  }
  return AttentionFunction::apply(q, k, v, mask.defined() ? mask.detach() : at::empty({0}), keep,
                                  encodeParams(call.params), self(this), layer);
}
at::Tensor Dispatcher::add(const std::string& layer, const at::Tensor& a, const at::Tensor& b) {
  return elementwise(layer, {OpKind::Add, Variant::Forward, {a, b}, {}});
}
at::Tensor Dispatcher::embedding(const std::string& layer, const at::Tensor& indices, const at::Tensor& table,
                                 int64_t paddingIdx) {
  return EmbeddingFunction::apply(table, indices, paddingIdx, self(this), layer);
}
at::Tensor Dispatcher::crossEntropy(const std::string& layer, const at::Tensor& logits, const at::Tensor& target) {
  return CrossEntropyFunction::apply(logits, target, self(this), layer);
}
at::Tensor Dispatcher::update(const std::string& layer, const OpCall& call) {
  at::NoGradGuard noGrad;
  return run(layer, call, true);
}
at::Tensor Dispatcher::batchNorm(const std::string& layer, const at::Tensor& x, const at::Tensor& gamma,
                                 const at::Tensor& beta, at::Tensor& runningMean, at::Tensor& runningVar) {
  if (training_) {
    {
      at::NoGradGuard noGrad;  // running statistics are bookkeeping, not part of the op
      const at::Tensor mean = x.mean({0, 2, 3});
      const at::Tensor var = x.var({0, 2, 3}, /*unbiased=*/true);
      runningMean.mul_(0.9).add_(mean, 0.1);
      runningVar.mul_(0.9).add_(var, 0.1);
    }
    return elementwise(layer, {OpKind::BatchNorm, Variant::Forward, {x, gamma, beta}, {{"training", 1}}});
  }
  return elementwise(layer,
                     {OpKind::BatchNorm, Variant::Forward, {x, gamma, beta, runningMean, runningVar}, {{"training", 0}}});
}
at::Tensor Dispatcher::maxPool2d(const std::string& layer, const at::Tensor& x, int64_t kernel, int64_t stride) {
  return elementwise(layer, {OpKind::MaxPool2d, Variant::Forward, {x}, {{"kernel", kernel}, {"stride", stride}}});
}
at::Tensor Dispatcher::globalAvgPool(const std::string& layer, const at::Tensor& x) {
  return elementwise(layer, {OpKind::AvgPool2d, Variant::Forward, {x}, {}});
}

}  // namespace peat::ops
