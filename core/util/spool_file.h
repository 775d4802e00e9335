// SPDX-License-Identifier: MIT
#pragma once
// Bytes kept on disk instead of in memory while a command runs: an anonymous file (O_TMPFILE, or a
// name unlinked at once where the file system has none) in the directory of a given path, so
// nothing can be planted at it, and a killed process leaves nothing behind. Playback keeps the
// candidate's outputs in one, analyze its per-call reports, until the session is opened for writing.
#include <cstdint>
#include <string>

namespace peat::util {

class SpoolFile {
 public:
  // The file is made, in the directory that holds `besidePath`, at the first append.
  explicit SpoolFile(std::string besidePath) : beside_(std::move(besidePath)) {}
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;
  ~SpoolFile();
  // Appends `size` bytes and returns where they start; throws std::runtime_error on a write error
  // (a full disk). Not thread-safe: callers serialise appends.
  uint64_t append(const void* bytes, uint64_t size);
  // Reads back `size` bytes from `offset` (thread-safe with other reads).
  void read(uint64_t offset, void* out, uint64_t size) const;
  uint64_t size() const { return end_; }

 private:
  void open();
  std::string beside_;
  int fd_ = -1;
  uint64_t end_ = 0;
};

}  // namespace peat::util
