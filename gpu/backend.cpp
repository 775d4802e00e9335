// SPDX-License-Identifier: MIT
// Host-side helpers of the backend interface: names, device specs, reading results back.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "gpu/backend.h"
#include "gpu/checks.h"

namespace peat::gpu {

const char* gemmName(GemmKind kind) {
  switch (kind) {
    case GemmKind::Naive: return "naive";
    case GemmKind::Tiled: return "tiled";
    case GemmKind::HalfInputs: return "half";
    case GemmKind::SplitK: return "splitk";
    case GemmKind::TileEdge: return "tile-edge";
    case GemmKind::Golden: return "golden";
  }
  return "?";
}

std::vector<GemmKind> gemmKinds() {
  return {GemmKind::Golden, GemmKind::Naive, GemmKind::Tiled, GemmKind::HalfInputs, GemmKind::SplitK, GemmKind::TileEdge};
}

GemmKind gemmFromName(const std::string& name) {
  std::string all;
  for (GemmKind k : gemmKinds()) {
    if (name == gemmName(k)) return k;
    all += std::string(all.empty() ? "" : ", ") + gemmName(k);
  }
  throw std::invalid_argument("unknown GEMM '" + name + "' (expected one of " + all + ")");
}

OpenedDevice openDevice(const std::string& spec) {
  const std::size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const std::string digits = spec.substr(colon + 1);
    if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("bad device '" + spec + "' (expected cpu, cuda:N or hip:N)");
    index = std::stoi(digits);
  }
  OpenedDevice out;
  out.backend = openBackend(name);
  const std::size_t count = out.backend->devices().size();
  if (std::size_t(index) >= count)
    throw std::out_of_range("device " + spec + " does not exist (" + name + " has " + std::to_string(count) +
                            (count == 1 ? " device)" : " devices)"));
  out.device = out.backend->open(index);
  return out;
}

FlipList Device::prepareFlips(const std::vector<BitFlip>& flips, Stream& stream) {
  FlipList out;
  out.count = flips.size();
  for (const BitFlip& f : flips) out.maxIndex = std::max(out.maxIndex, f.index);
  out.list = allocate(std::max<uint64_t>(out.count, 1) * sizeof(BitFlip));
  upload(*out.list, 0, flips.data(), out.count * sizeof(BitFlip), stream);
  return out;
}

void Device::injectBitFlips(Buffer& words, const std::vector<BitFlip>& flips, Stream& stream) {
  checks::flips(checks::words(words), flips);  // names the first bad index
  const FlipList list = prepareFlips(flips, stream);
  applyFlips(words, list, stream);
  synchronize(stream);  // the list is freed on return
}

RangeCheckResult readRangeResult(Device& device, const Buffer& result, Stream& stream) {
  checks::result(result, kRangeResultBytes, "range check");
  uint64_t words[2] = {0, 0};
  device.download(words, result, 0, sizeof words, stream);
  device.synchronize(stream);
  return {words[0], words[1]};
}

ErrorHistograms readHistograms(Device& device, const Buffer& result, Stream& stream) {
  checks::result(result, kHistogramWords * 8, "histogram");
  std::vector<uint64_t> words(kHistogramWords);
  device.download(words.data(), result, 0, kHistogramWords * 8, stream);
  device.synchronize(stream);
  ErrorHistograms h;
  h.mismatched = words[0];
  std::copy(words.begin() + kHistBitsAt, words.begin() + kHistUlpAt, h.bits.begin());
  std::copy(words.begin() + kHistUlpAt, words.begin() + kHistAbsAt, h.log2Ulp.begin());
  std::copy(words.begin() + kHistAbsAt, words.end(), h.log2Abs.begin());
  return h;
}

}  // namespace peat::gpu
