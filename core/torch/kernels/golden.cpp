// SPDX-License-Identifier: MIT
// The golden kernels (ATen) and the GEMM decomposition that candidate GEMMs run through.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "core/torch/kernels/kernel.h"

namespace peat::kernels {

using ops::OpKind;
using ops::Variant;

namespace {

std::vector<int64_t> pair(int64_t v) { return {v, v}; }

at::Tensor flatten2d(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

// Softmax and log-softmax over "dim" (the last by default). GradInput's inputs are (dy, y).
at::Tensor softmaxGolden(const ops::OpCall& c) {
  const auto& in = c.inputs;
  const int64_t dim = c.paramOr("dim", -1);
  const bool log = c.kind == OpKind::LogSoftmax;
  if (c.variant == Variant::GradInput)
    return log ? at::_log_softmax_backward_data(in[0], in[1], dim, at::kFloat)
               : at::_softmax_backward_data(in[0], in[1], dim, at::kFloat);
  return log ? at::log_softmax(in[0], dim) : at::softmax(in[0], dim);
}

// Layer norm over the last "normalized" dimensions (1 by default), eps 1e-5 by default, with
// gamma and beta unless "weight" / "bias" say 0. Forward (x[, gamma][, beta]); GradInput
// (dy, x[, gamma]); GradWeight (dy, x): dGamma; GradBias (dy): dBeta.
at::Tensor layerNormGolden(const ops::OpCall& c) {
  const auto& in = c.inputs;
  const at::Tensor& x = c.variant == Variant::Forward ? in[0] : in[c.variant == Variant::GradBias ? 0 : 1];
  const int64_t nd = c.paramOr("normalized", 1);
  const std::vector<int64_t> shape(x.sizes().end() - nd, x.sizes().end());
  const double eps = c.realOr("eps", 1e-5);
  const bool weight = c.paramOr("weight", 1) != 0, bias = c.paramOr("bias", 1) != 0;
  switch (c.variant) {
    case Variant::Forward:
      return at::layer_norm(x, shape, weight ? in[1] : at::Tensor(), bias ? in[weight ? 2 : 1] : at::Tensor(), eps);
    case Variant::GradInput:
    case Variant::GradWeight: {
      const bool input = c.variant == Variant::GradInput;
      const at::Tensor gamma = input && weight ? in[2] : at::ones(shape);
      const auto stats = at::native_layer_norm(x, shape, gamma, at::Tensor(), eps);
      const auto grads = at::native_layer_norm_backward(in[0], x, shape, std::get<1>(stats), std::get<2>(stats), gamma,
                                                        at::Tensor(), {input, !input, false});
      return input ? std::get<0>(grads) : std::get<1>(grads);
    }
    case Variant::GradBias: return in[0].reshape({-1, c10::multiply_integers(shape)}).sum(0).reshape(shape);
    default: break;
  }
  throw std::invalid_argument("layernorm has no " + std::string(ops::variantName(c.variant)) + " call");
}

// GELU ("approximate" 1: the tanh form), ReLU, SiLU, tanh, sigmoid. GradInput's inputs are (dy, x)
// for GELU and SiLU, (dy, y) for ReLU, tanh and sigmoid: what ATen's own backward keeps.
at::Tensor activationGolden(const ops::OpCall& c) {
  const auto& in = c.inputs;
  const bool grad = c.variant == Variant::GradInput;
  const char* approximate = c.paramOr("approximate", 0) ? "tanh" : "none";
  switch (c.kind) {
    case OpKind::Gelu: return grad ? at::gelu_backward(in[0], in[1], approximate) : at::gelu(in[0], approximate);
    case OpKind::Relu: return grad ? at::threshold_backward(in[0], in[1], 0) : at::relu(in[0]);
    case OpKind::Silu: return grad ? at::silu_backward(in[0], in[1]) : at::silu(in[0]);
    case OpKind::Tanh: return grad ? at::tanh_backward(in[0], in[1]) : at::tanh(in[0]);
    case OpKind::Sigmoid: return grad ? at::sigmoid_backward(in[0], in[1]) : at::sigmoid(in[0]);
    default: break;
  }
  throw std::logic_error("activationGolden: not an activation");
}

// Mean cross-entropy of logits [N, C] and class ids [N] (ignore_index -100), as log-softmax and
// NLL; the loss is stored as [1]. GradInput's inputs are (dLoss [1], logits, ids): dLogits.
at::Tensor crossEntropyGolden(const ops::OpCall& c) {
  const auto& in = c.inputs;
  const bool grad = c.variant == Variant::GradInput;
  const at::Tensor& logits = in[grad ? 1 : 0];
  const at::Tensor& target = in[grad ? 2 : 1];
  const int64_t ignore = c.paramOr("ignore_index", -100);
  const at::Tensor ls = at::log_softmax(logits, -1);
  const auto loss = at::nll_loss_forward(ls, target, at::Tensor(), at::Reduction::Mean, ignore);
  if (!grad) return std::get<0>(loss).reshape({1});
  const at::Tensor dls = at::nll_loss_backward(in[0].reshape({}), ls, target, at::Tensor(), at::Reduction::Mean, ignore,
                                               std::get<1>(loss));
  return at::_log_softmax_backward_data(dls, ls, -1, at::kFloat);
}

// The optimisers' updates as kernels over a parameter, its gradient and its moments; the output
// stacks the new parameter and the new moments ([2, ...] for SGD with momentum, [3, ...] for Adam).
//   sgd (p, g, buf): buf' = momentum buf + g, p' = p - lr buf'
//   adam (p, g, m, v): m' = beta1 m + (1-beta1) g, v' = beta2 v + (1-beta2) g^2,
//                      p' = p - lr (m'/c1) / (sqrt(v'/c2) + eps), c_i = 1 - beta_i^step
at::Tensor optimiserGolden(const ops::OpCall& c) {
  const auto& in = c.inputs;
  const double lr = c.real("lr");
  if (c.kind == OpKind::Sgd) {
    const at::Tensor buf = in[2].mul(c.real("momentum")).add_(in[1]);
    return at::stack({in[0].add(buf, -lr), buf});
  }
  const double b1 = c.real("beta1"), b2 = c.real("beta2"), step = double(c.param("step"));
  const double c1 = 1.0 - std::pow(b1, step), c2 = 1.0 - std::pow(b2, step);
  const at::Tensor m = in[2].mul(b1).add_(in[1], 1.0 - b1);
  const at::Tensor v = in[3].mul(b2).addcmul_(in[1], in[1], 1.0 - b2);
  return at::stack({in[0].addcdiv(m / c1, (v / c2).sqrt_().add_(c.real("eps")), -lr), m, v});
}

// Scaled dot-product attention, the ATen ops an unfused graph runs (bmm or baddbmm with the mask,
// softmax, bmm), so that routing a graph's attention as one call changes none of its values.
// Forward (q [.., Tq, D], k [.., Tk, D], v [.., Tk, Dv][, mask]) with "mask" 1 when the additive mask
// (broadcast to the scores) is there, "causal" 1 for the causal limit (query i sees keys
// j <= i + Tk - Tq), "scale_f64" (1 by default), and with "dropout" 1 the dropout's multipliers
// keep [.., Tq, Tk] (0 or 1/(1-p), drawn as ATen's CPU dropout draws them) after the mask: o = (P keep) v.
// GradInput (dO, q, k, v[, mask][, keep]): dq, dk or dv ("wrt").
at::Tensor attentionProbabilities(const ops::OpCall& c, const at::Tensor& q, const at::Tensor& k, const at::Tensor* mask) {
  const double scale = c.realOr("scale", 1.0);
  const at::Tensor kt = k.transpose(-1, -2);
  at::Tensor s;
  if (mask && scale == 1.0 && q.dim() == 3) s = at::baddbmm(*mask, q, kt);
  else {
    s = at::matmul(q, kt);
    if (scale != 1.0) s = s * scale;
    if (mask) s = s + *mask;
  }
  if (c.paramOr("causal", 0)) {
    const int64_t tq = q.size(-2), tk = k.size(-2);
    s = s.masked_fill(at::ones({tq, tk}, at::kBool).triu(1 + tk - tq), -std::numeric_limits<float>::infinity());
  }
  return at::softmax(s, -1);
}

at::Tensor attentionGolden(const ops::OpCall& c) {
  const auto& in = c.inputs;
  const bool grad = c.variant == Variant::GradInput;
  const std::size_t base = grad ? 1 : 0;
  const at::Tensor &q = in.at(base), &k = in.at(base + 1), &v = in.at(base + 2);
  const at::Tensor* mask = c.paramOr("mask", 0) ? &in.at(base + 3) : nullptr;
  const at::Tensor* keep = c.paramOr("dropout", 0) ? &in.at(base + 3 + (mask ? 1 : 0)) : nullptr;
  const at::Tensor p = attentionProbabilities(c, q, k, mask);
  const at::Tensor dropped = keep ? p * *keep : p;  // as the unfused graph's dropout: its input times the mask
  if (!grad) return at::matmul(dropped, v);
  const at::Tensor& dO = in[0];
  const int64_t wrt = c.paramOr("wrt", 0);
  // an operand broadcast over batch dimensions gets the sum of its gradients, as autograd gives it
  if (wrt == 2) return at::matmul(dropped.transpose(-1, -2), dO).sum_to_size(v.sizes());
  at::Tensor dp = at::matmul(dO, v.transpose(-1, -2));
  if (keep) dp = dp * *keep;
  const at::Tensor ds = at::_softmax_backward_data(dp, p, -1, at::kFloat);
  const double scale = c.realOr("scale", 1.0);
  // dk as autograd computes it for the parts: the weight gradient of bmm(q, k^T), q^T ds, then
  // transposed back (ds^T q is the same product summed in another order: 1 ulp apart)
  at::Tensor g = wrt == 0 ? at::matmul(ds, k) : at::matmul(q.transpose(-1, -2), ds).transpose(-1, -2);
  if (scale != 1.0) g = g * scale;
  return g.sum_to_size(wrt == 0 ? q.sizes() : k.sizes());
}

}  // namespace

bool isOneMask(const at::Tensor& mask, int64_t tq, int64_t tk) {
  return mask.dim() >= 2 && mask.size(-2) == tq && mask.size(-1) == tk && mask.numel() == tq * tk;
}

bool isCausalMask(const at::Tensor& mask, int64_t tq, int64_t tk) {
  return isOneMask(mask, tq, tk) &&
         at::equal(mask.to(at::kFloat).reshape({tq, tk}), at::full({tq, tk}, -INFINITY).triu(1 + tk - tq));
}

at::Tensor runGolden(const ops::OpCall& c) {
  const auto& in = c.inputs;
  switch (c.kind) {
    case OpKind::Linear:
      switch (c.variant) {
        case Variant::Forward: return at::linear(in[0], in[1], in.size() > 2 ? in[2] : at::Tensor());
        case Variant::GradInput: return at::matmul(in[0], in[1]);
        case Variant::GradWeight: return at::mm(flatten2d(in[0]).t(), flatten2d(in[1]));
        default: break;  // no other variant
      }
      break;
    case OpKind::Conv2d: {
      const ops::ConvGeometry g = ops::convGeometry(c);
      switch (c.variant) {
        case Variant::Forward:
          return at::conv2d(in[0], in[1], in.size() > 2 ? in[2] : at::Tensor(), g.stride(), g.padding(), g.dilation(),
                            g.groups);
        case Variant::GradInput: {
          // convolution_backward reads only the input's shape for this gradient.
          const at::Tensor inputShape =
              at::empty({in[0].size(0), in[1].size(1) * g.groups, c.param("in_h"), c.param("in_w")});
          auto grads = at::convolution_backward(in[0], inputShape, in[1], c10::nullopt, g.stride(), g.padding(),
                                                g.dilation(), false, pair(0), g.groups, {true, false, false});
          return std::get<0>(grads);
        }
        case Variant::GradWeight: {
          // Bit-exact replays need the recorded thread count: oneDNN splits this reduction by thread.
          const at::Tensor weightShape =
              at::empty({in[0].size(1), in[1].size(1) / g.groups, c.param("k_h"), c.param("k_w")});
          auto grads = at::convolution_backward(in[0], in[1], weightShape, c10::nullopt, g.stride(), g.padding(),
                                                g.dilation(), false, pair(0), g.groups, {false, true, false});
          return std::get<1>(grads);
        }
        default: break;  // no other variant
      }
      break;
    }
    case OpKind::Matmul:
      switch (c.variant) {
        case Variant::Forward: return at::matmul(in[0], in[1]);
        case Variant::GradInput: return at::matmul(in[0], in[1].transpose(-1, -2));
        case Variant::GradWeight: return at::matmul(in[0].transpose(-1, -2), in[1]);
        default: break;  // no other variant
      }
      break;
    case OpKind::Softmax:
    case OpKind::LogSoftmax: return softmaxGolden(c);
    case OpKind::LayerNorm: return layerNormGolden(c);
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Silu:
    case OpKind::Tanh:
    case OpKind::Sigmoid: return activationGolden(c);
    case OpKind::Add: return at::add(in[0], in[1]);
    case OpKind::Embedding:
      if (c.variant == Variant::GradWeight)  // a scatter-add of the output's gradient rows
        return at::embedding_dense_backward(in[0], in[1], c.param("num_weights"), c.paramOr("padding_idx", -1),
                                            c.paramOr("scale_grad_by_freq", 0) != 0);
      return at::embedding(in[1], in[0], c.paramOr("padding_idx", -1));
    case OpKind::Dropout: return in[0] * in[1];  // x or dy times the recorded mask (already scaled by 1/(1-p))
    case OpKind::CrossEntropy: return crossEntropyGolden(c);
    case OpKind::Sgd:
    case OpKind::Adam: return optimiserGolden(c);
    case OpKind::Attention: return attentionGolden(c);
    case OpKind::BatchNorm:
      if (c.param("training"))  // batch statistics: the output depends on the batch only
        return at::batch_norm(in[0], in[1], in[2], at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false);
      return at::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5, false);
    case OpKind::MaxPool2d: return at::max_pool2d(in[0], pair(c.param("kernel")), pair(c.param("stride")));
    case OpKind::AvgPool2d: return in[0].mean({2, 3});
  }
  throw std::logic_error("golden kernel: unhandled op");
}

at::Tensor runThroughGemm(const ops::OpCall& c, const GemmEngine& gemm) {
  const auto& in = c.inputs;
  auto mm = [&](const at::Tensor& a, const at::Tensor& b) { return gemm(a.contiguous(), b.contiguous()); };
  switch (c.kind) {
    case OpKind::Linear:
      switch (c.variant) {
        case Variant::Forward: {
          at::Tensor y = mm(flatten2d(in[0]), in[1].t());
          if (in.size() > 2 && in[2].defined()) y = y + in[2];
          auto shape = in[0].sizes().vec();
          shape.back() = in[1].size(0);
          return y.reshape(shape);
        }
        case Variant::GradInput: {
          auto shape = in[0].sizes().vec();
          shape.back() = in[1].size(1);
          return mm(flatten2d(in[0]), in[1]).reshape(shape);
        }
        case Variant::GradWeight: return mm(flatten2d(in[0]).t(), flatten2d(in[1]));
        default: break;  // no other variant
      }
      break;
    case OpKind::Conv2d: {
      // im2col per group: a grouped or depthwise convolution is `groups` independent GEMMs.
      const ops::ConvGeometry g = ops::convGeometry(c);
      const int64_t groups = g.groups;
      switch (c.variant) {
        case Variant::Forward: {
          const at::Tensor& x = in[0];
          const at::Tensor& w = in[1];
          const int64_t n = x.size(0), cout = w.size(0), kh = w.size(2), kw = w.size(3);
          const int64_t coutG = cout / groups, cinG = w.size(1);
          const int64_t ho = g.outH(x.size(2), kh), wo = g.outW(x.size(3), kw);
          std::vector<at::Tensor> parts;
          for (int64_t gi = 0; gi < groups; ++gi) {
            const at::Tensor xg = x.slice(1, gi * cinG, (gi + 1) * cinG);
            const at::Tensor wg = w.slice(0, gi * coutG, (gi + 1) * coutG);
            at::Tensor cols = at::im2col(xg, {kh, kw}, g.dilation(), g.padding(), g.stride());  // [N, C*kh*kw, L]
            at::Tensor colsAll = cols.permute({1, 0, 2}).reshape({cols.size(1), -1});           // [CK, N*L]
            at::Tensor y = mm(wg.reshape({coutG, -1}), colsAll);                                  // [Cout, N*L]
            parts.push_back(y.reshape({coutG, n, ho * wo}).permute({1, 0, 2}).reshape({n, coutG, ho, wo}));
          }
          at::Tensor y = groups == 1 ? parts[0] : at::cat(parts, 1);
          if (in.size() > 2 && in[2].defined()) y = y + in[2].reshape({1, cout, 1, 1});
          return y.contiguous();
        }
        case Variant::GradInput: {
          const at::Tensor& dy = in[0];
          const at::Tensor& w = in[1];
          const int64_t n = dy.size(0), cout = w.size(0), kh = w.size(2), kw = w.size(3);
          const int64_t coutG = cout / groups;
          std::vector<at::Tensor> parts;
          for (int64_t gi = 0; gi < groups; ++gi) {
            const at::Tensor wg = w.slice(0, gi * coutG, (gi + 1) * coutG);
            const at::Tensor dyg = dy.slice(1, gi * coutG, (gi + 1) * coutG);
            at::Tensor dyAll = dyg.reshape({n, coutG, -1}).permute({1, 0, 2}).reshape({coutG, -1});  // [Cout, N*L]
            at::Tensor dcols = mm(wg.reshape({coutG, -1}).t(), dyAll);                               // [CK, N*L]
            dcols = dcols.reshape({dcols.size(0), n, -1}).permute({1, 0, 2});                         // [N, CK, L]
            parts.push_back(at::col2im(dcols.contiguous(), {c.param("in_h"), c.param("in_w")}, {kh, kw}, g.dilation(),
                                       g.padding(), g.stride()));
          }
          return groups == 1 ? parts[0] : at::cat(parts, 1);
        }
        case Variant::GradWeight: {
          const at::Tensor& dy = in[0];
          const at::Tensor& x = in[1];
          const int64_t n = dy.size(0), cout = dy.size(1), kh = c.param("k_h"), kw = c.param("k_w");
          const int64_t coutG = cout / groups, cinG = x.size(1) / groups;
          std::vector<at::Tensor> parts;
          for (int64_t gi = 0; gi < groups; ++gi) {
            const at::Tensor xg = x.slice(1, gi * cinG, (gi + 1) * cinG);
            const at::Tensor dyg = dy.slice(1, gi * coutG, (gi + 1) * coutG);
            at::Tensor cols = at::im2col(xg, {kh, kw}, g.dilation(), g.padding(), g.stride());
            at::Tensor colsAll = cols.permute({1, 0, 2}).reshape({cols.size(1), -1});                 // [CK, N*L]
            at::Tensor dyAll = dyg.reshape({n, coutG, -1}).permute({1, 0, 2}).reshape({coutG, -1});  // [Cout, N*L]
            parts.push_back(mm(dyAll, colsAll.t()).reshape({coutG, cinG, kh, kw}));
          }
          return groups == 1 ? parts[0] : at::cat(parts, 0);
        }
        default: break;  // no other variant
      }
      break;
    }
    case OpKind::Matmul: {
      at::Tensor a = in[0], b = in[1];
      if (c.variant == Variant::GradInput) b = b.transpose(-1, -2);
      if (c.variant == Variant::GradWeight) a = a.transpose(-1, -2);
      if (a.dim() == 2) return mm(a, b);
      const auto batchShape = a.sizes().slice(0, a.dim() - 2).vec();
      at::Tensor a3 = a.reshape({-1, a.size(-2), a.size(-1)}), b3 = b.reshape({-1, b.size(-2), b.size(-1)});
      std::vector<at::Tensor> outs;
      for (int64_t i = 0; i < a3.size(0); ++i) outs.push_back(mm(a3[i], b3[i]));
      auto shape = batchShape;
      shape.push_back(a.size(-2));
      shape.push_back(b.size(-1));
      return at::stack(outs).reshape(shape);
    }
    default: break;
  }
  throw std::logic_error(std::string("op ") + ops::opName(c.kind) + " is not GEMM-based");
}

namespace {
class GoldenKernel final : public Kernel {
 public:
  std::string name() const override { return "golden"; }
  bool supports(ops::OpKind) const override { return true; }
  at::Tensor run(const ops::OpCall& call, const CallContext&) override { return runGolden(call); }
};
}  // namespace

std::unique_ptr<Kernel> makeGolden() { return std::make_unique<GoldenKernel>(); }

}  // namespace peat::kernels
