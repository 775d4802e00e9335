// SPDX-License-Identifier: MIT
#pragma once
// A table of a run (h5::Column list, written with SessionWriter::writeTable) built row by row:
// named text and numeric columns of equal length. The one table builder of every result kind.
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/store/h5.h"

namespace peat::store {

class TableBuilder {
 public:
  enum Kind { Text, Number };
  // Columns in this order, each text or numeric.
  explicit TableBuilder(std::initializer_list<std::pair<std::string, Kind>> columns) {
    for (const auto& [name, kind] : columns) columns_.push_back({name, kind == Text, {}, {}});
  }
  // The text columns first, then the numeric ones.
  TableBuilder(std::initializer_list<std::string> text, std::initializer_list<std::string> numbers) {
    for (const std::string& n : text) columns_.push_back({n, true, {}, {}});
    for (const std::string& n : numbers) columns_.push_back({n, false, {}, {}});
  }
  void addNumberColumns(const std::vector<std::string>& names) {
    for (const std::string& n : names) columns_.push_back({n, false, {}, {}});
  }
  // The text cells of the row in the order of the text columns, then the numbers likewise.
  void row(const std::vector<std::string>& text, const std::vector<double>& numbers) {
    std::size_t t = 0, n = 0;
    for (h5::Column& c : columns_) {
      if (c.isText)
        c.text.push_back(text.at(t++));
      else
        c.numbers.push_back(numbers.at(n++));
    }
  }
  std::size_t rows() const { return columns_.empty() ? 0 : columns_.front().size(); }
  // Drops the rows, keeping the columns (a table written a block at a time).
  void clearRows() {
    for (h5::Column& c : columns_) c.text.clear(), c.numbers.clear();
  }
  const std::vector<h5::Column>& columns() const { return columns_; }

 private:
  std::vector<h5::Column> columns_;
};

}  // namespace peat::store
