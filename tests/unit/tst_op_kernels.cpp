// SPDX-License-Identifier: MIT
// The op-wise candidates (issue 31) against references written here in double precision: each
// legitimate port within the error its method is known to make, each planted bug showing the
// effect that names it (an overflow, a constant factor, a reused mask), on inputs where it shows.
#include <ATen/ATen.h>  // before Qt: LibTorch uses `slots` as a name
#include <QtTest>

#include <cmath>

#include "core/detector/op_replay.h"
#include "core/torch/kernels/kernel.h"

using namespace peat;
using kernels::makeKernel;
using ops::OpCall;
using ops::OpKind;
using ops::Variant;

namespace {
at::Tensor run(const std::string& spec, const OpCall& c) { return makeKernel(spec, 7)->run(c, {"test", 0, 0}); }
double maxAbs(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }
double maxRel(const at::Tensor& a, const at::Tensor& ref) {
  return ((a.to(at::kDouble) - ref) / ref.abs().clamp_min(1e-300)).abs().max().item<double>();
}
// softmax over the last dimension, in double, from its definition
at::Tensor softmaxReference(const at::Tensor& x) {
  const at::Tensor d = x.to(at::kDouble);
  const at::Tensor e = (d - std::get<0>(d.max(-1, true))).exp();
  return e / e.sum(-1, true);
}
// layer norm over the last dimension, in double: biased variance, eps inside the square root
at::Tensor layerNormReference(const at::Tensor& x, const at::Tensor& g, const at::Tensor& b, double eps, bool bessel = false,
                              bool epsOutside = false, bool rms = false) {
  const at::Tensor d = x.to(at::kDouble);
  const int64_t n = x.size(-1);
  const at::Tensor mean = rms ? at::zeros_like(d.select(-1, 0)).unsqueeze(-1) : d.mean(-1, true);
  const at::Tensor var = (d - mean).square().sum(-1, true) / double(bessel ? n - 1 : n);
  const at::Tensor norm = epsOutside ? (d - mean) / (var.sqrt() + eps) : (d - mean) / (var + eps).sqrt();
  return norm * g.to(at::kDouble) + b.to(at::kDouble);
}
}  // namespace

class TestOpKernels : public QObject {
  Q_OBJECT
 private slots:
  void softmaxPortsAreWithinTheirMethodsError();
  void softmaxWithoutMaxOverflows();
  void layerNormPortsAndBugs();
  void geluByTanhIsTheTanhForm();
  void adamPorts();
  void atomicEmbeddingBackwardDiffersBetweenCalls();
  void dropoutReuseKeepsTheFirstMask();
  void unscaledGradientCarriesTheScale();
  void catalogNamesEveryOpCandidate();
  void opReplayNamesEachFormula();
  void attentionGoldenAndItsMaskOffByOne();
};

void TestOpKernels::softmaxPortsAreWithinTheirMethodsError() {
  at::manual_seed(1);
  const OpCall c{OpKind::Softmax, Variant::Forward, {at::randn({64, 200}) * 4}, {}};
  const at::Tensor ref = softmaxReference(c.inputs[0]);
  // fp32 kernels: a few units of rounding per element (exp, sum of 200 terms, one division)
  for (const char* k : {"softmax-exp2", "softmax-online", "golden"}) {
    const double rel = maxRel(run(k, c), ref);
    QVERIFY2(rel < 2e-5, qPrintable(QStringLiteral("%1: %2").arg(QString::fromLatin1(k)).arg(rel)));
  }
  QVERIFY(maxAbs(run("softmax-online", c), run("golden", c)) > 0);  // another order: not golden's bits
  // the polynomial's own error dominates: 1.4e-4 (degree 3) and 1.7e-7 (degree 5), plus rounding
  const double p3 = maxRel(run("softmax-poly", c), ref), p5 = maxRel(run("softmax-poly:degree=5", c), ref);
  QVERIFY2(p3 > 2e-5 && p3 < 4e-4, qPrintable(QString::number(p3)));
  QVERIFY2(p5 < 5e-6 && p5 < p3 / 10, qPrintable(QString::number(p5)));
  // a softmax over another dimension goes there
  OpCall d1{OpKind::Softmax, Variant::Forward, {at::randn({8, 30, 5})}, {{"dim", 1}}};
  QVERIFY(maxAbs(run("softmax-online", d1), at::softmax(d1.inputs[0], 1)) < 1e-6);
  // backward calls run golden's backward
  const OpCall back{OpKind::Softmax, Variant::GradInput, {at::randn({4, 9}), at::softmax(at::randn({4, 9}), -1)}, {}};
  QVERIFY(at::equal(run("softmax-poly", back), run("golden", back)));
}

void TestOpKernels::softmaxWithoutMaxOverflows() {
  at::manual_seed(2);
  const at::Tensor small = at::randn({16, 50});
  const OpCall ok{OpKind::Softmax, Variant::Forward, {small}, {}};
  QVERIFY(maxRel(run("softmax-nomax", ok), softmaxReference(small)) < 2e-5);  // harmless on small logits
  at::Tensor big = small.clone();
  big.index_put_({3, 7}, 100.f);  // exp(100) overflows fp32: Inf / Inf
  const at::Tensor y = run("softmax-nomax", {OpKind::Softmax, Variant::Forward, {big}, {}});
  QVERIFY(y[3].isnan().any().item<bool>());
  QVERIFY(y[2].isfinite().all().item<bool>());  // other rows intact
  QVERIFY(run("golden", {OpKind::Softmax, Variant::Forward, {big}, {}}).isfinite().all().item<bool>());
}

void TestOpKernels::layerNormPortsAndBugs() {
  at::manual_seed(3);
  const int64_t n = 256;
  at::Tensor x = at::randn({32, n}) * 0.5 + 3;  // a mean far from zero: one-pass variance cancels
  const at::Tensor g = at::randn({n}), b = at::randn({n});
  const OpCall c{OpKind::LayerNorm, Variant::Forward, {x, g, b}, {}};
  const at::Tensor ref = layerNormReference(x, g, b, 1e-5);
  const double golden = maxAbs(run("golden", c), ref);
  QVERIFY2(golden < 1e-5, qPrintable(QString::number(golden)));
  const double onePass = maxAbs(run("layernorm-onepass", c), ref);
  QVERIFY2(onePass > 5 * golden && onePass < 0.05, qPrintable(QString::number(onePass)));  // cancellation, bounded
  const double fp16 = maxAbs(run("layernorm-fp16stats", c), ref);
  QVERIFY2(fp16 > golden && fp16 < 0.05, qPrintable(QString::number(fp16)));
  // the bugs are other formulas: each matches its own reference to fp32 rounding
  QVERIFY(maxAbs(run("layernorm-bessel", c), layerNormReference(x, g, b, 1e-5, true)) < 1e-4);
  QVERIFY(maxAbs(run("layernorm-bessel", c), ref) > 1e-3);
  QVERIFY(maxAbs(run("layernorm-eps-outside", c), layerNormReference(x, g, b, 1e-5, false, true)) < 1e-4);
  QVERIFY(maxAbs(run("rmsnorm", c), layerNormReference(x, g, b, 1e-5, false, false, true)) < 1e-4);
  QVERIFY(maxAbs(run("rmsnorm", c), ref) > 1);
  // eps outside the square root matters where the variance is small next to eps
  const at::Tensor flat = at::randn({4, n}) * 1e-3;
  const OpCall s{OpKind::LayerNorm, Variant::Forward, {flat, g, b}, {}};
  QVERIFY(maxAbs(run("layernorm-eps-outside", s), layerNormReference(flat, g, b, 1e-5)) > 0.01);
}

void TestOpKernels::geluByTanhIsTheTanhForm() {
  at::manual_seed(4);
  const at::Tensor x = at::randn({1000}) * 3;
  const OpCall c{OpKind::Gelu, Variant::Forward, {x}, {}};
  const at::Tensor d = x.to(at::kDouble);
  const at::Tensor tanhForm = 0.5 * d * (1 + (std::sqrt(2 / M_PI) * (d + 0.044715 * d.pow(3))).tanh());
  QVERIFY(maxAbs(run("gelu-tanh", c), tanhForm) < 1e-5);
  const double fromExact = maxAbs(run("gelu-tanh", c), run("golden", c));
  QVERIFY2(fromExact > 1e-5 && fromExact < 1e-3, qPrintable(QString::number(fromExact)));  // the approximation's error
  const OpCall back{OpKind::Gelu, Variant::GradInput, {at::randn({1000}), x}, {}};
  QVERIFY(maxAbs(run("gelu-tanh", back), run("golden", back)) > 0);  // its backward is the tanh form's too
}

void TestOpKernels::adamPorts() {
  at::manual_seed(5);
  const at::Tensor p = at::randn({64, 32}), g = at::randn({64, 32}) * 1e-2, m = at::randn({64, 32}) * 1e-2,
                   v = at::rand({64, 32}) * 1e-4;
  OpCall c{OpKind::Adam, Variant::Update, {p, g, m, v}, {{"step", 10}}};
  c.setReal("lr", 1e-3);
  c.setReal("beta1", 0.9);
  c.setReal("beta2", 0.999);
  c.setReal("eps", 1e-8);
  const at::Tensor golden = run("golden", c), bf16 = run("adam-bf16", c), inside = run("adam-eps-inside", c);
  // bf16 moments: m and v within bf16's half unit (2^-9 relative); the parameter moves by lr at most
  QVERIFY(maxRel(bf16[1], golden[1].to(at::kDouble)) <= std::ldexp(1.0, -8));
  QVERIFY(maxAbs(bf16[0], golden[0]) < 1e-3 * 0.05);
  // eps inside the square root: the same step where v_hat >> eps
  QVERIFY(at::equal(inside[1], golden[1]) && at::equal(inside[2], golden[2]));
  QVERIFY(maxAbs(inside[0], golden[0]) > 0 && maxAbs(inside[0], golden[0]) < 1e-3 * 0.1);
}

void TestOpKernels::atomicEmbeddingBackwardDiffersBetweenCalls() {
  at::manual_seed(6);
  const at::Tensor ids = at::randint(0, 4, {512}, at::kLong);  // few rows: many additions per row
  const OpCall c{OpKind::Embedding, Variant::GradWeight, {at::randn({512, 16}), ids}, {{"num_weights", 6}}};
  auto k = makeKernel("embedding-atomic", 1);
  const at::Tensor a = k->run(c, {"t", 0, 0}), b = k->run(c, {"t", 0, 1}), golden = run("golden", c);
  QVERIFY(!at::equal(a, b));  // unordered sums: another result each call
  QVERIFY(maxAbs(a, golden) < 1e-4 && maxAbs(a, golden) > 0);
  QVERIFY(at::equal(a.slice(0, 4, 6), at::zeros({2, 16})));  // rows no id names stay zero
}

void TestOpKernels::dropoutReuseKeepsTheFirstMask() {
  at::manual_seed(7);
  auto k = makeKernel("dropout-reuse", 1);
  const at::Tensor x = at::randn({64, 64});
  const at::Tensor m1 = at::empty({64, 64}).bernoulli_(0.9).div_(0.9), m2 = at::empty({64, 64}).bernoulli_(0.9).div_(0.9);
  const at::Tensor first = k->run({OpKind::Dropout, Variant::Forward, {x, m1}, {}}, {"t", 0, 0});
  const at::Tensor second = k->run({OpKind::Dropout, Variant::Forward, {x, m2}, {}}, {"t", 1, 0});
  QVERIFY(at::equal(first, x * m1));
  QVERIFY(at::equal(second, x * m1));  // the step's own mask is ignored
  QVERIFY(!at::equal(second, run("golden", {OpKind::Dropout, Variant::Forward, {x, m2}, {}})));
}

void TestOpKernels::unscaledGradientCarriesTheScale() {
  at::manual_seed(8);
  const at::Tensor y = at::softmax(at::randn({8, 10}), -1), dy = at::randn({8, 10});
  const OpCall back{OpKind::Softmax, Variant::GradInput, {dy, y}, {}};
  QVERIFY(at::allclose(run("grad-unscaled:scale=512", back), run("golden", back) * 512));
  const OpCall fwd{OpKind::Softmax, Variant::Forward, {dy}, {}};
  QVERIFY(at::equal(run("grad-unscaled", fwd), run("golden", fwd)));
  QVERIFY(!makeKernel("grad-unscaled", 1)->supports(OpKind::Adam));
}

void TestOpKernels::catalogNamesEveryOpCandidate() {
  const auto& catalog = kernels::kernelCatalog();
  for (const char* name : {"softmax-exp2", "softmax-poly", "softmax-online", "softmax-nomax", "layernorm-onepass",
                           "layernorm-fp16stats", "layernorm-eps-outside", "layernorm-bessel", "rmsnorm", "gelu-tanh",
                           "adam-bf16", "adam-eps-inside", "embedding-atomic", "dropout-reuse", "grad-unscaled"}) {
    bool found = false;
    for (const auto& d : catalog) found = found || d.name == name;
    QVERIFY2(found, name);
    QVERIFY(makeKernel(name, 1) != nullptr);
  }
  QVERIFY_THROWS_EXCEPTION(kernels::KernelError, makeKernel("softmax-poly:degree=4", 1));
  QVERIFY(!makeKernel("softmax-online", 1)->supports(OpKind::Linear));
  QVERIFY(!makeKernel("bf16", 1)->supports(OpKind::Adam));  // reduced-precision optimisers are their own
}

namespace {
// The detector's op replay on one call: golden's output, the candidate's, and the call's inputs.
std::string replayed(const std::string& spec, const OpCall& c, const std::string& op) {
  const at::Tensor golden = run("golden", c).contiguous(), candidate = run(spec, c).contiguous();
  detector::OpOperands operands{op, int64_t(c.variant), c.params, {}, {}};
  for (const at::Tensor& t : c.inputs) {
    const at::Tensor f = t.contiguous().to(at::kFloat);
    operands.inputs.emplace_back(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
    operands.shapes.emplace_back(t.sizes().begin(), t.sizes().end());
  }
  const auto v = detector::replayOp(golden.data_ptr<float>(), candidate.data_ptr<float>(), uint64_t(golden.numel()), operands);
  return v ? v->model + ": " + v->parameters.at("formula") : "none";
}
}  // namespace

// The replay names the formula each candidate follows, from the recorded inputs, where the
// outputs alone cannot (a Bessel factor of 1.002 looks like rounding; epsilon inside the root
// like a fault where v is tiny); legitimate ports it does not claim are left to the detector.
void TestOpKernels::opReplayNamesEachFormula() {
  at::manual_seed(9);
  const int64_t n = 64;
  const at::Tensor x = at::randn({16, n}), g = at::randn({n}), b = at::randn({n});
  const OpCall ln{OpKind::LayerNorm, Variant::Forward, {x, g, b}, {}};
  QCOMPARE(replayed("layernorm-bessel", ln, "layernorm"), std::string("scaling: variance with Bessel's correction (N-1)"));
  QCOMPARE(replayed("layernorm-eps-outside", ln, "layernorm"), std::string("scaling: epsilon outside the square root"));
  QCOMPARE(replayed("rmsnorm", ln, "layernorm"), std::string("scaling: no mean subtraction (RMSNorm's formula)"));
  // legitimate, another fp32 way: within the bound of the op's own formula recomputed in double (issue 41:
  // a legitimate reading needs a replay, a bound or a grid, and this is the bound)
  QCOMPARE(replayed("layernorm-onepass", ln, "layernorm"),
           std::string("accumulation_order: the op's own, within fp32 rounding"));
  QCOMPARE(replayed("golden", ln, "layernorm"), std::string("none"));
  const OpCall ge{OpKind::Gelu, Variant::Forward, {at::randn({2000}) * 3}, {}};
  QCOMPARE(replayed("gelu-tanh", ge, "gelu"), std::string("precision_loss: GELU by its tanh approximation"));
  const OpCall gg{OpKind::Gelu, Variant::GradInput, {at::randn({2000}), at::randn({2000}) * 3}, {}};
  QCOMPARE(replayed("gelu-tanh", gg, "gelu"), std::string("precision_loss: GELU by its tanh approximation"));
  OpCall adam{OpKind::Adam, Variant::Update, {at::randn({512}), at::randn({512}) * 1e-3, at::randn({512}) * 1e-4,
                                              at::rand({512}) * 1e-12}, {{"step", 5}}};  // v near eps: the forms differ
  adam.setReal("lr", 1e-3);
  adam.setReal("beta1", 0.9);
  adam.setReal("beta2", 0.999);
  adam.setReal("eps", 1e-8);
  QCOMPARE(replayed("adam-eps-inside", adam, "adam"), std::string("accumulation_order: epsilon inside the square root"));
  // softmax in 16 bits: the project's candidates and ATen's own bf16 softmax (a kernel not written here)
  const OpCall sm{OpKind::Softmax, Variant::Forward, {at::randn({32, 80}) * 4}, {}};
  QCOMPARE(replayed("softmax-bf16", sm, "softmax"), std::string("precision_loss: softmax with its input and output in bf16"));
  QCOMPARE(replayed("softmax-fp16", sm, "softmax"), std::string("precision_loss: softmax with its input and output in fp16"));
  QCOMPARE(replayed("softmax-online", sm, "softmax"), std::string("accumulation_order: the op's own, within fp32 rounding"));
  {
    const at::Tensor golden = run("golden", sm).contiguous();
    const at::Tensor aten = at::softmax(sm.inputs[0].to(at::kBFloat16), -1).to(at::kFloat).contiguous();
    detector::OpOperands operands{"softmax", 0, {}, {}, {}};
    const at::Tensor in = sm.inputs[0].contiguous();
    operands.inputs.emplace_back(in.data_ptr<float>(), in.data_ptr<float>() + in.numel());
    operands.shapes.push_back({32, 80});
    const auto v = detector::replayOp(golden.data_ptr<float>(), aten.data_ptr<float>(), uint64_t(golden.numel()), operands);
    QVERIFY(v && v->model == "precision_loss" && v->parameters.at("format") == "bf16");
  }
  const at::Tensor dx = at::randn({64, 64});
  auto reuse = makeKernel("dropout-reuse", 1);
  const at::Tensor m1 = at::empty({64, 64}).bernoulli_(0.9).div_(0.9), m2 = at::empty({64, 64}).bernoulli_(0.9).div_(0.9);
  reuse->run({OpKind::Dropout, Variant::Forward, {dx, m1}, {}}, {"t", 0, 0});
  const OpCall second{OpKind::Dropout, Variant::Forward, {dx, m2}, {}};
  const at::Tensor golden = run("golden", second), stale = reuse->run(second, {"t", 1, 0});
  detector::OpOperands operands{"dropout", 0, {}, {}, {}};
  for (const at::Tensor& t : second.inputs) {
    operands.inputs.emplace_back(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    operands.shapes.push_back({64, 64});
  }
  const auto v = detector::replayOp(golden.data_ptr<float>(), stale.data_ptr<float>(), 4096, operands);
  QVERIFY(v && v->model == "index_error");
  QVERIFY(!detector::replayOp(golden.data_ptr<float>(), golden.data_ptr<float>(), 4096, operands));  // its own mask
}

// Attention as one call: golden (the ATen ops of an unfused graph) against double-precision
// autograd written here, forward and dq, dk, dv, causal by flag and by mask; then a causal limit
// one key late, written here in ATen (not one of the project's kernels), named by the replay as
// index_error in every variant, and golden's own output not.
void TestOpKernels::attentionGoldenAndItsMaskOffByOne() {
  at::manual_seed(11);
  const int64_t b = 6, t = 12, d = 8;
  const at::Tensor q = at::randn({b, t, d}), k = at::randn({b, t, d}), v = at::randn({b, t, d}), dO = at::randn({b, t, d});
  const at::Tensor causalMask = at::full({t, t}, -INFINITY).triu(1);
  auto reference = [&](int64_t shift) {  // double autograd; query i sees keys up to i + shift
    std::vector<at::Tensor> leaves;
    for (const at::Tensor& x : {q, k, v}) leaves.push_back(x.to(at::kDouble).requires_grad_());
    const at::Tensor limit = at::ones({t, t}, at::kBool).triu(1 + shift);
    const at::Tensor s = at::matmul(leaves[0], leaves[1].transpose(-1, -2)).masked_fill(limit, -INFINITY);
    const at::Tensor o = at::matmul(at::softmax(s, -1), leaves[2]);
    o.backward(dO.to(at::kDouble));
    return std::vector<at::Tensor>{o.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
  };
  const std::vector<at::Tensor> exact = reference(0), late = reference(1);
  for (const bool byMask : {false, true}) {
    OpCall fwd{OpKind::Attention, Variant::Forward, {q, k, v}, {}};
    if (byMask) fwd.inputs.push_back(causalMask), fwd.params["mask"] = 1;
    else fwd.params["causal"] = 1;
    QVERIFY(maxAbs(run("golden", fwd), exact[0]) < 1e-5);
    for (int64_t wrt = 0; wrt < 3; ++wrt) {
      OpCall g{OpKind::Attention, Variant::GradInput, {dO, q, k, v}, fwd.params};
      if (byMask) g.inputs.push_back(causalMask);
      if (wrt) g.params["wrt"] = wrt;
      QVERIFY2(maxAbs(run("golden", g), exact[std::size_t(wrt + 1)]) < 1e-4, std::to_string(wrt).c_str());
    }
  }
  auto named = [&](const OpCall& c, const at::Tensor& candidate) {
    const at::Tensor golden = run("golden", c).contiguous(), cand = candidate.to(at::kFloat).contiguous();
    detector::OpOperands operands{"attention", int64_t(c.variant), c.params, {}, {}};
    for (const at::Tensor& x : c.inputs) {
      const at::Tensor f = x.contiguous();
      operands.inputs.emplace_back(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
      operands.shapes.emplace_back(x.sizes().begin(), x.sizes().end());
    }
    const auto verdict = detector::replayOp(golden.data_ptr<float>(), cand.data_ptr<float>(), uint64_t(golden.numel()), operands);
    return verdict ? verdict->model : std::string("none");
  };
  OpCall fwd{OpKind::Attention, Variant::Forward, {q, k, v, causalMask}, {{"mask", 1}}};
  QCOMPARE(named(fwd, late[0]), std::string("index_error"));
  QCOMPARE(named(fwd, run("golden", fwd)), std::string("none"));
  // a query shared by the batch ([t, d] against [b, t, d] keys): dq summed over the batch, as autograd
  // gives it, in the operand's own shape
  {
    const at::Tensor q2 = at::randn({t, d});
    OpCall g{OpKind::Attention, Variant::GradInput, {dO, q2, k, v}, {{"causal", 1}}};
    const at::Tensor dq = run("golden", g);
    at::Tensor qd = q2.to(at::kDouble).requires_grad_();
    const at::Tensor s = at::matmul(qd, k.to(at::kDouble).transpose(-1, -2))
                             .masked_fill(at::ones({t, t}, at::kBool).triu(1), -INFINITY);
    at::matmul(at::softmax(s, -1), v.to(at::kDouble)).backward(dO.to(at::kDouble));
    QCOMPARE(dq.sizes(), q2.sizes());
    QVERIFY(maxAbs(dq, qd.grad()) < 1e-4);
  }
  // the project's candidates: FlashAttention's forward is within bf16 rounding of P (relative 2^-8 of
  // the output's scale) and not a moved limit; the planted bug is the moved limit exactly
  const at::Tensor flash = run("attention-flash", fwd);
  QVERIFY2(maxAbs(flash, exact[0]) < 1e-2 * exact[0].abs().max().item<double>() && maxAbs(flash, exact[0]) > 0,
           std::to_string(maxAbs(flash, exact[0])).c_str());
  QCOMPARE(named(fwd, flash), std::string("none"));
  QVERIFY(maxAbs(run("attention-causal-off", fwd), late[0]) < 1e-5);
  QCOMPARE(named(fwd, run("attention-causal-off", fwd)), std::string("index_error"));
  OpCall flagged{OpKind::Attention, Variant::GradInput, {dO, q, k, v}, {{"causal", 1}, {"wrt", 1}}};
  QVERIFY(maxAbs(run("attention-causal-off", flagged), late[2]) < 1e-4);
  // a bf16 softmax: every output on bf16's grid, within its rounding of the exact softmax
  const at::Tensor logits = at::randn({32, 50}) * 3;
  const at::Tensor sb = run("softmax-bf16", {OpKind::Softmax, Variant::Forward, {logits}, {}});
  QVERIFY(at::equal(sb, sb.to(at::kBFloat16).to(at::kFloat)));
  // against the exact softmax of its bf16-rounded input: only the output's rounding (2^-9 relative) is left
  QVERIFY(maxRel(sb, softmaxReference(logits.to(at::kBFloat16).to(at::kFloat))) <= std::ldexp(1.0, -8));
  for (int64_t wrt = 0; wrt < 3; ++wrt) {
    OpCall g{OpKind::Attention, Variant::GradInput, {dO, q, k, v}, {{"causal", 1}, {"wrt", wrt}}};
    QVERIFY2(named(g, late[std::size_t(wrt + 1)]) == "index_error", ("wrt " + std::to_string(wrt) + ": " + named(g, late[std::size_t(wrt + 1)])).c_str());
  }
}

QTEST_APPLESS_MAIN(TestOpKernels)
#include "tst_op_kernels.moc"
