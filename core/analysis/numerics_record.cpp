// SPDX-License-Identifier: MIT
#include "core/analysis/numerics_record.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace peat::analyzer {

namespace {

// The format names in column order, from a statistics object of any tensor.
std::vector<std::string> formatColumns() {
  const float probe[2] = {1.0f, 2.0f};
  const TensorNumerics t = tensorNumerics(probe, 2);
  std::vector<std::string> out;
  for (const auto& [kind, list] : {std::pair{"plain", &t.plain}, std::pair{"tensor", &t.tensorScaled}, std::pair{"block", &t.blockScaled}})
    for (const FormatShare& f : *list) {
      out.push_back(std::string(kind) + "_" + f.format + "_underflow");
      out.push_back(std::string(kind) + "_" + f.format + "_saturated");
    }
  return out;
}

}  // namespace

store::TableBuilder numericsTable() {
  store::TableBuilder t({"layer", "op", "phase", "tensor"},
                        {"iteration", "call", "count", "nonzero", "amax", "min_nonzero", "range_binades"});
  t.addNumberColumns(formatColumns());
  return t;
}

void addNumericsRow(store::TableBuilder& table, const store::CallId& id, const std::string& tensor, const TensorNumerics& t) {
  std::vector<double> numbers = {double(id.iteration), double(id.callIndex), double(t.count), double(t.nonzero),
                                 t.amax, t.minNonzero, t.rangeBinades};
  for (const auto* list : {&t.plain, &t.tensorScaled, &t.blockScaled})
    for (const FormatShare& f : *list) {
      numbers.push_back(f.underflow);
      numbers.push_back(f.saturated);
    }
  table.row({id.layer, id.op, store::phaseName(id.phase), tensor}, numbers);
}

std::vector<std::string> numericsQuantities(const std::vector<h5::Column>& table) {
  std::vector<std::string> out;
  for (const h5::Column& c : table)
    if (!c.isText && c.name != "iteration" && c.name != "call" && c.name != "count" && c.name != "nonzero") out.push_back(c.name);
  return out;
}

NumericsGrid loadNumericsGrid(const store::SessionReader& reader, const std::string& run, const std::string& quantity,
                              const std::string& tensor) {
  const std::vector<h5::Column> table = reader.table(run, "numerics");
  const h5::Column *layer = h5::findColumn(table, "layer"), *phase = h5::findColumn(table, "phase"),
                   *kind = h5::findColumn(table, "tensor"), *iteration = h5::findColumn(table, "iteration"),
                   *value = h5::findColumn(table, quantity);
  if (!layer || !phase || !kind || !iteration || !layer->isText || !phase->isText || !kind->isText || iteration->isText)
    throw std::runtime_error("run " + run + " has no numerics table (record it with peat profile --numerics)");
  if (!value || value->isText) throw std::runtime_error("the numerics table of run " + run + " has no quantity '" + quantity + "'");
  NumericsGrid g;
  g.quantity = quantity;
  std::map<std::string, std::size_t> layerIndex;
  std::map<int64_t, std::size_t> iterationIndex;
  const std::size_t rows = std::min({layer->size(), phase->size(), kind->size(), iteration->size(), value->size()});
  for (std::size_t r = 0; r < rows; ++r) {
    if (phase->text[r] != "forward" || kind->text[r] != tensor) continue;
    if (layerIndex.emplace(layer->text[r], g.layers.size()).second) g.layers.push_back(layer->text[r]);
    iterationIndex.emplace(int64_t(iteration->numbers[r]), 0);
  }
  for (auto& [it, index] : iterationIndex) {
    index = g.iterations.size();
    g.iterations.push_back(it);
  }
  g.values.assign(g.layers.size() * g.iterations.size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t r = 0; r < rows; ++r) {
    if (phase->text[r] != "forward" || kind->text[r] != tensor) continue;
    double& cell = g.values[layerIndex.at(layer->text[r]) * g.iterations.size() + iterationIndex.at(int64_t(iteration->numbers[r]))];
    cell = std::isnan(cell) ? value->numbers[r] : std::max(cell, value->numbers[r]);
  }
  return g;
}

}  // namespace peat::analyzer
