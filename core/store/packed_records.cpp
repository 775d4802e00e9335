// SPDX-License-Identifier: MIT
// Packed records (packed_records.h). A pack of P rows is one record:
//   labels   kind = "packed_records"; ids (the rows' ids, one per line); scalar_names, label_names,
//            array_names (comma-separated, in name order); "label.<name>" for each label name (the
//            rows' values, one per line)
//   arrays   scalars [P, S] float64; scalar_present, label_present [P, S], [P, L] uint8;
//            offsets [P + 1, A] int64 (where each row's part of each array starts);
//            dims [P, A, 3] int64 (each row's array as rank, d0, d1; rank -1: the row has none);
//            "array.<name>" for each array name: the rows' elements one after another
#include "core/store/packed_records.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/store/h5.h"

namespace peat::store {

namespace {

bool plainName(const std::string& name) {
  return !name.empty() && name.find_first_of(",\n") == std::string::npos;
}

std::string joined(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? std::string(1, sep) : std::string()) + parts[k];
  return out;
}

// Every part between separators, empty ones too: "a\n\nb" -> {"a", "", "b"}; "" -> {""}.
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

}  // namespace

bool RecordPacker::add(const std::string& id, const ResultRecord& record) {
  if (!plainName(id)) return false;
  for (const auto& [name, value] : record.scalars)
    if (!plainName(name)) return false;
  for (const auto& [name, value] : record.labels)
    if (!plainName(name) || value.find('\n') != std::string::npos) return false;
  std::set<std::string> names;
  for (const NamedTensor& a : record.arrays) {
    if (!plainName(a.name) || !a.linkTo.empty() || a.view.shape.size() > 2 || !names.insert(a.name).second) return false;
    for (const auto& [name, type] : arrayTypes_)
      if (name == a.name && type != a.view.dtype) return false;
  }
  for (const NamedTensor& a : record.arrays)
    if (std::none_of(arrayTypes_.begin(), arrayTypes_.end(), [&](const auto& t) { return t.first == a.name; }))
      arrayTypes_.emplace_back(a.name, a.view.dtype);
  rows_.emplace_back(id, record);
  return true;
}

void RecordPacker::clear() {
  rows_.clear();
  arrayTypes_.clear();
  storage_.clear();
}

ResultRecord RecordPacker::record() {
  std::set<std::string> scalarSet, labelSet;
  for (const auto& [id, r] : rows_) {
    for (const auto& [name, value] : r.scalars) scalarSet.insert(name);
    for (const auto& [name, value] : r.labels) labelSet.insert(name);
  }
  const std::vector<std::string> scalarNames(scalarSet.begin(), scalarSet.end()), labelNames(labelSet.begin(), labelSet.end());
  std::vector<std::string> arrayNames;
  for (const auto& [name, type] : arrayTypes_) arrayNames.push_back(name);
  std::sort(arrayNames.begin(), arrayNames.end());
  const std::size_t p = rows_.size(), s = scalarNames.size(), l = labelNames.size(), a = arrayNames.size();

  std::vector<double> scalars(p * s, 0.0);
  std::vector<uint8_t> scalarPresent(p * s, 0), labelPresent(p * l, 0);
  std::vector<int64_t> offsets((p + 1) * a, 0), dims(p * a * 3, 0);
  std::vector<std::vector<std::string>> labelValues(l, std::vector<std::string>(p));
  std::vector<std::vector<unsigned char>> arrays(a);
  std::vector<std::string> ids;
  for (std::size_t row = 0; row < p; ++row) {
    const ResultRecord& r = rows_[row].second;
    ids.push_back(rows_[row].first);
    for (std::size_t k = 0; k < s; ++k)
      if (const auto it = r.scalars.find(scalarNames[k]); it != r.scalars.end())
        scalars[row * s + k] = it->second, scalarPresent[row * s + k] = 1;
    for (std::size_t k = 0; k < l; ++k)
      if (const auto it = r.labels.find(labelNames[k]); it != r.labels.end())
        labelValues[k][row] = it->second, labelPresent[row * l + k] = 1;
    for (std::size_t c = 0; c < a; ++c) {
      int64_t* d = &dims[(row * a + c) * 3];
      d[0] = -1;
      for (const NamedTensor& t : r.arrays) {
        if (t.name != arrayNames[c]) continue;
        d[0] = int64_t(t.view.shape.size());
        for (std::size_t q = 0; q < t.view.shape.size(); ++q) d[1 + q] = int64_t(t.view.shape[q]);
        const std::size_t bytes = std::size_t(t.view.elementCount()) * h5::typeSize(t.view.dtype);
        const auto* from = static_cast<const unsigned char*>(t.view.data);
        if (bytes) arrays[c].insert(arrays[c].end(), from, from + bytes);
      }
    }
  }
  // the arrays' types in arrayNames' order (arrayTypes_ is in first-seen order)
  std::vector<DType> types;
  for (const std::string& name : arrayNames)
    for (const auto& [n, t] : arrayTypes_)
      if (n == name) types.push_back(t);
  for (std::size_t c = 0; c < a; ++c) {  // each row's part of each array: where it starts
    std::size_t at = 0;
    for (std::size_t row = 0; row < p; ++row) {
      const int64_t* d = &dims[(row * a + c) * 3];
      uint64_t n = d[0] < 0 ? 0 : 1;
      for (int64_t q = 0; q < std::max<int64_t>(d[0], 0); ++q) n *= uint64_t(d[1 + q]);
      at += std::size_t(n);
      offsets[(row + 1) * a + c] = int64_t(at);
    }
  }

  ResultRecord out;
  out.labels = {{"kind", kPackedRecordsKind}, {"ids", joined(ids, '\n')}, {"scalar_names", joined(scalarNames, ',')},
                {"label_names", joined(labelNames, ',')}, {"array_names", joined(arrayNames, ',')}};
  for (std::size_t k = 0; k < l; ++k) out.labels["label." + labelNames[k]] = joined(labelValues[k], '\n');
  storage_.clear();
  auto keep = [&](const void* data, std::size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(data);
    storage_.emplace_back(b, b + bytes);
    return static_cast<const void*>(storage_.back().data());
  };
  storage_.reserve(6 + a);
  out.arrays.push_back({"scalars", {DType::F64, {p, s}, keep(scalars.data(), scalars.size() * sizeof(double))}});
  out.arrays.push_back({"scalar_present", {DType::U8, {p, s}, keep(scalarPresent.data(), scalarPresent.size())}});
  out.arrays.push_back({"label_present", {DType::U8, {p, l}, keep(labelPresent.data(), labelPresent.size())}});
  out.arrays.push_back({"offsets", {DType::I64, {p + 1, a}, keep(offsets.data(), offsets.size() * sizeof(int64_t))}});
  out.arrays.push_back({"dims", {DType::I64, {p, a, 3}, keep(dims.data(), dims.size() * sizeof(int64_t))}});
  for (std::size_t c = 0; c < a; ++c) {
    const std::size_t size = h5::typeSize(types[c]);
    out.arrays.push_back({"array." + arrayNames[c], {types[c], {arrays[c].size() / size}, keep(arrays[c].data(), arrays[c].size())}});
  }
  return out;
}

bool isPacked(const StoredRecord& record) {
  const auto kind = record.labels.find("kind");
  return kind != record.labels.end() && kind->second == kPackedRecordsKind;
}

std::vector<std::string> packedIds(const std::string& idsLabel) { return lines(idsLabel); }

std::vector<std::pair<std::string, StoredRecord>> unpackRecords(const StoredRecord& packed, const std::string& where) {
  const auto fail = [&](const std::string& what) { return SessionError("packed record " + where + " " + what); };
  const auto label = [&](const std::string& name) -> const std::string& {
    const auto it = packed.labels.find(name);
    if (it == packed.labels.end()) throw fail("has no label " + name);
    return it->second;
  };
  const auto names = [&](const std::string& name) {  // comma-separated, none empty
    std::vector<std::string> out;
    const std::string& all = label(name);
    for (std::size_t start = 0; !all.empty();) {
      const std::size_t end = all.find(',', start);
      out.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (out.back().empty() || out.back().find('\n') != std::string::npos) throw fail("has a malformed " + name);
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  };
  if (!isPacked(packed)) throw fail("is no packed record");
  const std::vector<std::string> ids = lines(label("ids"));
  const std::vector<std::string> scalarNames = names("scalar_names"), labelNames = names("label_names"),
                                 arrayNames = names("array_names");
  const std::size_t p = ids.size(), s = scalarNames.size(), l = labelNames.size(), a = arrayNames.size();
  // an array of the given type and element count, as a typed copy
  const auto array = [&](const std::string& name, DType type, uint64_t count) -> const Tensor& {
    const auto it = packed.arrays.find(name);
    if (it == packed.arrays.end()) throw fail("has no " + name + " array");
    if (it->second.dtype != type || it->second.elementCount() != count)
      throw fail("has a " + name + " array of another type or size than its rows need");
    return it->second;
  };
  const auto typed = [](const Tensor& t, void* out) { std::memcpy(out, t.bytes.data(), t.bytes.size()); };
  std::vector<double> scalars(p * s);
  typed(array("scalars", DType::F64, p * s), scalars.data());
  const Tensor& scalarPresent = array("scalar_present", DType::U8, p * s);
  const Tensor& labelPresent = array("label_present", DType::U8, p * l);
  std::vector<int64_t> offsets((p + 1) * a), dims(p * a * 3);
  typed(array("offsets", DType::I64, (p + 1) * a), offsets.data());
  typed(array("dims", DType::I64, p * a * 3), dims.data());
  std::vector<std::vector<std::string>> labelValues;
  for (const std::string& name : labelNames) {
    labelValues.push_back(lines(label("label." + name)));
    if (labelValues.back().size() != p) throw fail("lists label " + name + " for another number of rows than its ids");
  }
  std::vector<const Tensor*> columns;
  for (std::size_t c = 0; c < a; ++c) {
    const auto it = packed.arrays.find("array." + arrayNames[c]);
    if (it == packed.arrays.end()) throw fail("has no array." + arrayNames[c] + " array");
    columns.push_back(&it->second);
    // each row's part runs from its offset to the next, as long as its dimensions say, inside the array
    if (offsets[c] != 0 || uint64_t(offsets[p * a + c]) != it->second.elementCount())
      throw fail("has offsets that do not cover its " + arrayNames[c] + " array");
    for (std::size_t row = 0; row < p; ++row) {
      const int64_t* d = &dims[(row * a + c) * 3];
      if (d[0] < -1 || d[0] > 2) throw fail("gives an array of rank " + std::to_string(d[0]));
      uint64_t n = d[0] < 0 ? 0 : 1;
      for (int64_t q = 0; q < std::max<int64_t>(d[0], 0); ++q) {
        if (d[1 + q] < 0 || (d[1 + q] > 0 && n > it->second.elementCount() / uint64_t(d[1 + q])))
          throw fail("gives dimensions larger than its " + arrayNames[c] + " array");
        n *= uint64_t(d[1 + q]);
      }
      if (offsets[(row + 1) * a + c] < offsets[row * a + c] || uint64_t(offsets[(row + 1) * a + c] - offsets[row * a + c]) != n)
        throw fail("has offsets that disagree with its rows' dimensions");
    }
  }
  std::set<std::string> seen;
  std::vector<std::pair<std::string, StoredRecord>> out;
  out.reserve(p);
  for (std::size_t row = 0; row < p; ++row) {
    if (ids[row].empty() || !seen.insert(ids[row]).second) throw fail("names row '" + ids[row] + "' twice or not at all");
    StoredRecord r;
    for (std::size_t k = 0; k < s; ++k)
      if (scalarPresent.bytes[row * s + k]) r.scalars[scalarNames[k]] = scalars[row * s + k];
    for (std::size_t k = 0; k < l; ++k)
      if (labelPresent.bytes[row * l + k]) r.labels[labelNames[k]] = labelValues[k][row];
    for (std::size_t c = 0; c < a; ++c) {
      const int64_t* d = &dims[(row * a + c) * 3];
      if (d[0] < 0) continue;
      const Tensor& col = *columns[c];
      const std::size_t size = h5::typeSize(col.dtype);
      Tensor t;
      t.dtype = col.dtype;
      for (int64_t q = 0; q < d[0]; ++q) t.shape.push_back(uint64_t(d[1 + q]));
      const auto from = std::ptrdiff_t(uint64_t(offsets[row * a + c]) * size), to = std::ptrdiff_t(uint64_t(offsets[(row + 1) * a + c]) * size);
      t.bytes.assign(col.bytes.begin() + from, col.bytes.begin() + to);
      r.arrays.emplace(arrayNames[c], std::move(t));
    }
    out.emplace_back(ids[row], std::move(r));
  }
  return out;
}

}  // namespace peat::store
