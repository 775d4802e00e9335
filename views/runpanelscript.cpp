// SPDX-License-Identifier: MIT
// The run panel's mode "Record a Python script": its rows (interpreter, script, the script's
// arguments, ops, every N iterations, an optional runtime-FI swap), their setters, and the
// `peat record -o SESSION ... -- INTERPRETER SCRIPT ARGS` they stand for (docs/record.md). peat execs
// the interpreter with the package peat on PYTHONPATH; the script runs unchanged.
#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QProcess>
#include <QToolButton>
#include <QSpinBox>
#include <QStandardPaths>

#include "views/runpanel.h"

namespace peat::views {

namespace {

// Whether peat and the package take `word`, the first word after `--`, for the interpreter (as
// `peat record -- python3 train.py` is written) rather than for the script.
bool namedPython(const QString& word) {
  const QString base = QFileInfo(word).fileName();
  return base.startsWith(QLatin1String("python")) && !base.contains(QLatin1String(".py"));
}

}  // namespace

void RunPanel::addScriptRows() {
  interpreter_ = new QComboBox(this);
  interpreter_->setObjectName(QStringLiteral("interpreter"));
  interpreter_->setEditable(true);
  const QString fromEnvironment = qEnvironmentVariable("PEAT_PYTHON");
  if (!fromEnvironment.isEmpty()) interpreter_->addItem(fromEnvironment);
  if (fromEnvironment != QLatin1String("python3")) interpreter_->addItem(QStringLiteral("python3"));
  interpreter_->setCurrentIndex(0);
  interpreter_->setToolTip(tr("The Python that runs your script, with its own PyTorch: python3, a virtual environment's\n"
                              "bin/python, ... (the default is $PEAT_PYTHON when it is set)"));
  form_->addRow(tr("Interpreter"), interpreter_);

  script_ = new QLineEdit(this);
  script_->setObjectName(QStringLiteral("script"));
  script_->setPlaceholderText(tr("train.py: your training script, unchanged"));
  script_->setToolTip(tr("Your PyTorch training script as you run it with python3; it runs in its own folder, and\n"
                         "its op calls (forward, backward, optimiser) are recorded into the session"));
  auto* browse = new QToolButton(this);  // as narrow as its text: the dock may be narrow
  browse->setText(tr("..."));
  {
    auto* row = new QHBoxLayout;
    row->addWidget(script_, 1);
    row->addWidget(browse);
    form_->addRow(tr("Script"), row);
  }
  connect(browse, &QToolButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Training script"), script_->text(),
                                                      tr("Python scripts (*.py);;All files (*)"));
    if (!path.isEmpty()) script_->setText(path);
  });

  scriptArgs_ = new QLineEdit(this);
  scriptArgs_->setObjectName(QStringLiteral("scriptArguments"));
  scriptArgs_->setPlaceholderText(tr("its arguments, e.g. --epochs 1 --batch-size 64"));
  scriptArgs_->setToolTip(tr("The script's own arguments, split as QProcess::splitCommand does: double quotes keep words\n"
                             "together (--name \"my run\"), three double quotes make one; single quotes are plain characters"));
  form_->addRow(tr("Arguments"), scriptArgs_);

  scriptOps_ = new QComboBox(this);
  scriptOps_->setObjectName(QStringLiteral("scriptOps"));
  scriptOps_->setEditable(true);
  scriptOps_->addItems({QStringLiteral("all"), QStringLiteral("gemm"), QStringLiteral("conv")});
  scriptOps_->setItemData(0, tr("every op the recorder knows (GEMMs, convolutions, softmax, norms, the loss, the optimiser, ...)"),
                          Qt::ToolTipRole);
  scriptOps_->setItemData(1, tr("the matrix products: linear, matmul and the like"), Qt::ToolTipRole);
  scriptOps_->setItemData(2, tr("the convolutions"), Qt::ToolTipRole);
  scriptOps_->setToolTip(tr("The ops whose calls are recorded (--ops): all, gemm, conv, or a comma-separated list such as\n"
                            "linear,matmul,softmax (peat record names the ops it knows when one is not)"));
  form_->addRow(tr("Ops to record"), scriptOps_);

  recordEvery_ = new QSpinBox(this);
  recordEvery_->setObjectName(QStringLiteral("recordEvery"));
  recordEvery_->setRange(1, 1000000);
  recordEvery_->setValue(1);
  recordEvery_->setPrefix(tr("every "));
  recordEvery_->setSuffix(tr(" iterations"));
  recordEvery_->setSpecialValueText(tr("every iteration"));
  recordEvery_->setToolTip(tr("--every N: record the calls of every N-th iteration (an iteration ends at optimizer.step())"));
  form_->addRow(tr("Record"), recordEvery_);

  swap_ = new QLineEdit(this);
  swap_->setObjectName(QStringLiteral("swap"));
  swap_->setPlaceholderText(tr("none, or OP=KERNEL"));
  swap_->setToolTip(tr("Runtime fault injection (--swap OP=KERNEL), e.g. gemm=python:mykernels:bf16_gemm: the script runs\n"
                       "twice with the same seed, golden and then with the candidate in place of every K-th call of OP.\n"
                       "A python:MODULE:FUNCTION kernel is imported from the script's folder or PYTHONPATH. Empty: none."));
  swapEvery_ = new QSpinBox(this);
  swapEvery_->setObjectName(QStringLiteral("swapEvery"));
  swapEvery_->setRange(1, 1000000);
  swapEvery_->setValue(1);
  swapEvery_->setPrefix(tr("every "));
  swapEvery_->setSuffix(tr(" calls"));
  swapEvery_->setSpecialValueText(tr("every call"));
  swapEvery_->setToolTip(tr("--swap-every K: the candidate runs every K-th call of the op"));
  swapEvery_->setEnabled(false);
  connect(swap_, &QLineEdit::textChanged, swapEvery_,
          [this](const QString& text) { swapEvery_->setEnabled(!text.trimmed().isEmpty()); });
  {
    auto* row = new QHBoxLayout;
    row->addWidget(swap_, 1);
    row->addWidget(swapEvery_);
    form_->addRow(tr("Swap in"), row);
  }
}

void RunPanel::setInterpreter(const QString& interpreter) { interpreter_->setCurrentText(interpreter); }
QString RunPanel::interpreter() const { return interpreter_->currentText().trimmed(); }
void RunPanel::setScript(const QString& script) { script_->setText(script); }
void RunPanel::setScriptArguments(const QString& arguments) { scriptArgs_->setText(arguments); }
void RunPanel::setScriptOps(const QString& ops) { scriptOps_->setCurrentText(ops); }
void RunPanel::setRecordEvery(int iterations) { recordEvery_->setValue(iterations); }
void RunPanel::setSwap(const QString& swap) { swap_->setText(swap); }
void RunPanel::setSwapEvery(int calls) { swapEvery_->setValue(calls); }

// record -o SESSION [--force] --ops X --every N [--swap OP=KERNEL --swap-every K] -- INTERPRETER SCRIPT
// ARGS; the paths absolute, since the run starts in the script's folder.
QStringList RunPanel::recordArguments(const QString& session, QString* error) const {
  auto fail = [&](const QString& why) {
    if (error) *error = why;
    return QStringList();
  };
  const QString python = interpreter();
  if (python.isEmpty()) return fail(tr("choose the Python interpreter that runs the script (python3, a venv's bin/python)"));
  const bool path = python.contains(QLatin1Char('/'));
  if (path ? !QFileInfo(python).isExecutable() || QFileInfo(python).isDir() : QStandardPaths::findExecutable(python).isEmpty())
    return fail(tr("no Python interpreter '%1': name one on PATH or give its path").arg(python));
  const QString script = script_->text().trimmed();
  if (script.isEmpty()) return fail(tr("choose the training script to record (a .py file)"));
  if (!QFileInfo(script).isFile()) return fail(tr("script %1 does not exist").arg(script));
  QStringList ops = scriptOps_->currentText().split(QLatin1Char(','), Qt::SkipEmptyParts);
  for (QString& op : ops) op = op.trimmed();
  ops.removeAll(QString());
  if (ops.isEmpty()) return fail(tr("ops to record: all, gemm, conv or a comma-separated list of ops"));
  const QString swap = swap_->text().trimmed();
  if (!swap.isEmpty()) {
    const qsizetype eq = swap.indexOf(QLatin1Char('='));
    if (eq <= 0 || eq == swap.size() - 1)
      return fail(tr("swap '%1': give OP=KERNEL, e.g. gemm=python:mykernels:bf16_gemm (empty: no swap)").arg(swap));
  }
  QStringList a{QStringLiteral("record"), QStringLiteral("-o"), QFileInfo(session).absoluteFilePath()};
  if (replace_->isChecked()) a << QStringLiteral("--force");
  a << QStringLiteral("--ops") << ops.join(QLatin1Char(',')) << QStringLiteral("--every") << QString::number(recordEvery_->value());
  if (!swap.isEmpty()) a << QStringLiteral("--swap") << swap << QStringLiteral("--swap-every") << QString::number(swapEvery_->value());
  a << QStringLiteral("--");
  // The interpreter goes after -- when peat and the package know it by its name (python, python3.11,
  // .../bin/python); any other one reaches peat as PEAT_PYTHON only (launch()).
  if (namedPython(python)) a << (path ? QFileInfo(python).absoluteFilePath() : python);
  a << QFileInfo(script).absoluteFilePath() << QProcess::splitCommand(scriptArgs_->text());
  return a;
}

}  // namespace peat::views
