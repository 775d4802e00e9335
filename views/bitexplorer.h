// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/fp/explain.h"
#include "core/save/flip_in_model.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace peat::views {

// One value as its 32 fp32 bits (issue 18's bit explorer, first part): sign, exponent and
// mantissa, the decoded value, one ULP there and the neighbours one ULP away, and the same value
// rounded to fp16, bf16, tf32, fp8 E4M3 and E5M2 beside it. Clicking a bit toggles it and shows the
// new value with its absolute, relative and ULP change. Opened from a SAVE layer it colours each
// bit by its class (robust, ranging, vulnerable) and says whether the toggled value leaves the
// sound range (a range check catches it). Every number comes from core/fp/explain.h.
class BitExplorer : public QWidget {
  Q_OBJECT
 public:
  explicit BitExplorer(QWidget* parent = nullptr);
  void setValue(float value);  // forgets toggles: this value is the reference
  // A SAVE value: its sound range and its bits' classes (bit b set in a mask: robust / ranging).
  void setSaveContext(const QString& where, double lo, double hi, uint32_t robustMask, uint32_t rangingMask);
  void clearSaveContext();
  // An element of a golden/candidate pair: the golden value opens, the bits where the candidate
  // differs are framed, and the context line gives both values and the error between them.
  void setPairContext(const QString& where, float golden, float candidate);
  // The blocks of each block-scaled format the value belongs to (core/fp/explain.h: blockPlaces).
  void setBlockContext(const std::vector<fp::BlockPlace>& places);
  void clearContexts();  // SAVE, pair and blocks: a typed value has none
  void toggleBit(int bit);  // as a click on the bit does
  void stepNext();      // the next fp32 value up (the Next float button)
  void stepPrevious();  // the next one down
  void setFormatShown(const QString& name, bool shown);  // a narrow format's row ("e4m3", ...)
  void setLargeType(bool large);
  bool largeType() const;
  QString fp64Text() const;  // the value typed, in fp64
  uint32_t bits() const { return bits_; }
  float referenceValue() const { return reference_; }
  const std::optional<fp::Toggle>& lastToggle() const { return toggle_; }
  QString valueText() const;   // the panel's description of the value
  QString toggleText() const;  // what the last toggle did
  QString formatsText() const; // the value in the narrow formats
  QString contextText() const;  // the SAVE or pair context line
  QString blocksText() const;   // the block-scaled formats' blocks
  uint32_t differingBits() const { return pair_ ? fp::bitsOf(golden_) ^ fp::bitsOf(candidate_) : 0; }

  // "Flip in the model" (a SAVE value whose analysis can rebuild its network): the bits toggled are
  // flipped in this value of a chosen test image and the network is run on (by the window, off the
  // GUI thread); the outcome comes back through showFlip.
  void setFlipAvailable(bool available);
  void requestFlip();  // as the button does
  void setFlipImage(int image);
  void showFlip(const save::ModelFlip& flip);
  void showFlipError(const QString& text);
  QString flipText() const;

 signals:
  void flipRequested(quint32 mask, int image);
  void windowResized();  // it grew its window (Large type, a flip's outcome): whoever placed it may place it again

 private:
  void refresh();
  QLineEdit* input_;
  std::array<QToolButton*, 32> buttons_{};
  QLabel *context_, *value_, *fp64_, *change_, *formats_, *blocks_;
  std::array<QLabel*, 32> bitNumbers_{};
  std::array<QLabel*, 3> fieldLabels_{};
  QPushButton *previous_, *next_;
  QCheckBox* large_;
  std::vector<QCheckBox*> formatBoxes_;  // one per fp::narrowFormats()
  double typed_ = 1.0;  // the value as typed (fp64), before fp32 rounds it
  uint32_t typedBits_ = 0x3f800000u;  // the fp32 bits it rounds to: once the bits change, fp64 shows them
  double baseFontSize_ = 10;
  uint32_t bits_ = 0x3f800000u;
  float reference_ = 1.0f;
  std::optional<fp::Toggle> toggle_;
  bool save_ = false;
  double lo_ = 0, hi_ = 0;
  uint32_t robust_ = 0, ranging_ = 0;
  QString where_;
  bool pair_ = false;
  float golden_ = 0, candidate_ = 0;
  std::vector<fp::BlockPlace> places_;
  bool flipAvailable_ = false;
  QWidget* flipRow_;
  QSpinBox* flipImage_;
  QPushButton* flipButton_;
  QLabel* flipResult_;
};

}  // namespace peat::views
