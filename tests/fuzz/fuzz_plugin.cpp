// SPDX-License-Identifier: MIT
// libFuzzer target for the plugin ABI probe's checks: a plugin's self-description (peat_kernel_info,
// whatever its fields and name bytes) and the probe helper's answer (text from a process that ran
// the plugin). Every input is accepted as a plugin the ABI allows, or refused with PluginError;
// nothing else may happen, and what is accepted must obey the ABI's rules.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/plugin/peat/kernel_abi.h"
#include "core/plugin/plugin_probe.h"

namespace {

void mustObeyTheAbi(const peat::plugin::PluginInfo& info) {
  if (info.abiVersion != PEAT_KERNEL_ABI_VERSION || info.opKind != PEAT_OP_GEMM || info.dtype != PEAT_DTYPE_F32 ||
      info.memory != PEAT_MEMORY_HOST || info.name.empty() || info.name.size() > 64)
    std::abort();
  for (char c : info.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) std::abort();
  if (info.probeMismatches > peat::plugin::kProbeElements || info.probeFirstMismatch >= int32_t(peat::plugin::kProbeElements) ||
      (info.probeMismatches == 0) != (info.probeFirstMismatch < 0))
    std::abort();
}

uint32_t word(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v % 4;  // small values, so the accepted ones are reached too
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    if (data[0] & 1) {
      // the answer of the probe helper
      mustObeyTheAbi(peat::plugin::parseProbeAnswer(std::string(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz"));
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
