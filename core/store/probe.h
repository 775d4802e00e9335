// SPDX-License-Identifier: MIT
#pragma once
// Trust (docs/architecture.md): a file from someone else (a session, a weights file, a merge
// input, the HDF5 file behind file.h5:/path) may crash or hang the HDF5 library. Such a file is read
// first in the peat-probe helper process; only when that passes does this process open it.
//
// The rule is in the types: SessionReader's constructor probes (see session.h), and
// io::readTensorSource probes the HDF5 files it reads. Nothing opens a user's file otherwise.
//
// A probe is skipped only for a file that
//  - this process holds open in a SessionWriter (it is writing it, so it made or probed it), or
//  - passed a probe before and is unchanged since: the same device, inode, size, modification
//    and status-change times (ctime, which no user can set), remembered in this process and in a
//    per-user cache ($XDG_CACHE_HOME/peat/probed, else ~/.cache/peat/probed; PEAT_PROBE_CACHE names
//    another file, or "off"). A file is remembered only if its ctime was at least two seconds old
//    when the probe started, so a change after the probe always changes a recorded time, and only
//    on a local filesystem whose kernel keeps ctime (ext4, xfs, btrfs, tmpfs, ...; not sshfs or
//    SMB, where the owner can set it). The cache is read only when it is this user's own file and
//    nobody else can write it.
// Names and paths are never trusted: a file renamed, copied or rewritten is probed again.
#include <cstdint>
#include <string>

#include "core/store/session.h"  // probeSession, SessionError

namespace peat::store {

// Reads one dataset of any HDF5 file (`file.h5:/group/dataset`) in the helper as
// io::readHdf5Dataset would; throws SessionError with the helper's one-line reason on failure.
void probeHdf5Dataset(const std::string& path, const std::string& dataset);

// For SessionWriter: while a writer holds a file, this process reads it without a probe. The token
// (0: the file could not be found) names the registration, which renames do not change.
uint64_t registerWrittenFile(const std::string& path);
void unregisterWrittenFile(uint64_t token);
bool isWrittenHere(const std::string& path);

// Tells the observer of setSessionAccessObserver (session.h) that this thread blocks on a file:
// the probe's helper process counts as an access.
void notifySessionAccess();

// The checks that need no HDF5: the path exists, is a readable regular file and starts with the
// HDF5 signature. Throws SessionError with the same words SessionReader uses.
void checkSessionPath(const std::string& path);

}  // namespace peat::store
