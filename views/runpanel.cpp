// SPDX-License-Identifier: MIT
// The run panel's form: its rows per mode, the kernel and op choices, its fit to a narrow dock, the
// setters the window and the tour use. Its commands are in runpanelcommands.cpp, the child process
// that runs them in runpanelprocess.cpp, a chosen plugin's probe in runpanelplugin.cpp.
#include "views/runpanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QResizeEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcessEnvironment>
#include <QProgressBar>
#include <QPushButton>
#include <QToolButton>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <cmath>

#include <csignal>

#include "core/catalog/catalog.h"
#include "core/store/call_params.h"

#include <fcntl.h>
#include <unistd.h>

namespace peat::views {

namespace {

// in the order of RunPanel::Mode
const char* kModes[] = {"profile", "playback", "runtime FI", "SAVE analyze", "SAVE campaign", "SAVE run",
                        "Record a Python script"};

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

// A button beside a field, as narrow as its text (a push button is at least 80 px wide).
QToolButton* toolButton(const QString& text, QWidget* owner) {
  auto* button = new QToolButton(owner);
  button->setText(text);
  button->setToolButtonStyle(Qt::ToolButtonTextOnly);
  return button;
}

// A row of the form: `field`, stretched, with `button` beside it.
void addFieldWithButton(QFormLayout* form, const QString& label, QWidget* field, QToolButton* button) {
  auto* row = new QHBoxLayout;
  row->addWidget(field, 1);
  row->addWidget(button);
  form->addRow(label, row);
}

// A row naming a file: a line edit with a "..." button that asks for it (to read, or to write;
// `several`: one or more to read, joined by "; ").
QLineEdit* addFileRow(QWidget* owner, QFormLayout* form, const QString& label, const QString& placeholder,
                      const QString& filter, bool write, bool several = false) {
  auto* edit = new QLineEdit(owner);
  edit->setPlaceholderText(placeholder);
  auto* browse = toolButton(QObject::tr("..."), owner);
  addFieldWithButton(form, label, edit, browse);
  QObject::connect(browse, &QToolButton::clicked, owner, [owner, edit, label, filter, write, several] {
    const QString first = edit->text().section(QLatin1Char(';'), 0, 0).trimmed();
    const QString path = write     ? QFileDialog::getSaveFileName(owner, label, edit->text(), filter)
                         : several ? QFileDialog::getOpenFileNames(owner, label, first, filter).join(QStringLiteral("; "))
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
                       "SAVE run: the model on your inputs with SAVE's engine, plain or protected, its outputs shown;\n"
                       "Record a Python script: your own PyTorch training script, unchanged, run by your Python with\n"
                       "its op calls recorded into a session (peat record)"));
  form_->addRow(tr("Mode"), mode_);
  addScriptRows();  // Record a Python script: interpreter, script, arguments, ops, every, swap

  model_ = new QComboBox(this);
  model_->setObjectName(QStringLiteral("model"));
  for (const catalog::ZooModel& m : catalog::zooModels()) {  // the zoo, from the one catalog
    model_->addItem(QString::fromStdString(m.name));
    model_->setItemData(model_->count() - 1, QString::fromStdString(m.summary), Qt::ToolTipRole);
  }
  model_->setCurrentText(QStringLiteral("lenet"));
  model_->setEditable(true);  // a zoo name, or a TorchScript file (docs/models.md)
  model_->setToolTip(tr("A zoo model, or a TorchScript file of your own (torch.jit.trace or torch.jit.script, .save)"));
  modelFile_ = toolButton(tr("File..."), this);
  modelFile_->setToolTip(tr("Train your own network: every GEMM of its TorchScript graph goes through the kernel slot"));
  fusedAttention_ = new QCheckBox(tr("attention as one call"), this);
  fusedAttention_->setObjectName(QStringLiteral("fusedAttention"));
  fusedAttention_->setToolTip(tr("--attention fused: a transformer's scores, softmax and values reach the slot as one\n"
                                 "'attention' call (for attention kernels) instead of three (docs/models.md)"));
  {  // the model with its file button, and under it its option: the row fits a narrow dock
    auto* row = new QHBoxLayout;
    row->addWidget(model_, 1);
    row->addWidget(modelFile_);
    auto* column = new QVBoxLayout;
    column->addLayout(row);
    column->addWidget(fusedAttention_);
    form_->addRow(tr("Model"), column);
  }
  connect(modelFile_, &QToolButton::clicked, this, [this] {
    const bool save = isSave(mode());
    const QString path =
        save ? QFileDialog::getOpenFileName(this, tr("ONNX model"), QString(), tr("ONNX models (*.onnx);;All files (*)"))
             : QFileDialog::getOpenFileName(this, tr("TorchScript model"), QString(),
                                            tr("TorchScript archives (*.pt *.pth *.ts *.zip);;All files (*)"));
    if (!path.isEmpty()) model_->setCurrentText(path);
  });

  // SAVE run: the inputs, a reference, the protection and its faults, and where the outputs go
  const QString tensors = tr("NumPy arrays (*.npy);;HDF5 files (*.h5 *.hdf5);;All files (*)");
  input_ = addFileRow(this, form_, tr("Input"), tr("x.npy or x.h5:/dataset: one sample or [N, sample...]"), tensors, false,
                      true);
  input_->setToolTip(tr("The model's input as it takes it (already normalised); an HDF5 file names its dataset after a\n"
                        "colon. A model with several inputs: one file per input in the model's order, separated by ';'\n"
                        "(ids.npy; mask.npy), or each as NAME=FILE (mask=mask.npy; ids=ids.npy)"));
  expect_ = addFileRow(this, form_, tr("Expected outputs"), tr("optional: a reference, e.g. PyTorch's outputs"), tensors, false,
                       true);
  expect_->setToolTip(tr("The outputs another runtime gives on the same inputs: the largest difference is reported.\n"
                         "A model with several outputs: one file per output in order, separated by ';', or NAME=FILE"));
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
  auto* dataButton = toolButton(tr("Data..."), this);
  addFieldWithButton(form_, tr("Data"), data_, dataButton);
  connect(dataButton, &QToolButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Training data"), QString(),
                                                      tr("HDF5 files (*.h5 *.hdf5);;NumPy files (*.npy)"));
    if (path.isEmpty()) return;
    // a .npy file stands for its folder (train_x.npy, train_y.npy, test_x.npy, test_y.npy)
    data_->setText(path.endsWith(QLatin1String(".npy")) ? QFileInfo(path).absolutePath() : path);
  });

  kernel_ = new QComboBox(this);
  kernel_->setEditable(true);
  // the catalog's candidates and fault models (the GEMM's first, then those written for one op, whose
  // choice chooses their op: docs/kernels.md); golden is the reference and a plugin has its button
  for (const bool oneOp : {false, true})
    for (const catalog::KernelDescription& k : catalog::kernels()) {
      if (k.family == "golden" || k.family == "plugin" || oneOp != !kernelOp(QString::fromStdString(k.name)).isEmpty()) continue;
      kernel_->addItem(QString::fromStdString(k.name));
      kernel_->setItemData(kernel_->count() - 1, QString::fromStdString(k.summary), Qt::ToolTipRole);
    }
  kernel_->setObjectName(QStringLiteral("kernel"));
  kernel_->setToolTip(tr("Candidate kernel or fault model, with options as NAME:KEY=VALUE (see 'peat kernels')"));
  plugin_ = toolButton(tr("Plugin..."), this);
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
  connect(plugin_, &QToolButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Kernel plugin"), QString(), tr("Shared libraries (*.so)"));
    if (path.isEmpty()) return;
    const auto answer = QMessageBox::warning(
        this, tr("Load a kernel plugin?"),
        tr("A plugin is code: it runs with your rights, in peat's kernel host (a process of its own beside the "
           "replay or training, so a crash or a runaway allocation in it fails its calls, not the run). "
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
  recordOps_->addItem(gemmOps());
  recordOps_->setItemData(0, tr("the GEMMs (the default)"), Qt::ToolTipRole);
  addOps(recordOps_);
  recordOps_->setCurrentText(gemmOps());
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
  // how faults are counted across schemes, and which schemes: a campaign's numbers depend on both
  basis_ = new QComboBox(this);
  basis_->addItem(tr("same rate per byte of unreliable memory"), QStringLiteral("memory"));
  basis_->addItem(tr("same flips per inference"), QStringLiteral("inference"));
  basis_->setToolTip(tr("memory (README's and the demo's figures): Flips is the unprotected run's count; each scheme gets\n"
                        "the same fault rate per byte of its own unreliable memory, so SAVE, whose type-2 tiles sit in\n"
                        "reliable memory, meets fewer faults, as it would on the same hardware.\n"
                        "inference: every scheme gets Flips faults per inference wherever its data is (a harsher test of\n"
                        "the checks alone; SAVE scores lower, e.g. about 47% against 86% on LeNet at 4096 flips)."));
  form_->addRow(tr("Fault basis"), basis_);
  auto* schemes = new QWidget(this);
  auto* schemeRow = new QGridLayout(schemes);  // three to a row: a narrow dock holds them
  schemeRow->setContentsMargins(0, 0, 0, 0);
  const QList<QPair<QString, QString>> schemeNames = {
      {QStringLiteral("none"), tr("no protection")},
      {QStringLiteral("save"), tr("SAVE: range checks, weight checks, recomputation of type-2 values, restart")},
      {QStringLiteral("tmr"), tr("triple modular redundancy: every layer three times, voted")},
      {QStringLiteral("ranger"), tr("Ranger: activations clipped to profiled bounds")},
      {QStringLiteral("ecc"), tr("SEC-DED ECC on every word (corrects one flip, detects two)")}};
  for (const auto& [name, meaning] : schemeNames) {
    auto* box = new QCheckBox(name, schemes);
    box->setChecked(true);
    box->setToolTip(meaning);
    schemeRow->addWidget(box, int(schemes_.size()) / 3, int(schemes_.size()) % 3);
    schemes_ << box;
  }
  schemeRow->setColumnStretch(3, 1);
  schemes->setToolTip(tr("The protection schemes the campaign compares (docs/save.md)"));
  form_->addRow(tr("Schemes"), schemes);

  device_ = new QComboBox(this);
  device_->addItem(QStringLiteral("cpu:0"));
  device_->setToolTip(tr("Where the gpu-* kernels run (CUDA or HIP GPUs the Devices panel found, or the CPU reference).\n"
                         "Training, the other kernels and SAVE run on the CPU."));
  form_->addRow(tr("Device"), device_);

  session_ = new QLineEdit(this);
  session_->setPlaceholderText(tr("session file (.h5)"));
  auto* browse = toolButton(tr("..."), this);
  addFieldWithButton(form_, tr("Session"), session_, browse);
  connect(browse, &QToolButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Session"), session_->text(), tr("PEAT sessions (*.h5)"),
                                                      nullptr, QFileDialog::DontConfirmOverwrite);
    if (!path.isEmpty()) session_->setText(path);
  });
  analyze_ = new QCheckBox(tr("analyse the replayed calls"), this);
  analyze_->setToolTip(tr("Analyse the replayed calls afterwards (peat analyze): their errors and verdicts in the window"));
  analyze_->setChecked(true);
  form_->addRow(analyze_);
  // profile, runtime FI and a Python recording write a whole session file: a free name beside an
  // existing one by default (lenet-2.h5), or the file replaced when asked
  replace_ = new QCheckBox(tr("replace an existing session"), this);
  replace_->setToolTip(tr("Replace the session file if it exists; unchecked, the run writes a free name beside it (lenet-2.h5)"));
  form_->addRow(replace_);

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

  fitNarrowDock();
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

// Narrow enough for a dock beside the pages at 1024 x 700: labels above their fields where the
// panel is too narrow for them beside (fitRows), boxes that shorten their text (their items whole in the list), and each field's
// placeholder also its tooltip (a placeholder is cut where the field is narrow).
void RunPanel::fitNarrowDock() {
  layout()->setContentsMargins(4, 4, 4, 4);
  for (QComboBox* box : findChildren<QComboBox*>()) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(8);
  }
  for (QLineEdit* edit : findChildren<QLineEdit*>())
    if (!edit->placeholderText().isEmpty() && edit->toolTip().isEmpty()) edit->setToolTip(edit->placeholderText());
  // every row still counts here (none hidden yet): the width the widest mode needs side by side
  besideWidth_ = form_->minimumSize().width() + layout()->contentsMargins().left() + layout()->contentsMargins().right();
  form_->setRowWrapPolicy(QFormLayout::WrapAllRows);  // until the panel is shown wide enough
}

// Each label beside its field where the dock is wide enough for that, else above it (a dock at
// 1024 x 700). (Qt's WrapLongRows, which wraps only the long rows, gave a row made visible again
// no height: tst_runpanel.fitsANarrowDock.)
// The room is the scroll area's viewport where the panel sits in one (a scroll area never makes the
// panel narrower than the side-by-side form needs, so its own width cannot say that the dock shrank).
void RunPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  QWidget* room = parentWidget();
  if (room && room != watched_) {
    watched_ = room;
    room->installEventFilter(this);
  }
  fitRows(room ? room->width() : width());
}

bool RunPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == watched_ && watched_ == parentWidget() && event->type() == QEvent::Resize) fitRows(watched_->width());
  return QWidget::eventFilter(watched, event);
}

void RunPanel::fitRows(int room) {
  const auto policy = room >= besideWidth_ ? QFormLayout::DontWrapRows : QFormLayout::WrapAllRows;
  if (policy != form_->rowWrapPolicy()) form_->setRowWrapPolicy(policy);
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
  // a candidate written for one op names it in the catalog (GEMM candidates keep the op chosen)
  const catalog::KernelDescription* k = catalog::kernel(kernel.section(QLatin1Char(':'), 0, 0).toStdString());
  if (!k || k->ops == "gemm" || k->ops == "all") return {};
  for (const std::string& op : store::opNames())
    if (op == k->ops) return QString::fromStdString(op);
  return {};
}
void RunPanel::setIterations(int n) { iterations_->setValue(n); }
void RunPanel::setSeed(int seed) { seed_->setValue(seed); }
void RunPanel::setFlips(const QString& flips) { flips_->setText(flips); }
void RunPanel::setImages(int n) { images_->setValue(n); }
bool RunPanel::setBasis(const QString& basis) {
  const int at = basis_->findData(basis);
  if (at >= 0) basis_->setCurrentIndex(at);
  return at >= 0;
}
bool RunPanel::setSchemes(const QString& schemes) {
  const QStringList chosen = schemes.split(QLatin1Char(','), Qt::SkipEmptyParts);
  for (const QString& c : chosen)
    if (std::none_of(schemes_.begin(), schemes_.end(), [&](QCheckBox* b) { return b->text() == c.trimmed(); })) return false;
  for (QCheckBox* b : schemes_) b->setChecked(chosen.contains(b->text()));
  return true;
}
void RunPanel::setAnalyzeAfterPlayback(bool on) { analyze_->setChecked(on); }
void RunPanel::setReplaceSession(bool on) { replace_->setChecked(on); }
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
  const bool run = m == Mode::SaveRun, python = m == Mode::PythonRecord;
  const bool replays = m == Mode::Playback || m == Mode::RuntimeFi;
  // the rows in the order of the form
  const bool rows[] = {
      true,                                                     // mode
      python, python, python, python, python, python,           // interpreter, script, arguments, ops, record every, swap
      m != Mode::Playback && !python,                           // model
      run, run, run, run, run,                                  // input, expected, protection, faults, outputs (SAVE run)
      (trains || m == Mode::SaveCampaign) && modelIsFile(),     // data
      replays, replays,                                         // kernel, op
      m == Mode::Profile, m == Mode::RuntimeFi, trains,         // record ops, frequency, iterations
      m != Mode::SaveAnalyze && !python,                        // seed
      m == Mode::SaveCampaign, m == Mode::SaveCampaign,         // flips, images
      m == Mode::SaveCampaign, m == Mode::SaveCampaign,         // fault basis, schemes
      !run && !python,                                          // device
      !run,                                                     // session
      m == Mode::Playback,                                      // analyse afterwards
      trains || python};                                        // replace
  Q_ASSERT(int(sizeof rows / sizeof rows[0]) == form_->rowCount());
  for (int r = 0; r < int(sizeof rows / sizeof rows[0]) && r < form_->rowCount(); ++r) form_->setRowVisible(r, rows[r]);
  modelFile_->setEnabled(m != Mode::Playback);
  fusedAttention_->setVisible(trains);
  // a row made visible shows every widget in it: the plugin's op line only for a plugin
  pluginOps_->setVisible(replays && kernel_->currentText().startsWith(QLatin1String("plugin:path=")));
  modelFile_->setToolTip(isSave(m) ? tr("An ONNX model of your own: SAVE reads it with its initializers as weights")
                                   : tr("Train your own network: every GEMM of its TorchScript graph goes through the kernel slot"));
}

// What `peat profile` records without --record-ops: the GEMMs.
QString RunPanel::gemmOps() { return QStringLiteral("linear,conv2d,matmul"); }

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

}  // namespace peat::views
