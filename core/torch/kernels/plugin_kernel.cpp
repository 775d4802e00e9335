// SPDX-License-Identifier: MIT
// The slot's calls as calls of a user kernel. ABI v1: every GEMM-based call decomposed into fp32
// GEMMs. ABI v2: each call mapped to the op kind the plugin exports (a linear layer to one GEMM with
// B transposed and the bias as C0, a batched matmul to a batched GEMM, softmax over any dimension to
// rows of the last, ...), its floating inputs converted to the op's declared dtype and its outputs
// back to fp32 (peat/kernel_abi.h, "Conversions").
#include "core/torch/kernels/plugin_kernel.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>

#include "core/plugin/dtypes.h"
#include "core/plugin/kernel_host.h"
#include "core/plugin/peat/kernel_abi.h"
#include "core/plugin/plugin_probe.h"

namespace peat::kernels {

using ops::OpCall;
using ops::OpKind;
using ops::Variant;

namespace {

at::Tensor f32(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }
at::Tensor flatten2d(const at::Tensor& t) { return f32(t).reshape({-1, t.size(-1)}); }

std::vector<int64_t> sizesOf(const at::Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); }

// One ABI v2 call being put together: fp32 inputs (converted when it runs), output shapes.
struct AbiCall {
  uint32_t kind = 0, variant = PEAT_VARIANT_FORWARD;
  peat_params params{};
  std::vector<at::Tensor> inputs;
  enum class As { Input, Output, F32 };
  std::vector<As> as;  // each input's dtype: the op's input dtype, its output dtype (GEMM's C0), or f32 (a mask)
  std::vector<std::vector<int64_t>> outputs;
  double flops = 0;
  void in(const at::Tensor& t, As dtype = As::Input) {
    inputs.push_back(f32(t));
    as.push_back(dtype);
  }
};

uint32_t abiVariant(Variant v) { return uint32_t(v); }  // the same numbers (peat/kernel_abi.h)

class PluginKernel final : public Kernel {
 public:
  PluginKernel(plugin::PluginInfo info, plugin::LoadedPlugin inProcess) : info_(std::move(info)), local_(inProcess) {}
  PluginKernel(plugin::PluginInfo info, std::unique_ptr<plugin::KernelHost> host)
      : info_(std::move(info)), host_(std::move(host)) {}
  std::string name() const override { return "plugin:" + info_.name; }

  std::string declaredFormats() const override {
    if (info_.abiVersion < 2) return "gemm:f32->f32";
    std::string out;
    for (const plugin::PluginOp& op : info_.ops)
      out += (out.empty() ? "" : ",") + plugin::abiOpName(op.kind) + ":" + plugin::dtypeName(op.inputDtype) + "->" +
             plugin::dtypeName(op.outputDtype);
    return out;
  }

  bool supports(OpKind kind) const override {
    for (Variant v : {Variant::Forward, Variant::GradInput, Variant::GradWeight, Variant::GradBias, Variant::Update})
      if (supports(kind, v)) return true;
    return false;
  }

  bool supports(OpKind kind, Variant v) const override {
    if (info_.abiVersion < 2) return ops::isGemmOp(kind);
    auto has = [&](uint32_t abiKind, uint32_t variant) {
      const plugin::PluginOp* op = info_.op(abiKind);
      return op && (op->variants & PEAT_VARIANT_BIT(variant));
    };
    const bool gemm = has(PEAT_OP_GEMM, PEAT_VARIANT_FORWARD) || has(PEAT_OP_BATCHED_GEMM, PEAT_VARIANT_FORWARD);
    switch (kind) {
      case OpKind::Linear:
      case OpKind::Matmul: return gemm && v <= Variant::GradWeight;
      case OpKind::Conv2d: return (has(PEAT_OP_CONV2D, abiVariant(v)) || gemm) && v <= Variant::GradWeight;
      case OpKind::Softmax:
      case OpKind::LogSoftmax: return v <= Variant::GradInput && has(PEAT_OP_SOFTMAX, abiVariant(v));
      case OpKind::LayerNorm: return v <= Variant::GradBias && has(PEAT_OP_LAYER_NORM, abiVariant(v));
      case OpKind::Attention: return v <= Variant::GradInput && has(PEAT_OP_ATTENTION, abiVariant(v));
      case OpKind::Gelu:
      case OpKind::Relu:
      case OpKind::Silu:
      case OpKind::Tanh:
      case OpKind::Sigmoid: return v <= Variant::GradInput && has(PEAT_OP_ACTIVATION, abiVariant(v));
      case OpKind::Sgd:
      case OpKind::Adam: return v == Variant::Update && has(PEAT_OP_OPTIMIZER, PEAT_VARIANT_UPDATE);
      default: return false;
    }
  }

  bool supports(OpKind kind, Variant v, const std::map<std::string, int64_t>& params) const override {
    if (!supports(kind, v)) return false;
    if (kind != OpKind::Attention) return true;
    const auto dropout = params.find("dropout");
    const plugin::PluginOp* op = info_.op(PEAT_OP_ATTENTION);
    return dropout == params.end() || dropout->second == 0 || (op->features & PEAT_FEATURE_ATTENTION_DROPOUT);
  }

  at::Tensor run(const OpCall& call, const CallContext&) override {
    if (info_.abiVersion < 2) return runThroughGemm(call, [this](const at::Tensor& a, const at::Tensor& b) { return gemmV1(a, b); });
    if (!supports(call.kind, call.variant, call.params))
      throw KernelError("plugin '" + info_.name + "' does not implement " + ops::opName(call.kind) + " " +
                        ops::variantName(call.variant) +
                        (call.kind == OpKind::Attention && call.paramOr("dropout", 0) ? " with dropout" : ""));
    switch (call.kind) {
      case OpKind::Linear: return linear(call);
      case OpKind::Matmul: return matmul(call);
      case OpKind::Conv2d: return conv2d(call);
      case OpKind::Softmax:
      case OpKind::LogSoftmax: return softmax(call);
      case OpKind::LayerNorm: return layerNorm(call);
      case OpKind::Attention: return attention(call);
      case OpKind::Sgd:
      case OpKind::Adam: return optimizer(call);
      default: return activation(call);
    }
  }

 private:
  // ---- ABI v1 ----
  at::Tensor gemmV1(const at::Tensor& a, const at::Tensor& b) {
    // NaN first, in both places: an element the kernel leaves unwritten shows as NaN
    at::Tensor c = at::full({a.size(0), b.size(1)}, std::numeric_limits<float>::quiet_NaN());
    const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
    float* pc = c.data_ptr<float>();
    if (host_) {
      const plugin::CallOutcome o = host_->gemm(pa, pb, pc, a.size(0), b.size(1), a.size(1));
      if (o.kind == plugin::CallOutcome::KernelFailed) throw KernelError(o.message);
      if (!o.ok()) throw KernelCallFailed(o.text(), o.message);
      return c;
    }
    const int rc = local_.gemm(pa, pb, pc, a.size(0), b.size(1), a.size(1));
    if (rc != 0) failed(rc, "gemm");
    return c;
  }

  [[noreturn]] void failed(int rc, const std::string& what) const {
    const char* why = local_.lastError ? local_.lastError() : nullptr;
    throw KernelError("plugin '" + info_.name + "' failed (code " + std::to_string(rc) + ") in " + what +
                      (why ? std::string(": ") + why : std::string()));
  }

  // ---- ABI v2: one call, converted ----
  std::vector<at::Tensor> execute(AbiCall& c) {
    const plugin::PluginOp* op = info_.op(c.kind);
    if (!op) throw KernelError("plugin '" + info_.name + "' has no " + plugin::abiOpName(c.kind) + " kernel");
    for (const at::Tensor& t : c.inputs)
      if (t.dim() > 8) throw KernelError("a tensor of " + std::to_string(t.dim()) + " dimensions for plugin '" + info_.name + "' (at most 8)");
    std::vector<std::vector<unsigned char>> buffers(c.inputs.size() + c.outputs.size());
    std::vector<plugin::KernelHost::Arg> args;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      const at::Tensor& t = c.inputs[i];
      const uint32_t dtype = c.as[i] == AbiCall::As::F32      ? uint32_t(PEAT_DTYPE_F32)
                             : c.as[i] == AbiCall::As::Output ? op->outputDtype
                                                              : op->inputDtype;
      const auto n = std::size_t(t.numel());
      const float scale = plugin::chooseScale(t.data_ptr<float>(), n, dtype);
      buffers[i].resize(n * plugin::dtypeSize(dtype));
      plugin::encodeValues(t.data_ptr<float>(), n, dtype, scale, buffers[i].data());
      args.push_back({plugin::wire::kInput, dtype, sizesOf(t), buffers[i].data(), nullptr, scale});
    }
    for (std::size_t o = 0; o < c.outputs.size(); ++o) {
      std::vector<unsigned char>& b = buffers[c.inputs.size() + o];
      int64_t n = 1;
      for (int64_t d : c.outputs[o]) n *= d;
      b.assign(std::size_t(n) * plugin::dtypeSize(op->outputDtype), 0xFF);  // NaN: unwritten elements show
      args.push_back({plugin::wire::kOutput, op->outputDtype, c.outputs[o], nullptr, b.data(), 1.0f});
    }
    const std::string what = plugin::abiOpName(c.kind) + " " + plugin::abiVariantName(c.variant);
    if (host_) {
      const plugin::CallOutcome o = host_->callV2(c.kind, c.variant, args, c.params, c.flops);
      if (o.kind == plugin::CallOutcome::KernelFailed) throw KernelError(o.message + " (" + what + ")");
      if (!o.ok()) throw KernelCallFailed(o.text(), o.message + " (" + what + ")");
    } else {
      std::vector<peat_tensor> in(c.inputs.size()), out(c.outputs.size());
      for (std::size_t i = 0; i < args.size(); ++i) {
        peat_tensor& t = i < in.size() ? in[i] : out[i - in.size()];
        t = peat_tensor{};
        t.data = i < in.size() ? const_cast<void*>(args[i].in) : args[i].out;
        t.dtype = args[i].dtype;
        t.rank = uint32_t(args[i].shape.size());
        for (std::size_t d = 0; d < args[i].shape.size() && d < 8; ++d) t.shape[d] = args[i].shape[d];
        t.scale = args[i].scale;
      }
      peat_call call{};
      call.op_kind = c.kind;
      call.variant = c.variant;
      call.input_count = uint32_t(in.size());
      call.output_count = uint32_t(out.size());
      call.inputs = in.data();
      call.outputs = out.data();
      call.params = c.params;
      const int rc = local_.run(&call);
      if (rc != 0) failed(rc, what);
      for (std::size_t o = 0; o < out.size(); ++o) args[in.size() + o].scale = out[o].scale;
    }
    std::vector<at::Tensor> results;
    for (std::size_t o = 0; o < c.outputs.size(); ++o) {
      at::Tensor r = at::empty(c.outputs[o], at::kFloat);
      const plugin::KernelHost::Arg& a = args[c.inputs.size() + o];
      plugin::decodeValues(buffers[c.inputs.size() + o].data(), std::size_t(r.numel()), a.dtype, a.scale,
                           r.data_ptr<float>());
      results.push_back(r);
    }
    return results;
  }

  // C[m,n] = op(A) op(B) (+ C0): A and B stored as the given matrices, ta / tb transposing them.
  at::Tensor gemm(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, const at::Tensor& c0 = at::Tensor()) {
    const plugin::PluginOp* g = info_.op(PEAT_OP_GEMM);
    AbiCall c;
    c.kind = g && (g->variants & PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD)) ? uint32_t(PEAT_OP_GEMM)
                                                                          : uint32_t(PEAT_OP_BATCHED_GEMM);
    peat_params& p = c.params;
    p.trans_a = ta, p.trans_b = tb;
    p.m = ta ? a.size(1) : a.size(0);
    p.k = ta ? a.size(0) : a.size(1);
    p.n = tb ? b.size(0) : b.size(1);
    p.lda = a.size(1), p.ldb = b.size(1), p.ldc = p.n;
    p.alpha = 1, p.beta = c0.defined() ? 1 : 0;
    p.batch = 1;
    c.in(a);
    c.in(b);
    if (c0.defined()) c.in(c0.expand({p.m, p.n}), AbiCall::As::Output);
    c.outputs = {{p.m, p.n}};
    c.flops = 2.0 * double(p.m) * double(p.n) * double(p.k);
    return execute(c)[0];
  }

  // op(a) op(b) over broadcast batch dimensions: one batched GEMM (a shared operand at stride 0)
  // where the plugin has it, else one GEMM per matrix.
  at::Tensor batchedGemm(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb) {
    if (a.dim() < 2 || b.dim() < 2) throw KernelError("plugin GEMMs take matrices; this call has a vector operand");
    if (a.dim() == 2 && b.dim() == 2) return gemm(f32(a), f32(b), ta, tb);
    const std::vector<int64_t> batch =
        at::infer_size(a.sizes().slice(0, std::size_t(a.dim() - 2)), b.sizes().slice(0, std::size_t(b.dim() - 2)));
    int64_t count = 1;
    for (int64_t d : batch) count *= d;
    if (a.numel() == 0 || b.numel() == 0)  // an empty operand: the product of nothing (K 0) or an empty result
      return at::matmul(f32(ta ? a.transpose(-1, -2) : a), f32(tb ? b.transpose(-1, -2) : b));
    auto stack = [&](const at::Tensor& t, int64_t& stride) {
      const int64_t own = t.numel() / (t.size(-2) * t.size(-1));
      if (own == 1) {
        stride = 0;
        return f32(t).reshape({t.size(-2), t.size(-1)});
      }
      std::vector<int64_t> shape = batch;
      shape.insert(shape.end(), {t.size(-2), t.size(-1)});
      stride = t.size(-2) * t.size(-1);
      return f32(t.expand(shape)).reshape({count, t.size(-2), t.size(-1)});
    };
    int64_t sa = 0, sb = 0;
    const at::Tensor a3 = stack(a, sa), b3 = stack(b, sb);
    const int64_t m = ta ? a.size(-1) : a.size(-2), k = ta ? a.size(-2) : a.size(-1), n = tb ? b.size(-2) : b.size(-1);
    std::vector<int64_t> outShape = batch;
    outShape.insert(outShape.end(), {m, n});
    const plugin::PluginOp* bg = info_.op(PEAT_OP_BATCHED_GEMM);
    if (bg && (bg->variants & PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD))) {
      AbiCall c;
      c.kind = PEAT_OP_BATCHED_GEMM;
      peat_params& p = c.params;
      p.trans_a = ta, p.trans_b = tb, p.m = m, p.n = n, p.k = k;
      p.lda = a.size(-1), p.ldb = b.size(-1), p.ldc = n;
      p.alpha = 1, p.beta = 0;
      p.batch = count, p.stride_a = sa, p.stride_b = sb, p.stride_c = m * n;
      c.in(a3);
      c.in(b3);
      c.outputs = {{count, m, n}};
      c.flops = 2.0 * double(count) * double(m) * double(n) * double(k);
      return execute(c)[0].reshape(outShape);
    }
    std::vector<at::Tensor> parts;
    for (int64_t i = 0; i < count; ++i)
      parts.push_back(gemm(sa ? a3[i].contiguous() : a3, sb ? b3[i].contiguous() : b3, ta, tb));
    return at::stack(parts).reshape(outShape);
  }

  at::Tensor linear(const OpCall& call) {
    const auto& in = call.inputs;
    switch (call.variant) {
      case Variant::Forward: {  // y = x W^T + b: B transposed, the bias as C0
        const at::Tensor x = flatten2d(in[0]);
        at::Tensor bias = in.size() > 2 && in[2].defined() && in[2].numel() > 0 ? f32(in[2]) : at::Tensor();
        std::vector<int64_t> shape = sizesOf(in[0]);
        shape.back() = in[1].size(0);
        return gemm(x, f32(in[1]), false, true, bias).reshape(shape);
      }
      case Variant::GradInput: {  // dX = dY W
        std::vector<int64_t> shape = sizesOf(in[0]);
        shape.back() = in[1].size(1);
        return gemm(flatten2d(in[0]), f32(in[1]), false, false).reshape(shape);
      }
      default:  // dW = dY^T X: A transposed
        return gemm(flatten2d(in[0]), flatten2d(in[1]), true, false);
    }
  }

  at::Tensor matmul(const OpCall& call) {
    const auto& in = call.inputs;
    switch (call.variant) {
      case Variant::Forward: return batchedGemm(in[0], in[1], false, false);
      case Variant::GradInput: return batchedGemm(in[0], in[1], false, true);  // dA = dC B^T
      default: return batchedGemm(in[0], in[1], true, false);                  // dB = A^T dC
    }
  }

  at::Tensor conv2d(const OpCall& call) {
    const plugin::PluginOp* op = info_.op(PEAT_OP_CONV2D);
    if (!op || !(op->variants & PEAT_VARIANT_BIT(abiVariant(call.variant))))
      return runThroughGemm(call, [this](const at::Tensor& a, const at::Tensor& b) { return gemm(a, b, false, false); });
    const auto& in = call.inputs;
    const ops::ConvGeometry g = ops::convGeometry(call);
    AbiCall c;
    c.kind = PEAT_OP_CONV2D;
    c.variant = abiVariant(call.variant);
    peat_params& p = c.params;
    p.stride_h = g.strideH, p.stride_w = g.strideW, p.pad_h = g.padH, p.pad_w = g.padW;
    p.dilation_h = g.dilationH, p.dilation_w = g.dilationW, p.groups = g.groups;
    c.in(in[0]);
    c.in(in[1]);
    switch (call.variant) {
      case Variant::Forward: {
        const at::Tensor &x = in[0], &w = in[1];
        if (in.size() > 2 && in[2].defined() && in[2].numel() > 0) c.in(in[2]);
        c.outputs = {{x.size(0), w.size(0), g.outH(x.size(2), w.size(2)), g.outW(x.size(3), w.size(3))}};
        c.flops = 2.0 * double(c.outputs[0][0] * c.outputs[0][1] * c.outputs[0][2] * c.outputs[0][3]) *
                  double(w.size(1) * w.size(2) * w.size(3));
        break;
      }
      case Variant::GradInput:
        c.outputs = {{in[0].size(0), in[1].size(1) * g.groups, call.param("in_h"), call.param("in_w")}};
        c.flops = 2.0 * double(in[0].numel()) * double(in[1].size(1) * in[1].size(2) * in[1].size(3));
        break;
      default:
        c.outputs = {{in[0].size(1), in[1].size(1) / g.groups, call.param("k_h"), call.param("k_w")}};
        c.flops = 2.0 * double(in[0].numel()) * double(c.outputs[0][1] * c.outputs[0][2] * c.outputs[0][3]);
        break;
    }
    return execute(c)[0];
  }

  at::Tensor softmax(const OpCall& call) {
    const auto& in = call.inputs;
    const int64_t rank = in[0].dim();
    int64_t dim = call.paramOr("dim", -1);
    if (dim < 0) dim += rank;
    auto rows = [&](const at::Tensor& t) {
      const at::Tensor moved = rank ? f32(t.movedim(dim, -1)) : f32(t).reshape({1});
      return moved.reshape({-1, moved.size(-1)});
    };
    AbiCall c;
    c.kind = PEAT_OP_SOFTMAX;
    c.variant = abiVariant(call.variant);
    c.params.log = call.kind == OpKind::LogSoftmax;
    c.in(rows(in[0]));
    if (call.variant == Variant::GradInput) c.in(rows(in[1]));
    c.outputs = {sizesOf(c.inputs[0])};
    c.flops = 8.0 * double(in[0].numel());
    const at::Tensor out = execute(c)[0];
    if (rank == 0) return out.reshape({});
    const at::Tensor moved = in[0].movedim(dim, -1);
    return out.reshape(moved.sizes()).movedim(-1, dim).contiguous();
  }

  at::Tensor layerNorm(const OpCall& call) {
    const auto& in = call.inputs;
    const int64_t nd = call.paramOr("normalized", 1);
    const bool weight = call.paramOr("weight", 1) != 0, bias = call.paramOr("bias", 1) != 0;
    const at::Tensor& x = call.variant == Variant::Forward ? in[0] : in[call.variant == Variant::GradBias ? 0 : 1];
    const std::vector<int64_t> normalized(x.sizes().end() - nd, x.sizes().end());
    int64_t n = 1;
    for (int64_t d : normalized) n *= d;
    auto rows = [&](const at::Tensor& t) { return f32(t).reshape({-1, n}); };
    AbiCall c;
    c.kind = PEAT_OP_LAYER_NORM;
    c.variant = abiVariant(call.variant);
    c.params.eps = call.realOr("eps", 1e-5);
    const at::Tensor ones = at::ones({n}), zeros = at::zeros({n});
    switch (call.variant) {
      case Variant::Forward:
        c.in(rows(in[0]));
        c.in(weight ? rows(in[1]).reshape({n}) : ones);
        c.in(bias ? rows(in[weight ? 2 : 1]).reshape({n}) : zeros);
        c.outputs = {sizesOf(c.inputs[0])};
        break;
      case Variant::GradInput:
        c.in(rows(in[0]));
        c.in(rows(in[1]));
        c.in(weight ? rows(in[2]).reshape({n}) : ones);
        c.outputs = {sizesOf(c.inputs[0])};
        break;
      case Variant::GradWeight:
        c.in(rows(in[0]));
        c.in(rows(in[1]));
        c.outputs = {{n}};
        break;
      default:
        c.in(rows(in[0]));
        c.outputs = {{n}};
        break;
    }
    c.flops = 10.0 * double(x.numel());
    const at::Tensor out = execute(c)[0];
    return call.variant == Variant::Forward || call.variant == Variant::GradInput ? out.reshape(x.sizes())
                                                                                    : out.reshape(normalized);
  }

  at::Tensor activation(const OpCall& call) {
    AbiCall c;
    c.kind = PEAT_OP_ACTIVATION;
    c.variant = abiVariant(call.variant);
    switch (call.kind) {
      case OpKind::Gelu:
        c.params.activation = call.paramOr("approximate", 0) ? PEAT_ACTIVATION_GELU_TANH : PEAT_ACTIVATION_GELU;
        break;
      case OpKind::Relu: c.params.activation = PEAT_ACTIVATION_RELU; break;
      case OpKind::Silu: c.params.activation = PEAT_ACTIVATION_SILU; break;
      case OpKind::Tanh: c.params.activation = PEAT_ACTIVATION_TANH; break;
      default: c.params.activation = PEAT_ACTIVATION_SIGMOID; break;
    }
    for (const at::Tensor& t : call.inputs) c.in(t.reshape({-1}));  // element-wise: any rank, as one row
    c.outputs = {{call.inputs[0].numel()}};
    c.flops = 10.0 * double(call.inputs[0].numel());
    return execute(c)[0].reshape(call.inputs[0].sizes());
  }

  at::Tensor optimizer(const OpCall& call) {
    AbiCall c;
    c.kind = PEAT_OP_OPTIMIZER;
    c.variant = PEAT_VARIANT_UPDATE;
    peat_params& p = c.params;
    p.lr = call.real("lr");
    if (call.kind == OpKind::Sgd) {
      p.optimizer = PEAT_OPTIMIZER_SGD;
      p.momentum = call.real("momentum");
    } else {
      p.optimizer = PEAT_OPTIMIZER_ADAM;
      p.beta1 = call.real("beta1"), p.beta2 = call.real("beta2"), p.eps = call.real("eps");
      p.step = call.param("step");
    }
    for (const at::Tensor& t : call.inputs) c.in(t.reshape({-1}));  // element-wise over the parameter
    for (std::size_t i = 0; i + 1 < call.inputs.size(); ++i) c.outputs.push_back({call.inputs[0].numel()});
    c.flops = 10.0 * double(call.inputs[0].numel());
    std::vector<at::Tensor> outs = execute(c);
    for (at::Tensor& o : outs) o = o.reshape(call.inputs[0].sizes());
    return at::stack(outs);
  }

  // q [.., Tq, D], k [.., Tk, D], v [.., Tk, Dv] as [B, T, D]; a mask that is exactly causal becomes
  // the causal flag; another [Tq, Tk] mask is passed; a mask that differs per batch entry runs the
  // kernel once per entry.
  at::Tensor attention(const OpCall& call) {
    const auto& in = call.inputs;
    const bool grad = call.variant == Variant::GradInput;
    const std::size_t base = grad ? 1 : 0;
    const at::Tensor &q = in.at(base), &k = in.at(base + 1), &v = in.at(base + 2);
    const int64_t tq = q.size(-2), tk = k.size(-2), d = q.size(-1), dv = v.size(-1);
    const std::vector<int64_t> batchShape =
        at::infer_size(at::infer_size(q.sizes().slice(0, std::size_t(q.dim() - 2)), k.sizes().slice(0, std::size_t(k.dim() - 2))),
                       v.sizes().slice(0, std::size_t(v.dim() - 2)));
    int64_t b = 1;
    for (int64_t x : batchShape) b *= x;
    if (b == 0 || tq == 0 || tk == 0) return runGolden(call);  // nothing for a kernel to compute
    auto batched = [&](const at::Tensor& t) {
      std::vector<int64_t> shape = batchShape;
      shape.insert(shape.end(), {t.size(-2), t.size(-1)});
      return f32(t.expand(shape)).reshape({b, t.size(-2), t.size(-1)});
    };
    const at::Tensor q3 = batched(q), k3 = batched(k), v3 = batched(v);
    const at::Tensor dO3 = grad ? batched(in[0]) : at::Tensor();
    bool causal = call.paramOr("causal", 0) != 0;
    at::Tensor keep;  // the dropout's multipliers, [b, tq, tk]
    if (call.paramOr("dropout", 0)) {
      std::vector<int64_t> shape = batchShape;
      shape.insert(shape.end(), {tq, tk});
      keep = f32(in.at(base + 3 + (call.paramOr("mask", 0) ? 1 : 0)).expand(shape)).reshape({b, tq, tk});
    }
    at::Tensor mask;  // [tq, tk], or [b, tq, tk] when it differs per batch entry
    if (call.paramOr("mask", 0)) {
      const at::Tensor& m = in.at(base + 3);
      if (!causal && isCausalMask(m, tq, tk)) causal = true;
      else if (isOneMask(m, tq, tk)) mask = f32(m).reshape({tq, tk});
      else {
        std::vector<int64_t> shape = batchShape;
        shape.insert(shape.end(), {tq, tk});
        mask = f32(m.expand(shape)).reshape({b, tq, tk});
      }
    }
    auto once = [&](const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& vv, const at::Tensor& dd,
                    const at::Tensor& mm, const at::Tensor& kp) {
      AbiCall c;
      c.kind = PEAT_OP_ATTENTION;
      c.variant = abiVariant(call.variant);
      c.params.scale = call.realOr("scale", 1.0);
      c.params.causal = causal;
      c.params.has_mask = mm.defined();
      c.params.has_dropout = kp.defined();
      if (grad) c.in(dd);
      c.in(qq);
      c.in(kk);
      c.in(vv);
      if (mm.defined()) c.in(mm, AbiCall::As::F32);
      if (kp.defined()) c.in(kp, AbiCall::As::F32);
      const int64_t bb = qq.size(0);
      if (grad) c.outputs = {sizesOf(qq), sizesOf(kk), sizesOf(vv)};
      else c.outputs = {{bb, tq, dv}};
      c.flops = (grad ? 8.0 : 4.0) * double(bb) * double(tq) * double(tk) * double(std::max(d, dv));
      return execute(c);
    };
    std::vector<at::Tensor> outs;
    if (!mask.defined() || mask.dim() == 2) {
      outs = once(q3, k3, v3, dO3, mask, keep);
    } else {
      std::vector<std::vector<at::Tensor>> parts;
      for (int64_t i = 0; i < b; ++i)
        parts.push_back(once(q3.slice(0, i, i + 1), k3.slice(0, i, i + 1), v3.slice(0, i, i + 1),
                             grad ? dO3.slice(0, i, i + 1) : at::Tensor(), mask[i].contiguous(),
                             keep.defined() ? keep.slice(0, i, i + 1) : at::Tensor()));
      for (std::size_t o = 0; o < parts[0].size(); ++o) {
        std::vector<at::Tensor> col;
        for (auto& p : parts) col.push_back(p[o]);
        outs.push_back(at::cat(col, 0));
      }
    }
    if (!grad) {
      std::vector<int64_t> shape = batchShape;
      shape.insert(shape.end(), {tq, dv});
      return outs[0].reshape(shape);
    }
    const int64_t wrt = call.paramOr("wrt", 0);
    if (wrt < 0 || wrt > 2) throw KernelError("attention call with wrt " + std::to_string(wrt) + " (0, 1 or 2: dq, dk, dv)");
    const at::Tensor& which = wrt == 0 ? q : wrt == 1 ? k : v;
    at::Tensor g = outs[std::size_t(wrt)];
    std::vector<int64_t> shape = batchShape;
    shape.insert(shape.end(), {which.size(-2), which.size(-1)});
    g = g.reshape(shape);
    // an operand broadcast over batch dimensions gets the sum of its gradients, as autograd gives it
    return g.sum_to_size(which.sizes()).contiguous();
  }

  plugin::PluginInfo info_;
  plugin::LoadedPlugin local_;
  std::unique_ptr<plugin::KernelHost> host_;
};

}  // namespace

std::unique_ptr<Kernel> makePluginKernel(const std::string& path, PluginPlacement placement) {
  if (path.empty()) throw KernelError("kernel 'plugin' needs path=FILE, e.g. plugin:path=./libmykernel.so");
  try {
    if (placement == PluginPlacement::InProcess) {
      plugin::LoadedPlugin loaded = plugin::loadProbedPlugin(path);
      if (const std::string warning = plugin::probeWarning(loaded.info); !warning.empty())
        std::cerr << "peat: warning: " << warning << "\n";
      plugin::PluginInfo info = loaded.info;
      return std::make_unique<PluginKernel>(std::move(info), std::move(loaded));
    }
    const plugin::HostLimits limits = plugin::hostLimitsFromEnvironment();
    plugin::PluginInfo info = plugin::probePlugin(path);
    if (const std::string warning = plugin::probeWarning(info); !warning.empty())
      std::cerr << "peat: warning: " << warning << "\n";
    auto host = std::make_unique<plugin::KernelHost>(path, info.name, limits);
    return std::make_unique<PluginKernel>(std::move(info), std::move(host));
  } catch (const plugin::PluginError& e) {
    throw KernelError(e.what());
  }
}

}  // namespace peat::kernels
