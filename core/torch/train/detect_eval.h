// SPDX-License-Identifier: MIT
#pragma once
// A labelled corpus from the project's own candidates and fault models across ops and seeds, run
// through the detector: the confusion matrix behind `peat detect-eval`; and a labelled corpus made
// elsewhere (--external), judged beside it.
#include <map>
#include <string>
#include <vector>

namespace peat::train {

struct DetectEvalCase {
  std::string op, kernel, expected, got, gotFormat, expectedFormat;  // external pairs: op = part, kernel = name
  double confidence = 0;
  std::string alsoReproducedBy;  // formats whose replay reproduced the candidate as well (with operands), comma-separated
  bool correct = false;          // got == expected, or for "legitimate" any of exact, precision_loss, accumulation_order
  std::vector<std::string> alternatives;  // the other readings, by confidence
};

struct DetectEvalResult {
  std::vector<DetectEvalCase> cases;
  std::map<std::string, std::map<std::string, int>> confusion;  // expected -> got -> count
  int correct = 0, formatChecked = 0, formatCorrect = 0;
  // formatTied: the expected format not named first but among the formats that reproduce the pair as
  // well (`also_reproduced_by`): identical arithmetic on these inputs, as tf32 and fp16 inside fp16's range
  int formatTied = 0;
  std::map<std::string, std::map<std::string, int>> formatConfusion;  // expected format -> named format -> count
  // The two errors, counted apart: pairs that differ legitimately and the fault verdicts named on them
  // (false alarms), those judged unknown (nothing reproduced them: not settled, not an alarm), and
  // pairs that differ by a fault and the legitimate verdicts named on them (a bug called legitimate,
  // the worst verdict this tool can give).
  int legitimate = 0, legitimateFaultVerdicts = 0, legitimateUnknown = 0;
  int faults = 0, faultLegitimateVerdicts = 0;
};

// `operands`: the GEMM ops' cases (linear, conv2d) judged again with the calls' operands given to the
// detector, as a session's recorded calls are (bounds and format replay), in a result of their own.
struct DetectEvalRun {
  DetectEvalResult outputsOnly, withOperands;
};
DetectEvalRun runDetectEval(int seeds);

// A corpus made elsewhere (tests/cli/external_corpus.py writes one from NumPy's and PyTorch's
// kernels): DIR/labels.tsv, one pair a line, tab-separated, '#' lines skipped:
//   part  name  expected  format  golden  candidates
// expected: a verdict name, or "legitimate" (any of exact, precision_loss, accumulation_order is
// right); format: the expected precision format or "-"; golden and candidates (comma-separated,
// replays of one input): .npy files or file.h5:/path, relative to DIR. Judged from the outputs alone.
struct ExternalEvalRun {
  std::string labels;                             // the labels file read
  DetectEvalResult all;                           // every pair
  std::vector<std::pair<std::string, DetectEvalResult>> parts;  // by part, in the file's order
};
ExternalEvalRun runExternalEval(const std::string& dir);

}  // namespace peat::train
