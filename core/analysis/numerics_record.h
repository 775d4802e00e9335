// SPDX-License-Identifier: MIT
#pragma once
// The home of one result kind: the table "numerics" of a profile run (`peat profile --numerics`),
// one row per recorded call and tensor with its narrow-format statistics (core/analyzer/numerics.h):
// text columns layer, op, phase, tensor; numbers iteration, call, count, nonzero, amax, min_nonzero,
// range_binades, then <kind>_<format>_underflow and <kind>_<format>_saturated for kind plain,
// tensor (one scale per tensor) and block. Written here, read back here as a layers x iterations grid
// for the workbench's heat map.
// In the analysis layer (it reads and writes sessions), in the analyzer namespace of its statistics.
#include <cstdint>
#include <string>
#include <vector>

#include "core/analyzer/numerics.h"
#include "core/store/session.h"
#include "core/store/table.h"

namespace peat::analyzer {

store::TableBuilder numericsTable();
void addNumericsRow(store::TableBuilder& table, const store::CallId& id, const std::string& tensor, const TensorNumerics& t);

// The numeric columns a grid can show ("plain_e4m3_underflow", "block_mxfp4_saturated", "range_binades", ...).
std::vector<std::string> numericsQuantities(const std::vector<h5::Column>& table);

// One quantity of one tensor kind ("output") of the forward calls, per layer (rows, in the order
// they first appear) and recorded iteration (columns): the largest over the layer's calls of that
// iteration, NaN where the layer has no such call.
struct NumericsGrid {
  std::string quantity;
  std::vector<std::string> layers;
  std::vector<int64_t> iterations;
  std::vector<double> values;  // [layer * iterations.size() + iteration]
};
// Throws std::runtime_error naming what is missing (no numerics table, no such quantity).
NumericsGrid loadNumericsGrid(const store::SessionReader& reader, const std::string& run, const std::string& quantity,
                              const std::string& tensor = "output");

}  // namespace peat::analyzer
