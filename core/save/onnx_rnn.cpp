// SPDX-License-Identifier: MIT
// ONNX's RNN, GRU and LSTM unrolled over their (fixed) sequence onto SAVE's existing ops: the
// input projection of every step as one token-wise linear layer, then per step the recurrent
// linear layer, the gates (Sigmoid, Tanh, element-wise Mul and Add, an affine for 1 - z) and the
// state; each op has a sound transfer function, so the bounds stay sound. Gate order and
// equations as ONNX defines them (LSTM: i, o, f, c; GRU: z, r, h, with linear_before_reset either
// way); forward, reverse and bidirectional; initial states from constants.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <algorithm>

namespace peat::save::onnx_import {

void Importer::mapRecurrent(const onnx::NodeProto& n) {
  const std::string name = nameOf(n), op = n.op_type();
  const bool lstm = op == "LSTM", gru = op == "GRU";
  const int gates = lstm ? 4 : gru ? 3 : 1;
  const auto input = [&](int i) -> const std::string* {
    return n.input_size() > i && !n.input(i).empty() ? &n.input(i) : nullptr;
  };
  const int64_t layout = intAttr(n, "layout", 0);
  const std::vector<int64_t> dx = dimsOf(n.input(0));
  if (dx.size() != 3 || (layout != 0 && layout != 1)) return refuse(n, "its input is not [seq, batch, input] (layout 0 or 1)");
  const int64_t seq = layout == 0 ? dx[0] : dx[1], batch = layout == 0 ? dx[1] : dx[0], in = dx[2];
  if (batch != 1) return refuse(n, "a batch inside one sample is not mapped (SAVE runs one sample at a time)");
  const Constant* w = constant(n.input(1));
  const Constant* r = n.input_size() > 2 ? constant(n.input(2)) : nullptr;
  if (!w || !r || !w->isFloat || !r->isFloat || w->dims.size() != 3 || r->dims.size() != 3)
    return refuse(n, "its weights W and R are not float32 initializers");
  const int64_t dirs = w->dims[0], hidden = intAttr(n, "hidden_size", r->dims[2]);
  const std::string direction = attribute(n, "direction") ? attribute(n, "direction")->s() : "forward";
  if ((direction == "bidirectional") != (dirs == 2) || (direction != "forward" && direction != "reverse" && dirs == 1))
    return refuse(n, "direction '" + direction + "' does not fit its weights");
  if (w->dims[1] != gates * hidden || w->dims[2] != in || r->dims[0] != dirs || r->dims[1] != gates * hidden ||
      r->dims[2] != hidden)
    return refuse(n, "its weights do not fit its input and hidden size");
  const Constant* b = input(3) ? constant(*input(3)) : nullptr;
  if (input(3) && (!b || !b->isFloat || int64_t(b->values.size()) != dirs * 2 * gates * hidden))
    return refuse(n, "its bias B is not a float32 initializer [dirs, 2 x gates x hidden]");
  if (const std::string* lens = input(4)) {
    const Constant* c = constant(*lens);
    if (!c) return refuse(n, "its sequence_lens is not a constant");
    for (int64_t v : c->integers)
      if (v != seq) return refuse(n, "sequence_lens shorter than the sequence (padded batches) are not mapped");
  }
  const auto state = [&](int i, const char* what, std::vector<float>& into) -> bool {
    into.assign(std::size_t(dirs * hidden), 0.0f);
    if (!input(i)) return true;
    const Constant* c = constant(*input(i));
    // one state per direction; a model traced at a fixed batch of N read as a batch holds N equal
    // copies ([dirs, N, hidden], zeros as PyTorch writes them): one sample's is the first
    const int64_t copies = c && c->isFloat && dirs * hidden > 0 ? int64_t(c->values.size()) / (dirs * hidden) : 0;
    bool equal = copies >= 1 && int64_t(c->values.size()) == copies * dirs * hidden &&
                 (copies == 1 || copies == fixedBatch_);
    for (int64_t d = 0; equal && d < dirs; ++d)
      for (int64_t k = 1; equal && k < copies; ++k)
        equal = std::equal(c->values.begin() + (d * copies + k) * hidden, c->values.begin() + (d * copies + k + 1) * hidden,
                           c->values.begin() + d * copies * hidden);
    if (!equal) {
      refuse(n, std::string("its ") + what + " is not a float32 constant [dirs, 1, hidden]");
      return false;
    }
    into.clear();
    for (int64_t d = 0; d < dirs; ++d)
      into.insert(into.end(), c->values.begin() + d * copies * hidden, c->values.begin() + (d * copies + 1) * hidden);
    return true;
  };
  std::vector<float> h0, c0;
  if (!state(5, "initial_h", h0) || (lstm && !state(6, "initial_c", c0))) return;
  if (lstm && input(7)) return refuse(n, "peephole weights (P) are not mapped");
  if (attribute(n, "clip")) return refuse(n, "clip is not mapped");
  if (intAttr(n, "input_forget", 0) != 0) return refuse(n, "input_forget=1 is not mapped");
  if (attribute(n, "activation_alpha") || attribute(n, "activation_beta"))
    return refuse(n, "activation_alpha and activation_beta are not mapped");
  std::vector<std::string> acts;
  if (const auto* a = attribute(n, "activations"))
    for (const auto& s : a->strings()) acts.push_back(s);
  const std::vector<std::string> standard = lstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                           : gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                 : std::vector<std::string>{"Tanh"};
  Op rnnAct = Op::Tanh;
  if (!acts.empty()) {
    for (std::size_t i = 0; i < acts.size(); ++i) {
      const std::string& want = standard[i % standard.size()];
      if (!lstm && !gru && (acts[i] == "Relu" || acts[i] == "Tanh" || acts[i] == "Sigmoid")) {
        if (i > 0 && acts[i] != acts[0]) return refuse(n, "different activations per direction are not mapped");
        rnnAct = acts[i] == "Relu" ? Op::Relu : acts[i] == "Sigmoid" ? Op::Sigmoid : Op::Tanh;
      } else if (acts[i] != want) {
        return refuse(n, "activation '" + acts[i] + "' where ONNX's default is " + want + " is not mapped");
      }
    }
  }
  const bool beforeReset = intAttr(n, "linear_before_reset", 0) != 0;

  const auto slice = [&](const std::string& tag, int v, int64_t start, int64_t len) {
    std::vector<std::pair<int, int64_t>> from;
    for (int64_t j = 0; j < len; ++j) from.push_back({v, start + j});
    return selectOf(name + tag, v, {len}, from);
  };
  const auto constantLike = [&](const std::string& tag, int v, const float* values) {  // a constant [hidden] node
    const int base = slice(tag + ".base", v, 0, hidden);
    return b_.affine(name + tag, base, std::vector<float>(std::size_t(hidden), 0.0f),
                     std::vector<float>(values, values + hidden));
  };
  const auto linear = [&](const std::string& lname, int x, const float* weight, int64_t rows, int64_t cols,
                          const std::vector<float>& bias) {
    params_[lname + ".weight"] = tensorOf(std::vector<float>(weight, weight + rows * cols), {rows, cols});
    params_[lname + ".bias"] = tensorOf(bias, {rows});
    return b_.linear(lname, x, rows);
  };
  const int xs = shaped(name + ".x", first(n), seq == 1 ? std::vector<int64_t>{in} : std::vector<int64_t>{seq, in});
  std::vector<std::vector<int>> hs(std::size_t(dirs), std::vector<int>(std::size_t(seq), -1));
  std::vector<int> lastH(static_cast<std::size_t>(dirs), -1), lastC(static_cast<std::size_t>(dirs), -1);
  const int64_t gh = gates * hidden;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const std::string dn = ".d" + std::to_string(d);
    const float* bw = b ? b->values.data() + d * 2 * gh : nullptr;  // Wb, then Rb
    // the input projection: Wb, and Rb where it adds outside a product (GRU's h gate before reset)
    std::vector<float> xBias(std::size_t(gh), 0.0f), hBias(std::size_t(gh), 0.0f);
    for (int64_t j = 0; j < gh && bw; ++j) {
      const bool inside = gru && j >= 2 * hidden && beforeReset;  // Rbh multiplies with r
      xBias[std::size_t(j)] = bw[j] + (inside ? 0.0f : bw[gh + j]);
      hBias[std::size_t(j)] = inside ? bw[gh + j] : 0.0f;
    }
    const int gx = linear(name + dn + ".input", xs, w->values.data() + d * gh * in, gh, in, xBias);
    const float* rw = r->values.data() + d * gh * hidden;
    int h = constantLike(dn + ".h0", gx, h0.data() + d * hidden);
    int c = lstm ? constantLike(dn + ".c0", gx, c0.data() + d * hidden) : -1;
    for (int64_t k = 0; k < seq; ++k) {
      const int64_t t = reverse ? seq - 1 - k : k;
      const std::string sn = dn + ".t" + std::to_string(t);
      const int xt = seq == 1 ? gx : slice(sn + ".xt", gx, t * gh, gh);
      if (lstm) {
        const int g = b_.addNodes(name + sn + ".gates", xt, linear(name + sn + ".recurrent", h, rw, gh, hidden, hBias));
        const int i = b_.unary(Op::Sigmoid, name + sn + ".i", slice(sn + ".gi", g, 0, hidden));
        const int o = b_.unary(Op::Sigmoid, name + sn + ".o", slice(sn + ".go", g, hidden, hidden));
        const int f = b_.unary(Op::Sigmoid, name + sn + ".f", slice(sn + ".gf", g, 2 * hidden, hidden));
        const int cc = b_.unary(Op::Tanh, name + sn + ".cand", slice(sn + ".gc", g, 3 * hidden, hidden));
        c = b_.addNodes(name + sn + ".c", b_.mul(name + sn + ".fc", f, c), b_.mul(name + sn + ".ic", i, cc));
        h = b_.mul(name + sn + ".h", o, b_.unary(Op::Tanh, name + sn + ".tanh_c", c));
      } else if (gru) {
        // z and r from x and h; the candidate from x and r with h (linear_before_reset: r times
        // (Rh h + Rbh); else Rh (r h))
        const int zr = linear(name + sn + ".recurrent", h, rw, beforeReset ? gh : 2 * hidden, hidden,
                              std::vector<float>(hBias.begin(), hBias.begin() + (beforeReset ? gh : 2 * hidden)));
        const int z = b_.unary(Op::Sigmoid, name + sn + ".z",
                               b_.addNodes(name + sn + ".gz", slice(sn + ".xz", xt, 0, hidden), slice(sn + ".hz", zr, 0, hidden)));
        const int rg = b_.unary(Op::Sigmoid, name + sn + ".r",
                                b_.addNodes(name + sn + ".gr", slice(sn + ".xr", xt, hidden, hidden),
                                            slice(sn + ".hr", zr, hidden, hidden)));
        const int reset = beforeReset
                              ? b_.mul(name + sn + ".rh", rg, slice(sn + ".hh", zr, 2 * hidden, hidden))
                              : linear(name + sn + ".recurrent_h", b_.mul(name + sn + ".rh", rg, h), rw + 2 * hidden * hidden,
                                       hidden, hidden, std::vector<float>(std::size_t(hidden), 0.0f));
        const int cand = b_.unary(Op::Tanh, name + sn + ".cand",
                                  b_.addNodes(name + sn + ".gh", slice(sn + ".xh", xt, 2 * hidden, hidden), reset));
        // h = cand + z (h - cand)
        const int minus = b_.affine(name + sn + ".neg", cand, std::vector<float>(std::size_t(hidden), -1.0f),
                                    std::vector<float>(std::size_t(hidden), 0.0f));
        h = b_.addNodes(name + sn + ".h", cand, b_.mul(name + sn + ".zd", z, b_.addNodes(name + sn + ".d", h, minus)));
      } else {
        h = b_.unary(rnnAct, name + sn + ".h",
                     b_.addNodes(name + sn + ".gates", xt, linear(name + sn + ".recurrent", h, rw, gh, hidden, hBias)));
      }
      hs[std::size_t(d)][std::size_t(t)] = h;
    }
    lastH[std::size_t(d)] = h;
    lastC[std::size_t(d)] = c;
  }
  // Y: [seq, dirs, 1, hidden] (layout 1: [1, seq, dirs, hidden]); Y_h, Y_c: [dirs, 1, hidden] ([1, dirs, hidden])
  std::vector<std::pair<int, int64_t>> y, yh, yc;
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t j = 0; j < hidden; ++j) y.push_back({hs[std::size_t(d)][std::size_t(t)], j});
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t j = 0; j < hidden; ++j) {
      yh.push_back({lastH[std::size_t(d)], j});
      if (lstm) yc.push_back({lastC[std::size_t(d)], j});
    }
  const auto output = [&](int i, const std::vector<std::pair<int, int64_t>>& from, std::vector<int64_t> dims) {
    if (n.output_size() <= i || n.output(i).empty()) return;
    const std::string tag = i == 0 ? ".y" : i == 1 ? ".y_h" : ".y_c";
    const std::vector<int64_t> sample = sampleShape(dims);
    values_[n.output(i)] = selectOf(name + tag, from.front().first, sample, from);
    dims_[n.output(i)] = dims;
  };
  output(0, y, layout == 0 ? std::vector<int64_t>{seq, dirs, 1, hidden} : std::vector<int64_t>{1, seq, dirs, hidden});
  output(1, yh, layout == 0 ? std::vector<int64_t>{dirs, 1, hidden} : std::vector<int64_t>{1, dirs, hidden});
  if (lstm) output(2, yc, layout == 0 ? std::vector<int64_t>{dirs, 1, hidden} : std::vector<int64_t>{1, dirs, hidden});
}

}  // namespace peat::save::onnx_import
