// SPDX-License-Identifier: MIT
#pragma once
// The SAVE tab's *Run outputs*: what `peat save run` gave on the user's inputs (started from the
// run panel, mode SAVE run). A line on what ran, how long the inference took and, for a protected
// run, how many faults were injected, detected and recovered; the largest difference from the
// expected outputs when they were given; the whole output tensor's statistics; and a table per
// sample, its top classes for a classifier-like output, else its range and first values (a model
// with several outputs: one of them at a time, chosen above the table). Every
// number comes from the command's JSON summary or from core (save::summariseOutputs).
#include <QString>
#include <QWidget>

#include "core/save/output_summary.h"

class QComboBox;
class QLabel;
class QTableView;

namespace peat::views {

class SaveRunTableModel;

// An output against the expected outputs given for it, as `save run --json` reports it.
struct SaveRunComparison {
  bool given = false;  // expected outputs were given: the numbers below are set
  QString reference;
  double maxAbs = 0, maxRel = 0;
  qint64 worstSample = 0, worstElement = 0, top1Agree = 0, nonFinite = 0;
};

// One output of a model with several: its name, the file `save run` wrote it to, its summary.
struct SaveRunOutputPart {
  QString name, file;
  save::OutputSummary summary;
  SaveRunComparison comparison;  // its own
};

// One SAVE run, as the run panel's child reported it and as core summarised its outputs file.
struct SaveRunOutputs {
  QString model, input, outputs;  // as given to the command
  QString protection;             // none, save, tmr, ranger, ecc
  qint64 flips = 0;               // faults asked for over the inference
  double seconds = 0;             // the inference alone
  save::OutputSummary summary;    // the output shown (a model with several: the first, as top-1 is)
  std::vector<SaveRunOutputPart> parts;  // a model with several outputs: each one (else empty)
  qint64 faults = 0, detections = 0, recoveries = 0, unrecovered = 0;  // what the protection saw
  SaveRunComparison comparison;  // a model with several outputs: the worst of theirs
};

class SaveRunView : public QWidget {
  Q_OBJECT
 public:
  explicit SaveRunView(QWidget* parent = nullptr);
  void showOutputs(const SaveRunOutputs& run);
  void showMessage(const QString& text);  // no outputs: why (a run going, its error, none yet)

  QString titleText() const;
  QString detailsText() const;  // the lines under the title, as plain text
  SaveRunTableModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QString csv() const;
  QComboBox* outputChooser() const { return chooser_; }  // shown for a model with several outputs

 private:
  void showPart(int part);  // the table and the lines for one output of run_ (-1: its only one)

  SaveRunOutputs run_;
  QWidget* chooserRow_;
  QComboBox* chooser_;
  QLabel *title_, *details_;
  QTableView* table_;
  SaveRunTableModel* model_;
};

}  // namespace peat::views
