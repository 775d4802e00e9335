// SPDX-License-Identifier: MIT
#include "core/analysis/call_spool.h"

#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "core/util/byte_record.h"

namespace peat::analyzer {

namespace {

// A field added to these types must be added to the byte form below (and to its test,
// tst_analyzer callSpoolKeepsEveryField): these sizes change with it and stop the build.
static_assert(sizeof(Report) == 1288, "Report changed: keep it whole in reportFields");
static_assert(sizeof(Criteria) == 128, "Criteria changed: keep it whole in criteriaFields");
static_assert(sizeof(detector::Verdict) == 168, "Verdict changed: keep it whole in Out/In::verdict");
static_assert(sizeof(CallAnalysis) == 1752, "CallAnalysis changed: keep it whole in encode/decode");

class Out : public util::ByteWriter {
 public:
  void verdict(const detector::Verdict& v) {
    text(v.model);
    raw(v.confidence);
    raw(uint64_t(v.parameters.size()));
    for (const auto& [k, x] : v.parameters) text(k), text(x);
    textMap(v.evidence);
    text(v.explanation);
  }
  void verdicts(const std::vector<detector::Verdict>& list) {
    raw(uint64_t(list.size()));
    for (const detector::Verdict& v : list) verdict(v);
  }
};

class In : public util::ByteReader {
 public:
  explicit In(const std::vector<unsigned char>& b) : ByteReader(b, "a kept call analysis") {}
  detector::Verdict verdict() {
    detector::Verdict v;
    v.model = text();
    raw(v.confidence);
    for (uint64_t i = count(); i > 0; --i) {
      std::string k = text();
      v.parameters[k] = text();
    }
    textMap(v.evidence);
    v.explanation = text();
    return v;
  }
  void verdicts(std::vector<detector::Verdict>& list) {
    for (uint64_t i = count(); i > 0; --i) list.push_back(verdict());
  }
};

// Every field of a report, in one order for both directions (Out and In share the member calls).
template <typename Io>
void reportFields(Io& io, std::conditional_t<std::is_same_v<Io, Out>, const Report&, Report&> r) {
  io.list(r.shape);
  for (auto* v : {&r.rows, &r.cols, &r.elements, &r.identical, &r.mismatched, &r.goldenNaN, &r.goldenInf,
                  &r.candidateNaN, &r.candidateInf, &r.newlyNonFinite, &r.maxAbsIndex, &r.nanPairs, &r.signOnly,
                  &r.exponentInvolved, &r.mantissaOnly, &r.rowMismatch.binWidth, &r.colMismatch.binWidth,
                  &r.tileRows, &r.tileCols, &r.tilesDown, &r.tilesAcross, &r.runs, &r.longestRun, &r.dominantGap})
    io.raw(*v);
  for (auto* v : {&r.maxAbs, &r.meanAbs, &r.rmsAbs, &r.maxRel, &r.meanRel, &r.goldenRms, &r.maxAbsOverScale,
                  &r.meanAbsOverScale, &r.p50, &r.p99, &r.p999, &r.dominantGapShare})
    io.raw(*v);
  io.raw(r.maxAbsGolden);
  io.raw(r.maxAbsCandidate);
  io.raw(r.log2Ulp);
  io.raw(r.bitMismatch);
  io.raw(r.runLengthLog2);
  for (auto* v : {&r.maxAbsPosition, &r.log2Abs, &r.rowMismatch.counts, &r.colMismatch.counts, &r.tileMismatch})
    io.list(*v);
}

template <typename Io>
void criteriaFields(Io& io, std::conditional_t<std::is_same_v<Io, Out>, const Criteria&, Criteria&> k) {
  for (auto* v : {&k.cosine, &k.maxAbs, &k.maxRel, &k.relAbove2, &k.relAbove3, &k.relAbove4, &k.maxUlp,
                  &k.candidateError, &k.referenceError})
    io.raw(*v);
  io.raw(k.elements);
  io.raw(k.nonFinite);
  io.raw(k.ruleEvaluated);
}

}  // namespace

std::vector<unsigned char> CallSpool::encode(const CallAnalysis& a) {
  Out out;
  for (const std::string* t : {&a.call, &a.layer, &a.op}) out.text(*t);
  out.raw(a.iteration);
  out.raw(a.callIndex);
  out.raw(a.variant);
  reportFields(out, a.report);
  out.verdict(a.detection.verdict);
  out.verdicts(a.detection.findings);
  out.verdicts(a.detection.alternatives);
  criteriaFields(out, a.criteria);
  out.text(a.criteria.reference);
  return std::move(out.bytes);
}

CallAnalysis CallSpool::decode(const std::vector<unsigned char>& bytes) {
  In in(bytes);
  CallAnalysis a;
  a.call = in.text();
  a.layer = in.text();
  a.op = in.text();
  in.raw(a.iteration);
  in.raw(a.callIndex);
  in.raw(a.variant);
  reportFields(in, a.report);
  a.detection.verdict = in.verdict();
  in.verdicts(a.detection.findings);
  in.verdicts(a.detection.alternatives);
  criteriaFields(in, a.criteria);
  a.criteria.reference = in.text();
  in.finish();
  return a;
}

void CallSpool::add(std::size_t index, const CallAnalysis& analysis) {
  const std::vector<unsigned char> bytes = encode(analysis);
  const std::lock_guard<std::mutex> lock(mutex_);
  at_.at(index) = {file_.append(bytes.data(), bytes.size()), bytes.size()};
}

CallAnalysis CallSpool::read(std::size_t index) const {
  const auto [offset, size] = at_.at(index);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size));
  file_.read(offset, bytes.data(), size);
  return decode(bytes);
}

}  // namespace peat::analyzer
