// SPDX-License-Identifier: MIT
// Constant folding in the ONNX importer (shape arithmetic, masks, tokens): a node whose inputs are
// all constants is evaluated here, one helper per op family; element moves share their index
// arithmetic with the activations' (onnx_moves.cpp).
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <algorithm>
#include <cmath>

namespace peat::save::onnx_import {

namespace {

std::vector<double> numbers(const Constant& c) {
  return c.isFloat ? std::vector<double>(c.values.begin(), c.values.end())
                   : std::vector<double>(c.integers.begin(), c.integers.end());
}

Constant make(std::vector<int64_t> dims, const std::vector<double>& v, bool isFloat) {
  Constant c;
  c.dims = std::move(dims);
  c.isFloat = isFloat;
  (isFloat ? c.values.reserve(v.size()) : c.integers.reserve(v.size()));
  for (double x : v) {
    if (isFloat) c.values.push_back(float(x));
    else  // saturated: INT64_MAX and INT64_MIN (a slice's open ends) are not doubles
      c.integers.push_back(x >= 0x1p63 ? INT64_MAX : x <= -0x1p63 ? INT64_MIN : int64_t(x));
  }
  return c;
}

}  // namespace

std::vector<int64_t> Importer::ints(const onnx::NodeProto& n, int input) {
  const Constant* c = n.input_size() > input && !n.input(input).empty() ? constant(n.input(input)) : nullptr;
  if (!c) throw SaveError("input " + std::to_string(input) + " is not a constant");
  if (!c->isFloat) return c->integers;  // exactly: INT64_MAX (a slice to the end) does not survive a double
  std::vector<int64_t> out;
  for (double x : numbers(*c)) out.push_back(int64_t(x));
  return out;
}

// Evaluates a node whose inputs are all constants (false: not an op folded here). To fold a new
// op, add its row to `folders`; an op without one is tried as an element move (moveIndices).
bool Importer::fold(const onnx::NodeProto& n) {
  static const std::map<std::string, Folder> folders{
      {"Cast", &Importer::foldCast},
      {"Add", &Importer::foldElementwise},
      {"Sub", &Importer::foldElementwise},
      {"Mul", &Importer::foldElementwise},
      {"Div", &Importer::foldElementwise},
      {"Equal", &Importer::foldElementwise},
      {"Pow", &Importer::foldElementwise},
      {"Mod", &Importer::foldElementwise},
      {"Less", &Importer::foldElementwise},
      {"Greater", &Importer::foldElementwise},
      {"Sqrt", &Importer::foldUnary},
      {"Neg", &Importer::foldUnary},
      {"Not", &Importer::foldUnary},
      {"Where", &Importer::foldWhere},
      {"ConstantOfShape", &Importer::foldConstantOfShape},
      {"Range", &Importer::foldRange},
      {"ScatterND", &Importer::foldScatterND},
  };
  const std::string& op = n.op_type();
  std::vector<const Constant*> in;
  for (const auto& v : n.input()) in.push_back(v.empty() ? nullptr : constant(v));
  std::optional<Constant> folded;
  if (op == "Shape") {  // of an activation too
    folded = foldShape(n, in);
  } else {
    for (const Constant* c : in)
      if (!c && !(op == "Clip" || op == "Slice" || op == "Squeeze" || op == "Unsqueeze")) return false;
    if (in.empty() || !in[0]) return false;
    const auto it = folders.find(op);
    // a move of constants makes no more than what is left of the budget
    moveLimit_ = std::min(kMoveElements, std::max<int64_t>(foldBudget_ - folded_, 0));
    moveWhat_ = "a constant folded from " + op + " (" + std::to_string(folded_) + " elements folded already, " +
                std::to_string(foldBudget_) + " in all at most)";
    struct Restore {  // the activations' moves keep their own limit, however the fold ends
      Importer& i;
      ~Restore() { i.moveLimit_ = kMoveElements, i.moveWhat_ = "an element move"; }
    } restore{*this};
    folded = (this->*(it == folders.end() ? &Importer::foldMove : it->second))(n, in);
  }
  if (!folded) return false;
  folded_ += countOf(folded->dims);
  if (folded_ > foldBudget_)
    throw SaveError("constants folded at import of more than " + std::to_string(foldBudget_) +
                    " elements in all (" + std::to_string(kFoldTotal) +
                    " beyond the initializers' own), the most SAVE makes at import");
  constants_[n.output(0)] = std::move(*folded);
  return true;
}

std::optional<Constant> Importer::foldShape(const onnx::NodeProto& n, const std::vector<const Constant*>& in) {
  std::vector<int64_t> d = isActivation(n.input(0)) ? dimsOf(n.input(0)) : in[0] ? in[0]->dims : std::vector<int64_t>{};
  const int64_t r = int64_t(d.size());
  int64_t start = axisOf(intAttr(n, "start", 0), d.size()), end = attribute(n, "end") ? axisOf(intAttr(n, "end", r), d.size()) : r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  return make({end - start}, std::vector<double>(d.begin() + start, d.begin() + end), false);
}

std::optional<Constant> Importer::foldCast(const onnx::NodeProto& n, const std::vector<const Constant*>& in) {
  const Constant& a = *in[0];
  const int64_t to = intAttr(n, "to", 1);
  std::vector<double> v = numbers(a);
  if (to != onnx::TensorProto::FLOAT)
    for (double& x : v) x = std::trunc(x);
  return make(a.dims, v, to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE);
}

// Add, Sub, Mul, Div, Pow, Mod (fmod=0: the divisor's sign, as Python's %; fmod=1: C's fmod) and
// the comparisons Equal, Less, Greater, with numpy broadcasting.
std::optional<Constant> Importer::foldElementwise(const onnx::NodeProto& n, const std::vector<const Constant*>& in) {
  const std::string& op = n.op_type();
  if (in.size() != 2) return std::nullopt;
  const Constant& a = *in[0];
  const Constant& b = *in[1];
  std::vector<int64_t> dims;
  if (!broadcastDims(a.dims, b.dims, dims)) throw SaveError("constant operands that do not broadcast");
  boundedCount(dims, kFoldElements, "a folded " + op);
  const std::vector<double> av = numbers(a), bv = numbers(b);
  std::vector<double> out(std::size_t(countOf(dims)));
  const bool isFloat = a.isFloat || b.isFloat;
  for (int64_t e = 0; e < countOf(dims); ++e) {
    const std::vector<int64_t> c = coordOf(e, dims);
    const double x = av[std::size_t(broadcastIndex(a.dims, dims, c))], y = bv[std::size_t(broadcastIndex(b.dims, dims, c))];
    double r = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : op == "Pow" ? std::pow(x, y)
             : op == "Equal" ? double(x == y) : op == "Less" ? double(x < y) : op == "Greater" ? double(x > y)
             : isFloat ? x / y : std::trunc(x / y);
    if (op == "Div" && isFloat) r = double(float(x) / float(y));
    if (op == "Mod") {
      if (y == 0) throw SaveError("a constant modulo 0");
      r = std::fmod(x, y);
      if (intAttr(n, "fmod", 0) == 0 && r != 0 && (r < 0) != (y < 0)) r += y;
    }
    out[std::size_t(e)] = r;
  }
  const bool logical = op == "Equal" || op == "Less" || op == "Greater";
  return make(dims, out, isFloat && !logical);
}

// Sqrt, Neg and Not.
std::optional<Constant> Importer::foldUnary(const onnx::NodeProto& n, const std::vector<const Constant*>& in) {
  const std::string& op = n.op_type();
  const Constant& a = *in[0];
  std::vector<double> v = numbers(a);
  for (double& x : v) x = op == "Sqrt" ? double(std::sqrt(float(x))) : op == "Neg" ? -x : double(x == 0);
  return make(a.dims, v, a.isFloat && op != "Not");
}

std::optional<Constant> Importer::foldWhere(const onnx::NodeProto&, const std::vector<const Constant*>& in) {
  if (in.size() != 3) return std::nullopt;
  const Constant& a = *in[0];
  std::vector<int64_t> d1, dims;
  if (!broadcastDims(a.dims, in[1]->dims, d1) || !broadcastDims(d1, in[2]->dims, dims))
    throw SaveError("constant operands that do not broadcast");
  boundedCount(dims, kFoldElements, "a folded Where");
  const std::vector<double> av = numbers(a), x = numbers(*in[1]), y = numbers(*in[2]);
  std::vector<double> out(std::size_t(countOf(dims)));
  for (int64_t e = 0; e < countOf(dims); ++e) {
    const std::vector<int64_t> c = coordOf(e, dims);
    out[std::size_t(e)] = av[std::size_t(broadcastIndex(a.dims, dims, c))] != 0
                              ? x[std::size_t(broadcastIndex(in[1]->dims, dims, c))]
                              : y[std::size_t(broadcastIndex(in[2]->dims, dims, c))];
  }
  return make(dims, out, in[1]->isFloat || in[2]->isFloat);
}

std::optional<Constant> Importer::foldConstantOfShape(const onnx::NodeProto& n, const std::vector<const Constant*>& in) {
  std::vector<int64_t> dims;
  for (double x : numbers(*in[0])) dims.push_back(int64_t(x));
  double value = 0;
  bool isFloat = true;
  if (const auto* v = attribute(n, "value"); v && v->has_t()) {
    const Constant c = decode(v->t(), "constant");
    value = numbers(c).empty() ? 0.0 : numbers(c)[0];
    isFloat = c.isFloat;
  }
  return make(dims, std::vector<double>(std::size_t(boundedCount(dims, kFoldElements, "a ConstantOfShape")), value), isFloat);
}

std::optional<Constant> Importer::foldRange(const onnx::NodeProto&, const std::vector<const Constant*>& in) {
  const Constant& a = *in[0];
  const double start = numbers(a).at(0), limit = numbers(*in.at(1)).at(0), delta = numbers(*in.at(2)).at(0);
  if (delta == 0) throw SaveError("a range with step 0");
  const double count = std::ceil((limit - start) / delta);  // sized before anything is allocated
  if (!std::isfinite(count) || count > double(kFoldElements))
    throw SaveError("a Range of more than " + std::to_string(kFoldElements) + " elements, the most SAVE makes at import");
  std::vector<double> v;
  v.reserve(std::size_t(std::max(0.0, count)));
  for (double x = start; delta > 0 ? x < limit : x > limit; x += delta) v.push_back(x);
  return make({int64_t(v.size())}, v, a.isFloat);
}

// ScatterND without a reduction: a copy of the data with the updates written at the indices (a
// mask built by slice assignment, as Swin's attention mask).
std::optional<Constant> Importer::foldScatterND(const onnx::NodeProto& n, const std::vector<const Constant*>& in) {
  if (in.size() != 3 || !in[1] || !in[2]) return std::nullopt;
  if (const auto* r = attribute(n, "reduction"); r && r->s() != "none") throw SaveError("a ScatterND with a reduction");
  const Constant &data = *in[0], &idx = *in[1], &upd = *in[2];
  if (idx.isFloat || idx.dims.empty()) throw SaveError("ScatterND indices that are not integers");
  const std::size_t k = std::size_t(idx.dims.back());
  if (k > data.dims.size()) throw SaveError("ScatterND indices longer than the data's rank");
  const int64_t slice = countOf(std::vector<int64_t>(data.dims.begin() + long(k), data.dims.end()));
  const int64_t count = k ? countOf(idx.dims) / int64_t(k) : 0;
  std::vector<double> out = numbers(data);
  const std::vector<double> u = numbers(upd);
  if (int64_t(u.size()) != count * slice) throw SaveError("ScatterND updates of the wrong size");
  const std::vector<int64_t> st = stridesOf(data.dims);
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = 0;
    for (std::size_t j = 0; j < k; ++j) {
      int64_t v = idx.integers[std::size_t(i) * k + j];
      if (v < 0) v += data.dims[j];
      if (v < 0 || v >= data.dims[j]) throw SaveError("a ScatterND index out of range");
      at += v * st[j];
    }
    for (int64_t e = 0; e < slice; ++e) out[std::size_t(at + e)] = u[std::size_t(i * slice + e)];
  }
  return make(data.dims, out, data.isFloat);
}

// Element moves: the same index arithmetic as for activations (see move()); a Concat's other
// constants placed beside the first.
std::optional<Constant> Importer::foldMove(const onnx::NodeProto& n, const std::vector<const Constant*>& in) {
  const Constant& a = *in[0];
  const std::vector<double> av = numbers(a);
  std::vector<int64_t> dims;
  std::vector<int64_t> gather;
  if (!moveIndices(n, a.dims, dims, gather)) return std::nullopt;
  std::vector<double> v(gather.size());
  for (std::size_t i = 0; i < gather.size(); ++i) v[i] = gather[i] < 0 ? 0.0 : av[std::size_t(gather[i])];
  Constant c = make(dims, v, a.isFloat);
  if (!a.isFloat)  // integers exactly
    for (std::size_t i = 0; i < gather.size(); ++i) c.integers[i] = gather[i] < 0 ? 0 : a.integers[std::size_t(gather[i])];
  if (n.op_type() == "Concat") {  // the other constants' elements
    int64_t offset = 0;
    const int64_t axis = axisOf(intAttr(n, "axis", 0), a.dims.size());
    for (const Constant* part : in) {
      const std::vector<double> pv = numbers(*part);
      for (int64_t e = 0; e < countOf(part->dims); ++e) {
        std::vector<int64_t> coord = coordOf(e, part->dims);
        coord[std::size_t(axis)] += offset;
        int64_t at = 0;
        for (std::size_t k = 0; k < coord.size(); ++k) at = at * dims[k] + coord[k];
        if (c.isFloat) c.values[std::size_t(at)] = float(pv[std::size_t(e)]);
        else c.integers[std::size_t(at)] = part->isFloat ? int64_t(pv[std::size_t(e)]) : part->integers[std::size_t(e)];
      }
      offset += part->dims[std::size_t(axis)];
    }
  }
  return c;
}

}  // namespace peat::save::onnx_import
