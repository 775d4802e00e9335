// SPDX-License-Identifier: MIT
#pragma once
#include <QElapsedTimer>
#include <QJsonObject>
#include <QProcess>
#include <QStringList>
#include <QWidget>

#include <functional>
#include <memory>

#include "views/progressestimate.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QToolButton;
class QSpinBox;
class QCheckBox;
class QFormLayout;
class QTemporaryDir;

namespace peat::views {

// Starts the work the CLI does (profile, playback, runtime fault injection, SAVE analysis,
// campaigns, protected inference on the user's inputs, and `peat record` of the user's own PyTorch
// script) from a form, in a child `peat` process: the same core code, off the GUI thread, and a
// crash or a cancel there cannot take the workbench down. Progress, live results and errors come
// as the child's event stream (PEAT_EVENTS=jsonl, docs/events.md), never from its human text;
// Cancel sends SIGINT, which the commands answer by ending the run with a readable session (a
// campaign keeps every point it finished).
class RunPanel : public QWidget {
  Q_OBJECT
 public:
  // PythonRecord: `peat record -- python3 SCRIPT ARGS`, the user's unchanged training script run by
  // their own Python with the peat package recording its op calls (docs/record.md).
  enum class Mode { Profile, Playback, RuntimeFi, SaveAnalyze, SaveCampaign, SaveRun, PythonRecord };

  explicit RunPanel(QWidget* parent = nullptr);
  ~RunPanel() override;

  void setMode(Mode mode);
  Mode mode() const;
  void setSessionPath(const QString& path);  // the output (or, for playback and SAVE, the appended) session
  QString sessionPath() const;
  // `path` when no file is there, else the first free "name-N.suffix" beside it.
  static QString freeSessionPath(const QString& path);
  void setModel(const QString& model);  // a zoo name or a TorchScript file
  void setData(const QString& data);    // a model file's --data
  void setKernel(const QString& kernel);
  // playback's and runtime FI's --op: any op of the kernel slot, or "all"; false: no such op
  bool setOp(const QString& op);
  // profile's --record-ops: comma-separated ops, or "all" (the GEMMs by default)
  void setRecordOps(const QString& ops);
  void setFusedAttention(bool on);  // --attention fused
  // The slot ops the chosen plugin runs, once its probe answered (empty: not a plugin, or not yet).
  QStringList pluginOps() const;
  // The op a candidate is written for ("softmax" for softmax-online); "" for kernels of every op or of GEMMs.
  static QString kernelOp(const QString& kernel);
  void setIterations(int n);
  void setSeed(int seed);
  void setFlips(const QString& flips);
  void setImages(int n);
  // SAVE campaign: "memory" or "inference" (--basis); schemes comma-separated (--schemes); false for
  // a value the form does not offer
  bool setBasis(const QString& basis);
  bool setSchemes(const QString& schemes);
  void setAnalyzeAfterPlayback(bool on);
  // profile, runtime FI and a Python recording: replace an existing session file (--force) instead
  // of writing the first free name beside it
  void setReplaceSession(bool on);
  // SAVE run: the model's input (.npy or FILE.h5:/dataset, as the model takes it), an optional
  // reference for its outputs, the protection (none, save, tmr, ranger, ecc), the faults injected
  // over the inference, and where the outputs go (empty: a file of the panel's own).
  void setInput(const QString& input);
  void setExpected(const QString& expected);
  bool setProtection(const QString& scheme);  // false: no such scheme (the choice stays)
  void setFaults(qint64 faults);
  void setOutputs(const QString& outputs);
  QString outputsPath() const;  // where the next SAVE run writes its outputs
  // Record a Python script: the interpreter (a name on PATH or a path; the default is $PEAT_PYTHON,
  // else python3), the script and its arguments as typed on a command line (QProcess::splitCommand),
  // the ops to record (all, gemm, conv or a comma-separated list), every how many iterations, and an
  // optional runtime-FI swap OP=KERNEL of every K-th call ("" for none). The run's working directory
  // is the script's folder, as when it is started from there.
  void setInterpreter(const QString& interpreter);
  QString interpreter() const;
  void setScript(const QString& script);
  void setScriptArguments(const QString& arguments);
  void setScriptOps(const QString& ops);
  void setRecordEvery(int iterations);
  void setSwap(const QString& swap);
  void setSwapEvery(int calls);
  // The devices to offer ("cpu:0", "cuda:0", ...), as the Devices panel found them. The gpu-*
  // kernels run on the chosen one; every other kernel runs on the CPU.
  void setDevices(const QStringList& devices);
  void setDevice(const QString& device);
  // The peat program and arguments the form describes now; empty with `error` set when it is
  // incomplete (no session, a SAVE model without shipped weights, ...).
  QStringList arguments(QString* error) const;
  QString program() const;  // `peat` beside this executable, or $PEAT_CLI

  // Runs several peat commands one after another (each must succeed), e.g. the demo session's.
  bool startSequence(const QList<QStringList>& steps, const QString& session);
  // The commands that make the demo session at `session`: LeNet profiled from the shipped weights,
  // replayed through bf16 and analysed, then SAVE's selection and a short campaign (as tools/demo.sh).
  static QList<QStringList> demoSteps(const QString& session);

  bool running() const;
  bool writesSession() const;  // the run going (or the form, when idle) writes the session file
  bool start();  // false (and finished(false, reason)) when the form is incomplete or a run is going
  // SIGINT, then SIGKILL if the run has not ended within kCancelGraceMs (training and replay:
  // kTrainCancelGraceMs; a Python recording:
  // kRecordCancelGraceMs, for the script to reach its next Python line and the recorder to write the
  // iteration in flight and mark the run cancelled); `graceMs` >= 0 replaces that grace (closing the
  // window waits longer, so that the command ends its point or iteration and marks its run cancelled)
  void cancel(int graceMs = -1);
  static constexpr int kCancelGraceMs = 600;  // SAVE's commands: a campaign keeps its finished points
  // training and replay (profile, playback, runtime FI): a LeNet profile cancelled mid-run took
  // 1.2-1.5 s to write its iteration in flight and mark its run cancelled (killed after 600 ms on a
  // loaded machine, it showed interrupted)
  static constexpr int kTrainCancelGraceMs = 5000;
  static constexpr int kRecordCancelGraceMs = 10000;
  QString statusText() const;
  double secondsLeft() const { return estimate_.secondsLeft(); }  // the estimate shown, < 0: none yet

 signals:
  void progressed(qint64 done, qint64 total);
  void started();  // a run (or a sequence) began
  // Results as they arrive, from the progress lines: a campaign's finished point, and the loss of
  // a training run after `iteration` iterations (runtime FI: also the run with the candidate).
  void livePoint(const QString& scheme, double flips, double accuracy);
  void liveLoss(double iteration, double loss, double candidateLoss);
  void finished(bool ok, const QString& message, const QString& session);
  // A SAVE run on `input` ended: ok with `result` (its JSON summary, `peat save run --json`) and the
  // outputs it wrote at `outputs`; else `message` says why in one line (or that it was cancelled).
  void saveRunEnded(bool ok, const QString& message, const QJsonObject& result, const QString& input,
                    const QString& outputs);

 protected:
  void resizeEvent(QResizeEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;  // the scroll area's viewport resized

 private:
  void fitNarrowDock();  // once, at the end of the constructor
  void fitRows(int room);  // labels beside their fields where `room` holds them, else above
  void updateFields();  // on a mode change: rows, and SAVE's models
  void updateRows();    // which rows the mode and the model show
  void readOutput();
  void handleEvent(const QByteArray& line);
  void processEnded(int code, QProcess::ExitStatus status);
  bool launch(const QStringList& args);
  bool modelIsFile() const;  // not one of the zoo's names
  QStringList saveRunArguments(const QString& model, QString* error) const;
  QStringList recordArguments(const QString& session, QString* error) const;  // PythonRecord's
  void addScriptRows();  // the PythonRecord rows of the form (runpanelscript.cpp)
  static QString gemmOps();  // what `peat profile` records without --record-ops
  void describePlugin(const QString& kernel);
  void pluginProbed(int code, QProcess::ExitStatus status);
  void restrictOps(const QStringList& ops);

  QFormLayout* form_;
  int besideWidth_ = 0;  // the width the form needs with each label beside its field
  QWidget* watched_ = nullptr;  // the scroll area's viewport the panel sits in (fitRows' room)
  QComboBox *mode_, *model_, *kernel_, *op_, *recordOps_, *device_;
  QSpinBox *iterations_, *seed_, *every_, *images_;
  QComboBox* basis_;
  QList<QCheckBox*> schemes_;
  QLineEdit *flips_, *session_, *prob_;
  QCheckBox* analyze_;
  QCheckBox* replace_;
  QString note_;  // what start() chose for the user (a free session name), shown with the run
  QPushButton *start_, *cancel_;
  QToolButton *plugin_, *modelFile_;  // tool buttons: as narrow as their text
  QCheckBox* fusedAttention_;
  QLabel* pluginOps_;
  QProcess* pluginProbe_;
  QStringList pluginSlotOps_;
  QLineEdit* data_;
  QLineEdit *input_, *expect_, *outputs_;  // SAVE run
  QComboBox* protect_;
  QSpinBox* faults_;
  mutable std::unique_ptr<QTemporaryDir> scratch_;  // a SAVE run's outputs when no file is named
  int saveRuns_ = 0;
  bool saveRun_ = false;  // the run going (or the last one) is a SAVE run
  QJsonObject result_;    // its JSON summary, once printed
  QString launchedInput_, launchedOutputs_;  // its input, and where it writes its outputs
  // PythonRecord's rows: interpreter, script, its arguments, ops, every N iterations, swap
  QComboBox *interpreter_ = nullptr, *scriptOps_ = nullptr;
  QLineEdit *script_ = nullptr, *scriptArgs_ = nullptr, *swap_ = nullptr;
  QSpinBox *recordEvery_ = nullptr, *swapEvery_ = nullptr;
  bool pythonRun_ = false;  // the run going (or the last one) records a Python script
  bool swapRun_ = false;    // ... with --swap: a golden pass, then one with the candidate
  int pass_ = 0;            // which of them is going (1, 2)
  bool killed_ = false;     // Cancel's grace ran out and the run was killed
  QString workDir_;         // the run's working directory (empty: the workbench's)
  QString runPython_;       // a Python recording's interpreter, handed to peat as PEAT_PYTHON
  QString lastOutput_;      // the last line of human output (a Python run's: the script's traceback ends there)
  QString lastCount_;       // what the last progress event of a run without a known end counted
  QProgressBar* progress_;
  QLabel* status_;
  QProcess* process_;
  QElapsedTimer clock_;
  ProgressEstimate estimate_;
  QString lastError_, buffer_, runName_;
  bool cancelled_ = false;
  // The rest of a sequence: each step's arguments, made when the step before it has finished (an
  // analysis names the run the playback before it stored).
  QList<std::function<QStringList()>> queue_;
  int steps_ = 0;
};

}  // namespace peat::views
