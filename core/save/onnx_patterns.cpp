// SPDX-License-Identifier: MIT
// Patterns over several ONNX nodes that SAVE maps as one: an erf GELU chain, a zero Pad folded
// into the Conv or AveragePool that reads it, a MatMul + Add into one linear layer, and an
// attention mask's -inf before a softmax.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <cmath>

namespace peat::save::onnx_import {

// An erf GELU (see matchGelu): true where `n` is part of one, its inner nodes skipped and the
// GELU mapped at its last node.
bool Importer::mapGeluChain(const onnx::NodeProto& n, const std::string& name) {
  if (geluInside_.count(n.output(0))) return true;  // part of an erf GELU, mapped at its last node
  if (auto g = geluEnd_.find(n.output(0)); g != geluEnd_.end()) {
    const int x = values_.at(g->second);
    try {
      values_[n.output(0)] = b_.gelu(name, x);
    } catch (const SaveError& e) {
      refuse(n, e.what());
      return true;
    }
    dims_[n.output(0)] = dimsOf(g->second);
    return true;
  }
  return n.op_type() == "Div" && matchGelu(n);
}

// GELU as exporters without a Gelu op write it: Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x) ->
// Mul(0.5) (or Mul(0.5) -> Mul(x)), each the one reader of the one before. True (and the chain remembered) on a match.
bool Importer::matchGelu(const onnx::NodeProto& div) {
  auto only = [&](const std::string& v, const char* op) -> const onnx::NodeProto* {
    auto it = readers_.find(v);
    if (it == readers_.end() || it->second.size() != 1 || it->second[0]->op_type() != op || consumers_[v] != 1) return nullptr;
    return it->second[0];
  };
  auto scalar = [&](const onnx::NodeProto& n, const std::string& other, double want, double tol) {
    for (const auto& in : n.input())
      if (in != other) {
        const Constant* c = constant(in);
        return c && c->isFloat && c->values.size() == 1 && std::fabs(double(c->values[0]) - want) <= tol;
      }
    return false;
  };
  if (div.input_size() != 2 || !isActivation(div.input(0)) || !scalar(div, div.input(0), std::sqrt(2.0), 1e-6)) return false;
  const std::string x = div.input(0);
  const onnx::NodeProto* erf = only(div.output(0), "Erf");
  const onnx::NodeProto* add = erf ? only(erf->output(0), "Add") : nullptr;
  if (!add || !scalar(*add, erf->output(0), 1.0, 0)) return false;
  // the two products in either order: (x * (1 + erf)) * 0.5 as PyTorch 1.13 writes it,
  // x * (0.5 * (1 + erf)) as PyTorch 2.x's dynamo exporter does
  const onnx::NodeProto* first = only(add->output(0), "Mul");
  const onnx::NodeProto* second = first ? only(first->output(0), "Mul") : nullptr;
  if (!second) return false;
  const auto byX = [&](const onnx::NodeProto& m) { return m.input(0) == x || m.input(1) == x; };
  const bool xFirst = byX(*first) && scalar(*second, first->output(0), 0.5, 0);
  const bool halfFirst = scalar(*first, add->output(0), 0.5, 0) && byX(*second);
  if (!xFirst && !halfFirst) return false;
  for (const std::string& v : {div.output(0), erf->output(0), add->output(0), first->output(0)}) geluInside_.insert(v);
  geluEnd_[second->output(0)] = x;
  return true;
}

// A layer norm as exporters write it before LayerNormalization existed (opset < 17; see
// matchLayerNorm): true where `n` is part of one, its inner nodes skipped and SAVE's LayerNorm
// mapped at its last node.
bool Importer::mapLayerNormChain(const onnx::NodeProto& n, const std::string& name) {
  if (layerNormInside_.count(n.output(0))) return true;
  auto it = layerNormEnd_.find(n.output(0));
  if (it == layerNormEnd_.end()) return n.op_type() == "ReduceMean" && matchLayerNorm(n);
  const DecomposedLayerNorm& ln = it->second;
  try {
    const std::vector<int64_t> d = dimsOf(ln.input);
    const int x = shaped(name + ".input", values_.at(ln.input), sampleShape(d));
    const int64_t w = b_.node(x).features();
    if (w != d.back()) throw SaveError("internal: a layer norm's width");
    auto vectorOf = [&](const std::vector<float>& v, float fallback) {
      std::vector<float> out(std::size_t(w), fallback);
      for (int64_t i = 0; i < w; ++i)
        if (!v.empty()) out[std::size_t(i)] = v[v.size() == 1 ? 0 : std::size_t(i)];
      return out;
    };
    params_[name + ".weight"] = tensorOf(vectorOf(ln.gamma, 1.0f), {w});
    params_[name + ".bias"] = tensorOf(vectorOf(ln.beta, 0.0f), {w});
    values_[n.output(0)] = b_.layerNorm(name, x, ln.eps);
    dims_[n.output(0)] = d;
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
  return true;
}

// ReduceMean(x, last axis) -> Sub(x, mean) -> Pow(., 2) -> ReduceMean(last axis) -> Add(eps) ->
// Sqrt -> Div(x - mean, .), then optionally Mul(gamma) and Add(beta) with constants of the last
// axis's width: torch's layer_norm at opset < 17, each value read only inside the chain. True (and
// the chain remembered) on a match. SAVE's LayerNorm computes (x - mean) * rsqrt(var + eps): its
// own fp32 arithmetic, bounded soundly; ONNX's quotient differs from it by rounding only.
bool Importer::matchLayerNorm(const onnx::NodeProto& mean) {
  auto only = [&](const std::string& v, const char* op) -> const onnx::NodeProto* {
    auto it = readers_.find(v);
    if (it == readers_.end() || it->second.size() != 1 || it->second[0]->op_type() != op || consumers_[v] != 1) return nullptr;
    return it->second[0];
  };
  auto lastAxis = [&](const onnx::NodeProto& r, const std::string& of) {
    if (r.input_size() != 1 || intAttr(r, "keepdims", 1) != 1 || !isActivation(of)) return false;
    const std::vector<int64_t> axes = intsAttr(r, "axes");
    const int64_t rank = int64_t(dimsOf(of).size());
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
  };
  auto scalar = [&](const onnx::NodeProto& n, const std::string& other, float& value) {
    if (n.input_size() != 2) return false;
    const std::string& c = n.input(0) == other ? n.input(1) : n.input(0);
    const Constant* k = constant(c);
    if (!k || !k->isFloat || k->values.size() != 1) return false;
    value = k->values[0];
    return true;
  };
  const std::string x = mean.input_size() == 1 ? mean.input(0) : std::string();
  if (x.empty() || !lastAxis(mean, x)) return false;
  const int64_t w = dimsOf(x).back();
  const onnx::NodeProto* sub = only(mean.output(0), "Sub");
  if (!sub || sub->input(0) != x || sub->input(1) != mean.output(0)) return false;
  const std::string d = sub->output(0);
  auto r = readers_.find(d);
  if (r == readers_.end() || r->second.size() != 2 || consumers_[d] != 2) return false;
  const onnx::NodeProto* pow = r->second[0]->op_type() == "Pow" ? r->second[0] : r->second[1];
  const onnx::NodeProto* div = r->second[0]->op_type() == "Div" ? r->second[0] : r->second[1];
  float two = 0, eps = 0;
  if (pow->op_type() != "Pow" || div->op_type() != "Div" || pow->input(0) != d || div->input(0) != d ||
      !scalar(*pow, d, two) || two != 2.0f)
    return false;
  const onnx::NodeProto* var = only(pow->output(0), "ReduceMean");
  if (!var || var->input(0) != pow->output(0)) return false;
  const std::vector<int64_t> axes = intsAttr(*var, "axes");
  if (intAttr(*var, "keepdims", 1) != 1 || axes.size() != 1 || !(axes[0] == -1 || axes[0] == int64_t(dimsOf(x).size()) - 1))
    return false;
  const onnx::NodeProto* add = only(var->output(0), "Add");
  if (!add || !scalar(*add, var->output(0), eps) || !(eps > 0)) return false;
  const onnx::NodeProto* sqrt = only(add->output(0), "Sqrt");
  if (!sqrt || only(sqrt->output(0), "Div") != div || div->input(1) != sqrt->output(0)) return false;
  DecomposedLayerNorm ln;
  ln.input = x;
  ln.eps = eps;
  std::string end = div->output(0);
  auto affine = [&](const char* op, std::vector<float>& into) {
    const onnx::NodeProto* next = only(end, op);
    if (!next || next->input_size() != 2) return;
    const std::string& other = next->input(0) == end ? next->input(1) : next->input(0);
    const Constant* c = constant(other);
    if (!c || !c->isFloat || (int64_t(c->values.size()) != w && c->values.size() != 1) ||
        countOf(c->dims) != int64_t(c->values.size()) || (c->values.size() != 1 && c->dims.back() != w))
      return;
    into = c->values;
    layerNormInside_.insert(end);
    end = next->output(0);
  };
  affine("Mul", ln.gamma);
  if (!ln.gamma.empty()) affine("Add", ln.beta);
  for (const std::string& v : {mean.output(0), d, pow->output(0), var->output(0), add->output(0), sqrt->output(0)})
    layerNormInside_.insert(v);
  if (end != div->output(0)) layerNormInside_.insert(div->output(0));
  layerNormInside_.erase(end);
  layerNormEnd_[end] = std::move(ln);
  return true;
}

// Pad with zeros: on the spatial axes only, the same on every side, and read by one Conv or
// AveragePool (an exporter's explicit padding before AveragePool): remembered, and folded into
// that op's own padding. Any other zero padding (a Swin window's) is a Select whose padding
// reads the constant 0.
void Importer::pad(const onnx::NodeProto& n) {
  if (n.input_size() == 0 || !isActivation(n.input(0))) return refuse(n, "its input is not computed from the model's input");
  const auto* mode = attribute(n, "mode");
  if (mode && mode->s() != "constant") return refuse(n, "only zero padding is mapped (mode " + mode->s() + ")");
  const std::vector<int64_t> d = dimsOf(n.input(0));
  const std::size_t rank = d.size();
  std::vector<int64_t> p;
  if (opset_ < 11) {
    p = intsAttr(n, "pads");
    if (floatAttr(n, "value", 0.0f) != 0.0f) return refuse(n, "padding with a value other than 0");
  } else {
    const Constant* pads = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
    if (!pads || pads->isFloat) return refuse(n, "its pads are not a constant");
    p = pads->integers;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const Constant* v = constant(n.input(2));
      if (!v || !v->isFloat || v->values.size() != 1 || v->values[0] != 0.0f) return refuse(n, "padding with a value other than 0");
    }
  }
  if (n.input_size() > 3 && !n.input(3).empty()) return refuse(n, "padding of chosen axes (opset 18) is not mapped");
  if (p.size() != 2 * rank) return refuse(n, "its pads do not match its input's rank");
  for (int64_t v : p)
    if (v < 0) return refuse(n, "negative padding (a crop) is not mapped");
  if (p[0] || p[rank]) return refuse(n, "padding of the batch axis");
  auto r = readers_.find(n.output(0));
  const bool spatial = rank == 4 && !p[1] && !p[5] && p[2] == p[3] && p[2] == p[6] && p[2] == p[7];
  const bool folds = spatial && consumers_[n.output(0)] == 1 && r != readers_.end() && r->second.size() == 1 &&
                     (r->second[0]->op_type() == "Conv" || r->second[0]->op_type() == "AveragePool");
  if (folds) {
    zeroPad_[n.output(0)] = {values_.at(n.input(0)), p[2]};
    return;
  }
  std::vector<int64_t> out(rank);
  for (std::size_t k = 0; k < rank; ++k) out[k] = d[k] + p[k] + p[k + rank];
  std::vector<int64_t> gather = axisWiseGather(d, out, [&](std::size_t k, int64_t c) { return c - p[k]; });
  try {
    const std::string name = nameOf(n);
    setActivation(n.output(0), name, gathered(name, values_.at(n.input(0)), sampleShape(out), std::move(gather)), out);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

// A Conv or AveragePool reading a zero Pad's output (see pad()): the padding added to its own.
void Importer::mapAfterZeroPad(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  const auto [x, extra] = zeroPad_.at(n.input(0));
  int out = -1;
  try {
    if (op == "Conv")
      out = conv(n, x, extra);
    else if (op == "AveragePool")
      out = avgPool(n, x, extra);
    else
      return refuse(n, "a zero Pad feeding " + op + " is not mapped (only Conv and AveragePool take one)");
  } catch (const SaveError& e) {
    return refuse(n, e.what());
  }
  if (out >= 0) values_[n.output(0)] = out;
}

// x + c into the bias of the bias-free linear layer (a MatMul) that computed `a`, where the Add is
// its one consumer and c has the layer's width: exporters write Linear as MatMul + Add.
bool Importer::foldIntoLinearBias(const onnx::NodeProto& n, const std::string& a, int x, const Constant& c,
                                  const std::vector<int64_t>& cdims) {
  const Node& xn = b_.node(x);
  auto folded = biasFree_.find(a);
  if (folded == biasFree_.end() || cdims.size() != 1 || cdims[0] != xn.features()) return false;
  Node& linear = g_.nodes[std::size_t(folded->second)];
  for (std::size_t j = 0; j < linear.bias.size(); ++j) linear.bias[j] += c.values[j];
  biasFree_.erase(folded);
  values_[n.output(0)] = x;
  return true;
}

// An attention mask's -inf (a causal mask): before a softmax, -1e30 gives the same exact zeros
// (exp of about -1e30 underflows to 0) and keeps every range finite; elsewhere it is refused.
// False where the node was refused.
bool Importer::maskInfinities(const onnx::NodeProto& n, std::vector<float>& expanded) {
  bool infinite = false;
  for (float& v : expanded)
    if (std::isinf(v)) {
      infinite = true;
      if (v > 0) {
        refuse(n, "a constant +inf is not mapped");
        return false;
      }
      v = -1e30f;
    } else if (std::isnan(v)) {
      refuse(n, "a NaN constant");
      return false;
    }
  if (infinite) {
    auto r = readers_.find(n.output(0));
    if (r == readers_.end() || r->second.size() != 1 || r->second[0]->op_type() != "Softmax" || consumers_[n.output(0)] != 1) {
      refuse(n, "a -inf constant that does not mask a softmax's input is not mapped");
      return false;
    }
  }
  return true;
}

}  // namespace peat::save::onnx_import
