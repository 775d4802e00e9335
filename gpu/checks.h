// SPDX-License-Identifier: MIT
#pragma once
// Argument checks shared by every backend (host code), so all reject the same bad input with the
// same words, before anything is changed.
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace peat::gpu::checks {

inline std::string mib(uint64_t bytes) { return std::to_string((bytes + (1u << 19)) >> 20) + " MiB"; }

inline void ownBuffer(const void* device, const Buffer& b, const char* what) {
  if (b.owner() != device) throw std::invalid_argument(std::string(what) + " buffer belongs to another device");
}

// [offset, offset + bytes) inside a buffer of `size` bytes, without overflow.
inline void span(uint64_t size, uint64_t offset, uint64_t bytes, const char* what) {
  if (offset > size || bytes > size - offset)
    throw std::invalid_argument(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                                std::to_string(offset) + " + " + std::to_string(bytes) + ") are outside the buffer of " +
                                std::to_string(size) + " bytes");
}

inline uint64_t words(const Buffer& b) {
  if (b.bytes() % 4)
    throw std::invalid_argument("buffer of " + std::to_string(b.bytes()) + " bytes is not whole 32-bit words");
  return b.bytes() / 4;
}

inline void floats(const Buffer& b, uint64_t n, const char* what) {
  if (n > UINT64_MAX / 4 || b.bytes() < n * 4)
    throw std::invalid_argument(std::string(what) + " buffer holds " + std::to_string(b.bytes() / 4) + " floats, " +
                                std::to_string(n) + " are needed");
}

inline void flips(uint64_t count, const std::vector<BitFlip>& list) {
  for (const BitFlip& f : list)
    if (f.index >= count)
      throw std::out_of_range("bit flip at word " + std::to_string(f.index) + " is outside the buffer of " +
                              std::to_string(count) + " words");
}

inline void flipList(uint64_t count, const FlipList& list) {
  if (list.count && list.maxIndex >= count)
    throw std::out_of_range("bit flip at word " + std::to_string(list.maxIndex) + " is outside the buffer of " +
                            std::to_string(count) + " words");
  if (!list.list || list.list->bytes() < list.count * sizeof(BitFlip))
    throw std::invalid_argument("flip list is not prepared");
}

inline void stuckAt(uint64_t count, const StuckAt& r) {
  if (r.first > count || r.count > count - r.first)
    throw std::out_of_range("stuck-at region [" + std::to_string(r.first) + ", " + std::to_string(r.first) + " + " +
                            std::to_string(r.count) + ") is outside the buffer of " + std::to_string(count) + " words");
}

inline void result(const Buffer& b, uint64_t bytes, const char* what) {
  if (b.bytes() < bytes)
    throw std::invalid_argument(std::string(what) + " result buffer has " + std::to_string(b.bytes()) +
                                " bytes, " + std::to_string(bytes) + " are needed");
}

inline void gemm(GemmKind kind, const GemmShape& s, const Buffer& a, const Buffer& b, const Buffer& c) {
  if (!s.m || !s.n || !s.k) throw std::invalid_argument("GEMM dimensions must be positive");
  if (s.m > (1u << 30) || s.n > (1u << 30) || s.k > (1u << 30))
    throw std::invalid_argument("GEMM dimensions above 2^30 are not supported");
  floats(a, s.m * s.k, "GEMM A");
  floats(b, s.k * s.n, "GEMM B");
  floats(c, s.m * s.n, "GEMM C");
  if (&a == &c || &b == &c) throw std::invalid_argument("GEMM C must not alias A or B");
  if (kind == GemmKind::SplitK && (s.parts < 1 || uint64_t(s.parts) > s.k))
    throw std::invalid_argument("split-K needs 1 <= parts <= K (" + std::to_string(s.parts) + " parts, K = " +
                                std::to_string(s.k) + ")");
}

}  // namespace peat::gpu::checks
