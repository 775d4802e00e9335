// SPDX-License-Identifier: MIT
// core/store/call_params: a call's stored parameters as displays show them. Real parameters come
// as the bits of a double in an int64 ("NAME_f64"): the bit patterns below are the ones a GPT-style
// profile stores (lr 0.003, eps 1e-8, p 0.1), written out, so a decoding that converted the
// integer instead of reinterpreting its bits, or printed too few digits, fails.
#include <QtTest>

#include <cstring>

#include "core/store/call_params.h"

using peat::store::CallDescription;
using peat::store::CallParameter;
using peat::store::describeCall;

namespace {

const CallParameter* parameter(const CallDescription& d, const std::string& name) {
  for (const CallParameter& p : d.parameters)
    if (p.name == name) return &p;
  return nullptr;
}

QStringList inputNames(const CallDescription& d) {
  QStringList out;
  for (const auto& in : d.inputs) out << QString::fromStdString(in.name);
  return out;
}

int64_t bitsOf(double v) {
  int64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

}  // namespace

class TestCallParams : public QObject {
  Q_OBJECT
 private slots:
  void decodesRealParameters_data();
  void decodesRealParameters();
  void realTextRoundTrips_data();
  void realTextRoundTrips();
  void adamUpdate();
  void layerNormVariants_data();
  void layerNormVariants();
  void layerNormWithoutGammaOrBeta();
  void dropoutAndEmbedding();
  void gemmCalls();
  void callsWithoutVariant();
  void unknownOpsAndParameters();
};

// The stored bits, exactly as `peat profile` wrote them, and the double they hold.
void TestCallParams::decodesRealParameters_data() {
  QTest::addColumn<qint64>("bits");
  QTest::addColumn<double>("value");
  QTest::addColumn<QString>("text");
  QTest::newRow("eps 1e-5") << qint64(0x3EE4F8B588E368F1) << 1e-5 << QStringLiteral("1e-05");
  QTest::newRow("lr 3e-3") << qint64(4569063951553953530) << 3e-3 << QStringLiteral("0.003");
  QTest::newRow("p 0.1") << qint64(4591870180066957722) << 0.1 << QStringLiteral("0.1");
  QTest::newRow("beta2 0.999") << qint64(4607173411600762667) << 0.999 << QStringLiteral("0.999");
  QTest::newRow("eps 1e-8") << qint64(4487126258331716666) << 1e-8 << QStringLiteral("1e-08");
  QTest::newRow("negative") << qint64(bitsOf(-2.5)) << -2.5 << QStringLiteral("-2.5");
}

void TestCallParams::decodesRealParameters() {
  QFETCH(qint64, bits);
  QFETCH(double, value);
  QFETCH(QString, text);
  QCOMPARE(peat::store::realFromBits(bits), value);  // bit for bit: QCOMPARE of doubles is fuzzy
  QVERIFY(std::memcmp(&value, &bits, sizeof value) == 0);
  const CallDescription d = describeCall("mystery", {{"scale_f64", bits}, {"variant", 0}});
  const CallParameter* p = parameter(d, "scale");
  QVERIFY(p);
  QVERIFY(p->real);
  QCOMPARE(QString::fromStdString(p->text), text);
  QVERIFY(p->value == value);
  QVERIFY(!parameter(d, "scale_f64"));
}

void TestCallParams::realTextRoundTrips_data() {
  QTest::addColumn<double>("value");
  QTest::addColumn<QString>("text");
  QTest::newRow("0.1 + 0.2") << 0.1 + 0.2 << QStringLiteral("0.30000000000000004");
  QTest::newRow("1/3 in float") << double(1.0f / 3.0f) << QStringLiteral("0.3333333432674408");
  QTest::newRow("zero") << 0.0 << QStringLiteral("0");
  QTest::newRow("large") << 1e300 << QStringLiteral("1e+300");
  QTest::newRow("whole") << 250000.0 << QStringLiteral("250000");
  QTest::newRow("whole and a half") << 1234.5 << QStringLiteral("1234.5");
  QTest::newRow("inf") << HUGE_VAL << QStringLiteral("inf");
}

void TestCallParams::realTextRoundTrips() {
  QFETCH(double, value);
  QFETCH(QString, text);
  QCOMPARE(QString::fromStdString(peat::store::realText(value)), text);
  QVERIFY(std::strtod(text.toLatin1().constData(), nullptr) == value);
}

// The Adam update of the GPT-style profile: its parameters decoded, its inputs and output named.
void TestCallParams::adamUpdate() {
  const CallDescription d = describeCall("adam", {{"variant", 4},
                                                  {"lr_f64", 4569063951553953530},
                                                  {"beta1_f64", 4606281698874543309},
                                                  {"beta2_f64", 4607173411600762667},
                                                  {"eps_f64", 4487126258331716666},
                                                  {"step", 7}});
  QVERIFY(d.knownOp && d.knownVariant);
  QCOMPARE(QString::fromStdString(d.variant), QStringLiteral("update"));
  QCOMPARE(QString::fromStdString(d.kind("backward")), QStringLiteral("adam update"));
  QCOMPARE(QString::fromStdString(d.summary), QStringLiteral("Adam update: new parameter, m and v stacked"));
  QVERIFY(QString::fromStdString(d.text()).startsWith(QStringLiteral("Adam update: new parameter, m and v stacked (m' = ")));
  QCOMPARE(QString::fromStdString(d.parameterLine()), QStringLiteral("lr 0.003, beta1 0.9, beta2 0.999, eps 1e-08, step 7"));
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("p"), QStringLiteral("g"), QStringLiteral("m"), QStringLiteral("v")}));
  QCOMPARE(QString::fromStdString(d.roleOf("input_3")), QStringLiteral("v"));
  QCOMPARE(QString::fromStdString(d.roleOf("input_4")), QString());
  QCOMPARE(QString::fromStdString(d.output), QStringLiteral("p', m', v'"));
  QVERIFY(parameter(d, "step") && !parameter(d, "step")->real && parameter(d, "step")->value == 7);
  QVERIFY(!parameter(d, "variant"));
}

void TestCallParams::layerNormVariants_data() {
  QTest::addColumn<int>("variant");
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("text");
  QTest::addColumn<QStringList>("inputs");
  QTest::addColumn<QString>("output");
  QTest::newRow("forward") << 0 << QStringLiteral("layernorm forward")
                           << QStringLiteral("layer norm (y = (x - mean) / sqrt(var + eps) * gamma + beta)")
                           << QStringList{QStringLiteral("x"), QStringLiteral("gamma"), QStringLiteral("beta")}
                           << QStringLiteral("y");
  QTest::newRow("grad_input") << 1 << QStringLiteral("layernorm grad_input")
                              << QStringLiteral("layer norm, gradient of the input (dX = (g - mean(g) - x_hat "
                                                "mean(g x_hat)) / sqrt(var + eps), g = gamma dy)")
                              << QStringList{QStringLiteral("dy"), QStringLiteral("x"), QStringLiteral("gamma")}
                              << QStringLiteral("dX");
  QTest::newRow("grad_weight") << 2 << QStringLiteral("layernorm grad_weight")
                               << QStringLiteral("layer norm, gradient of gamma (dGamma = sum dy * x_hat)")
                               << QStringList{QStringLiteral("dy"), QStringLiteral("x")} << QStringLiteral("dGamma");
  QTest::newRow("grad_bias") << 3 << QStringLiteral("layernorm grad_bias")
                             << QStringLiteral("layer norm, gradient of beta (dBeta = sum dy)")
                             << QStringList{QStringLiteral("dy")} << QStringLiteral("dBeta");
}

void TestCallParams::layerNormVariants() {
  QFETCH(int, variant);
  QFETCH(QString, kind);
  QFETCH(QString, text);
  QFETCH(QStringList, inputs);
  QFETCH(QString, output);
  // eps as the profiler stores one that is not the default
  const CallDescription d = describeCall("layernorm", {{"variant", variant}, {"eps_f64", bitsOf(1e-6)}});
  QCOMPARE(QString::fromStdString(d.kind()), kind);
  QCOMPARE(QString::fromStdString(d.text()), text);
  QCOMPARE(inputNames(d), inputs);
  QCOMPARE(QString::fromStdString(d.output), output);
  QCOMPARE(QString::fromStdString(d.parameterLine()), QStringLiteral("eps 1e-06"));
  QCOMPARE(QString::fromStdString(d.parameterLine(true)), QStringLiteral("normalized 1, eps 1e-06, weight 1, bias 1"));
  QVERIFY(!parameter(d, "eps")->byDefault && parameter(d, "normalized")->byDefault);
}

// gamma and beta are inputs only where the layer has them ("weight" 0, "bias" 0 say it has not);
// without a stored eps the call ran with the default 1e-5, shown as such.
void TestCallParams::layerNormWithoutGammaOrBeta() {
  CallDescription d = describeCall("layernorm", {{"variant", 0}, {"weight", 0}});
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("x"), QStringLiteral("beta")}));
  QCOMPARE(QString::fromStdString(d.roleOf("input_1")), QStringLiteral("beta"));
  QCOMPARE(QString::fromStdString(parameter(d, "weight")->meaning), QStringLiteral("no gamma"));
  QVERIFY(!parameter(d, "weight")->byDefault);
  const CallParameter* eps = parameter(d, "eps");
  QVERIFY(eps && eps->byDefault && eps->real && eps->value == 1e-5);
  QCOMPARE(QString::fromStdString(eps->text), QStringLiteral("1e-05"));
  QCOMPARE(QString::fromStdString(d.parameterLine()), QStringLiteral("weight 0"));
  d = describeCall("layernorm", {{"variant", 1}, {"bias", 0}, {"weight", 0}});
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("dy"), QStringLiteral("x")}));
}

void TestCallParams::dropoutAndEmbedding() {
  CallDescription d = describeCall("dropout", {{"variant", 1}, {"p_f64", 4591870180066957722}});
  QCOMPARE(QString::fromStdString(d.kind()), QStringLiteral("dropout grad_input"));
  QCOMPARE(QString::fromStdString(d.text()), QStringLiteral("dropout, gradient of the input (dx = dy * mask)"));
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("dy"), QStringLiteral("mask")}));
  QCOMPARE(QString::fromStdString(d.parameterLine()), QStringLiteral("p 0.1"));
  d = describeCall("embedding", {{"variant", 0}});
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("ids"), QStringLiteral("table")}));
  QCOMPARE(QString::fromStdString(parameter(d, "padding_idx")->meaning), QStringLiteral("none"));
  d = describeCall("embedding", {{"variant", 2}, {"num_weights", 64}, {"padding_idx", 0}});
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("dy"), QStringLiteral("ids")}));
  // the table's row count is a size the tensors show: only asked for
  QCOMPARE(QString::fromStdString(d.parameterLine()), QStringLiteral("padding_idx 0"));
  QCOMPARE(QString::fromStdString(d.parameterLine(false, true)), QStringLiteral("padding_idx 0, num_weights 64"));
  // an embedding has no grad_input: the op is known, its inputs are not named
  d = describeCall("embedding", {{"variant", 1}});
  QVERIFY(d.knownOp && !d.knownVariant);
  QVERIFY(d.inputs.empty());
  QCOMPARE(QString::fromStdString(d.roleOf("input_0")), QString());
}

void TestCallParams::gemmCalls() {
  CallDescription d = describeCall("linear", {{"variant", 2}});
  QCOMPARE(QString::fromStdString(d.text()), QStringLiteral("linear layer, gradient of the weight (dW = dY^T X)"));
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("dy"), QStringLiteral("x")}));
  QVERIFY(d.parameters.empty());
  d = describeCall("matmul", {{"variant", 2}});
  QCOMPARE(inputNames(d), (QStringList{QStringLiteral("a"), QStringLiteral("dc")}));
  d = describeCall("conv2d", {{"variant", 1}, {"stride", 2}, {"padding", 1}, {"in_h", 32}, {"in_w", 30}, {"groups", 4}});
  QCOMPARE(QString::fromStdString(d.parameterLine()), QStringLiteral("stride 2, padding 1, groups 4"));
  QCOMPARE(QString::fromStdString(d.parameterLine(true, true)),
           QStringLiteral("stride 2, padding 1, groups 4, in_h 32, in_w 30"));
  QCOMPARE(QString::fromStdString(d.roleOf("input_1")), QStringLiteral("weight"));
  QVERIFY(peat::store::isGemmOpName("conv2d") && !peat::store::isGemmOpName("softmax"));
}

// Sessions recorded before op-wise routing store no variant: the phase stands in, nothing is named.
void TestCallParams::callsWithoutVariant() {
  const CallDescription d = describeCall("linear", {});
  QVERIFY(d.knownOp && !d.knownVariant);
  QCOMPARE(QString::fromStdString(d.variant), QString());
  QCOMPARE(QString::fromStdString(d.kind("backward")), QStringLiteral("linear backward"));
  QCOMPARE(QString::fromStdString(d.text()), QStringLiteral("fully connected layer, a GEMM"));
  QCOMPARE(QString::fromStdString(d.roleOf("input_0")), QString());
  QCOMPARE(QString::fromStdString(describeCall("gelu", {{"variant", 9}}).variant), QStringLiteral("variant 9"));
}

void TestCallParams::unknownOpsAndParameters() {
  const CallDescription d = describeCall("fused_rope", {{"variant", 0}, {"theta_f64", bitsOf(10000.0)}, {"heads", 8}});
  QVERIFY(!d.knownOp && !d.knownVariant);
  QCOMPARE(QString::fromStdString(d.text()), QStringLiteral("fused_rope"));
  QCOMPARE(QString::fromStdString(d.kind()), QStringLiteral("fused_rope forward"));
  QCOMPARE(QString::fromStdString(d.parameterLine()), QStringLiteral("heads 8, theta 10000"));
  // a known op keeps a parameter it does not list, after its own
  const CallDescription s = describeCall("softmax", {{"variant", 0}, {"dim", 1}, {"chunk", 4}});
  QCOMPARE(QString::fromStdString(s.parameterLine()), QStringLiteral("dim 1, chunk 4"));
  QCOMPARE(QString::fromStdString(peat::store::opSummary("log_softmax")), QStringLiteral("log-softmax along a dimension"));
}

QTEST_GUILESS_MAIN(TestCallParams)
#include "tst_call_params.moc"
