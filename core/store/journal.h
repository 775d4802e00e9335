// SPDX-License-Identifier: MIT
#pragma once
// An HDF5 virtual file driver that makes every flush of a session atomic against a process killed
// at any moment (and, with `durable`, against power loss).
//
// HDF5 updates its metadata in place and does not order those writes, so a writer killed during a
// flush (or while the metadata cache evicts a dirty entry) can leave a file whose groups point past
// its recorded end ("addr overflow") or at half-written nodes, which loses iterations that were
// already reported saved. This driver writes the file as POSIX pread/pwrite like HDF5's default
// "sec2" driver, with one difference: between two flushes, a write to any byte the last flushed
// state may use (every page below that state's end of allocation) is held in memory. Writes to new
// space go straight to the file, where no flushed structure points. A flush then commits:
//   1. the held pages are written to a journal beside the file, "<file>-journal", ending in a CRC-32
//      and a commit mark;
//   2. the pages are written into the file;
//   3. the journal is removed.
// Opening a file whose journal is complete (a writer died in step 2) replays it first; an incomplete
// journal (it died in step 1) is removed, since the file was not touched yet. So the file always
// holds exactly the state of some flush. The file format is plain HDF5: h5py and h5dump read it.
#include <hdf5.h>

#include <string>

namespace peat::h5 {

// A new file access property list that selects the journaling driver; the caller closes it.
hid_t journalingAccessList(bool durable);

// Tells the driver of open file `file` that its file was renamed (its journal follows the name).
void journalFileRenamed(hid_t file, const std::string& newPath);

// "<path>-journal"
std::string journalPath(const std::string& path);

}  // namespace peat::h5
