// SPDX-License-Identifier: MIT
#pragma once
// What the session's files share (session_writer.cpp, session_reader.cpp, session_verify.cpp):
// private to them, not part of the public API in session.h.
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/store/h5.h"
#include "core/store/session.h"

namespace peat::store {

// The reader's state: here because session_reader.cpp and session_verify.cpp both use it.
struct SessionReader::Impl {
  std::string path;
  std::optional<h5::File> file;
};

namespace detail {

// The text fields of a session's provenance and their attribute names, in the order the writer
// stores them: one list for the writer and the reader (seed, a number, is stored beside them).
inline std::vector<std::pair<const char*, std::string*>> provenanceText(Provenance& p) {
  return {{"tool_version", &p.toolVersion}, {"git_commit", &p.gitCommit},  {"model", &p.model},
          {"dataset", &p.dataset},          {"backend", &p.backend},       {"device", &p.device},
          {"libtorch_version", &p.libtorchVersion}, {"hdf5_version", &p.hdf5Version}, {"date", &p.date},
          {"command_line", &p.commandLine}, {"hostname", &p.hostname}};
}

// Every store entry point holds the HDF5 layer's lock (h5::Lock); it tells the observer of
// setSessionAccessObserver (session.h) before it blocks.
using Lock = h5::Lock;

std::string utcNow();    // ISO-8601, e.g. "2024-05-01T12:00:00Z"
std::string hostName();  // "unknown" when the system will not say

// Names of runs, tensors, reports, tables and attributes become HDF5 link names: no '/' or oddities.
bool isSafeName(const std::string& name);
// Throws SessionError saying which `what` ("run", "tensor", ...) has a name that is not allowed.
void requireSafeName(const std::string& what, const std::string& name);

// Turns an HDF5 failure inside a session into the one-line SessionError the user sees.
[[noreturn]] void damaged(const std::string& path, const h5::Error& e);

// Writes each tensor as a dataset of `group`, or as a hard link where NamedTensor::linkTo says so.
void writeTensors(h5::Group& group, const std::vector<NamedTensor>& tensors, const h5::DatasetLayout& layout = {});
// A ResultRecord is a group: scalars and labels as attributes, arrays as datasets. readRecord is the
// inverse; both live here so the record's layout is defined in one place.
void writeRecord(h5::Group& g, const ResultRecord& record);
StoredRecord readRecord(const h5::Group& g);
// Reads a whole dataset in its stored type, checking the file holds its bytes before allocating.
Tensor readWholeTensor(const h5::Dataset& ds);

}  // namespace detail
}  // namespace peat::store
