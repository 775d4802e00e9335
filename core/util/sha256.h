// SPDX-License-Identifier: MIT
#pragma once
// SHA-256 (FIPS 180-4), for the provenance of files a session was made from (a user's model and
// data): playback and resume refuse a file whose digest differs from the recorded one.
#include <cstddef>
#include <cstdint>
#include <string>

namespace peat::util {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t length);
  std::string hex();  // finishes; lower-case, 64 characters

 private:
  void block(const unsigned char* p);
  uint32_t h_[8];
  unsigned char buffer_[64];
  std::size_t used_ = 0;
  uint64_t total_ = 0;
};

// Throws std::runtime_error when the file cannot be read.
std::string sha256File(const std::string& path);

}  // namespace peat::util
