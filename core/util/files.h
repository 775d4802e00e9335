// SPDX-License-Identifier: MIT
// Files peat makes for the user (.npy outputs, CSV tables, exported plots): never written through a
// link planted where they go, never replacing an existing file unless the user said so.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace peat::util {

// Why PATH cannot be written; what() is one sentence for "peat: error: ".
struct FileRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws FileRefused when PATH is a symbolic link (always: peat does not write through links) or an
// existing file and !overwrite. For a check before long work; writeFileAtomically checks again.
void checkWritable(const std::string& path, bool overwrite, const std::string& forceFlag = "--force");

// Makes PATH through a fresh file beside it (created O_CREAT|O_EXCL|O_NOFOLLOW under a new name, so
// a link planted at that name is never followed), filled by WRITE(fd, temporary path), then linked
// (!overwrite: fails if PATH appeared meanwhile) or renamed (overwrite: replaces PATH itself, a link
// there included, never its target) into place. WRITE returns false on failure; the temporary file
// is removed on every failure. Throws FileRefused.
void writeFileAtomically(const std::string& path, bool overwrite,
                         const std::function<bool(int fd, const std::string& temporary)>& write,
                         const std::string& forceFlag = "--force");
void writeFileAtomically(const std::string& path, bool overwrite, const std::string& bytes,
                         const std::string& forceFlag = "--force");

}  // namespace peat::util
