// SPDX-License-Identifier: MIT
// Ops that move elements in the ONNX importer: for each, the output dims and the input element
// each output element takes (one index map, shared by constant folding and by activations, where
// it becomes a view or a Select), and the mapping of Reshape ... Concat and Split onto SAVE.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

namespace peat::save::onnx_import {

namespace {

// Every output element takes the input element at its own flat index (a view).
void identityGather(const std::vector<int64_t>& out, std::vector<int64_t>& gather, int64_t limit, const std::string& what) {
  gather.resize(std::size_t(boundedCount(out, limit, what)));
  for (std::size_t i = 0; i < gather.size(); ++i) gather[i] = int64_t(i);
}

}  // namespace

// The output dims of an op that moves the elements of its first input (of dims `d`) and, for
// each output element, the input element it takes (-1: none, a zero or another Concat input).
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Gather (constant indices), Expand,
// Concat (the first input's part). False for other ops.
// To move elements with a new op, add its row to `maps` (and to the operator table in onnx_map.cpp).
bool Importer::moveIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                           std::vector<int64_t>& gather) {
  static const std::map<std::string, IndexMap> maps{
      {"Reshape", &Importer::reshapeIndices},     {"Flatten", &Importer::flattenIndices},
      {"Squeeze", &Importer::squeezeIndices},     {"Unsqueeze", &Importer::squeezeIndices},
      {"Transpose", &Importer::transposeIndices}, {"Slice", &Importer::sliceIndices},
      {"Gather", &Importer::gatherIndices},       {"Expand", &Importer::expandIndices},
      {"Concat", &Importer::concatIndices},
  };
  const auto it = maps.find(n.op_type());
  if (it == maps.end()) return false;
  (this->*it->second)(n, d, out, gather);
  return true;
}

void Importer::reshapeIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                              std::vector<int64_t>& gather) {
  const std::size_t rank = d.size();
  const std::vector<int64_t> target = ints(n, 1);
  const bool allowZero = intAttr(n, "allowzero", 0) != 0;
  out.clear();
  int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    int64_t t = target[i];
    if (t == 0 && !allowZero) {
      if (i >= rank) throw SaveError("a reshape copies a dimension its input lacks");
      t = d[i];
    }
    if (t == -1) {
      if (infer >= 0) throw SaveError("a reshape with two inferred dimensions");
      infer = int64_t(i);
      out.push_back(1);
      continue;
    }
    if (t < 0) throw SaveError("a reshape to a negative dimension");
    known *= t;
    out.push_back(t);
  }
  if (infer >= 0) {
    if (known == 0 || countOf(d) % known) throw SaveError("a reshape whose inferred dimension does not divide");
    out[std::size_t(infer)] = countOf(d) / known;
  }
  if (countOf(out) != countOf(d)) {
    std::string from, to;
    for (int64_t v : d) from += (from.empty() ? "" : "x") + std::to_string(v);
    for (int64_t v : target) to += (to.empty() ? "" : ",") + std::to_string(v);
    throw SaveError("a reshape of " + from + " (one sample) to [" + to + "] changes the element count");
  }
  identityGather(out, gather, moveLimit_, moveWhat_);
}

void Importer::flattenIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                              std::vector<int64_t>& gather) {
  const std::size_t rank = d.size();
  const int64_t axis = axisOf(intAttr(n, "axis", 1), rank);
  int64_t left = 1;
  for (int64_t i = 0; i < axis; ++i) left *= d[std::size_t(i)];
  out = {left, countOf(d) / std::max<int64_t>(left, 1)};
  identityGather(out, gather, moveLimit_, moveWhat_);
}

void Importer::squeezeIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                              std::vector<int64_t>& gather) {
  const std::string& op = n.op_type();
  const std::size_t rank = d.size();
  std::vector<int64_t> axes = n.input_size() > 1 ? ints(n, 1) : intsAttr(n, "axes");
  out = d;
  if (op == "Squeeze") {
    std::set<int64_t> drop;
    for (int64_t a : axes) drop.insert(axisOf(a, rank));
    out.clear();
    for (std::size_t i = 0; i < rank; ++i)
      if (!(drop.count(int64_t(i)) || (axes.empty() && d[i] == 1))) out.push_back(d[i]);
      else if (d[i] != 1) throw SaveError("a squeeze of a dimension that is not 1");
  } else {
    const std::size_t r = rank + axes.size();
    std::set<int64_t> add;
    for (int64_t a : axes) add.insert(axisOf(a, r));
    out.clear();
    std::size_t k = 0;
    for (std::size_t i = 0; i < r; ++i) out.push_back(add.count(int64_t(i)) ? 1 : d.at(k++));
  }
  identityGather(out, gather, moveLimit_, moveWhat_);
}

void Importer::transposeIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                                std::vector<int64_t>& gather) {
  const std::size_t rank = d.size();
  std::vector<int64_t> perm = intsAttr(n, "perm");
  if (perm.empty())
    for (std::size_t i = rank; i-- > 0;) perm.push_back(int64_t(i));
  if (perm.size() != rank) throw SaveError("a permutation of the wrong rank");
  out.clear();
  for (int64_t p : perm) out.push_back(d.at(std::size_t(p)));
  const std::vector<int64_t> st = stridesOf(d);
  gather.resize(std::size_t(boundedCount(out, moveLimit_, moveWhat_)));
  for (int64_t e = 0; e < countOf(out); ++e) {
    const std::vector<int64_t> c = coordOf(e, out);
    int64_t at = 0;
    for (std::size_t k = 0; k < rank; ++k) at += c[k] * st[std::size_t(perm[k])];
    gather[std::size_t(e)] = at;
  }
}

void Importer::sliceIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                            std::vector<int64_t>& gather) {
  const std::size_t rank = d.size();
  const std::vector<int64_t> starts = ints(n, 1), ends = ints(n, 2);
  std::vector<int64_t> axes = n.input_size() > 3 && !n.input(3).empty() ? ints(n, 3) : std::vector<int64_t>{};
  std::vector<int64_t> steps = n.input_size() > 4 && !n.input(4).empty() ? ints(n, 4) : std::vector<int64_t>{};
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  std::vector<int64_t> first(rank, 0), step(rank, 1);
  out = d;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t ax = std::size_t(axisOf(axes.at(i), rank));
    const int64_t dim = d.at(ax), st = steps.at(i);
    if (st == 0) throw SaveError("a slice with step 0");
    // ONNX's clamping: [0, dim] going forward, [-1, dim - 1] going backward (a reversal)
    const int64_t s0 = starts[i], e0 = ends.at(i);
    int64_t b = s0 < 0 ? (s0 < -dim ? 0 : s0 + dim) : s0, e = e0 < 0 ? (e0 < -dim ? -1 : e0 + dim) : e0;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out[ax] = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out[ax] = b > e ? (b - e - st - 1) / -st : 0;
    }
    first[ax] = b;
    step[ax] = st;
  }
  const std::vector<int64_t> sd = stridesOf(d);
  gather.resize(std::size_t(boundedCount(out, moveLimit_, moveWhat_)));
  for (int64_t e = 0; e < countOf(out); ++e) {
    const std::vector<int64_t> c = coordOf(e, out);
    int64_t at = 0;
    for (std::size_t k = 0; k < rank; ++k) at += (first[k] + c[k] * step[k]) * sd[k];
    gather[std::size_t(e)] = at;
  }
}

void Importer::gatherIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                             std::vector<int64_t>& gather) {
  const std::size_t rank = d.size();
  const Constant* idx = constant(n.input(1));
  if (!idx || idx->isFloat) throw SaveError("only gathers at constant indices are mapped");
  const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), rank));
  out.clear();
  out.insert(out.end(), d.begin(), d.begin() + long(ax));
  out.insert(out.end(), idx->dims.begin(), idx->dims.end());
  out.insert(out.end(), d.begin() + long(ax) + 1, d.end());
  const std::vector<int64_t> sd = stridesOf(d);
  gather.resize(std::size_t(boundedCount(out, moveLimit_, moveWhat_)));
  const std::size_t ir = idx->dims.size();
  for (int64_t e = 0; e < countOf(out); ++e) {
    const std::vector<int64_t> c = coordOf(e, out);
    int64_t flatIdx = 0;
    for (std::size_t k = 0; k < ir; ++k) flatIdx = flatIdx * idx->dims[k] + c[ax + k];
    int64_t j = idx->integers.at(std::size_t(flatIdx));
    if (j < 0) j += d[ax];
    if (j < 0 || j >= d[ax]) throw SaveError("a gather index out of range");
    int64_t at = j * sd[ax];
    for (std::size_t k = 0; k < ax; ++k) at += c[k] * sd[k];
    for (std::size_t k = ax + 1; k < rank; ++k) at += c[k + ir - 1] * sd[k];
    gather[std::size_t(e)] = at;
  }
}

void Importer::expandIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                             std::vector<int64_t>& gather) {
  std::vector<int64_t> shape = ints(n, 1);
  if (!broadcastDims(d, shape, out)) throw SaveError("an expand that does not broadcast");
  gather.resize(std::size_t(boundedCount(out, moveLimit_, moveWhat_)));
  for (int64_t e = 0; e < countOf(out); ++e) gather[std::size_t(e)] = broadcastIndex(d, out, coordOf(e, out));
}

void Importer::concatIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                             std::vector<int64_t>& gather) {
  const std::size_t rank = d.size();
  const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), rank));
  out = d;
  out[ax] = 0;
  int64_t offset = -1;
  for (int i = 0; i < n.input_size(); ++i) {
    const std::vector<int64_t> pd = isActivation(n.input(i)) ? dimsOf(n.input(i)) : constant(n.input(i))->dims;
    if (pd.size() != rank) throw SaveError("concatenated tensors of different ranks");
    for (std::size_t k = 0; k < rank; ++k)
      if (k != ax && pd[k] != d[k]) throw SaveError("concatenated tensors of different shapes");
    if (i == concatPart_) offset = out[ax];
    out[ax] += pd[ax];
  }
  const std::vector<int64_t> sd = stridesOf(d);
  gather.assign(std::size_t(boundedCount(out, moveLimit_, moveWhat_)), -1);
  for (int64_t e = 0; e < countOf(out); ++e) {
    const std::vector<int64_t> c = coordOf(e, out);
    if (c[ax] < offset || c[ax] >= offset + d[ax]) continue;
    int64_t at = 0;
    for (std::size_t k = 0; k < rank; ++k) at += (k == ax ? c[k] - offset : c[k]) * sd[k];
    gather[std::size_t(e)] = at;
  }
}

// Reshape, Flatten, Squeeze, Unsqueeze (views), Transpose, Slice, Gather, Expand and Concat (a
// Select over the computed inputs; a Concat's constant parts added after it).
void Importer::move(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Gather" && n.input_size() == 2 && !isActivation(n.input(0)) && isActivation(n.input(1)))
    return embedding(n);
  int part = -1, parts = 0;
  for (int i = 0; i < n.input_size(); ++i)
    if (isActivation(n.input(i))) {
      if (part < 0) part = i;
      ++parts;
      if (op != "Concat") break;
    }
  if (part < 0 || (part != 0 && op != "Concat")) return refuse(n, "its data input is not computed from the model's input");
  if (op == "Concat")
    for (int i = 0; i < n.input_size(); ++i) {
      const Constant* c = isActivation(n.input(i)) ? nullptr : constant(n.input(i));
      if (!isActivation(n.input(i)) && (!c || !c->isFloat)) return refuse(n, "a concatenated constant that is not float32");
    }
  if (parts > 1) return concatActivations(n);
  concatPart_ = part;
  const std::string name = nameOf(n);
  std::vector<int64_t> out, gather;
  try {
    if (!moveIndices(n, dimsOf(n.input(part)), out, gather)) return refuse(n, "internal: no index map");
    const int x = values_.at(n.input(part));
    int v = gathered(name, x, sampleShape(out), gather);  // a view where no data moves
    if (op == "Concat") v = concatConstants(n, part, v, out);
    setActivation(n.output(0), name, v, out);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

// A Gather of a constant table by computed indices: a lookup of the model's token ids (checked by
// tokenInput), SAVE's Embed; indices computed any other way are data-dependent moves SAVE refuses.
void Importer::embedding(const onnx::NodeProto& n) {
  if (!tokenInputs_.count(n.input(1)))
    return refuse(n, "its indices are computed from the model's input (a data-dependent gather)");
  const Constant* table = constant(n.input(0));  // a float32 [rows, features] initializer (tokenInput)
  const int64_t rows = table->dims[0], features = table->dims[1];
  const std::string name = nameOf(n);
  try {
    params_[name + ".weight"] = tensorOf(table->values, table->dims);
    const int v = b_.embed(name, values_.at(n.input(1)), rows, features);
    std::vector<int64_t> out = dimsOf(n.input(1));
    out.push_back(features);
    setActivation(n.output(0), name, v, out);
    if (g_.inputs.size() <= 1) {
      g_.tokens = g_.tokens == 0 ? rows : std::min(g_.tokens, rows);  // ids that every table holds
    } else {  // one input of several: its part of node 0 holds ids
      for (InputPart& p : g_.inputs)
        if (p.name == n.input(1)) p.tokens = p.tokens == 0 ? rows : std::min(p.tokens, rows);
    }
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

// A Concat of several computed tensors (DenseNet's dense blocks, ShuffleNet's channel halves,
// Inception's branches, a roll's two slices): one Select over their sources, each output element
// traced back through the views and Selects before it; constant parts added after it.
void Importer::concatActivations(const onnx::NodeProto& n) {
  try {
    std::vector<std::vector<int64_t>> dims;
    int any = -1;  // a computed input, for a Select that reads nothing
    for (int i = 0; i < n.input_size(); ++i) {
      dims.push_back(isActivation(n.input(i)) ? dimsOf(n.input(i)) : constant(n.input(i))->dims);
      if (any < 0 && isActivation(n.input(i))) any = values_.at(n.input(i));
    }
    const std::size_t rank = dims[0].size();
    const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), rank));
    if (ax >= rank) return refuse(n, "a concatenation axis out of range");
    if (ax == 0 && dims[0][0] == 1) return refuse(n, "a concatenation along the batch axis (SAVE runs one sample at a time)");
    std::vector<int64_t> out = dims[0], start;
    out[ax] = 0;
    for (const auto& d : dims) {
      if (d.size() != rank) return refuse(n, "concatenated tensors of different ranks");
      for (std::size_t k = 0; k < rank; ++k)
        if (k != ax && d[k] != out[k]) return refuse(n, "concatenated tensors of different shapes");
      start.push_back(out[ax]);
      out[ax] += d[ax];
    }
    std::vector<std::pair<int, int64_t>> from(std::size_t(countOf(out)), {-1, -1});
    bool constants = false;
    for (int64_t e = 0; e < countOf(out); ++e) {
      std::vector<int64_t> c = coordOf(e, out);
      std::size_t i = 0;
      while (i + 1 < dims.size() && c[ax] >= start[i + 1]) ++i;
      if (!isActivation(n.input(int(i)))) {
        constants = true;
        continue;
      }
      c[ax] -= start[i];
      int64_t at = 0;
      for (std::size_t k = 0; k < rank; ++k) at = at * dims[i][k] + c[k];
      from[std::size_t(e)] = traced(values_.at(n.input(int(i))), at);
    }
    const std::string name = nameOf(n);
    int v = selectOf(name, any, sampleShape(out), from);
    if (constants) v = concatConstants(n, -1, v, out);
    setActivation(n.output(0), name, v, out);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

// A Concat's constant parts, added where the Select over its computed parts (`part`, or all of
// them: -1) left zeros.
int Importer::concatConstants(const onnx::NodeProto& n, int part, int v, const std::vector<int64_t>& out) {
  const std::string name = nameOf(n);
  const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), out.size()));
  std::vector<float> fill(std::size_t(countOf(out)), 0.0f);
  int64_t offset = 0;
  for (int i = 0; i < n.input_size(); ++i) {
    const bool computed = part < 0 ? isActivation(n.input(i)) : i == part;
    const std::vector<int64_t> pd = computed ? dimsOf(n.input(i)) : constant(n.input(i))->dims;
    if (!computed) {
      const Constant& c = *constant(n.input(i));
      for (int64_t e = 0; e < countOf(pd); ++e) {
        std::vector<int64_t> coord = coordOf(e, pd);
        coord[ax] += offset;
        int64_t at = 0;
        for (std::size_t k = 0; k < coord.size(); ++k) at = at * out[k] + coord[k];
        fill[std::size_t(at)] = c.values[std::size_t(e)];
      }
    }
    offset += pd[ax];
  }
  params_[name + ".constant"] = tensorOf(fill, sampleShape(out));
  return b_.addConst(name + ".constant", v, name + ".constant");
}

// Split along an axis into parts given by input 1, the `split` attribute or equal shares.
void Importer::split(const onnx::NodeProto& n) {
  if (!isActivation(n.input(0))) return refuse(n, "its input is not computed from the model's input");
  try {
    const std::vector<int64_t> d = dimsOf(n.input(0));
    const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), d.size()));
    std::vector<int64_t> parts = n.input_size() > 1 && !n.input(1).empty() ? ints(n, 1) : intsAttr(n, "split");
    if (parts.empty()) {
      if (d[ax] % n.output_size()) return refuse(n, "a split into unequal parts without sizes");
      parts.assign(std::size_t(n.output_size()), d[ax] / n.output_size());
    }
    if (int(parts.size()) != n.output_size()) return refuse(n, "split sizes that do not match its outputs");
    const int x = values_.at(n.input(0));
    const std::vector<int64_t> sd = stridesOf(d);
    int64_t offset = 0;
    for (int k = 0; k < n.output_size(); ++k) {
      std::vector<int64_t> out = d;
      out[ax] = parts[std::size_t(k)];
      std::vector<int64_t> gather(std::size_t(countOf(out)));
      for (int64_t e = 0; e < countOf(out); ++e) {
        const std::vector<int64_t> c = coordOf(e, out);
        int64_t at = 0;
        for (std::size_t j = 0; j < d.size(); ++j) at += (j == ax ? c[j] + offset : c[j]) * sd[j];
        gather[std::size_t(e)] = at;
      }
      offset += parts[std::size_t(k)];
      const std::string name = nameOf(n) + "." + std::to_string(k);
      setActivation(n.output(k), name, gathered(name, x, sampleShape(out), gather), out);
    }
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

}  // namespace peat::save::onnx_import
