// SPDX-License-Identifier: MIT
#pragma once
// Many small records as the rows of one (docs/session-format.md, "Packed records"). HDF5 spends
// about a millisecond on each record (a group with its attributes and datasets), so an analysis of
// 70,000 calls stores its per-call reports 64 to a record. A row reads back as the record it was:
// the same scalars, labels and arrays (shapes and types included).
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/store/session.h"

namespace peat::store {

// The `kind` label of a packed record, and the suffix of its name among its run's reports.
inline constexpr const char* kPackedRecordsKind = "packed_records";
inline constexpr const char* kPackSuffix = ".pack";

class RecordPacker {
 public:
  // Adds `record` as the row `id`; false (nothing added) where it cannot be a row: a name with ',' or
  // a line break, a label with a line break, an array of more than two dimensions, or an array whose
  // type differs from the same array's in an earlier row. Such a record is stored as its own.
  // The rows' array data must stay alive until record() has been written.
  bool add(const std::string& id, const ResultRecord& record);
  std::size_t size() const { return rows_.size(); }
  const std::string& firstId() const { return rows_.front().first; }
  // The packed record; its arrays point into this packer, valid until the next add() or record().
  ResultRecord record();
  void clear();

 private:
  std::vector<std::pair<std::string, ResultRecord>> rows_;
  std::vector<std::vector<unsigned char>> storage_;  // the packed arrays' bytes
  std::vector<std::pair<std::string, DType>> arrayTypes_;
};

// Whether a stored record is a pack of rows (its `kind` label).
bool isPacked(const StoredRecord& record);
// The row ids a pack lists (its `ids` label), without reading its arrays.
std::vector<std::string> packedIds(const std::string& idsLabel);
// A pack's rows, each as its own record would read; throws SessionError naming `where` and what is
// malformed (uneven counts, offsets outside an array, an id twice, ...).
std::vector<std::pair<std::string, StoredRecord>> unpackRecords(const StoredRecord& packed, const std::string& where);

}  // namespace peat::store
