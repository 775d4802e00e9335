// SPDX-License-Identifier: MIT
#include "core/plugin/plugin_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/plugin/dtypes.h"
#include "core/plugin/peat/kernel_abi.h"
#include "core/plugin/probe_reference.h"
#include "core/util/helper_process.h"
#include "base/sys.h"

namespace peat::plugin {

namespace {

bool exports(const sys::SharedLibrary& lib, const char* name) {
  try {
    lib.symbol(name);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void* required(const sys::SharedLibrary& lib, const char* name) {
  try {
    return lib.symbol(name);
  } catch (const std::exception& e) {
    throw PluginError(std::string(e.what()) + " (see peat/kernel_abi.h)");
  }
}

PluginInfo describe(const sys::SharedLibrary& lib, const std::string& path) {
  void* infoSym = required(lib, "peat_kernel_info_v1");
  required(lib, "peat_kernel_gemm_v1");
  return validatePluginInfo(reinterpret_cast<const peat_kernel_info* (*)()>(infoSym)(), path);
}

// at most 65 bytes of the name are read: a longer one is refused anyway
std::string nameOf(const char* name) { return name ? std::string(name, ::strnlen(name, 65)) : ""; }

void checkName(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > 64) throw PluginError("plugin '" + path + "' has no usable name");
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      throw PluginError("plugin '" + path + "' has a name with characters other than letters, digits, '-', '_', '.'");
}

void checkMemory(uint32_t memory, const std::string& path) {
  if (memory == PEAT_MEMORY_DEVICE)
    throw PluginError("plugin '" + path + "': device-pointer kernels are not accepted yet; take host pointers");
  if (memory != PEAT_MEMORY_HOST)
    throw PluginError("plugin '" + path + "' declares memory kind " + std::to_string(memory) + "; host memory is 1");
}

}  // namespace

uint32_t abiVariantsOf(uint32_t opKind) {
  const uint32_t f = PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD), gi = PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT),
                 gw = PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_WEIGHT), gb = PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_BIAS);
  switch (opKind) {
    case PEAT_OP_GEMM:
    case PEAT_OP_BATCHED_GEMM: return f;
    case PEAT_OP_CONV2D: return f | gi | gw;
    case PEAT_OP_SOFTMAX:
    case PEAT_OP_ATTENTION:
    case PEAT_OP_ACTIVATION: return f | gi;
    case PEAT_OP_LAYER_NORM: return f | gi | gw | gb;
    case PEAT_OP_OPTIMIZER: return PEAT_VARIANT_BIT(PEAT_VARIANT_UPDATE);
    default: return 0;
  }
}

PluginInfo validatePluginInfo(const peat_kernel_info* info, const std::string& path) {
  if (!info) throw PluginError("plugin '" + path + "': peat_kernel_info_v1 returned NULL");
  PluginInfo out;
  out.path = path;
  out.abiVersion = info->abi_version;
  out.name = nameOf(info->name);
  out.opKind = info->op_kind;
  out.dtype = info->dtype;
  out.memory = info->memory;
  // v1 code named its version PEAT_KERNEL_ABI_VERSION, which read 1 until v2 came: such source,
  // compiled against today's header, says 2 in the v1 struct and is the v1 plugin it always was
  if (out.abiVersion == PEAT_KERNEL_ABI_VERSION) out.abiVersion = PEAT_KERNEL_ABI_VERSION_1;
  if (out.abiVersion != PEAT_KERNEL_ABI_VERSION_1)
    throw PluginError("plugin '" + path + "' declares ABI version " + std::to_string(out.abiVersion) +
                      " in peat_kernel_info_v1, which carries version 1 (PEAT_KERNEL_ABI_VERSION_1; or 2, "
                      "PEAT_KERNEL_ABI_VERSION, from v1 code compiled against today's header)");
  checkName(out.name, path);
  if (out.opKind != PEAT_OP_GEMM) throw PluginError("plugin '" + path + "': only GEMM kernels (op kind 1) are accepted");
  if (out.dtype != PEAT_DTYPE_F32) throw PluginError("plugin '" + path + "': only fp32 kernels (dtype 1) are accepted");
  checkMemory(out.memory, path);
  return out;
}

PluginInfo validatePluginInfoV2(const peat_plugin_info* info, const std::string& path) {
  if (!info) throw PluginError("plugin '" + path + "': peat_kernel_info_v2 returned NULL");
  PluginInfo out;
  out.path = path;
  out.abiVersion = info->abi_version;
  out.name = nameOf(info->name);
  out.memory = info->memory;
  if (out.abiVersion != PEAT_KERNEL_ABI_VERSION)
    throw PluginError("plugin '" + path + "' declares ABI version " + std::to_string(out.abiVersion) +
                      " in peat_kernel_info_v2, which carries version " + std::to_string(PEAT_KERNEL_ABI_VERSION));
  checkName(out.name, path);
  checkMemory(out.memory, path);
  if (info->op_count < 1 || info->op_count > PEAT_OP_KIND_COUNT)
    throw PluginError("plugin '" + path + "' declares " + std::to_string(info->op_count) + " op kinds; 1 to " +
                      std::to_string(PEAT_OP_KIND_COUNT) + " are allowed");
  if (!info->ops)
    throw PluginError("plugin '" + path + "' declares " + std::to_string(info->op_count) + " op kinds and no list of them");
  uint32_t seen = 0;
  for (uint32_t i = 0; i < info->op_count; ++i) {
    const peat_op_desc& d = info->ops[i];
    const std::string what = "plugin '" + path + "': op " + std::to_string(i) + " ";
    const uint32_t valid = abiVariantsOf(d.op_kind);
    if (!valid) throw PluginError(what + "has the unknown op kind " + std::to_string(d.op_kind));
    if (seen & (1u << d.op_kind)) throw PluginError(what + "declares " + abiOpName(d.op_kind) + " a second time");
    seen |= 1u << d.op_kind;
    if (d.variants == 0) throw PluginError(what + "(" + abiOpName(d.op_kind) + ") declares no variant");
    if (d.variants & ~valid) {
      const uint32_t bad = d.variants & ~valid;
      uint32_t v = 0;
      while (!(bad & (1u << v))) ++v;
      throw PluginError(what + "(" + abiOpName(d.op_kind) + ") declares the variant " + abiVariantName(v) +
                        ", which " + abiOpName(d.op_kind) + " does not have");
    }
    if (!knownDtype(d.input_dtype) || !knownDtype(d.output_dtype))
      throw PluginError(what + "(" + abiOpName(d.op_kind) + ") declares the unknown " +
                        dtypeName(knownDtype(d.input_dtype) ? d.output_dtype : d.input_dtype) + " (1 to 5 are known)");
    const uint32_t knownFeatures = d.op_kind == PEAT_OP_ATTENTION ? PEAT_FEATURE_ATTENTION_DROPOUT : 0u;
    if (d.features & ~knownFeatures)
      throw PluginError(what + "(" + abiOpName(d.op_kind) + ") declares features " + std::to_string(d.features) +
                        (knownFeatures ? "; attention knows only PEAT_FEATURE_ATTENTION_DROPOUT (1)"
                                       : "; this op kind has none (0)"));
    PluginOp op;
    op.kind = d.op_kind;
    op.variants = d.variants;
    op.inputDtype = d.input_dtype;
    op.outputDtype = d.output_dtype;
    op.features = d.features;
    out.ops.push_back(op);
  }
  return out;
}

namespace {

std::string oneLine(std::string text, std::size_t limit) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (text.size() > limit) text.resize(limit);
  return text;
}

std::string lastErrorOf(const sys::SharedLibrary& lib, bool v2) {
  for (const char* name : {v2 ? "peat_kernel_last_error_v2" : "", "peat_kernel_last_error_v1"}) {
    if (!*name || !exports(lib, name)) continue;
    const char* text = reinterpret_cast<LastErrorFn>(lib.symbol(name))();
    return text ? oneLine(std::string(text, ::strnlen(text, 1000)), 300) : "";
  }
  return "";
}

// Per-element tolerance of a probe case, relative to the largest magnitude of its output: set by the
// less precise of the op's two dtypes, with room for a port's own roundings in that format.
double dtypeTolerance(uint32_t dtype) {
  switch (dtype) {
    case PEAT_DTYPE_F32: return 1e-4;
    case PEAT_DTYPE_F16: return 4e-3;
    case PEAT_DTYPE_BF16: return 3e-2;
    case PEAT_DTYPE_FP8_E4M3: return 0.15;
    default: return 0.3;
  }
}

std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

double stickyMax(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }

// Runs one probe case through the kernel and adds its result to `op`. Inputs are rounded to the op's
// input dtype as the slot rounds them, and the reference is computed from those rounded values: what
// is left is the kernel's own error.
void runCase(RunV2Fn run, const sys::SharedLibrary& lib, const std::string& name, PluginOp& op, const ProbeCase& c) {
  std::vector<std::vector<unsigned char>> inBytes, outBytes;
  std::vector<peat_tensor> ins, outs;
  std::vector<std::vector<double>> decoded;
  std::vector<std::vector<int64_t>> inShapes;
  for (const ProbeInput& in : c.inputs) {
    const uint32_t dtype = in.keepF32 ? uint32_t(PEAT_DTYPE_F32) : in.outputDtype ? op.outputDtype : op.inputDtype;
    const std::size_t n = in.values.size();
    peat_tensor t{};
    t.dtype = dtype;
    t.scale = chooseScale(in.values.data(), n, dtype);
    inBytes.emplace_back(n * dtypeSize(dtype) + 1);  // + 1: never empty
    encodeValues(in.values.data(), n, dtype, t.scale, inBytes.back().data());
    std::vector<float> back(n);
    decodeValues(inBytes.back().data(), n, dtype, t.scale, back.data());
    decoded.emplace_back(back.begin(), back.end());
    t.data = inBytes.back().data();
    t.rank = uint32_t(in.shape.size());
    for (std::size_t d = 0; d < in.shape.size(); ++d) t.shape[d] = in.shape[d];
    ins.push_back(t);
    inShapes.push_back(in.shape);
  }
  for (const std::vector<int64_t>& shape : c.outputShapes) {
    std::size_t n = 1;
    for (int64_t d : shape) n *= std::size_t(d);
    outBytes.emplace_back(n * dtypeSize(op.outputDtype) + 1, 0xFF);  // NaN in every format: unwritten shows
    peat_tensor t{};
    t.data = outBytes.back().data();
    t.dtype = op.outputDtype;
    t.rank = uint32_t(shape.size());
    for (std::size_t d = 0; d < shape.size(); ++d) t.shape[d] = shape[d];
    t.scale = 1.0f;
    outs.push_back(t);
  }
  peat_call call{};
  call.op_kind = c.opKind;
  call.variant = c.variant;
  call.input_count = uint32_t(ins.size());
  call.output_count = uint32_t(outs.size());
  call.inputs = ins.data();
  call.outputs = outs.data();
  call.params = c.params;
  const int rc = run(&call);
  const std::string what = abiOpName(c.opKind) + " " + abiVariantName(c.variant) + " (" + c.label + ")";
  if (rc != 0) {
    const std::string why = lastErrorOf(lib, true);
    throw PluginError("plugin '" + name + "' failed its probe call " + what + " (return code " + std::to_string(rc) +
                      ")" + (why.empty() ? "" : ": " + why));
  }
  std::vector<std::vector<double>> want;
  try {
    want = referenceOutputs(c.opKind, c.variant, c.params, inShapes, decoded, c.outputShapes);
  } catch (const std::invalid_argument& e) {  // the probe's own case: a bug here, not in the plugin
    throw PluginError("the probe's reference refused its case " + what + ": " + e.what());
  }
  const double tol = std::max(dtypeTolerance(op.inputDtype), dtypeTolerance(op.outputDtype));
  uint64_t wrong = 0, checked = 0;
  double maxError = 0;
  for (std::size_t o = 0; o < outs.size(); ++o) {
    const std::size_t n = want[o].size();
    std::vector<float> got(n);
    decodeValues(outBytes[o].data(), n, op.outputDtype, isFp8(op.outputDtype) ? outs[o].scale : 1.0f, got.data());
    double largest = 0;
    for (double w : want[o])
      if (!std::isnan(w)) largest = std::max(largest, std::fabs(w));
    const double bound = tol * (largest + 1e-30) + 1e-12;  // the 1e-12: room for rounding when all is zero
    for (std::size_t i = 0; i < n; ++i) {
      if (std::isnan(want[o][i])) continue;  // not the kernel's to write
      ++checked;
      const double error = std::fabs(double(got[i]) - want[o][i]);
      maxError = stickyMax(maxError, error);
      if (!(error <= bound)) ++wrong;
    }
  }
  ++op.cases;
  if (wrong == 0) return;
  ++op.failedCases;
  op.maxError = op.failedCases == 1 ? maxError : stickyMax(op.maxError, maxError);
  if (op.firstFailure.empty())
    op.firstFailure = oneLine(abiVariantName(c.variant) + ", " + c.label + ": " + std::to_string(wrong) + " of " +
                                  std::to_string(checked) + " elements wrong (max abs error " + shortNumber(maxError) + ")",
                              kMaxFailureText);
}

PluginInfo checkV2(const sys::SharedLibrary& lib, const std::string& path) {
  auto infoFn = reinterpret_cast<const peat_plugin_info* (*)()>(lib.symbol("peat_kernel_info_v2"));
  PluginInfo info = validatePluginInfoV2(infoFn(), path);
  auto run = reinterpret_cast<RunV2Fn>(required(lib, "peat_kernel_run_v2"));
  for (PluginOp& op : info.ops)
    for (uint32_t v = 0; v < 32; ++v)  // variant by variant, so that a failure names the first variant
      if (op.variants & (1u << v))
        for (const ProbeCase& c : probeCases(op.kind, 1u << v, op.features)) runCase(run, lib, info.name, op, c);
  return info;
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
  // a library exporting the v2 info is a v2 plugin, whatever v1 symbols it also has
  if (exports(*lib, "peat_kernel_info_v2")) return checkV2(*lib, path);
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
    const std::string why = lastErrorOf(*lib, false);
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
  if (text.rfind("ok\t", 0) != 0 && text.rfind("ok2\t", 0) != 0) {
    const std::string why = text.rfind("error\t", 0) == 0 ? text.substr(6) : "the probe failed (" + text + ")";
    throw PluginError(why);
  }
  return parseProbeAnswer(text, path);
}

std::string probeWarning(const PluginInfo& info) {
  if (info.abiVersion == PEAT_KERNEL_ABI_VERSION) {
    uint64_t cases = 0, failed = 0;
    const PluginOp* first = nullptr;
    for (const PluginOp& op : info.ops) {
      cases += op.cases;
      failed += op.failedCases;
      if (!first && op.failedCases) first = &op;
    }
    if (!first) return "";
    return "plugin '" + info.name + "' got " + std::to_string(failed) + " of " + std::to_string(cases) +
           " probe cases wrong: " + abiOpName(first->kind) + " " + first->firstFailure +
           "; loaded anyway: replay calls through it and read the verdicts (docs/plugins.md)";
  }
  if (info.probeMismatches == 0) return "";
  char error[32];
  std::snprintf(error, sizeof error, "%.6g", info.probeMaxAbsError);
  return "plugin '" + info.name + "' computed its probe GEMM (7x5 by 5x6, exact in fp32) with " +
         std::to_string(info.probeMismatches) + " of " + std::to_string(kProbeElements) +
         " elements wrong (max abs error " + error + ", first at element " + std::to_string(info.probeFirstMismatch) +
         "); loaded anyway: replay calls through it and read the verdicts (docs/plugins.md)";
}

std::string probeAnswer(const PluginInfo& info) {
  char line[512];
  if (info.abiVersion != PEAT_KERNEL_ABI_VERSION) {
    std::snprintf(line, sizeof line, "ok\t%s\t%u\t%u\t%u\t%u\t%u\t%.9g\t%d", info.name.c_str(), info.abiVersion,
                  info.opKind, info.dtype, info.memory, info.probeMismatches, info.probeMaxAbsError,
                  info.probeFirstMismatch);
    return line;
  }
  std::snprintf(line, sizeof line, "ok2\t%s\t%u\t%zu", info.name.c_str(), info.memory, info.ops.size());
  std::string text = line;
  for (const PluginOp& op : info.ops) {
    std::snprintf(line, sizeof line, "\nop\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%.9g\t", op.kind, op.variants, op.inputDtype,
                  op.outputDtype, op.features, op.cases, op.failedCases, op.maxError);
    text += line + oneLine(op.firstFailure, kMaxFailureText);
  }
  return text;
}

namespace {

[[noreturn]] void unknownFormat() { throw PluginError("the plugin probe answered in an unknown format"); }

std::vector<std::string> split(const std::string& text, char at, std::size_t start = 0) {
  std::vector<std::string> fields;
  for (std::size_t end; (end = text.find(at, start)) != std::string::npos; start = end + 1)
    fields.push_back(text.substr(start, end - start));
  fields.push_back(text.substr(start));
  return fields;
}

uint32_t answerNumber(const std::string& f) {
  if (f.empty() || f.size() > 10 || f.find_first_not_of("0123456789") != std::string::npos) unknownFormat();
  const unsigned long long v = std::stoull(f);
  if (v > UINT32_MAX) unknownFormat();
  return uint32_t(v);
}

// a max abs error: a non-negative number, inf or nan, as %.9g prints it
double answerError(const std::string& f) {
  if (f.empty() || f.size() > 32 || f.find_first_not_of("0123456789.e+-naif") != std::string::npos) unknownFormat();
  char* end = nullptr;
  const double v = std::strtod(f.c_str(), &end);
  if (end != f.c_str() + f.size() || v < 0) unknownFormat();
  return v;
}

// "ok2\tname\tmemory\top_count", then op_count lines
// "op\tkind\tvariants\tin\tout\tfeatures\tcases\tfailed\tmax_error\tfirst"
PluginInfo parseProbeAnswerV2(const std::string& text, const std::string& path) {
  const std::vector<std::string> lines = split(text, '\n');
  const std::vector<std::string> head = split(lines[0], '\t', 4);
  if (head.size() != 3) unknownFormat();
  const uint32_t opCount = answerNumber(head[2]);
  if (opCount < 1 || opCount > PEAT_OP_KIND_COUNT || lines.size() != 1 + std::size_t(opCount)) unknownFormat();
  std::vector<peat_op_desc> descs;
  std::vector<PluginOp> ops;
  for (std::size_t l = 1; l < lines.size(); ++l) {
    if (lines[l].rfind("op\t", 0) != 0) unknownFormat();
    const std::vector<std::string> f = split(lines[l], '\t', 3);
    if (f.size() != 9) unknownFormat();
    PluginOp op;
    op.kind = answerNumber(f[0]);
    op.variants = answerNumber(f[1]);
    op.inputDtype = answerNumber(f[2]);
    op.outputDtype = answerNumber(f[3]);
    op.features = answerNumber(f[4]);
    op.cases = answerNumber(f[5]);
    op.failedCases = answerNumber(f[6]);
    op.maxError = answerError(f[7]);
    op.firstFailure = f[8];
    // every declared variant ran at least one case; a failed case had an error, and its description
    int declared = 0;
    for (uint32_t v = op.variants; v; v &= v - 1) ++declared;
    if (op.cases < uint32_t(declared) || op.cases > 100000 || op.failedCases > op.cases) unknownFormat();
    if ((op.failedCases == 0) != (op.maxError == 0) || (op.failedCases == 0) != op.firstFailure.empty()) unknownFormat();
    if (op.firstFailure.size() > kMaxFailureText) unknownFormat();
    for (char c : op.firstFailure)
      if (c < 0x20 || c > 0x7e) unknownFormat();
    descs.push_back(peat_op_desc{op.kind, op.variants, op.inputDtype, op.outputDtype, op.features});
    ops.push_back(op);
  }
  // the same rules as in the probe: a lying or broken probe cannot smuggle in what it refuses
  const peat_plugin_info raw{PEAT_KERNEL_ABI_VERSION, head[0].c_str(), answerNumber(head[1]), opCount, descs.data()};
  PluginInfo checked = validatePluginInfoV2(&raw, path);
  if (checked.name != head[0]) unknownFormat();  // a NUL inside the name
  checked.ops = ops;
  return checked;
}

}  // namespace

PluginInfo parseProbeAnswer(const std::string& text, const std::string& path) {
  // "ok\tname\tabi\top\tdtype\tmemory\tmismatches\tmax_error\tfirst" (v1) or the v2 form
  // (probeAnswer), from a process that ran the plugin: checked like any input
  if (text.rfind("ok2\t", 0) == 0) return parseProbeAnswerV2(text, path);
  if (text.rfind("ok\t", 0) != 0) throw PluginError("the plugin probe answered in an unknown format");
  const std::vector<std::string> fields = split(text, '\t', 3);
  if (fields.size() != 8) unknownFormat();
  const auto number = answerNumber;
  PluginInfo info;
  info.path = path;
  info.name = fields[0];
  info.abiVersion = number(fields[1]);
  if (info.abiVersion != PEAT_KERNEL_ABI_VERSION_1) unknownFormat();  // the probe answers v1 as version 1
  info.opKind = number(fields[2]);
  info.dtype = number(fields[3]);
  info.memory = number(fields[4]);
  info.probeMismatches = number(fields[5]);
  if (info.probeMismatches > kProbeElements) unknownFormat();
  info.probeMaxAbsError = answerError(fields[6]);
  if (info.probeMismatches > 0 && info.probeMaxAbsError == 0) unknownFormat();
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
  const sys::SharedLibrary& lib = *keep.back();
  const bool v2 = p.info.abiVersion == PEAT_KERNEL_ABI_VERSION;
  if (v2) p.run = reinterpret_cast<RunV2Fn>(required(lib, "peat_kernel_run_v2"));
  else p.gemm = reinterpret_cast<GemmFn>(required(lib, "peat_kernel_gemm_v1"));
  for (const char* name : {v2 ? "peat_kernel_last_error_v2" : "", "peat_kernel_last_error_v1"})
    if (*name && !p.lastError && exports(lib, name)) p.lastError = reinterpret_cast<LastErrorFn>(lib.symbol(name));
  return p;
}

std::vector<std::string> slotOpsOf(const PluginInfo& info) {
  if (info.abiVersion < 2) return {"linear", "conv2d", "matmul"};
  std::vector<std::string> out;
  auto add = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (const PluginOp& o : info.ops) switch (o.kind) {
      case PEAT_OP_GEMM:
      case PEAT_OP_BATCHED_GEMM: add({"linear", "conv2d", "matmul"}); break;
      case PEAT_OP_CONV2D: add({"conv2d"}); break;
      case PEAT_OP_SOFTMAX: add({"softmax", "log_softmax"}); break;
      case PEAT_OP_LAYER_NORM: add({"layernorm"}); break;
      case PEAT_OP_ATTENTION: add({"attention"}); break;
      case PEAT_OP_ACTIVATION: add({"gelu", "relu", "silu", "tanh", "sigmoid"}); break;
      case PEAT_OP_OPTIMIZER: add({"sgd", "adam"}); break;
      default: break;
    }
  return out;
}

}  // namespace peat::plugin
