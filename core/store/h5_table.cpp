// SPDX-License-Identifier: MIT
// Tables: 1-D compound datasets of text and number columns (numpy structured arrays in h5py),
// written whole, appended to a block of rows at a time, and read back.
#include <hdf5.h>

#include <algorithm>
#include <cstring>

#include "core/store/h5.h"
#include "core/store/h5_detail.h"

namespace peat::h5 {

namespace {
// Memory layout of one record: a char* per text column, a double per number column.
struct RecordLayout {
  Handle type;
  std::vector<std::size_t> offsets;
  std::size_t size = 0;
};

RecordLayout recordLayout(const std::vector<Column>& columns, const std::string& where) {
  RecordLayout layout;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    layout.offsets.push_back(layout.size);
    layout.size += columns[i].isText ? sizeof(char*) : sizeof(double);
  }
  layout.type = Handle(checkId(H5Tcreate(H5T_COMPOUND, std::max<std::size_t>(layout.size, 1)), "H5Tcreate", where),
                       H5Tclose);
  Handle text = stringType();
  for (std::size_t i = 0; i < columns.size(); ++i)
    check(H5Tinsert(layout.type.id(), columns[i].name.c_str(), layout.offsets[i],
                    columns[i].isText ? text.id() : H5T_NATIVE_DOUBLE),
          "H5Tinsert", where);
  return layout;
}
}  // namespace

namespace {
// The rows of `columns` in `layout` (text cells point into the columns' strings); throws when the
// columns are missing or differ in length.
std::vector<unsigned char> packRows(const std::vector<Column>& columns, const RecordLayout& layout, const std::string& p) {
  if (columns.empty()) throw Error("H5Dcreate2", p, "a table needs at least one column");
  const std::size_t rows = columns.front().size();
  for (const Column& c : columns)
    if (c.size() != rows) throw Error("H5Dcreate2", p, "table columns differ in length");
  std::vector<unsigned char> buffer(rows * layout.size);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < columns.size(); ++c) {
      unsigned char* cell = buffer.data() + r * layout.size + layout.offsets[c];
      if (columns[c].isText) {
        const char* s = columns[c].text[r].c_str();
        std::memcpy(cell, &s, sizeof s);
      } else {
        std::memcpy(cell, &columns[c].numbers[r], sizeof(double));
      }
    }
  return buffer;
}

// An appended table grows by chunks of this many rows.
constexpr hsize_t kAppendChunkRows = 1024;
}  // namespace

void Group::writeTable(const std::string& name, const std::vector<Column>& columns) {
  const std::string p = childPath(name);
  RecordLayout layout = recordLayout(columns, p);
  const std::vector<unsigned char> buffer = packRows(columns, layout, p);
  const hsize_t dims[1] = {columns.front().size()};
  Handle space(checkId(H5Screate_simple(1, dims, nullptr), "H5Screate_simple", p), H5Sclose);
  Handle ds(checkId(H5Dcreate2(id(), name.c_str(), layout.type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    "H5Dcreate2", p),
            H5Dclose);
  if (dims[0] > 0) check(H5Dwrite(ds.id(), layout.type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), "H5Dwrite", p);
}

void Group::appendTable(const std::string& name, const std::vector<Column>& columns) {
  const std::string p = childPath(name);
  RecordLayout layout = recordLayout(columns, p);
  const std::vector<unsigned char> buffer = packRows(columns, layout, p);
  const hsize_t rows = columns.front().size();
  if (!has(name)) {
    const hsize_t none[1] = {0}, unlimited[1] = {H5S_UNLIMITED}, chunk[1] = {kAppendChunkRows};
    Handle space(checkId(H5Screate_simple(1, none, unlimited), "H5Screate_simple", p), H5Sclose);
    Handle dcpl(checkId(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", p), H5Pclose);
    check(H5Pset_chunk(dcpl.id(), 1, chunk), "H5Pset_chunk", p);
    Handle made(checkId(H5Dcreate2(id(), name.c_str(), layout.type.id(), space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
                        "H5Dcreate2", p),
                H5Dclose);
  }
  Dataset ds = openDataset(name);
  Handle fileType(checkId(H5Dget_type(ds.id()), "H5Dget_type", p), H5Tclose);
  bool same = H5Tget_class(fileType.id()) == H5T_COMPOUND && H5Tget_nmembers(fileType.id()) == int(columns.size());
  for (std::size_t i = 0; same && i < columns.size(); ++i) {
    char* memberName = H5Tget_member_name(fileType.id(), unsigned(i));
    same = memberName && columns[i].name == memberName &&
           (H5Tget_member_class(fileType.id(), unsigned(i)) == H5T_STRING) == columns[i].isText;
    if (memberName) H5free_memory(memberName);
  }
  if (!same) throw Error("H5Dwrite", p, "the rows appended have other columns than the table");
  const std::vector<uint64_t> shape = ds.shape();
  if (shape.size() != 1) throw Error("H5Dwrite", p, "table is not one-dimensional");
  if (rows == 0) return;
  const hsize_t start[1] = {shape[0]}, count[1] = {rows}, grown[1] = {shape[0] + rows};
  check(H5Dset_extent(ds.id(), grown), "H5Dset_extent", p);
  Handle fileSpace(checkId(H5Dget_space(ds.id()), "H5Dget_space", p), H5Sclose);
  check(H5Sselect_hyperslab(fileSpace.id(), H5S_SELECT_SET, start, nullptr, count, nullptr), "H5Sselect_hyperslab", p);
  Handle memSpace(checkId(H5Screate_simple(1, count, nullptr), "H5Screate_simple", p), H5Sclose);
  check(H5Dwrite(ds.id(), layout.type.id(), memSpace.id(), fileSpace.id(), H5P_DEFAULT, buffer.data()), "H5Dwrite", p);
}

std::vector<Column> Group::readTable(const std::string& name) const {
  const std::string p = childPath(name);
  Dataset ds = openDataset(name);
  Handle fileType(checkId(H5Dget_type(ds.id()), "H5Dget_type", p), H5Tclose);
  if (H5Tget_class(fileType.id()) != H5T_COMPOUND) throw Error("H5Dread", p, "dataset is not a table");
  const int members = H5Tget_nmembers(fileType.id());
  if (members < 0 || members > 1024) throw Error("H5Tget_nmembers", p, "implausible number of columns");
  std::vector<Column> columns(static_cast<std::size_t>(members));
  for (int i = 0; i < members; ++i) {
    char* memberName = H5Tget_member_name(fileType.id(), unsigned(i));
    if (!memberName) fail("H5Tget_member_name", p);
    columns[std::size_t(i)].name = memberName;
    H5free_memory(memberName);
    columns[std::size_t(i)].isText = H5Tget_member_class(fileType.id(), unsigned(i)) == H5T_STRING;
  }
  const std::vector<uint64_t> shape = ds.shape();
  if (shape.size() != 1) throw Error("H5Dread", p, "table is not one-dimensional");
  const std::size_t rows = std::size_t(ds.checkedElementCount());
  RecordLayout layout = recordLayout(columns, p);
  if (rows > (uint64_t(1) << 32) / std::max<std::size_t>(layout.size, 1))
    throw Error("H5Dread", p, "table is implausibly large");
  std::vector<unsigned char> buffer(rows * layout.size);
  if (rows > 0) check(H5Dread(ds.id(), layout.type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), "H5Dread", p);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const unsigned char* cell = buffer.data() + r * layout.size + layout.offsets[c];
      if (columns[c].isText) {
        char* s = nullptr;
        std::memcpy(&s, cell, sizeof s);
        columns[c].text.emplace_back(s ? s : "");
      } else {
        double v = 0;
        std::memcpy(&v, cell, sizeof v);
        columns[c].numbers.push_back(v);
      }
    }
  if (rows > 0) {
    Handle space(checkId(H5Dget_space(ds.id()), "H5Dget_space", p), H5Sclose);
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(layout.type.id(), space.id(), H5P_DEFAULT, buffer.data());
#else
    H5Dvlen_reclaim(layout.type.id(), space.id(), H5P_DEFAULT, buffer.data());
#endif
  }
  return columns;
}

}  // namespace peat::h5
