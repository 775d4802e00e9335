// SPDX-License-Identifier: MIT
#include "views/runpanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcessEnvironment>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QTimer>

#include <algorithm>
#include <cmath>

#include <csignal>

#include "core/store/call_params.h"

#include <fcntl.h>
#include <unistd.h>

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

const char* kModes[] = {"profile", "playback", "runtime FI", "SAVE analyze", "SAVE campaign", "SAVE run"};

// What `peat profile` records without --record-ops: the GEMMs.
const QString kGemmOps = QStringLiteral("linear,conv2d,matmul");

// The candidates written for one op (`peat kernels`, column "ops"), by their names' prefixes.
struct KernelOp {
  const char* prefix;
  const char* op;
};
const KernelOp kKernelOps[] = {{"softmax-", "softmax"},     {"layernorm-", "layernorm"}, {"rmsnorm", "layernorm"},
                               {"gelu-", "gelu"},           {"adam-", "adam"},           {"embedding-", "embedding"},
                               {"dropout-", "dropout"},       {"attention-", "attention"}};

QString opNamesText() {
  QStringList names;
  for (const std::string& op : store::opNames()) names << QString::fromStdString(op);
  return names.join(QStringLiteral(", "));
}

// "all" and every op of the kernel slot, each with what it computes as its tooltip.
void addOps(QComboBox* box) {
  box->addItem(QStringLiteral("all"));
  box->setItemData(0, RunPanel::tr("every op the kernel takes"), Qt::ToolTipRole);
  for (const std::string& op : store::opNames()) {
    box->addItem(QString::fromStdString(op));
    box->setItemData(box->count() - 1, QString::fromStdString(store::opSummary(op)), Qt::ToolTipRole);
  }
}

bool isSave(RunPanel::Mode m) {
  return m == RunPanel::Mode::SaveAnalyze || m == RunPanel::Mode::SaveCampaign || m == RunPanel::Mode::SaveRun;
}

// A row of the form: `field`, stretched, with `button` beside it.
void addFieldWithButton(QFormLayout* form, const QString& label, QWidget* field, QPushButton* button) {
  auto* row = new QHBoxLayout;
  row->addWidget(field, 1);
  row->addWidget(button);
  form->addRow(label, row);
}

// A row naming a file: a line edit with a "..." button that asks for it (to read, or to write).
QLineEdit* addFileRow(QWidget* owner, QFormLayout* form, const QString& label, const QString& placeholder,
                      const QString& filter, bool write) {
  auto* edit = new QLineEdit(owner);
  edit->setPlaceholderText(placeholder);
  auto* browse = new QPushButton(QObject::tr("..."), owner);
  addFieldWithButton(form, label, edit, browse);
  QObject::connect(browse, &QPushButton::clicked, owner, [owner, edit, label, filter, write] {
    const QString path = write ? QFileDialog::getSaveFileName(owner, label, edit->text(), filter)
                               : QFileDialog::getOpenFileName(owner, label, edit->text(), filter);
    if (!path.isEmpty()) edit->setText(path);
  });
  return edit;
}

}  // namespace

// The whole form, built once (about 130 lines of widget set-up, no logic).
RunPanel::RunPanel(QWidget* parent) : QWidget(parent), process_(new QProcess(this)) {
  auto* outer = new QVBoxLayout(this);
  form_ = new QFormLayout;
  outer->addLayout(form_);

  mode_ = new QComboBox(this);
  for (const char* m : kModes) mode_->addItem(tr(m));
  mode_->setToolTip(tr("profile: train and record every op into a session; playback: replay recorded calls through a\n"
                       "candidate kernel; runtime FI: train twice, the second time with the candidate every k-th call;\n"
                       "SAVE analyze: ranges, bit classes and tiles of a model; SAVE campaign: accuracy under bit flips;\n"
                       "SAVE run: the model on your inputs with SAVE's engine, plain or protected, its outputs shown"));
  form_->addRow(tr("Mode"), mode_);

  model_ = new QComboBox(this);
  model_->addItems({QStringLiteral("mlp"), QStringLiteral("lenet"), QStringLiteral("resnet"), QStringLiteral("vit"),
                    QStringLiteral("chargpt")});
  model_->setCurrentText(QStringLiteral("lenet"));
  model_->setEditable(true);  // a zoo name, or a TorchScript file (docs/models.md)
  model_->setToolTip(tr("A zoo model, or a TorchScript file of your own (torch.jit.trace or torch.jit.script, .save)"));
  modelFile_ = new QPushButton(tr("Model file..."), this);
  modelFile_->setToolTip(tr("Train your own network: every GEMM of its TorchScript graph goes through the kernel slot"));
  fusedAttention_ = new QCheckBox(tr("attention as one call"), this);
  fusedAttention_->setObjectName(QStringLiteral("fusedAttention"));
  fusedAttention_->setToolTip(tr("--attention fused: a transformer's scores, softmax and values reach the slot as one\n"
                                 "'attention' call (for attention kernels) instead of three (docs/models.md)"));
  {
    auto* row = new QHBoxLayout;
    row->addWidget(model_, 1);
    row->addWidget(fusedAttention_);
    row->addWidget(modelFile_);
    form_->addRow(tr("Model"), row);
  }
  connect(modelFile_, &QPushButton::clicked, this, [this] {
    const bool save = isSave(mode());
    const QString path =
        save ? QFileDialog::getOpenFileName(this, tr("ONNX model"), QString(), tr("ONNX models (*.onnx);;All files (*)"))
             : QFileDialog::getOpenFileName(this, tr("TorchScript model"), QString(),
                                            tr("TorchScript archives (*.pt *.pth *.ts *.zip);;All files (*)"));
    if (!path.isEmpty()) model_->setCurrentText(path);
  });

  // SAVE run: the inputs, a reference, the protection and its faults, and where the outputs go
  const QString tensors = tr("NumPy arrays (*.npy);;HDF5 files (*.h5 *.hdf5);;All files (*)");
  input_ = addFileRow(this, form_, tr("Input"), tr("x.npy or x.h5:/dataset: one sample or [N, sample...]"), tensors, false);
  input_->setToolTip(tr("The model's input as it takes it (already normalised); an HDF5 file names its dataset after a colon"));
  expect_ = addFileRow(this, form_, tr("Expected outputs"), tr("optional: a reference, e.g. PyTorch's outputs"), tensors, false);
  expect_->setToolTip(tr("The outputs another runtime gives on the same inputs: the largest difference is reported"));
  protect_ = new QComboBox(this);
  protect_->addItems({QStringLiteral("none"), QStringLiteral("save"), QStringLiteral("tmr"), QStringLiteral("ranger"),
                      QStringLiteral("ecc")});
  protect_->setToolTip(tr("none: the plain engine; save: SAVE's range checks and recomputation; tmr: three copies "
                          "voted;\nranger: values clipped to profiled bounds; ecc: SEC-DED on the words in memory"));
  form_->addRow(tr("Protection"), protect_);
  faults_ = new QSpinBox(this);
  faults_->setRange(0, 100000000);
  faults_->setSuffix(tr(" bit flips"));
  faults_->setToolTip(tr("Faults injected over the whole inference (every sample in one batch), drawn with the seed"));
  form_->addRow(tr("Faults"), faults_);
  outputs_ = addFileRow(this, form_, tr("Outputs"), tr("optional: write the outputs as .npy here"),
                        tr("NumPy arrays (*.npy)"), true);

  data_ = new QLineEdit(this);
  data_->setPlaceholderText(tr("fashion-mnist:3x64x64, data.h5 or a folder of .npy files"));
  data_->setToolTip(tr("The model file's data: an HDF5 file with train/x, train/y, test/x, test/y; a folder of\n"
                       "train_x.npy ... test_y.npy; or Fashion-MNIST resized (fashion-mnist:CxHxW)"));
  auto* dataButton = new QPushButton(tr("Data..."), this);
  addFieldWithButton(form_, tr("Data"), data_, dataButton);
  connect(dataButton, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Training data"), QString(),
                                                      tr("HDF5 files (*.h5 *.hdf5);;NumPy files (*.npy)"));
    if (path.isEmpty()) return;
    // a .npy file stands for its folder (train_x.npy, train_y.npy, test_x.npy, test_y.npy)
    data_->setText(path.endsWith(QLatin1String(".npy")) ? QFileInfo(path).absolutePath() : path);
  });

  kernel_ = new QComboBox(this);
  kernel_->setEditable(true);
  kernel_->addItems({QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("tf32"), QStringLiteral("fp8-e4m3"),
                     QStringLiteral("fp8-e5m2"), QStringLiteral("fp16acc"), QStringLiteral("splitk:parts=4"),
                     QStringLiteral("pairwise"), QStringLiteral("reversed"), QStringLiteral("tile-edge"),
                     QStringLiteral("missing-ktile"), QStringLiteral("zeroed-tail"), QStringLiteral("stale-race"),
                     QStringLiteral("bitflip"), QStringLiteral("multibit"), QStringLiteral("stuckat0"),
                     QStringLiteral("stuckat1"), QStringLiteral("random-value"), QStringLiteral("zero"),
                     QStringLiteral("nan"), QStringLiteral("inf"), QStringLiteral("gpu-tiled"), QStringLiteral("gpu-naive"),
                     QStringLiteral("gpu-half"), QStringLiteral("gpu-splitk:parts=4"), QStringLiteral("gpu-tile-edge"),
                     QStringLiteral("gpu-golden")});
  // the candidates written for one op (docs/kernels.md): choosing one chooses its op
  kernel_->addItems({QStringLiteral("softmax-exp2"), QStringLiteral("softmax-poly"), QStringLiteral("softmax-online"),
                     QStringLiteral("softmax-nomax"), QStringLiteral("softmax-bf16"), QStringLiteral("softmax-fp16"),
                     QStringLiteral("attention-flash"), QStringLiteral("attention-causal-off"), QStringLiteral("layernorm-onepass"), QStringLiteral("layernorm-fp16stats"),
                     QStringLiteral("layernorm-eps-outside"), QStringLiteral("layernorm-bessel"), QStringLiteral("rmsnorm"),
                     QStringLiteral("gelu-tanh"), QStringLiteral("adam-bf16"), QStringLiteral("adam-eps-inside"),
                     QStringLiteral("embedding-atomic"), QStringLiteral("dropout-reuse"), QStringLiteral("grad-unscaled")});
  kernel_->setObjectName(QStringLiteral("kernel"));
  kernel_->setToolTip(tr("Candidate kernel or fault model, with options as NAME:KEY=VALUE (see 'peat kernels')"));
  plugin_ = new QPushButton(tr("Plugin..."), this);
  plugin_->setToolTip(tr("A kernel of your own (GEMM, softmax, layer norm, attention, ...), from a shared library\n"
                         "built against peat/kernel_abi.h (docs/plugins.md)"));
  pluginOps_ = new QLabel(this);
  pluginOps_->setObjectName(QStringLiteral("pluginOps"));
  pluginOps_->setWordWrap(true);
  pluginOps_->setVisible(false);
  {
    auto* row = new QHBoxLayout;
    row->addWidget(kernel_, 1);
    row->addWidget(plugin_);
    auto* column = new QVBoxLayout;
    column->addLayout(row);
    column->addWidget(pluginOps_);
    form_->addRow(tr("Kernel / fault"), column);
  }
  pluginProbe_ = new QProcess(this);
  connect(pluginProbe_, &QProcess::finished, this, &RunPanel::pluginProbed);
  connect(plugin_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Kernel plugin"), QString(), tr("Shared libraries (*.so)"));
    if (path.isEmpty()) return;
    const auto answer = QMessageBox::warning(
        this, tr("Load a kernel plugin?"),
        tr("A plugin is code: it runs with your rights inside the peat process that replays or trains.\n"
           "peat probes it in a separate process first, but only load plugins you trust.\n\n%1").arg(path),
        QMessageBox::Ok | QMessageBox::Cancel, QMessageBox::Cancel);
    if (answer == QMessageBox::Ok) kernel_->setCurrentText(QStringLiteral("plugin:path=") + path);
  });

  op_ = new QComboBox(this);
  op_->setObjectName(QStringLiteral("op"));
  addOps(op_);
  op_->setCurrentText(QStringLiteral("linear"));
  op_->setToolTip(tr("playback: replay only the recorded calls of this op; runtime FI: swap the candidate in for calls\n"
                     "of this op. A model's softmax, layer norm, ... calls are recorded with Record ops 'all'."));
  form_->addRow(tr("Op"), op_);
  // profile: the ops whose calls are recorded (--record-ops), a list of them or all
  recordOps_ = new QComboBox(this);
  recordOps_->setObjectName(QStringLiteral("recordOps"));
  recordOps_->setEditable(true);
  recordOps_->addItem(kGemmOps);
  recordOps_->setItemData(0, tr("the GEMMs (the default)"), Qt::ToolTipRole);
  addOps(recordOps_);
  recordOps_->setCurrentText(kGemmOps);
  recordOps_->setToolTip(tr("The ops whose calls the profile records, comma-separated: the GEMMs by default; 'all' also\n"
                            "records softmax, layer norm, activations, dropout (with its mask), embedding, the loss and\n"
                            "the optimiser's update of a model file"));
  form_->addRow(tr("Record ops"), recordOps_);
  connect(kernel_, &QComboBox::currentTextChanged, this, [this](const QString& kernel) {
    const QString op = kernelOp(kernel);
    if (!op.isEmpty() && op_->currentText() != QLatin1String("all")) op_->setCurrentText(op);
    describePlugin(kernel);
  });

  auto* freq = new QHBoxLayout;
  every_ = new QSpinBox(this);
  every_->setRange(1, 1000000);
  every_->setValue(10);
  every_->setPrefix(tr("every "));
  every_->setSuffix(tr(" calls"));
  prob_ = new QLineEdit(this);
  prob_->setPlaceholderText(tr("or probability, e.g. 0.01"));
  freq->addWidget(every_);
  freq->addWidget(prob_);
  form_->addRow(tr("Frequency"), freq);

  iterations_ = new QSpinBox(this);
  iterations_->setRange(1, 10000000);
  iterations_->setValue(50);
  form_->addRow(tr("Iterations"), iterations_);
  seed_ = new QSpinBox(this);
  seed_->setRange(1, 1 << 30);
  seed_->setValue(1);
  form_->addRow(tr("Seed"), seed_);

  flips_ = new QLineEdit(QStringLiteral("1,16,256,1024,4096"), this);
  flips_->setToolTip(tr("Bit flips per inference, comma-separated"));
  form_->addRow(tr("Flips"), flips_);
  images_ = new QSpinBox(this);
  images_->setRange(100, 10000);
  images_->setSingleStep(100);
  images_->setValue(500);
  form_->addRow(tr("Test images"), images_);

  device_ = new QComboBox(this);
  device_->addItem(QStringLiteral("cpu:0"));
  device_->setToolTip(tr("Where the gpu-* kernels run (CUDA or HIP GPUs the Devices panel found, or the CPU reference).\n"
                         "Training, the other kernels and SAVE run on the CPU."));
  form_->addRow(tr("Device"), device_);

  session_ = new QLineEdit(this);
  session_->setPlaceholderText(tr("session file (.h5)"));
  auto* browse = new QPushButton(tr("..."), this);
  addFieldWithButton(form_, tr("Session"), session_, browse);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Session"), session_->text(), tr("PEAT sessions (*.h5)"),
                                                      nullptr, QFileDialog::DontConfirmOverwrite);
    if (!path.isEmpty()) session_->setText(path);
  });
  analyze_ = new QCheckBox(tr("analyse the replayed calls afterwards"), this);
  analyze_->setChecked(true);
  form_->addRow(QString(), analyze_);
  // profile and runtime FI write a whole session file: a free name beside an existing one by
  // default (lenet-2.h5), or the file replaced when asked
  replace_ = new QCheckBox(tr("replace the session file if it exists (else a free name beside it)"), this);
  form_->addRow(QString(), replace_);

  auto* buttons = new QHBoxLayout;
  start_ = new QPushButton(tr("Start"), this);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setEnabled(false);
  buttons->addWidget(start_);
  buttons->addWidget(cancel_);
  outer->addLayout(buttons);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  outer->addWidget(progress_);
  status_ = new QLabel(tr("Idle"), this);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(status_);
  outer->addStretch(1);

  connect(mode_, &QComboBox::currentIndexChanged, this, &RunPanel::updateFields);
  connect(model_, &QComboBox::currentTextChanged, this, &RunPanel::updateRows);
  connect(start_, &QPushButton::clicked, this, &RunPanel::start);
  connect(cancel_, &QPushButton::clicked, this, &RunPanel::cancel);
  connect(process_, &QProcess::readyReadStandardOutput, this, &RunPanel::readOutput);
  connect(process_, &QProcess::finished, this, &RunPanel::processEnded);
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) processEnded(-1, QProcess::CrashExit);
  });
  updateFields();
}

RunPanel::~RunPanel() {
  if (process_->state() != QProcess::NotRunning) {
    process_->kill();
    process_->waitForFinished(2000);
  }
}

void RunPanel::setMode(Mode mode) { mode_->setCurrentIndex(int(mode)); }
RunPanel::Mode RunPanel::mode() const { return Mode(mode_->currentIndex()); }
void RunPanel::setSessionPath(const QString& path) { session_->setText(path); }
QString RunPanel::sessionPath() const { return session_->text(); }
void RunPanel::setModel(const QString& model) { model_->setCurrentText(model); }
void RunPanel::setData(const QString& data) { data_->setText(data); }

bool RunPanel::modelIsFile() const {
  for (int i = 0; i < model_->count(); ++i)
    if (model_->itemText(i) == model_->currentText()) return false;
  return !model_->currentText().trimmed().isEmpty();
}
void RunPanel::setKernel(const QString& kernel) { kernel_->setCurrentText(kernel); }

bool RunPanel::setOp(const QString& op) {
  if (op_->findText(op) < 0) return false;
  op_->setCurrentText(op);
  return true;
}
void RunPanel::setRecordOps(const QString& ops) { recordOps_->setCurrentText(ops); }

QString RunPanel::kernelOp(const QString& kernel) {
  const std::string name = kernel.section(QLatin1Char(':'), 0, 0).toStdString();
  for (const KernelOp& k : kKernelOps)
    if (name.rfind(k.prefix, 0) == 0) return QString::fromLatin1(k.op);
  return {};
}
void RunPanel::setIterations(int n) { iterations_->setValue(n); }
void RunPanel::setSeed(int seed) { seed_->setValue(seed); }
void RunPanel::setFlips(const QString& flips) { flips_->setText(flips); }
void RunPanel::setImages(int n) { images_->setValue(n); }
void RunPanel::setAnalyzeAfterPlayback(bool on) { analyze_->setChecked(on); }
bool RunPanel::running() const { return process_->state() != QProcess::NotRunning; }

void RunPanel::updateFields() {
  updateRows();
  const bool onnx = model_->currentText().trimmed().endsWith(QLatin1String(".onnx"));
  if (isSave(mode()) && !onnx)
    model_->setCurrentText(model_->currentText() == QLatin1String("vit") ? QStringLiteral("vit") : QStringLiteral("lenet"));
}

void RunPanel::updateRows() {
  const Mode m = mode();
  const bool trains = m == Mode::Profile || m == Mode::RuntimeFi;
  const bool run = m == Mode::SaveRun;
  // rows: mode, model, input, expected, protection, faults, outputs (SAVE run), data, kernel, op,
  // record ops, frequency, iterations, seed, flips, images, device, session, analyse, replace
  const bool rows[] = {true, m != Mode::Playback, run, run, run, run, run, (trains || m == Mode::SaveCampaign) && modelIsFile(),
                       m == Mode::Playback || m == Mode::RuntimeFi,
                       m == Mode::Playback || m == Mode::RuntimeFi, m == Mode::Profile, m == Mode::RuntimeFi, trains,
                       m != Mode::SaveAnalyze,
                       m == Mode::SaveCampaign, m == Mode::SaveCampaign, !run, !run, m == Mode::Playback, trains};
  for (int r = 0; r < int(sizeof rows / sizeof rows[0]) && r < form_->rowCount(); ++r) form_->setRowVisible(r, rows[r]);
  modelFile_->setEnabled(m != Mode::Playback);
  fusedAttention_->setVisible(trains);
  modelFile_->setToolTip(isSave(m) ? tr("An ONNX model of your own: SAVE reads it with its initializers as weights")
                                   : tr("Train your own network: every GEMM of its TorchScript graph goes through the kernel slot"));
}

// A user kernel chosen as the candidate: `peat kernels --probe FILE --json` (the probe runs it in a
// child process) says which op kinds and dtypes it exports; the op list offers the slot ops it runs.
void RunPanel::describePlugin(const QString& kernel) {
  if (pluginProbe_->state() != QProcess::NotRunning) {
    pluginProbe_->disconnect(this);
    pluginProbe_->kill();
    pluginProbe_->waitForFinished(1000);
    pluginProbe_->deleteLater();
    pluginProbe_ = new QProcess(this);
    connect(pluginProbe_, &QProcess::finished, this, &RunPanel::pluginProbed);
  }
  const QString prefix = QStringLiteral("plugin:path=");
  pluginSlotOps_.clear();
  if (!kernel.startsWith(prefix)) {
    pluginOps_->setVisible(false);
    restrictOps({});
    return;
  }
  const QString path = kernel.mid(prefix.size());
  pluginOps_->setVisible(true);
  if (!QFileInfo(path).isFile()) {
    pluginOps_->setText(tr("no such plugin: %1").arg(path));
    return;
  }
  pluginOps_->setText(tr("probing %1 ...").arg(QFileInfo(path).fileName()));
  pluginProbe_->setProgram(program());
  pluginProbe_->setArguments({QStringLiteral("kernels"), QStringLiteral("--probe"), path, QStringLiteral("--json")});
  pluginProbe_->start();
}

void RunPanel::pluginProbed(int code, QProcess::ExitStatus status) {
  const QByteArray out = pluginProbe_->readAllStandardOutput(), err = pluginProbe_->readAllStandardError();
  QJsonParseError parse{};
  const QJsonDocument doc = QJsonDocument::fromJson(out, &parse);
  if (status != QProcess::NormalExit || code != 0 || !doc.isObject()) {
    const QString line = QString::fromUtf8(err).trimmed().section(QLatin1Char('\n'), -1);
    pluginOps_->setText(tr("refused: %1").arg(line.isEmpty() ? tr("the probe failed") : line));
    restrictOps({});
    return;
  }
  const QJsonObject o = doc.object();
  QStringList kinds;
  for (const QJsonValue& v : o.value(QStringLiteral("ops")).toArray()) {
    const QJsonObject op = v.toObject();
    QStringList variants;
    for (const QJsonValue& x : op.value(QStringLiteral("variants")).toArray()) variants << x.toString();
    const int cases = op.value(QStringLiteral("cases")).toInt(), failed = op.value(QStringLiteral("failed_cases")).toInt();
    kinds << tr("%1 (%2; %3 -> %4%5)")
                 .arg(op.value(QStringLiteral("kind")).toString(), variants.join(QStringLiteral(", ")),
                      op.value(QStringLiteral("input_dtype")).toString(), op.value(QStringLiteral("output_dtype")).toString(),
                      failed ? tr("; probe: %1 of %2 cases wrong").arg(failed).arg(cases) : QString());
  }
  for (const QJsonValue& v : o.value(QStringLiteral("slot_ops")).toArray()) pluginSlotOps_ << v.toString();
  pluginOps_->setText(tr("%1, ABI v%2: %3.\nRuns the slot's %4 calls.")
                          .arg(o.value(QStringLiteral("name")).toString())
                          .arg(o.value(QStringLiteral("abi")).toInt())
                          .arg(kinds.join(QStringLiteral("; ")), pluginSlotOps_.join(QStringLiteral(", "))));
  pluginOps_->setToolTip(o.value(QStringLiteral("warning")).toString());
  restrictOps(pluginSlotOps_);
}

// Only these ops (and "all") can be chosen; every op when `ops` is empty.
void RunPanel::restrictOps(const QStringList& ops) {
  auto* model = qobject_cast<QStandardItemModel*>(op_->model());
  if (!model) return;
  for (int i = 0; i < op_->count(); ++i) {
    const QString op = op_->itemText(i);
    if (QStandardItem* item = model->item(i)) item->setEnabled(ops.isEmpty() || op == QLatin1String("all") || ops.contains(op));
  }
  if (!ops.isEmpty() && op_->currentText() != QLatin1String("all") && !ops.contains(op_->currentText()))
    op_->setCurrentText(ops.first());
}

QStringList RunPanel::pluginOps() const { return pluginSlotOps_; }

void RunPanel::setFusedAttention(bool on) { fusedAttention_->setChecked(on); }

QString RunPanel::program() const {
  const QString env = qEnvironmentVariable("PEAT_CLI");
  return env.isEmpty() ? QCoreApplication::applicationDirPath() + QStringLiteral("/peat") : env;
}

void RunPanel::setDevices(const QStringList& devices) {
  const QString current = device_->currentText();
  device_->clear();
  device_->addItems(devices.isEmpty() ? QStringList{QStringLiteral("cpu:0")} : devices);
  if (devices.contains(current)) device_->setCurrentText(current);
}

void RunPanel::setDevice(const QString& device) { device_->setCurrentText(device); }

QStringList RunPanel::arguments(QString* error) const {
  auto fail = [&](const QString& why) {
    if (error) *error = why;
    return QStringList();
  };
  const QString model = model_->currentText().trimmed(), kernel = kernel_->currentText().trimmed();
  if (mode() == Mode::SaveRun) return saveRunArguments(model, error);  // writes no session
  const QString session = session_->text().trimmed();
  if (session.isEmpty()) return fail(tr("choose a session file"));
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
      if (ops.join(QLatin1Char(',')) != kGemmOps) a << QStringLiteral("--record-ops") << ops.join(QLatin1Char(','));
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
        a << QStringLiteral("--images") << QString::number(images_->value()) << QStringLiteral("--flips") << flips_->text()
          << QStringLiteral("--seed") << seed;
        // an ONNX model's labelled samples (empty: Fashion-MNIST resized to its input, docs/save.md)
        if (model.endsWith(QLatin1String(".onnx")) && !data_->text().trimmed().isEmpty())
          a << QStringLiteral("--data") << data_->text().trimmed();
      }
      return a;
    }
    case Mode::SaveRun: break;  // above
  }
  return fail(tr("unknown mode"));
}

// peat save run on the user's input, with --json: the panel reads its summary, and the outputs
// from the file it names.
QStringList RunPanel::saveRunArguments(const QString& model, QString* error) const {
  QString why;
  const QStringList modelArgs = saveModelArguments(model, &why);
  const QString input = input_->text().trimmed(), expect = expect_->text().trimmed();
  // FILE.h5:/dataset names a file before the colon
  const auto file = [](const QString& spec) {
    const qsizetype colon = spec.indexOf(QStringLiteral(":/"));
    return colon > 0 ? spec.left(colon) : spec;
  };
  if (why.isEmpty() && input.isEmpty()) why = tr("choose the model's input (.npy or FILE.h5:/dataset)");
  if (why.isEmpty() && !QFileInfo(file(input)).isFile()) why = tr("input %1 does not exist").arg(file(input));
  if (why.isEmpty() && !expect.isEmpty() && !QFileInfo(file(expect)).isFile())
    why = tr("expected outputs %1 do not exist").arg(file(expect));
  if (why.isEmpty() && outputsPath().isEmpty()) why = tr("no folder for the outputs: name an outputs file");
  if (!why.isEmpty()) {
    if (error) *error = why;
    return {};
  }
  QStringList a = QStringList{QStringLiteral("save"), QStringLiteral("run")} + modelArgs;
  a << QStringLiteral("--input") << input << QStringLiteral("--output") << outputsPath() << QStringLiteral("--protect")
    << protect_->currentText() << QStringLiteral("--flips") << QString::number(faults_->value()) << QStringLiteral("--seed")
    << QString::number(seed_->value()) << QStringLiteral("--json");
  if (!expect.isEmpty()) a << QStringLiteral("--expect") << expect;
  return a;
}

QString RunPanel::outputsPath() const {
  const QString named = outputs_->text().trimmed();
  if (!named.isEmpty()) return named;
  if (!scratch_) scratch_ = std::make_unique<QTemporaryDir>();
  // a file per run: the outputs of the run before may still be read while the next one writes
  return scratch_->isValid() ? scratch_->filePath(QStringLiteral("outputs-%1.npy").arg(saveRuns_ + 1)) : QString();
}

void RunPanel::setInput(const QString& input) { input_->setText(input); }
void RunPanel::setExpected(const QString& expected) { expect_->setText(expected); }
bool RunPanel::setProtection(const QString& scheme) {
  if (protect_->findText(scheme) < 0) return false;
  protect_->setCurrentText(scheme);
  return true;
}
void RunPanel::setFaults(qint64 faults) { faults_->setValue(int(std::min<qint64>(faults, faults_->maximum()))); }
void RunPanel::setOutputs(const QString& outputs) { outputs_->setText(outputs); }
bool RunPanel::writesSession() const { return running() ? !saveRun_ : mode() != Mode::SaveRun; }

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

bool RunPanel::startSequence(const QList<QStringList>& steps, const QString& session) {
  if (running() || steps.isEmpty()) {
    emit finished(false, running() ? tr("a run is still going") : tr("nothing to run"), session);
    return false;
  }
  session_->setText(session);
  saveRun_ = false;  // the steps write the session
  queue_.clear();
  for (int i = 1; i < steps.size(); ++i) queue_ << [args = steps[i]] { return args; };
  steps_ = int(steps.size());
  return launch(steps.front());
}

QString RunPanel::freeSessionPath(const QString& path) {
  if (path.isEmpty() || !QFileInfo::exists(path)) return path;
  const QFileInfo info(path);
  QString base = info.completeBaseName();
  // lenet-2.h5 again gives lenet-3.h5, not lenet-2-2.h5
  const int dash = base.lastIndexOf(QLatin1Char('-'));
  bool numbered = false;
  if (dash > 0) base.mid(dash + 1).toInt(&numbered);
  if (numbered) base.truncate(dash);
  const QString suffix = info.suffix().isEmpty() ? QStringLiteral("h5") : info.suffix();
  for (int n = 2;; ++n) {
    const QString candidate = info.dir().filePath(QStringLiteral("%1-%2.%3").arg(base).arg(n).arg(suffix));
    if (!QFileInfo::exists(candidate)) return candidate;
  }
}

bool RunPanel::start() {
  if (running()) {
    emit finished(false, tr("a run is still going"), session_->text());
    return false;
  }
  note_.clear();
  if ((mode() == Mode::Profile || mode() == Mode::RuntimeFi) && !replace_->isChecked()) {
    const QString wanted = session_->text().trimmed();
    const QString free = freeSessionPath(wanted);
    if (free != wanted) {
      session_->setText(free);
      note_ = tr("%1 exists: writing %2 (tick 'replace' to overwrite it)").arg(QFileInfo(wanted).fileName(), QFileInfo(free).fileName());
    }
  }
  QString error;
  const QStringList args = arguments(&error);
  if (args.isEmpty()) {
    status_->setText(error);
    emit finished(false, error, session_->text());
    return false;
  }
  saveRun_ = mode() == Mode::SaveRun;
  if (saveRun_) {
    launchedInput_ = input_->text().trimmed();
    launchedOutputs_ = outputsPath();
    ++saveRuns_;
    result_ = QJsonObject();
  }
  queue_.clear();
  steps_ = 1;
  // A playback is followed by the analysis of its calls, for the error views.
  if (mode() == Mode::Playback && analyze_->isChecked()) {
    const QString session = session_->text();
    const QString fallback = QStringLiteral("playback-") + kernel_->currentText().section(QLatin1Char(':'), 0, 0);
    queue_ << [this, session, fallback] {
      return QStringList{QStringLiteral("analyze"), QStringLiteral("--session"), session, QStringLiteral("--run"),
                         runName_.isEmpty() ? fallback : runName_};
    };
    steps_ = 2;
  }
  return launch(args);
}

bool RunPanel::launch(const QStringList& args) {
  cancelled_ = false;
  lastError_.clear();
  buffer_.clear();
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("PEAT_EVENTS"), QStringLiteral("jsonl"));  // docs/events.md
  process_->setProcessEnvironment(env);
  process_->setProgram(program());
  process_->setArguments(args);
  process_->setProcessChannelMode(QProcess::MergedChannels);  // events, errors and the summary
  // The child must not inherit this process's open files: an inherited HDF5 file keeps the
  // workbench's lock on a session the run wants to write. Qt's own pipes are close-on-exec.
  process_->setChildProcessModifier([] {
    ::setpgid(0, 0);  // its own process group: Cancel reaches the helpers it starts (kernel host, probes) too
    for (int fd = 3; fd < 4096; ++fd) {
      const int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0 && !(flags & FD_CLOEXEC)) ::close(fd);
    }
  });
  progress_->setRange(0, 1000);  // determinate: nothing done until the first progress event says more
  progress_->setValue(0);
  estimate_.reset();
  status_->setText((note_.isEmpty() ? QString() : note_ + QStringLiteral("\n")) +
                   tr("Running: peat %1").arg(args.join(QLatin1Char(' '))));
  note_.clear();
  start_->setEnabled(false);
  cancel_->setEnabled(true);
  clock_.start();
  process_->start();
  emit started();
  return true;
}

void RunPanel::readOutput() {
  buffer_ += QString::fromUtf8(process_->readAllStandardOutput());
  int end;
  while ((end = int(buffer_.indexOf(QLatin1Char('\n')))) >= 0) {
    const QByteArray line = buffer_.left(end).trimmed().toUtf8();
    buffer_.remove(0, end + 1);
    if (line.startsWith('{')) handleEvent(line);  // the rest is the human output
  }
}

// One line of the event stream (docs/events.md); unknown events and fields are ignored, as the
// schema's rule for extending it asks.
void RunPanel::handleEvent(const QByteArray& line) {
  QJsonParseError error{};
  const QJsonObject e = QJsonDocument::fromJson(line, &error).object();
  if (error.error != QJsonParseError::NoError) return;
  if (!e.contains(QLatin1String("event"))) {  // a command's --json summary, not an event
    if (saveRun_ && e.contains(QLatin1String("output_shape"))) result_ = e;
    return;
  }
  if (e.value(QLatin1String("v")).toInt() < 1) return;
  const QString type = e.value(QLatin1String("event")).toString();
  if (type == QLatin1String("progress")) {
    const qint64 done = e.value(QLatin1String("done")).toInteger(), total = e.value(QLatin1String("total")).toInteger();
    if (total <= 0) return;
    if (cancelled_) return;  // "Cancelling" stays until the run has ended
    progress_->setRange(0, 1000);
    progress_->setValue(int(1000 * done / total));
    const double elapsed = double(clock_.elapsed()) / 1000;
    estimate_.update(done, total, elapsed);
    const double left = estimate_.secondsLeft();
    const QString what = e.contains(QLatin1String("status")) ? e.value(QLatin1String("status")).toString()
                                                            : e.value(QLatin1String("stage")).toString();
    status_->setText(tr("%1 of %2 %3, %4 s elapsed, %5")
                         .arg(done).arg(total).arg(what)
                         .arg(elapsed, 0, 'f', 1)
                         .arg(left < 0 ? tr("estimating the time left") : tr("about %1 s left at this rate").arg(left, 0, 'f', left < 10 ? 1 : 0)));
    emit progressed(done, total);
  } else if (type == QLatin1String("point")) {
    emit livePoint(e.value(QLatin1String("scheme")).toString(), e.value(QLatin1String("flips")).toDouble(),
                   e.value(QLatin1String("accuracy")).toDouble());
  } else if (type == QLatin1String("loss")) {
    const QJsonValue candidate = e.value(QLatin1String("candidate_loss"));
    // the event's iteration is 0-based; the signal counts finished iterations
    emit liveLoss(e.value(QLatin1String("iteration")).toDouble() + 1, e.value(QLatin1String("loss")).toDouble(),
                  candidate.isDouble() ? candidate.toDouble() : std::nan(""));
  } else if (type == QLatin1String("error")) {
    lastError_ = QStringLiteral("peat: error: ") + e.value(QLatin1String("message")).toString();
  } else if (type == QLatin1String("stored") && e.value(QLatin1String("kind")).toString() == QLatin1String("run")) {
    runName_ = e.value(QLatin1String("name")).toString();
  }
}

void RunPanel::processEnded(int code, QProcess::ExitStatus status) {
  readOutput();
  const bool ok = status == QProcess::NormalExit && code == 0;
  if (ok && !cancelled_ && !queue_.isEmpty()) {  // the next step of a sequence
    launch(queue_.takeFirst()());
    status_->setText(tr("Step %1 of %2: %3").arg(steps_ - queue_.size()).arg(steps_).arg(status_->text()));
    return;
  }
  queue_.clear();
  start_->setEnabled(true);
  cancel_->setEnabled(false);
  progress_->setRange(0, 1);
  progress_->setValue(ok ? 1 : 0);
  QString message;
  if (ok) message = tr("Finished in %1 s").arg(double(clock_.elapsed()) / 1000, 0, 'f', 1);
  else if (cancelled_) message = saveRun_ ? tr("Cancelled") : tr("Cancelled; the session keeps what was finished");
  else if (!lastError_.isEmpty()) message = lastError_;
  else if (process_->error() == QProcess::FailedToStart) message = tr("could not start %1").arg(program());
  else message = tr("peat ended with exit code %1").arg(code);
  status_->setText(message);
  emit finished(ok, message, saveRun_ ? QString() : session_->text());
  if (saveRun_) {
    const bool summarised = ok && !result_.isEmpty();
    emit saveRunEnded(summarised, ok && !summarised ? tr("peat save run printed no summary") : message, result_,
                      launchedInput_, launchedOutputs_);
  }
}

void RunPanel::cancel() {
  if (!running()) return;
  cancelled_ = true;
  queue_.clear();
  cancel_->setEnabled(false);
  status_->setText(tr("Cancelling ..."));
  const pid_t group = pid_t(process_->processId());
  if (group > 0) ::kill(-group, SIGINT);  // the commands end their run cleanly
  // A command finishing its point or iteration may take seconds: the session's journal keeps its
  // last commit whole (docs/architecture.md, Trust), so a kill after a short grace loses only the
  // work in flight, and Cancel answers within a second.
  QTimer::singleShot(kCancelGraceMs, process_, [this, group] {
    if (!running()) return;
    if (group > 0) ::kill(-group, SIGKILL);
    process_->kill();
  });
}

QString RunPanel::statusText() const { return status_->text(); }

}  // namespace peat::views
