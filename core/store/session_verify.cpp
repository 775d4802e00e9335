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
    // tables (compound rows, strings) are checked by their readers when they parse them
    const hid_t type = H5Dget_type(ds.id());
    const H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (type >= 0) H5Tclose(type);
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) continue;
    if (!ds.checksum()) ++v.withoutChecksum;
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
