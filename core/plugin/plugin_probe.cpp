// SPDX-License-Identifier: MIT
#include "core/plugin/plugin_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/plugin/peat/kernel_abi.h"
#include "core/util/helper_process.h"
#include "base/sys.h"

namespace peat::plugin {

namespace {

PluginInfo describe(const sys::SharedLibrary& lib, const std::string& path) {
  void* infoSym = nullptr;
  void* gemmSym = nullptr;
  try {
    infoSym = lib.symbol("peat_kernel_info_v1");
    gemmSym = lib.symbol("peat_kernel_gemm_v1");
  } catch (const std::exception& e) {
    throw PluginError(std::string(e.what()) + " (see peat/kernel_abi.h)");
  }
  (void)gemmSym;
  return validatePluginInfo(reinterpret_cast<const peat_kernel_info* (*)()>(infoSym)(), path);
}

}  // namespace

PluginInfo validatePluginInfo(const peat_kernel_info* info, const std::string& path) {
  if (!info) throw PluginError("plugin '" + path + "': peat_kernel_info_v1 returned NULL");
  PluginInfo out;
  out.path = path;
  out.abiVersion = info->abi_version;
  // at most 65 bytes of the name are read: a longer one is refused anyway
  out.name = info->name ? std::string(info->name, ::strnlen(info->name, 65)) : "";
  out.opKind = info->op_kind;
  out.dtype = info->dtype;
  out.memory = info->memory;
  if (out.abiVersion != PEAT_KERNEL_ABI_VERSION)
    throw PluginError("plugin '" + path + "' declares ABI version " + std::to_string(out.abiVersion) +
                      "; this PEAT speaks version " + std::to_string(PEAT_KERNEL_ABI_VERSION));
  if (out.name.empty() || out.name.size() > 64) throw PluginError("plugin '" + path + "' has no usable name");
  for (char c : out.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      throw PluginError("plugin '" + path + "' has a name with characters other than letters, digits, '-', '_', '.'");
  if (out.opKind != PEAT_OP_GEMM) throw PluginError("plugin '" + path + "': only GEMM kernels (op kind 1) are accepted");
  if (out.dtype != PEAT_DTYPE_F32) throw PluginError("plugin '" + path + "': only fp32 kernels (dtype 1) are accepted");
  if (out.memory != PEAT_MEMORY_HOST)
    throw PluginError("plugin '" + path + "': device-pointer kernels are not accepted yet; take host pointers");
  return out;
}

namespace {

std::string lastErrorOf(const sys::SharedLibrary& lib) {
  try {
    auto fn = reinterpret_cast<LastErrorFn>(lib.symbol("peat_kernel_last_error_v1"));
    const char* text = fn();
    return text ? text : "";
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

PluginInfo checkPluginInProcess(const std::string& path) {
  if (!sys::fileExists(path)) throw PluginError("plugin '" + path + "' does not exist");
  std::unique_ptr<sys::SharedLibrary> lib;
  try {
    lib = std::make_unique<sys::SharedLibrary>(path);
  } catch (const std::exception& e) {
    throw PluginError(e.what());
  }
  PluginInfo info = describe(*lib, path);
  auto gemm = reinterpret_cast<GemmFn>(lib->symbol("peat_kernel_gemm_v1"));
  // A 7x5 by 5x6 product with exactly representable values: any correct fp32 GEMM returns it exactly.
  const int64_t m = 7, k = 5, n = 6;
  std::vector<float> a(m * k), b(k * n), c(m * n, std::nanf("")), want(m * n, 0.0f);
  for (int64_t i = 0; i < m * k; ++i) a[i] = float((i * 7) % 11) - 5.0f;
  for (int64_t i = 0; i < k * n; ++i) b[i] = float((i * 5) % 13) * 0.5f - 3.0f;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q) want[i * n + j] += a[i * k + q] * b[q * n + j];
  const int rc = gemm(a.data(), b.data(), c.data(), m, n, k);
  if (rc != 0) {
    const std::string why = lastErrorOf(*lib);
    throw PluginError("plugin '" + info.name + "' failed its test GEMM (return code " + std::to_string(rc) + ")" +
                      (why.empty() ? "" : ": " + why));
  }
  for (int64_t i = 0; i < m * n; ++i) {
    const double error = std::fabs(double(c[i]) - double(want[i]));
    if (error <= 1e-4 * (1.0 + std::fabs(double(want[i])))) continue;
    if (info.probeFirstMismatch < 0) info.probeFirstMismatch = int32_t(i);
    ++info.probeMismatches;
    info.probeMaxAbsError = std::isnan(error) || std::isnan(info.probeMaxAbsError) ? std::nan("")
                                                                                   : std::max(info.probeMaxAbsError, error);
  }
  return info;
}

PluginInfo probePlugin(const std::string& path, double timeoutSeconds) {
  if (!sys::fileExists(path)) throw PluginError("plugin '" + path + "' does not exist");
  const std::string helper = sys::moduleDirectory() + "/peat-probe";
  if (!sys::fileExists(helper)) throw PluginError("the probe helper is missing: " + helper);
  const sys::HelperResult run = sys::runHelper({helper, "plugin", path}, timeoutSeconds);
  if (!run.started) throw PluginError("cannot start the plugin probe: " + run.output);
  if (run.timedOut)
    throw PluginError("plugin '" + path + "' did not finish its probe within " + std::to_string(int(timeoutSeconds)) +
                      " s and was stopped");
  if (run.signal)
    throw PluginError("plugin '" + path + "' crashed during its probe (" + sys::describeSignal(run.signal) +
                      "); it was not loaded");
  const std::string& text = run.output;
  if (text.rfind("ok\t", 0) != 0) {
    const std::string why = text.rfind("error\t", 0) == 0 ? text.substr(6) : "the probe failed (" + text + ")";
    throw PluginError(why);
  }
  return parseProbeAnswer(text, path);
}

std::string probeWarning(const PluginInfo& info) {
  if (info.probeMismatches == 0) return "";
  char error[32];
  std::snprintf(error, sizeof error, "%.6g", info.probeMaxAbsError);
  return "plugin '" + info.name + "' computed its probe GEMM (7x5 by 5x6, exact in fp32) with " +
         std::to_string(info.probeMismatches) + " of " + std::to_string(kProbeElements) +
         " elements wrong (max abs error " + error + ", first at element " + std::to_string(info.probeFirstMismatch) +
         "); loaded anyway: replay calls through it and read the verdicts (docs/plugins.md)";
}

PluginInfo parseProbeAnswer(const std::string& text, const std::string& path) {
  // "ok\tname\tabi\top\tdtype\tmemory\tmismatches\tmax_error\tfirst", from a process that ran the
  // plugin: checked like any input
  if (text.rfind("ok\t", 0) != 0) throw PluginError("the plugin probe answered in an unknown format");
  std::vector<std::string> fields;
  std::size_t start = 3;
  for (std::size_t tab; (tab = text.find('\t', start)) != std::string::npos; start = tab + 1)
    fields.push_back(text.substr(start, tab - start));
  fields.push_back(text.substr(start));
  if (fields.size() != 8) throw PluginError("the plugin probe answered in an unknown format");
  auto number = [](const std::string& f) {
    if (f.empty() || f.size() > 10 || f.find_first_not_of("0123456789") != std::string::npos)
      throw PluginError("the plugin probe answered in an unknown format");
    const unsigned long long v = std::stoull(f);
    if (v > UINT32_MAX) throw PluginError("the plugin probe answered in an unknown format");
    return uint32_t(v);
  };
  PluginInfo info;
  info.path = path;
  info.name = fields[0];
  info.abiVersion = number(fields[1]);
  info.opKind = number(fields[2]);
  info.dtype = number(fields[3]);
  info.memory = number(fields[4]);
  info.probeMismatches = number(fields[5]);
  if (info.probeMismatches > kProbeElements) throw PluginError("the plugin probe answered in an unknown format");
  const std::string& err = fields[6];
  if (err.empty() || err.size() > 32 || err.find_first_not_of("0123456789.e+-naif") != std::string::npos)
    throw PluginError("the plugin probe answered in an unknown format");
  char* end = nullptr;
  info.probeMaxAbsError = std::strtod(err.c_str(), &end);
  if (end != err.c_str() + err.size() || info.probeMaxAbsError < 0 ||
      (info.probeMismatches > 0 && info.probeMaxAbsError == 0))
    throw PluginError("the plugin probe answered in an unknown format");
  const std::string& first = fields[7];
  if (first == "-1") {
    info.probeFirstMismatch = -1;
  } else {
    const uint32_t f = number(first);
    if (f >= kProbeElements) throw PluginError("the plugin probe answered in an unknown format");
    info.probeFirstMismatch = int32_t(f);
  }
  if ((info.probeMismatches == 0) != (info.probeFirstMismatch < 0))
    throw PluginError("the plugin probe answered in an unknown format");
  // the same rules as in the probe: a lying or broken probe cannot smuggle in what it refuses
  peat_kernel_info raw{info.abiVersion, info.name.c_str(), info.opKind, info.dtype, info.memory};
  PluginInfo checked = validatePluginInfo(&raw, path);
  checked.probeMismatches = info.probeMismatches;
  checked.probeMaxAbsError = info.probeMaxAbsError;
  checked.probeFirstMismatch = info.probeFirstMismatch;
  return checked;
}

LoadedPlugin loadProbedPlugin(const std::string& path) {
  LoadedPlugin p;
  p.info = probePlugin(path);
  static std::vector<std::unique_ptr<sys::SharedLibrary>> keep;  // plugins stay loaded for the process
  keep.push_back(std::make_unique<sys::SharedLibrary>(path));
  p.gemm = reinterpret_cast<GemmFn>(keep.back()->symbol("peat_kernel_gemm_v1"));
  try {
    p.lastError = reinterpret_cast<LastErrorFn>(keep.back()->symbol("peat_kernel_last_error_v1"));
  } catch (const std::exception&) {
    p.lastError = nullptr;
  }
  return p;
}

}  // namespace peat::plugin
