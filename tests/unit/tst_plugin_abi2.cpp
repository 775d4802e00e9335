// SPDX-License-Identifier: MIT
// Plugin ABI v2's probe (core/plugin/plugin_probe.h, probe_reference.h): the examples of
// core/plugin/examples read as declared and come out right, the planted causal bug does not; kernels
// of every op kind (tests/plugins/ops_v2_plugins.c) pass in f32, f16/bf16 and fp8, and one with a
// plausible bug per op kind fails each op; broken declarations and failing calls are refused with one
// line; the probe helper's answer round-trips and a malformed one is refused.
#include <QtTest>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/plugin/dtypes.h"
#include "core/plugin/peat/kernel_abi.h"
#include "core/plugin/plugin_probe.h"
#include "core/plugin/probe_reference.h"

namespace plugin = peat::plugin;

namespace {

const uint32_t kF = PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD), kGI = PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT);

std::string example(const char* name) { return std::string(PEAT_PLUGIN_DIR "/libpeat_example_") + name + ".so"; }
std::string testPlugin(const char* name) { return std::string(PEAT_TEST_PLUGIN_DIR "/libpeat_") + name + ".so"; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

uint32_t totalCases(const plugin::PluginInfo& info) {
  uint32_t n = 0;
  for (const plugin::PluginOp& op : info.ops) n += op.cases;
  return n;
}

uint32_t failedCases(const plugin::PluginInfo& info) {
  uint32_t n = 0;
  for (const plugin::PluginOp& op : info.ops) n += op.failedCases;
  return n;
}

std::string refusal(const std::string& answer) {
  try {
    plugin::parseProbeAnswer(answer, "x.so");
  } catch (const plugin::PluginError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class TestPluginAbi2 : public QObject {
  Q_OBJECT
 private slots:
  void fp8KeepsInfinities();
  void examplesReadAsDeclared();
  void examplesAreRight_data();
  void examplesAreRight();
  void causalBugIsFound();
  void helperAnswersLikeTheProcess();
  void everyOpKindInEveryDtype_data();
  void everyOpKindInEveryDtype();
  void aPlantedBugPerOpKindIsFound();
  void brokenV2PluginsAreRefused_data();
  void brokenV2PluginsAreRefused();
  void declarationsAreChecked();
  void v1InfoCarriesVersion1();
  void answersRoundTrip();
  void malformedAnswersAreRefused_data();
  void malformedAnswersAreRefused();
  void everyDeclaredVariantHasCases();
  void referenceOfSmallCalls();
};

// A mask's -inf through an fp8 input: an infinity in E5M2, NaN in E4M3 (it has none), never a finite
// value that would let masked keys through; finite values beyond the range saturate.
void TestPluginAbi2::fp8KeepsInfinities() {
  const float values[] = {1.0f, -INFINITY, 0.5f};
  for (const uint32_t dtype : {uint32_t(PEAT_DTYPE_FP8_E5M2), uint32_t(PEAT_DTYPE_FP8_E4M3)}) {
    const float scale = plugin::chooseScale(values, 3, dtype);
    uint8_t codes[3];
    plugin::encodeValues(values, 3, dtype, scale, codes);
    float back[3];
    plugin::decodeValues(codes, 3, dtype, scale, back);
    QCOMPARE(back[0], 1.0f);  // the largest finite value maps to the format's largest, exactly
    if (dtype == PEAT_DTYPE_FP8_E5M2) QVERIFY(std::isinf(back[1]) && back[1] < 0);
    else QVERIFY(std::isnan(back[1]));
  }
}

void TestPluginAbi2::examplesReadAsDeclared() {
  const plugin::PluginInfo gemm = plugin::checkPluginInProcess(example("bf16_gemm"));
  QCOMPARE(gemm.abiVersion, uint32_t(PEAT_KERNEL_ABI_VERSION));
  QCOMPARE(gemm.name, std::string("bf16-gemm"));
  QCOMPARE(gemm.memory, uint32_t(PEAT_MEMORY_HOST));
  QCOMPARE(gemm.opKind, 0u);
  QCOMPARE(gemm.ops.size(), std::size_t(2));
  QCOMPARE(gemm.ops[0].kind, uint32_t(PEAT_OP_GEMM));
  QCOMPARE(gemm.ops[1].kind, uint32_t(PEAT_OP_BATCHED_GEMM));
  for (const plugin::PluginOp& op : gemm.ops) {
    QCOMPARE(op.variants, kF);
    QCOMPARE(op.inputDtype, uint32_t(PEAT_DTYPE_BF16));
    QCOMPARE(op.outputDtype, uint32_t(PEAT_DTYPE_F32));
  }
  QCOMPARE(gemm.ops[0].cases, 4u);  // the four transpose combinations
  QCOMPARE(gemm.ops[1].cases, 2u);
  QVERIFY(gemm.op(PEAT_OP_BATCHED_GEMM) == &gemm.ops[1]);
  QVERIFY(gemm.op(PEAT_OP_SOFTMAX) == nullptr);

  const plugin::PluginInfo softmax = plugin::checkPluginInProcess(example("online_softmax"));
  QCOMPARE(softmax.name, std::string("online-softmax"));
  QCOMPARE(softmax.ops.size(), std::size_t(1));
  QCOMPARE(softmax.ops[0].kind, uint32_t(PEAT_OP_SOFTMAX));
  QCOMPARE(softmax.ops[0].variants, kF | kGI);
  QCOMPARE(softmax.ops[0].inputDtype, uint32_t(PEAT_DTYPE_F32));
  QCOMPARE(softmax.ops[0].outputDtype, uint32_t(PEAT_DTYPE_F32));
  QCOMPARE(softmax.ops[0].cases, 4u);  // softmax and log-softmax, forward and backward

  const plugin::PluginInfo attention = plugin::checkPluginInProcess(example("flash_attention"));
  QCOMPARE(attention.name, std::string("flash-attention"));
  QCOMPARE(attention.ops.size(), std::size_t(1));
  QCOMPARE(attention.ops[0].kind, uint32_t(PEAT_OP_ATTENTION));
  QCOMPARE(attention.ops[0].variants, kF | kGI);
  QCOMPARE(attention.ops[0].inputDtype, uint32_t(PEAT_DTYPE_BF16));
  QCOMPARE(attention.ops[0].outputDtype, uint32_t(PEAT_DTYPE_F32));
  QCOMPARE(attention.ops[0].features, uint32_t(PEAT_FEATURE_ATTENTION_DROPOUT));
  QCOMPARE(attention.ops[0].cases, 16u);  // 4 shapes, each also with dropout, forward and grad input
}

void TestPluginAbi2::examplesAreRight_data() {
  QTest::addColumn<QString>("name");
  QTest::newRow("bf16-gemm") << "bf16_gemm";
  QTest::newRow("online-softmax") << "online_softmax";
  QTest::newRow("flash-attention") << "flash_attention";
}

void TestPluginAbi2::examplesAreRight() {
  QFETCH(QString, name);
  const plugin::PluginInfo info = plugin::checkPluginInProcess(example(name.toStdString().c_str()));
  QVERIFY(totalCases(info) > 0);
  for (const plugin::PluginOp& op : info.ops) {
    QVERIFY2(op.failedCases == 0, op.firstFailure.c_str());
    QCOMPARE(op.maxError, 0.0);
    QVERIFY(op.firstFailure.empty());
  }
  QVERIFY(plugin::probeWarning(info).empty());
}

// Query i also sees key i + 1: the causal cases fail, forward and backward; the others pass.
void TestPluginAbi2::causalBugIsFound() {
  const plugin::PluginInfo info = plugin::checkPluginInProcess(example("flash_attention_causalbug"));
  QCOMPARE(info.name, std::string("flash-attention-causalbug"));
  const plugin::PluginOp* op = info.op(PEAT_OP_ATTENTION);
  QVERIFY(op);
  QCOMPARE(op->cases, 16u);
  QCOMPARE(op->failedCases, 8u);  // the two causal shapes, with and without dropout, forward and grad input
  QCOMPARE(failedCases(info), 8u);
  QVERIFY(op->maxError > 0.01);
  QVERIFY2(contains(op->firstFailure, "forward, causal 5x18: "), op->firstFailure.c_str());
  QVERIFY2(contains(op->firstFailure, "elements wrong (max abs error "), op->firstFailure.c_str());
  const std::string warning = plugin::probeWarning(info);
  QVERIFY2(contains(warning, "plugin 'flash-attention-causalbug' got 8 of 16 probe cases wrong: "
                             "attention forward, causal 5x18: "),
           warning.c_str());
  QVERIFY2(contains(warning, "; loaded anyway: replay calls through it and read the verdicts (docs/plugins.md)"),
           warning.c_str());
  QVERIFY(warning.find('\n') == std::string::npos);
}

// peat-probe prints the answer, probePlugin parses it: the same info as in this process.
void TestPluginAbi2::helperAnswersLikeTheProcess() {
  for (const char* name : {"flash_attention_causalbug", "bf16_gemm"}) {
    const plugin::PluginInfo here = plugin::checkPluginInProcess(example(name));
    const plugin::PluginInfo there = plugin::probePlugin(example(name));
    QCOMPARE(there.abiVersion, here.abiVersion);
    QCOMPARE(there.name, here.name);
    QCOMPARE(there.memory, here.memory);
    QCOMPARE(there.ops.size(), here.ops.size());
    for (std::size_t i = 0; i < here.ops.size(); ++i) {
      QCOMPARE(there.ops[i].kind, here.ops[i].kind);
      QCOMPARE(there.ops[i].variants, here.ops[i].variants);
      QCOMPARE(there.ops[i].inputDtype, here.ops[i].inputDtype);
      QCOMPARE(there.ops[i].outputDtype, here.ops[i].outputDtype);
      QCOMPARE(there.ops[i].features, here.ops[i].features);
      QCOMPARE(there.ops[i].cases, here.ops[i].cases);
      QCOMPARE(there.ops[i].failedCases, here.ops[i].failedCases);
      QCOMPARE(float(there.ops[i].maxError), float(here.ops[i].maxError));
      QCOMPARE(there.ops[i].firstFailure, here.ops[i].firstFailure);
    }
    QCOMPARE(plugin::probeWarning(there), plugin::probeWarning(here));
  }
  // and v1 plugins still answer in the v1 form
  const plugin::PluginInfo v1 = plugin::probePlugin(example("gemm"));
  QCOMPARE(v1.abiVersion, uint32_t(PEAT_KERNEL_ABI_VERSION_1));
  QCOMPARE(v1.opKind, uint32_t(PEAT_OP_GEMM));
  QVERIFY(v1.ops.empty());
  QCOMPARE(v1.probeMismatches, 0u);
  const plugin::LoadedPlugin loaded = plugin::loadProbedPlugin(example("flash_attention"));
  QVERIFY(loaded.run && !loaded.gemm && loaded.lastError);
  QCOMPARE(loaded.info.name, std::string("flash-attention"));
}

// A kernel of every op kind that computes in double: right in f32, in f16 in and bf16 out, and in
// fp8 e4m3 in and e5m2 out (its own output scales), under the tolerance of the declared dtypes.
void TestPluginAbi2::everyOpKindInEveryDtype_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<uint32_t>("in");
  QTest::addColumn<uint32_t>("out");
  QTest::newRow("f32") << "ops_v2_f32" << uint32_t(PEAT_DTYPE_F32) << uint32_t(PEAT_DTYPE_F32);
  QTest::newRow("f16 in, bf16 out") << "ops_v2_f16" << uint32_t(PEAT_DTYPE_F16) << uint32_t(PEAT_DTYPE_BF16);
  QTest::newRow("fp8") << "ops_v2_fp8" << uint32_t(PEAT_DTYPE_FP8_E4M3) << uint32_t(PEAT_DTYPE_FP8_E5M2);
}

void TestPluginAbi2::everyOpKindInEveryDtype() {
  QFETCH(QString, name);
  QFETCH(uint32_t, in);
  QFETCH(uint32_t, out);
  const plugin::PluginInfo info = plugin::checkPluginInProcess(testPlugin(name.toStdString().c_str()));
  QCOMPARE(info.ops.size(), std::size_t(PEAT_OP_KIND_COUNT));
  for (const plugin::PluginOp& op : info.ops) {
    QCOMPARE(op.inputDtype, in);
    QCOMPARE(op.outputDtype, out);
    QCOMPARE(op.variants, plugin::abiVariantsOf(op.kind));
    QVERIFY(op.cases > 0);
    QVERIFY2(op.failedCases == 0, (plugin::abiOpName(op.kind) + " " + op.firstFailure).c_str());
  }
  QVERIFY(plugin::probeWarning(info).empty());
}

void TestPluginAbi2::aPlantedBugPerOpKindIsFound() {
  const plugin::PluginInfo info = plugin::checkPluginInProcess(testPlugin("ops_v2_wrong"));
  struct Expected {
    uint32_t kind;
    const char* failure;  // the start of the first failure
  };
  const Expected expected[] = {
      {PEAT_OP_GEMM, "forward, A^T 5x4x6, lda 9, alpha 0.5, beta 2: "},  // alpha ignored
      {PEAT_OP_BATCHED_GEMM, "forward, 3 of A^T 3x4x5, alpha 0.5, beta 2: "},  // beta ignored
      {PEAT_OP_CONV2D, "forward, 2x4x5x6 by 4x2x3x3, stride 2, padding 1, groups 2, bias: "},  // bias ignored
      {PEAT_OP_SOFTMAX, "grad_input, log-softmax, 3x7 rows: "},  // softmax's backward
      {PEAT_OP_LAYER_NORM, "forward, 3x8 rows: "},  // unbiased variance
      {PEAT_OP_ATTENTION, "forward, causal 2x6x6, mask: "},  // mask ignored
      {PEAT_OP_ACTIVATION, "forward, gelu, 4x6: "},  // x sigmoid(1.702 x)
      {PEAT_OP_OPTIMIZER, "update, adam, step 3, 12 elements: "},  // no bias correction
  };
  for (const Expected& e : expected) {
    const plugin::PluginOp* op = info.op(e.kind);
    QVERIFY(op);
    QVERIFY2(op->failedCases > 0, plugin::abiOpName(e.kind).c_str());
    QVERIFY2(op->firstFailure.rfind(e.failure, 0) == 0, op->firstFailure.c_str());
  }
  QCOMPARE(info.op(PEAT_OP_GEMM)->failedCases, 2u);        // the two cases with alpha 0.5
  QCOMPARE(info.op(PEAT_OP_BATCHED_GEMM)->failedCases, 1u);
  QCOMPARE(info.op(PEAT_OP_CONV2D)->failedCases, 1u);
  QCOMPARE(info.op(PEAT_OP_SOFTMAX)->failedCases, 1u);
  QCOMPARE(info.op(PEAT_OP_LAYER_NORM)->failedCases, 3u);  // not grad bias, which has no variance
  QCOMPARE(info.op(PEAT_OP_ATTENTION)->failedCases, 4u);   // the two masked shapes, both variants
  QCOMPARE(info.op(PEAT_OP_ACTIVATION)->failedCases, 2u);
  QCOMPARE(info.op(PEAT_OP_OPTIMIZER)->failedCases, 1u);
  const std::string warning = plugin::probeWarning(info);
  QVERIFY2(contains(warning, "plugin 'all-ops' got 15 of "), warning.c_str());
  QVERIFY2(contains(warning, " probe cases wrong: gemm forward, A^T 5x4x6"), warning.c_str());
}

void TestPluginAbi2::brokenV2PluginsAreRefused_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<QString>("reason");
  QTest::newRow("no op") << "bad_v2_zeroops" << "declares 0 op kinds; 1 to 8 are allowed";
  QTest::newRow("an op twice") << "bad_v2_dupop" << "declares softmax a second time";
  QTest::newRow("dtype 9") << "bad_v2_dtype" << "(softmax) declares the unknown dtype 9";
  QTest::newRow("device memory") << "bad_v2_device" << "device-pointer kernels are not accepted yet; take host pointers";
  QTest::newRow("no run") << "bad_v2_norun" << "lacks the entry point 'peat_kernel_run_v2'";
  QTest::newRow("failing call")
      << "bad_v2_failing"
      << "plugin 'no-run-or-failing' failed its probe call softmax forward (3x7 rows) (return code 7): "
         "no device found (cudaErrorNoDevice)";
}

// Refused with one line, in this process and through the probe helper.
void TestPluginAbi2::brokenV2PluginsAreRefused() {
  QFETCH(QString, name);
  QFETCH(QString, reason);
  const std::string path = testPlugin(name.toStdString().c_str());
  for (int helper = 0; helper <= 1; ++helper) {
    try {
      if (helper) plugin::probePlugin(path);
      else plugin::checkPluginInProcess(path);
      QFAIL("a broken plugin was accepted");
    } catch (const plugin::PluginError& e) {
      QVERIFY2(contains(e.what(), reason.toStdString()), e.what());
      QVERIFY2(!contains(e.what(), "\n"), e.what());
    }
  }
}

void TestPluginAbi2::declarationsAreChecked() {
  const peat_op_desc good[] = {{PEAT_OP_LAYER_NORM, 15, PEAT_DTYPE_BF16, PEAT_DTYPE_FP8_E5M2, 0},
                               {PEAT_OP_OPTIMIZER, PEAT_VARIANT_BIT(PEAT_VARIANT_UPDATE), PEAT_DTYPE_F32, PEAT_DTYPE_F16, 0}};
  peat_plugin_info info{PEAT_KERNEL_ABI_VERSION, "ok.name_1-x", PEAT_MEMORY_HOST, 2, good};
  const plugin::PluginInfo checked = plugin::validatePluginInfoV2(&info, "p.so");
  QCOMPARE(checked.ops.size(), std::size_t(2));
  QCOMPARE(checked.ops[0].variants, 15u);
  QCOMPARE(checked.ops[1].outputDtype, uint32_t(PEAT_DTYPE_F16));
  const peat_op_desc gradGemm[] = {{PEAT_OP_GEMM, kF | kGI, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0}};
  const peat_op_desc noVariant[] = {{PEAT_OP_CONV2D, 0, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0}};
  const peat_op_desc kind9[] = {{9, kF, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0}};
  const peat_op_desc outDtype0[] = {{PEAT_OP_SOFTMAX, kF, PEAT_DTYPE_F32, 0, 0}};
  std::vector<std::pair<peat_plugin_info, std::string>> bad(10, {info, ""});
  bad[0].first.abi_version = 1, bad[0].second = "declares ABI version 1 in peat_kernel_info_v2";
  bad[1].first.name = "a b", bad[1].second = "a name with characters other than";
  bad[2].first.name = nullptr, bad[2].second = "has no usable name";
  bad[3].first.memory = 3, bad[3].second = "declares memory kind 3";
  bad[4].first.op_count = 9, bad[4].second = "declares 9 op kinds";
  bad[5].first.ops = nullptr, bad[5].second = "declares 2 op kinds and no list of them";
  bad[6].first.ops = gradGemm, bad[6].second = "(gemm) declares the variant grad_input, which gemm does not have";
  bad[7].first.ops = noVariant, bad[7].second = "(conv2d) declares no variant";
  bad[8].first.ops = kind9, bad[8].second = "has the unknown op kind 9";
  bad[9].first.ops = outDtype0, bad[9].second = "declares the unknown dtype 0";
  for (std::size_t i = 6; i < bad.size(); ++i) bad[i].first.op_count = 1;
  for (const auto& [declared, why] : bad) {
    try {
      plugin::validatePluginInfoV2(&declared, "p.so");
      QFAIL(("accepted; expected: " + why).c_str());
    } catch (const plugin::PluginError& e) {
      QVERIFY2(contains(e.what(), why), e.what());
    }
  }
}

void TestPluginAbi2::v1InfoCarriesVersion1() {
  // v1 source that names its version PEAT_KERNEL_ABI_VERSION (1 when it was written, 2 today) is v1
  peat_kernel_info info{PEAT_KERNEL_ABI_VERSION, "old", PEAT_OP_GEMM, PEAT_DTYPE_F32, PEAT_MEMORY_HOST};
  QCOMPARE(plugin::validatePluginInfo(&info, "p.so").abiVersion, 1u);
  info.abi_version = PEAT_KERNEL_ABI_VERSION_1;
  QCOMPARE(plugin::validatePluginInfo(&info, "p.so").abiVersion, 1u);
  info.abi_version = 3;  // a version no header had
  try {
    plugin::validatePluginInfo(&info, "p.so");
    QFAIL("a v1 info with version 3 was accepted");
  } catch (const plugin::PluginError& e) {
    QVERIFY2(contains(e.what(), "declares ABI version 3 in peat_kernel_info_v1, which carries version 1"), e.what());
  }
  // and such a plugin, built from its source against today's header, probes and multiplies as v1
  const plugin::PluginInfo probed = plugin::probePlugin(testPlugin("v1_macro"));
  QCOMPARE(probed.abiVersion, uint32_t(PEAT_KERNEL_ABI_VERSION_1));
  QCOMPARE(probed.name, std::string("v1-macro"));
  QCOMPARE(probed.probeMismatches, 0u);
  const plugin::LoadedPlugin loaded = plugin::loadProbedPlugin(testPlugin("v1_macro"));
  QVERIFY(loaded.gemm);
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1};  // [2, 3] x [3, 2]
  float c[4] = {};
  QCOMPARE(loaded.gemm(a, b, c, 2, 2, 3), 0);
  QCOMPARE(c[0], 4.0f);
  QCOMPARE(c[1], 5.0f);
  QCOMPARE(c[2], 10.0f);
  QCOMPARE(c[3], 11.0f);
}

void TestPluginAbi2::answersRoundTrip() {
  plugin::PluginInfo info;
  info.abiVersion = PEAT_KERNEL_ABI_VERSION;
  info.name = "x-1";
  info.memory = PEAT_MEMORY_HOST;
  plugin::PluginOp a;
  a.kind = PEAT_OP_ATTENTION, a.variants = kF | kGI, a.inputDtype = PEAT_DTYPE_BF16, a.outputDtype = PEAT_DTYPE_F32;
  a.cases = 8, a.failedCases = 3, a.maxError = 0.3125, a.firstFailure = "forward, causal 5x18: 6 of 30 elements wrong";
  plugin::PluginOp b;
  b.kind = PEAT_OP_OPTIMIZER, b.variants = PEAT_VARIANT_BIT(PEAT_VARIANT_UPDATE), b.inputDtype = PEAT_DTYPE_FP8_E4M3;
  b.outputDtype = PEAT_DTYPE_FP8_E5M2, b.cases = 2, b.failedCases = 2, b.maxError = std::nan(""), b.firstFailure = "update";
  plugin::PluginOp c;
  c.kind = PEAT_OP_GEMM, c.variants = kF, c.inputDtype = PEAT_DTYPE_F16, c.outputDtype = PEAT_DTYPE_F16, c.cases = 4;
  info.ops = {a, b, c};
  const std::string answer = plugin::probeAnswer(info);
  QCOMPARE(answer.substr(0, answer.find('\n')), std::string("ok2\tx-1\t1\t3"));
  const plugin::PluginInfo back = plugin::parseProbeAnswer(answer, "x.so");
  QCOMPARE(back.path, std::string("x.so"));
  QCOMPARE(back.name, info.name);
  QCOMPARE(back.abiVersion, info.abiVersion);
  QCOMPARE(back.ops.size(), std::size_t(3));
  for (std::size_t i = 0; i < 3; ++i) {
    QCOMPARE(back.ops[i].kind, info.ops[i].kind);
    QCOMPARE(back.ops[i].variants, info.ops[i].variants);
    QCOMPARE(back.ops[i].inputDtype, info.ops[i].inputDtype);
    QCOMPARE(back.ops[i].outputDtype, info.ops[i].outputDtype);
    QCOMPARE(back.ops[i].cases, info.ops[i].cases);
    QCOMPARE(back.ops[i].failedCases, info.ops[i].failedCases);
    QCOMPARE(back.ops[i].firstFailure, info.ops[i].firstFailure);
  }
  QCOMPARE(back.ops[0].maxError, 0.3125);
  QVERIFY(std::isnan(back.ops[1].maxError));
  QCOMPARE(back.ops[2].maxError, 0.0);
  // a description with tabs and newlines travels on one line, cut at 200 characters
  info.ops = {a};
  info.ops[0].firstFailure = "a\tb\nc" + std::string(300, 'x');
  const plugin::PluginInfo cut = plugin::parseProbeAnswer(plugin::probeAnswer(info), "x.so");
  QCOMPARE(cut.ops[0].firstFailure.size(), plugin::kMaxFailureText);
  QCOMPARE(cut.ops[0].firstFailure.substr(0, 6), std::string("a b cx"));
  // the v1 form still parses
  QCOMPARE(plugin::parseProbeAnswer("ok\tg\t1\t1\t1\t1\t0\t0\t-1", "x.so").abiVersion, 1u);
}

void TestPluginAbi2::malformedAnswersAreRefused_data() {
  QTest::addColumn<QString>("answer");
  const QString op = QStringLiteral("\nop\t4\t3\t1\t1\t0\t4\t0\t0\t");  // softmax, both variants, right
  QTest::newRow("good (control)") << QString(QStringLiteral("ok2\tx\t1\t1") + op);
  QTest::newRow("head: 2 fields") << QString(QStringLiteral("ok2\tx\t1") + op);
  QTest::newRow("head: 4 fields") << QString(QStringLiteral("ok2\tx\t1\t1\t0") + op);
  QTest::newRow("op: 8 fields") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t0\t0");
  QTest::newRow("op: 10 fields") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t0\t0\t\t");
  QTest::newRow("op count 2, one op") << QString(QStringLiteral("ok2\tx\t1\t2") + op);
  QTest::newRow("op count 0") << QStringLiteral("ok2\tx\t1\t0");
  QTest::newRow("op count 9") << QString(QStringLiteral("ok2\tx\t1\t9") + op);
  QTest::newRow("a trailing line") << QString(QStringLiteral("ok2\tx\t1\t1") + op + QLatin1Char('\n'));
  QTest::newRow("not an op line") << QStringLiteral("ok2\tx\t1\t1\nop2\t4\t3\t1\t1\t0\t4\t0\t0\t");
  QTest::newRow("op kind 9") << QStringLiteral("ok2\tx\t1\t1\nop\t9\t1\t1\t1\t0\t4\t0\t0\t");
  QTest::newRow("op kind 0") << QStringLiteral("ok2\tx\t1\t1\nop\t0\t1\t1\t1\t0\t4\t0\t0\t");
  QTest::newRow("duplicate op") << QString(QStringLiteral("ok2\tx\t1\t2") + op + op);
  QTest::newRow("variants 0") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t0\t1\t1\t0\t4\t0\t0\t");
  QTest::newRow("unknown input dtype") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t6\t1\t0\t4\t0\t0\t");
  QTest::newRow("unknown output dtype") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t0\t0\t4\t0\t0\t");
  QTest::newRow("gemm grad input") << QStringLiteral("ok2\tx\t1\t1\nop\t1\t3\t1\t1\t0\t4\t0\t0\t");
  QTest::newRow("features on softmax") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t1\t4\t0\t0\t");
  QTest::newRow("unknown attention feature") << QStringLiteral("ok2\tx\t1\t1\nop\t6\t3\t1\t1\t2\t8\t0\t0\t");
  QTest::newRow("softmax grad weight") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t4\t1\t1\t0\t4\t0\t0\t");
  QTest::newRow("device memory") << QString(QStringLiteral("ok2\tx\t2\t1") + op);
  QTest::newRow("bad name") << QString(QStringLiteral("ok2\tx y\t1\t1") + op);
  QTest::newRow("empty name") << QString(QStringLiteral("ok2\t\t1\t1") + op);
  QTest::newRow("more failed than cases") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t5\t1\tf");
  QTest::newRow("fewer cases than variants") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t1\t0\t0\t");
  QTest::newRow("failed without text") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t1\t1\t");
  QTest::newRow("failed without error") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t1\t0\tf");
  QTest::newRow("error without failure") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t0\t0.5\t");
  QTest::newRow("text without failure") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t0\t0\tf");
  QTest::newRow("negative error") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t1\t-1\tf");
  QTest::newRow("error not a number") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t1\t1x\tf");
  QTest::newRow("control character") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t1\t1\tf\rg");
  QTest::newRow("text too long") << QString(QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t4\t1\t1\t") + QString(201, QLatin1Char('f')));
  QTest::newRow("number too long") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t3\t1\t1\t0\t99999999999\t0\t0\t");
  QTest::newRow("signed number") << QStringLiteral("ok2\tx\t1\t1\nop\t4\t+3\t1\t1\t0\t4\t0\t0\t");
  QTest::newRow("v1 with version 2") << QStringLiteral("ok\tg\t2\t1\t1\t1\t0\t0\t-1");
  QTest::newRow("unknown form") << QStringLiteral("ok3\tx\t1\t1");
}

void TestPluginAbi2::malformedAnswersAreRefused() {
  QFETCH(QString, answer);
  const std::string why = refusal(answer.toStdString());
  if (QString::fromLatin1(QTest::currentDataTag()).startsWith(QLatin1String("good"))) {
    QVERIFY2(why.empty(), why.c_str());
    return;
  }
  QVERIFY2(!why.empty(), "accepted");
}

// Every variant the ABI defines has probe cases, and the reference takes each of them.
void TestPluginAbi2::everyDeclaredVariantHasCases() {
  for (uint32_t kind = 1; kind <= PEAT_OP_KIND_COUNT; ++kind) {
    const uint32_t all = plugin::abiVariantsOf(kind);
    QVERIFY(all != 0);
    for (uint32_t v = 0; v < 5; ++v) {
      const std::vector<plugin::ProbeCase> cases = plugin::probeCases(kind, PEAT_VARIANT_BIT(v));
      QCOMPARE(cases.empty(), !(all & PEAT_VARIANT_BIT(v)));
      for (const plugin::ProbeCase& c : cases) {
        QCOMPARE(c.opKind, kind);
        QCOMPARE(c.variant, v);
        std::vector<std::vector<int64_t>> shapes;
        std::vector<std::vector<double>> values;
        for (const plugin::ProbeInput& in : c.inputs) {
          shapes.push_back(in.shape);
          values.emplace_back(in.values.begin(), in.values.end());
        }
        const auto out = plugin::referenceOutputs(kind, v, c.params, shapes, values, c.outputShapes);
        QCOMPARE(out.size(), c.outputShapes.size());
        for (const std::vector<double>& o : out) {
          bool finite = false;
          for (double x : o) finite = finite || std::isfinite(x);
          QVERIFY2(finite, (plugin::abiOpName(kind) + " " + c.label).c_str());
        }
      }
    }
  }
  QVERIFY(plugin::probeCases(9, 1).empty());
}

// A few outputs worked out by hand.
void TestPluginAbi2::referenceOfSmallCalls() {
  peat_params p{};
  // C = 0.5 A^T B + 2 C0: A^T = [[1, 2], [3, 4]] (A stored [[1, 3], [2, 4]]), B = I
  p.trans_a = 1, p.m = 2, p.n = 2, p.k = 2, p.lda = 2, p.ldb = 2, p.ldc = 3, p.alpha = 0.5, p.beta = 2;
  const auto c = plugin::referenceOutputs(PEAT_OP_GEMM, PEAT_VARIANT_FORWARD, p, {{2, 2}, {2, 2}, {2, 3}},
                                          {{1, 3, 2, 4}, {1, 0, 0, 1}, {1, 1, 0, 1, 1, 0}}, {{2, 3}})[0];
  QCOMPARE(c[0], 2.5);
  QCOMPARE(c[1], 3.0);
  QVERIFY(std::isnan(c[2]));  // ldc's padding: not the kernel's
  QCOMPARE(c[3], 3.5);
  QCOMPARE(c[4], 4.0);
  // attention with one key: o is that key's value, whatever the scores
  peat_params a{};
  a.scale = 0.5;
  const auto o = plugin::referenceOutputs(PEAT_OP_ATTENTION, PEAT_VARIANT_FORWARD, a, {{1, 2, 1}, {1, 1, 1}, {1, 1, 2}},
                                          {{3, -1}, {2}, {7, -5}}, {{1, 2, 2}})[0];
  QCOMPARE(o, (std::vector<double>{7, -5, 7, -5}));
  // causal with Tk < Tq: query 0 sees no key (a zero row), query 1 the only one
  a.causal = 1;
  const auto oc = plugin::referenceOutputs(PEAT_OP_ATTENTION, PEAT_VARIANT_FORWARD, a, {{1, 2, 1}, {1, 1, 1}, {1, 1, 2}},
                                           {{3, -1}, {2}, {7, -5}}, {{1, 2, 2}})[0];
  QCOMPARE(oc, (std::vector<double>{0, 0, 7, -5}));
  // a shape that does not fit is refused
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                           plugin::referenceOutputs(PEAT_OP_SOFTMAX, PEAT_VARIANT_FORWARD, p, {{2, 3}}, {{1, 2, 3}}, {{2, 3}}));
}

QTEST_GUILESS_MAIN(TestPluginAbi2)
#include "tst_plugin_abi2.moc"
