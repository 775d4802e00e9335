// SPDX-License-Identifier: MIT
#pragma once
// The detector: documented sufficient conditions (docs/error-models.md) that link a signature to a
// known error model. Each verdict carries a confidence and the numbers that fired it; when several
// rules hold, the others come back as ranked alternatives.
#include <map>
#include <string>
#include <vector>

#include "core/analyzer/report.h"

namespace peat::detector {

struct Verdict {
  std::string model;                     // exact, precision_loss, accumulation_order, bit_flip, ...
  double confidence = 0;                 // 0..1
  std::map<std::string, std::string> parameters;  // format, bit, value, factor
  std::map<std::string, double> evidence;         // the numbers the rule used
  std::string explanation;                        // one line for people
};

struct Detection {
  Verdict verdict;                    // the primary finding (a fault, where there is one)
  std::vector<Verdict> findings;      // secondary findings beside it: the legitimate rounding of the
                                      // rest of the tensor under a fault in a few elements (R13)
  std::vector<Verdict> alternatives;  // other readings that held, by confidence
};

const std::vector<std::string>& verdictNames();

// How a kernel developer reads a verdict: "legitimate" (exact, precision_loss, accumulation_order:
// a port that rounds or orders differently), "unknown" (nothing reproduced it, nothing names a bug)
// or "error" (any other model: a bug, a fault, a kernel that failed). detect-eval's counts and the
// workbench's graph colours use this one rule.
const char* verdictClass(const std::string& model);
bool legitimateVerdict(const std::string& model);

// What a verdict means, in two or three sentences for people (the workbench's explanations and
// tooltips): the signature, the error model it points to, and the likely cause. docs/error-models.md
// has the exact rules. Empty for an unknown name.
std::string verdictExplanation(const std::string& verdict);

// When a GEMM call's operands are known (playback), the rounding bounds can be computed instead
// of inferred: absProduct[i] = sum_k |a_ik| |b_kj| for output element i, over a reduction of length k.
struct GemmBound {
  std::vector<float> absProduct;
  std::vector<float> rowAbsSum, colAbsSum;  // sum_k |a_ik| per row i, sum_k |b_kj| per column j (and batch)
  int64_t rows = 0, cols = 0, k = 0;
  // A batched GEMM (matmul, bmm, a grouped conv): `batch` GEMMs of rows / batch rows each, stacked
  // along the rows: a is [rows, k] as one matrix, b is [batch, k, cols], colAbsSum [batch, cols], and
  // bias either [cols] for every GEMM or [batch, cols], one per GEMM.
  int64_t batch = 1;
  // The operands themselves (and a per-column bias added after the GEMM), so that the detector can
  // replay each precision hypothesis: round the inputs to the format and compare.
  std::vector<float> a, b, bias;
  // The replays computed whole because their hypothesis reproduced the candidate, by hypothesis id
  // (formatGemm's ids): formatGemm hands them back instead of replaying again.
  mutable std::map<std::string, std::vector<double>> replayed;
  // b rounded as each hypothesis rounds it, by hypothesis id, made by the first replay that needs it
  mutable std::map<std::string, std::vector<float>> roundedB;
  // the largest finite |a| and |b| (per-tensor scales), made by the first replay that needs them; -1: not yet
  mutable float aAmax = -1, bAmax = -1;
};

// |a| |b| for c = a b (+ bias) with row-major a[m,k], b[k,n] and bias[n] (or null).
GemmBound gemmBound(const float* a, const float* b, int64_t m, int64_t k, int64_t n, const float* bias = nullptr);
// The same, keeping the operands given (a [m k] and b [k n] values) rather than copies of them.
GemmBound gemmBound(std::vector<float>&& a, std::vector<float>&& b, int64_t m, int64_t k, int64_t n,
                    const float* bias = nullptr);
// `batch` GEMMs c_i = a_i b_i, a [batch, m, k] and b [batch, k, n] row-major (`aShared` / `bShared`:
// one a or one b for every batch, as matmul broadcasts it). The block-scaled replay runs each GEMM
// of the batch on its own (its own tensor amax and blocks), as a batched kernel quantises them.
GemmBound batchedGemmBound(const float* a, const float* b, int64_t batch, int64_t m, int64_t k, int64_t n, bool aShared,
                           bool bShared);

// The GEMM of a bound's operands in double (products summed in double, the bias added): the float64
// recomputation the reference rule (core/analyzer/criteria.h) compares against. Empty where the
// operands were not kept or m n k > 5e8.
std::vector<double> exactGemm(const GemmBound& b);
// The GEMM with its inputs rounded as one of the replay's hypotheses ("bf16", "fp8_e4m3",
// "fp8_e4m3/tensor-scale", ...) and summed in fp32: a kernel in that format, the stand-in for
// PyTorch's own kernel in it. Empty as exactGemm's, or for an unknown format.
std::vector<double> formatGemm(const GemmBound& b, const std::string& format);

// `candidates` are one or more candidate outputs for the same input (more than one reveals races).
Detection detect(const float* golden, const std::vector<const float*>& candidates, const std::vector<uint64_t>& shape,
                 const analyzer::ReportOptions& options = {}, const GemmBound* bound = nullptr);

}  // namespace peat::detector
