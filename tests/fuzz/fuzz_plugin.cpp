// SPDX-License-Identifier: MIT
// libFuzzer target for the plugin ABI probe's checks: a plugin's self-description (peat_kernel_info
// of v1 or peat_plugin_info of v2, whatever its fields and name bytes) and the probe helper's answer
// in either form (text from a process that ran the plugin). Every input is accepted as a plugin the
// ABI allows, or refused with PluginError; nothing else may happen, and what is accepted must obey
// the ABI's rules.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/plugin/dtypes.h"
#include "core/plugin/peat/kernel_abi.h"
#include "core/plugin/plugin_probe.h"

namespace {

bool usableName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

void mustObeyTheAbi(const peat::plugin::PluginInfo& info) {
  if (info.memory != PEAT_MEMORY_HOST || !usableName(info.name)) std::abort();
  if (info.abiVersion == PEAT_KERNEL_ABI_VERSION) {
    // v2: 1 to 8 ops, each kind once, known variants of that kind and known dtypes; consistent counts
    if (info.opKind != 0 || info.dtype != 0 || info.ops.empty() || info.ops.size() > PEAT_OP_KIND_COUNT) std::abort();
    uint32_t seen = 0;
    for (const peat::plugin::PluginOp& op : info.ops) {
      const uint32_t valid = peat::plugin::abiVariantsOf(op.kind);
      if (!valid || (seen & (1u << op.kind)) || op.variants == 0 || (op.variants & ~valid) ||
          !peat::plugin::knownDtype(op.inputDtype) || !peat::plugin::knownDtype(op.outputDtype))
        std::abort();
      seen |= 1u << op.kind;
      if (op.failedCases > op.cases || (op.failedCases == 0) != op.firstFailure.empty() ||
          (op.failedCases == 0) != (op.maxError == 0) || op.maxError < 0 ||
          op.firstFailure.size() > peat::plugin::kMaxFailureText)
        std::abort();
      for (char c : op.firstFailure)
        if (c < 0x20 || c > 0x7e) std::abort();
    }
    return;
  }
  if (info.abiVersion != PEAT_KERNEL_ABI_VERSION_1 || info.opKind != PEAT_OP_GEMM || info.dtype != PEAT_DTYPE_F32 ||
      !info.ops.empty())
    std::abort();
  if (info.probeMismatches > peat::plugin::kProbeElements || info.probeFirstMismatch >= int32_t(peat::plugin::kProbeElements) ||
      (info.probeMismatches == 0) != (info.probeFirstMismatch < 0))
    std::abort();
}

uint32_t word(const uint8_t* p, uint32_t modulus = 4) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v % modulus;  // small values, so the accepted ones are reached too
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    if (data[0] & 1) {
      // the answer of the probe helper
      mustObeyTheAbi(peat::plugin::parseProbeAnswer(std::string(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz"));
    } else if (data[0] & 2) {
      // a v2 self-description: abi, memory, op count, then 16 bytes per op (kind, variants, input and
      // output dtype), then the name's bytes
      if (size < 13) return 0;
      const uint32_t count = word(data + 9, 10);
      std::size_t at = 13;
      std::vector<peat_op_desc> ops;
      for (uint32_t i = 0; i < count && at + 16 <= size; ++i, at += 16)
        ops.push_back(peat_op_desc{word(data + at, 10), word(data + at + 4, 32), word(data + at + 8, 7),
                                   word(data + at + 12, 7), 0});
      std::vector<char> name(data + at, data + size);
      name.push_back('\0');
      // an op count past 8 must be refused before any op is read; below it, the ops given are declared
      const uint32_t declared = count > PEAT_OP_KIND_COUNT ? count : uint32_t(ops.size());
      const peat_plugin_info info{word(data + 1), name.data(), word(data + 5), declared, ops.empty() ? nullptr : ops.data()};
      mustObeyTheAbi(peat::plugin::validatePluginInfoV2(&info, "fuzz"));
    } else if (size >= 17) {
      // a self-description: four fields, then the name's bytes of any length (NUL-terminated, as
      // the ABI requires); a null name when the first name byte is 0xff
      std::vector<char> name(data + 17, data + size);
      name.push_back('\0');
      const bool null = size > 17 && data[17] == 0xff;
      const peat_kernel_info info{word(data + 1), null ? nullptr : name.data(), word(data + 5), word(data + 9),
                                  word(data + 13)};
      mustObeyTheAbi(peat::plugin::validatePluginInfo(&info, "fuzz"));
    }
  } catch (const peat::plugin::PluginError&) {
  }
  return 0;
}
