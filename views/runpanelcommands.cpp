// SPDX-License-Identifier: MIT
// The run panel's commands: the `peat` arguments its form stands for (profile, playback, runtime FI,
// SAVE analyze, campaign and run; a Python recording's in runpanelscript.cpp) and the demo's steps.
// The form itself is in runpanel.cpp, the child process that runs them in runpanelprocess.cpp.
#include <QComboBox>
#include <QCheckBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QLineEdit>
#include <QSpinBox>
#include <QTemporaryDir>

#include <algorithm>

#include "core/store/call_params.h"
#include "views/runpanel.h"

namespace peat::views {

namespace {

// The trained weights shipped for a SAVE model: installed beside the program, else in the sources.
QString shippedWeights(const QString& model) {
  const QString name = model + QStringLiteral("-fashion-mnist.h5");
  const QStringList dirs{QCoreApplication::applicationDirPath() + QStringLiteral("/../share/peat/data"),
                         QStringLiteral(PEAT_SOURCE_DATA_DIR)};
  for (const QString& d : dirs)
    if (QFileInfo::exists(d + QLatin1Char('/') + name)) return QDir::cleanPath(d + QLatin1Char('/') + name);
  return {};
}
// SAVE's model arguments: an ONNX file carries its weights (docs/save.md); a zoo model takes the
// shipped ones. Empty, with `why` set, when neither is at hand.
QStringList saveModelArguments(const QString& model, QString* why) {
  if (model.endsWith(QLatin1String(".onnx"))) {
    if (!QFileInfo(model).isFile()) *why = RunPanel::tr("ONNX model %1 does not exist").arg(model);
    return why->isEmpty() ? QStringList{QStringLiteral("-m"), model} : QStringList();
  }
  const QString weights = shippedWeights(model);
  if (weights.isEmpty()) {
    *why = RunPanel::tr("no trained weights of %1 are shipped: SAVE runs on lenet, vit or an ONNX file here").arg(model);
    return {};
  }
  return {QStringLiteral("-m"), model, QStringLiteral("-w"), weights};
}
QString opNamesText() {
  QStringList names;
  for (const std::string& op : store::opNames()) names << QString::fromStdString(op);
  return names.join(QStringLiteral(", "));
}

}  // namespace

QStringList RunPanel::arguments(QString* error) const {
  auto fail = [&](const QString& why) {
    if (error) *error = why;
    return QStringList();
  };
  const QString model = model_->currentText().trimmed(), kernel = kernel_->currentText().trimmed();
  if (mode() == Mode::SaveRun) return saveRunArguments(model, error);  // writes no session
  const QString session = session_->text().trimmed();
  if (session.isEmpty()) return fail(tr("choose a session file"));
  if (mode() == Mode::PythonRecord) return recordArguments(session, error);
  // a model file trains on the data the user names (docs/models.md)
  QStringList modelArguments{QStringLiteral("--model"), model};
  if ((mode() == Mode::Profile || mode() == Mode::RuntimeFi) && modelIsFile()) {
    if (!QFileInfo(model).isFile()) return fail(tr("model file %1 does not exist").arg(model));
    if (data_->text().trimmed().isEmpty()) return fail(tr("choose the model file's data"));
    modelArguments << QStringLiteral("--data") << data_->text().trimmed();
  }
  if ((mode() == Mode::Profile || mode() == Mode::RuntimeFi) && fusedAttention_->isChecked())
    modelArguments << QStringLiteral("--attention") << QStringLiteral("fused");
  const QString seed = QString::number(seed_->value()), iterations = QString::number(iterations_->value());
  // the gpu-* kernels run on the chosen device; the others only on the CPU
  const QString device = device_->currentText();
  const bool onDevice = kernel.startsWith(QLatin1String("gpu-"));
  QStringList deviceArguments;
  if (onDevice) deviceArguments << QStringLiteral("--device") << device;
  if ((mode() == Mode::Playback || mode() == Mode::RuntimeFi) && !onDevice && !device.startsWith(QLatin1String("cpu")))
    return fail(tr("%1 runs on the CPU: choose a gpu-* kernel to use %2").arg(kernel.section(QLatin1Char(':'), 0, 0), device));
  switch (mode()) {
    case Mode::Profile: {
      QStringList a = QStringList{QStringLiteral("profile")} + modelArguments +
                      QStringList{QStringLiteral("--iterations"), iterations, QStringLiteral("--seed"), seed,
                                  QStringLiteral("--record-every"), QString::number(std::max(1, iterations_->value() / 5)),
                                  QStringLiteral("--out"), session};
      if (replace_->isChecked()) a << QStringLiteral("--force");
      // the ops to record, each one the slot knows (the default, the GEMMs, goes without the option)
      QStringList ops = recordOps_->currentText().split(QLatin1Char(','), Qt::SkipEmptyParts);
      for (QString& op : ops) {
        op = op.trimmed();
        if (op != QLatin1String("all") && store::opSummary(op.toStdString()).empty())
          return fail(tr("record ops: no op '%1' (%2, or all)").arg(op, opNamesText()));
      }
      if (ops.isEmpty()) return fail(tr("record ops: name at least one op, or all"));
      if (ops.join(QLatin1Char(',')) != gemmOps()) a << QStringLiteral("--record-ops") << ops.join(QLatin1Char(','));
      return a;
    }
    case Mode::Playback:
      if (kernel.isEmpty()) return fail(tr("choose a kernel or fault model"));
      return QStringList{QStringLiteral("playback"), QStringLiteral("--session"), session, QStringLiteral("--kernel"), kernel,
                         QStringLiteral("--op"), op_->currentText(), QStringLiteral("--seed"), seed,
                         QStringLiteral("--store-outputs")} +
             deviceArguments;
    case Mode::RuntimeFi: {
      if (kernel.isEmpty()) return fail(tr("choose a kernel or fault model"));
      QStringList a = QStringList{QStringLiteral("runtime-fi")} + modelArguments +
                      QStringList{QStringLiteral("--iterations"), iterations, QStringLiteral("--seed"), seed,
                                  QStringLiteral("-k"), kernel, QStringLiteral("--op"), op_->currentText(),
                                  QStringLiteral("--out"), session};
      if (replace_->isChecked()) a << QStringLiteral("--force");
      a << deviceArguments;
      const QString p = prob_->text().trimmed();
      if (p.isEmpty()) a << QStringLiteral("--every") << QString::number(every_->value());
      else a << QStringLiteral("--prob") << p;
      return a;
    }
    case Mode::SaveAnalyze:
    case Mode::SaveCampaign: {
      QString why;
      const QStringList modelArgs = saveModelArguments(model, &why);
      if (modelArgs.isEmpty()) return fail(why);
      QStringList a = QStringList{QStringLiteral("save"),
                                  mode() == Mode::SaveAnalyze ? QStringLiteral("analyze") : QStringLiteral("campaign")} +
                      modelArgs;
      a << QStringLiteral("-s") << session;
      if (mode() == Mode::SaveCampaign) {
        QStringList schemes;
        for (QCheckBox* b : schemes_)
          if (b->isChecked()) schemes << b->text();
        if (schemes.isEmpty()) return fail(tr("choose at least one scheme to compare"));
        a << QStringLiteral("--images") << QString::number(images_->value()) << QStringLiteral("--flips") << flips_->text()
          << QStringLiteral("--seed") << seed << QStringLiteral("--basis") << basis_->currentData().toString()
          << QStringLiteral("--schemes") << schemes.join(QLatin1Char(','));
        // an ONNX model's labelled samples (empty: Fashion-MNIST resized to its input, docs/save.md)
        if (model.endsWith(QLatin1String(".onnx")) && !data_->text().trimmed().isEmpty())
          a << QStringLiteral("--data") << data_->text().trimmed();
      }
      return a;
    }
    case Mode::SaveRun:
    case Mode::PythonRecord: break;  // above
  }
  return fail(tr("unknown mode"));
}
// peat save run on the user's input, with --json: the panel reads its summary, and the outputs
// from the file it names.
QStringList RunPanel::saveRunArguments(const QString& model, QString* error) const {
  QString why;
  const QStringList modelArgs = saveModelArguments(model, &why);
  // A field may name several files, one per input or output of the model, separated by ';', each
  // FILE, FILE.h5:/dataset or NAME=FILE, as `save run` takes them (its --input and --expect).
  const auto entries = [](const QLineEdit* field) {
    QStringList out;
    const QString text = field->text().trimmed();
    if (QFileInfo(text).isFile()) return QStringList{text};  // one file whose name holds a ';'
    for (const QString& e : text.split(QLatin1Char(';')))
      if (!e.trimmed().isEmpty()) out << e.trimmed();
    return out;
  };
  const auto file = [](const QString& entry) {  // the file an entry reads
    QString spec = entry;
    const qsizetype eq = spec.indexOf(QLatin1Char('='));
    if (eq > 0 && !QFileInfo::exists(spec)) spec = spec.mid(eq + 1);  // NAME=FILE, as the command reads it
    const qsizetype colon = spec.indexOf(QStringLiteral(":/"));     // FILE.h5:/dataset
    return colon > 0 ? spec.left(colon) : spec;
  };
  const QStringList inputs = entries(input_), expected = entries(expect_);
  if (why.isEmpty() && inputs.isEmpty()) why = tr("choose the model's input (.npy or FILE.h5:/dataset)");
  for (const QString& i : inputs)
    if (why.isEmpty() && !QFileInfo(file(i)).isFile()) why = tr("input %1 does not exist").arg(file(i));
  for (const QString& e : expected)
    if (why.isEmpty() && !QFileInfo(file(e)).isFile()) why = tr("expected outputs %1 do not exist").arg(file(e));
  if (why.isEmpty() && outputsPath().isEmpty()) why = tr("no folder for the outputs: name an outputs file");
  if (!why.isEmpty()) {
    if (error) *error = why;
    return {};
  }
  QStringList a = QStringList{QStringLiteral("save"), QStringLiteral("run")} + modelArgs;
  for (const QString& i : inputs) a << QStringLiteral("--input") << i;
  a << QStringLiteral("--output") << outputsPath() << QStringLiteral("--protect") << protect_->currentText()
    << QStringLiteral("--flips") << QString::number(faults_->value()) << QStringLiteral("--seed")
    << QString::number(seed_->value()) << QStringLiteral("--json");
  for (const QString& e : expected) a << QStringLiteral("--expect") << e;
  return a;
}
QString RunPanel::outputsPath() const {
  const QString named = outputs_->text().trimmed();
  if (!named.isEmpty()) return named;
  if (!scratch_) scratch_ = std::make_unique<QTemporaryDir>();
  // a file per run: the outputs of the run before may still be read while the next one writes
  return scratch_->isValid() ? scratch_->filePath(QStringLiteral("outputs-%1.npy").arg(saveRuns_ + 1)) : QString();
}
QList<QStringList> RunPanel::demoSteps(const QString& session) {
  const QString weights = shippedWeights(QStringLiteral("lenet"));
  return {{QStringLiteral("profile"), QStringLiteral("--model"), QStringLiteral("lenet"), QStringLiteral("--init"), weights,
           QStringLiteral("--iterations"), QStringLiteral("30"), QStringLiteral("--record-every"), QStringLiteral("10"),
           QStringLiteral("--out"), session},
          {QStringLiteral("playback"), QStringLiteral("-s"), session, QStringLiteral("-k"), QStringLiteral("bf16"),
           QStringLiteral("--store-outputs"), QStringLiteral("--name"), QStringLiteral("bf16")},
          {QStringLiteral("analyze"), QStringLiteral("--session"), session, QStringLiteral("--run"), QStringLiteral("bf16")},
          // the output criterion at a budget of 5% of the working set: bit classes and placement that vary over a layer
          {QStringLiteral("save"), QStringLiteral("analyze"), QStringLiteral("-m"), QStringLiteral("lenet"), QStringLiteral("-w"),
           weights, QStringLiteral("--criterion"), QStringLiteral("output"), QStringLiteral("--epsilon"), QStringLiteral("60"),
           QStringLiteral("--budget"), QStringLiteral("5%"), QStringLiteral("-s"), session},
          {QStringLiteral("save"), QStringLiteral("campaign"), QStringLiteral("-m"), QStringLiteral("lenet"), QStringLiteral("-w"),
           weights, QStringLiteral("--images"), QStringLiteral("500"), QStringLiteral("--flips"),
           // the basis the README quotes: the same fault rate per byte of each scheme's unreliable memory
           QStringLiteral("1,16,256,1024,4096"), QStringLiteral("--basis"), QStringLiteral("memory"), QStringLiteral("-s"), session}};
}

}  // namespace peat::views
