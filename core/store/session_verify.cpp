// SPDX-License-Identifier: MIT
// SessionReader::verify(): reads every complete dataset of a session and checks its CRC-32. Apart
// from the reader because it walks the file with the raw HDF5 API (object addresses, type classes).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/util/text.h"
#include "core/store/session.h"
#include "core/store/session_common.h"

namespace peat::store {

using detail::damaged;
using detail::Lock;

namespace {

// An object of the file by its number and address: two links reach the same object when these match.
using ObjectKey = std::pair<unsigned long, haddr_t>;

std::optional<ObjectKey> objectKey(hid_t object) {
  H5O_info_t info{};
#if H5_VERSION_GE(1, 12, 0)
  if (H5Oget_info3(object, &info, H5O_INFO_BASIC) < 0) return std::nullopt;
  haddr_t addr = 0;
  std::memcpy(&addr, &info.token, std::min(sizeof addr, sizeof info.token));
  return ObjectKey{info.fileno, addr};
#else
  if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0) return std::nullopt;
  return ObjectKey{info.fileno, info.addr};
#endif
}

// The walk's memory: the groups on the way down from the root (a link back to one of them is a
// cycle) and every object already checked (a second hard link to it is skipped).
struct Walk {
  std::vector<std::pair<ObjectKey, std::string>> ancestors;
  std::set<ObjectKey> seen;
};

// A call's tensors and a checkpoint's: where peat reads numbers.
bool inTensorPlace(const std::string& path) {
  return path.find("/calls/") != std::string::npos || path.find("/checkpoints/") != std::string::npos;
}

std::string className(H5T_class_t cls) {
  switch (cls) {
    case H5T_STRING: return "strings";
    case H5T_COMPOUND: return "compound records";
    case H5T_ENUM: return "enumerations";
    case H5T_VLEN: return "variable-length sequences";
    case H5T_ARRAY: return "arrays";
    case H5T_OPAQUE: return "opaque bytes";
    case H5T_REFERENCE: return "references";
    case H5T_BITFIELD: return "bit fields";
    default: return "data of an unknown class";
  }
}

// Reads every element of a dataset that has no checksum (a table, a string list) in its native
// memory type, a slab of rows at a time for a 1-D one: each chunk is decoded once (a garbage chunk
// fails its filter or its size), and memory stays bounded.
void decodeEveryChunk(const h5::Dataset& ds) {
  const std::string& path = ds.path();
  h5::Handle type(H5Dget_type(ds.id()), H5Tclose);
  h5::Handle native(H5Tget_native_type(type.id(), H5T_DIR_DEFAULT), H5Tclose);
  h5::Handle space(H5Dget_space(ds.id()), H5Sclose);
  if (type.id() < 0 || native.id() < 0 || space.id() < 0) throw h5::Error("H5Tget_native_type", path, "unreadable type");
  const std::size_t rowBytes = std::max<std::size_t>(1, H5Tget_size(native.id()));
  const bool variable = H5Tdetect_class(native.id(), H5T_VLEN) > 0 || H5Tdetect_class(native.id(), H5T_STRING) > 0;
  const int rank = H5Sget_simple_extent_ndims(space.id());
  std::vector<hsize_t> dims(std::size_t(std::max(rank, 0)), 0);
  if (rank > 0) H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr);
  const hsize_t rows = rank == 0 ? 1 : dims[0];
  constexpr std::size_t kSlabBytes = std::size_t(8) << 20;
  // a row's bytes, overflow-checked (a crafted file may declare [1, 2^62]: a wrapped product would
  // divide by zero below or size the buffer short of what H5Dread writes)
  uint64_t rowTotal = rowBytes;
  for (int i = 1; i < rank; ++i)
    if (__builtin_mul_overflow(rowTotal, uint64_t(dims[std::size_t(i)]), &rowTotal) || rowTotal > kSlabBytes)
      throw h5::Error(h5::kRefused, path, "has rows too large to check");
  if (rowTotal == 0) return;  // nothing stored
  const hsize_t perRow = hsize_t(rowTotal / rowBytes);
  const hsize_t step = std::max<hsize_t>(1, hsize_t(kSlabBytes / rowTotal));
  std::vector<unsigned char> buffer;
  for (hsize_t at = 0; at < rows; at += step) {
    const hsize_t n = std::min(step, rows - at);
    buffer.assign(std::size_t(n * perRow) * rowBytes, 0);
    h5::Handle file(H5Scopy(space.id()), H5Sclose);
    h5::Handle memory;  // all of a scalar, else the slab's rows
    if (rank > 0) {
      std::vector<hsize_t> start(dims.size(), 0), count(dims);
      start[0] = at;
      count[0] = n;
      if (H5Sselect_hyperslab(file.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
        throw h5::Error("H5Sselect_hyperslab", path, "cannot select rows");
      memory = h5::Handle(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
    }
    const hid_t fileSpace = rank > 0 ? file.id() : H5S_ALL, memorySpace = memory.valid() ? memory.id() : H5S_ALL;
    if (H5Dread(ds.id(), native.id(), memorySpace, fileSpace, H5P_DEFAULT, buffer.data()) < 0) {
      if (variable) H5Dvlen_reclaim(native.id(), memory.valid() ? memory.id() : space.id(), H5P_DEFAULT, buffer.data());
      throw h5::Error("H5Dread", path, "a chunk cannot be decoded: the table is damaged");
    }
    if (variable) H5Dvlen_reclaim(native.id(), memory.valid() ? memory.id() : space.id(), H5P_DEFAULT, buffer.data());
  }
}

// Visits the datasets under `g`, skipping iteration and checkpoint groups that are not complete.
void verifyGroup(const h5::Group& g, bool inIterationsOrCheckpoints, bool writerDied, Walk& walk,
                 SessionReader::Verification& v) {
  for (const std::string& name : g.children()) {
    bool isGroup = false;
    try {
      isGroup = g.hasGroup(name);
      if (!isGroup && inIterationsOrCheckpoints) throw h5::Error("H5Gopen2", g.path() + "/" + name, "not a group");
    } catch (const h5::Error&) {
      if (!(inIterationsOrCheckpoints && writerDied)) throw;
      ++v.incompleteGroups;  // in flight when its writer was killed mid-flush
      continue;
    }
    if (isGroup) {
      std::optional<h5::Group> child;
      try {
        child.emplace(g.openGroup(name));
      } catch (const h5::Error&) {
        // the iteration or checkpoint in flight when its writer was killed mid-flush (readSummary
        // has checked that every complete one is readable)
        if (!(inIterationsOrCheckpoints && writerDied)) throw;
        ++v.incompleteGroups;
        continue;
      }
      // A link back to a group on the way down would make the walk endless (and HDF5 deeper and
      // deeper): refused. A group reached by a second link elsewhere was checked already.
      const std::optional<ObjectKey> key = objectKey(child->id());
      if (key) {
        for (const auto& [ancestor, path] : walk.ancestors)
          if (ancestor == *key)
            throw h5::Error(h5::kRefused, child->path(),
                            "links back to its ancestor group '" + path + "' (a cycle of links)");
        if (!walk.seen.insert(*key).second) continue;
      }
      if (inIterationsOrCheckpoints && (!child->hasAttribute("complete") || child->intAttribute("complete") != 1)) {
        ++v.incompleteGroups;
        continue;
      }
      // a run's status says whether its writer may have died mid-flush
      const bool died = writerDied || (g.path().size() >= 5 && g.path().compare(g.path().size() - 5, 5, "/runs") == 0 &&
                                       child->hasAttribute("status") && child->stringAttribute("status") == "running");
      if (key) walk.ancestors.emplace_back(*key, child->path());
      verifyGroup(*child, name == "iterations" || name == "checkpoints", died, walk, v);
      if (key) walk.ancestors.pop_back();
      continue;
    }
    h5::Dataset ds = g.openDataset(name);
    if (const std::optional<ObjectKey> key = objectKey(ds.id()); key && !walk.seen.insert(*key).second)
      continue;  // a hard link to a dataset already checked
    const hid_t type = H5Dget_type(ds.id());
    const H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (type >= 0) H5Tclose(type);
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
      // where peat reads tensors (a call's, a checkpoint's), anything but numbers is refused here,
      // not left for analyze to find; elsewhere (tables of compound rows, strings) every chunk is
      // decoded, so a garbage chunk fails here rather than as an empty plot in the workbench
      if (inTensorPlace(ds.path()))
        throw h5::Error(h5::kRefused, ds.path(), "holds " + className(cls) + ", not numbers: it is no tensor peat reads");
      decodeEveryChunk(ds);
      ++v.readWhole;
      if (v.readWholePaths.size() < SessionReader::Verification::kNamed) v.readWholePaths.push_back(util::printable(ds.path()));
      v.bytes += uint64_t(H5Dget_storage_size(ds.id()));
      continue;
    }
    if (!ds.checksum()) {
      ++v.withoutChecksum;
      if (v.withoutChecksumPaths.size() < SessionReader::Verification::kNamed) v.withoutChecksumPaths.push_back(util::printable(ds.path()));
    }
    ds.verify();
    ++v.datasets;
    v.bytes += uint64_t(H5Dget_storage_size(ds.id()));
  }
}

}  // namespace

SessionReader::Verification SessionReader::verify() const {
  Lock lock;
  Verification v;
  Walk walk;
  try {
    (void)readSummary(false);  // every complete iteration must be readable
    const h5::Group root = d->file->root();
    if (const std::optional<ObjectKey> key = objectKey(root.id())) walk.ancestors.emplace_back(*key, "/");
    verifyGroup(root, false, false, walk, v);
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
  return v;
}

}  // namespace peat::store
