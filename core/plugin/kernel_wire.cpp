// SPDX-License-Identifier: MIT
#include "core/plugin/kernel_wire.h"

#include <unistd.h>

#include "core/plugin/dtypes.h"
#include "core/plugin/peat/kernel_abi.h"

namespace peat::plugin::wire {

namespace {

uint64_t roundUp(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

}  // namespace

std::size_t pageSize() {
  static const std::size_t size = std::size_t(::sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t arenaStart() { return std::size_t(roundUp(sizeof(Control), pageSize())); }

uint64_t layout(Request& r) {
  const uint64_t page = pageSize();
  uint64_t cursor = 0;
  for (uint32_t i = 0; i < r.tensorCount && i < uint32_t(kMaxTensors); ++i) {
    Tensor& t = r.tensors[i];
    t.regionBegin = cursor;
    t.regionEnd = cursor + roundUp(t.bytes > 0 ? t.bytes : 1, page);
    // an output ends at its guard, but starts 64-byte aligned: the gap holds canary bytes
    t.offset = t.role == kOutput ? (t.regionEnd - t.bytes) / kOutputAlignment * kOutputAlignment : cursor;
    cursor = t.regionEnd + page;  // the guard page
  }
  return cursor;
}

std::string checkRequest(const Request& r, uint64_t arenaBytes) {
  if (r.magic != kMagic || r.version != kVersion) return "not a request of this wire version";
  if (r.tensorCount == 0 || r.tensorCount > uint32_t(kMaxTensors)) return "bad tensor count";
  if (r.arenaBytes != arenaBytes) return "the arena's size differs from the request's";
  if (r.abiVersion != 1 && r.abiVersion != 2) return "bad ABI version";
  const uint64_t page = pageSize();
  uint64_t cursor = 0;
  for (uint32_t i = 0; i < r.tensorCount; ++i) {
    const Tensor& t = r.tensors[i];
    const std::string which = "tensor " + std::to_string(i) + ": ";
    if (t.role != kInput && t.role != kOutput) return which + "bad role";
    const uint64_t element = dtypeSize(t.dtype);
    if (element == 0) return which + "unknown dtype " + std::to_string(t.dtype);
    if (t.rank > uint32_t(kMaxRank)) return which + "bad rank";
    uint64_t count = 1;
    for (uint32_t d = 0; d < t.rank; ++d) {
      if (t.shape[d] < 0 || (t.shape[d] > 0 && count > (uint64_t(1) << 50) / uint64_t(t.shape[d])))
        return which + "bad shape";
      count *= uint64_t(t.shape[d]);
    }
    if (count * element != t.bytes) return which + "its bytes do not match its shape";
    if (t.regionBegin != cursor || t.regionBegin % page || t.regionEnd % page || t.regionEnd <= t.regionBegin)
      return which + "bad region";
    if (t.offset < t.regionBegin || t.offset > t.regionEnd || t.bytes > t.regionEnd - t.offset)
      return which + "outside its region";
    if (t.regionEnd > arenaBytes || arenaBytes - t.regionEnd < page) return which + "past the arena";
    cursor = t.regionEnd + page;
  }
  return "";
}

}  // namespace peat::plugin::wire
