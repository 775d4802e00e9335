// SPDX-License-Identifier: MIT
// peat detect: which error model a candidate's difference from golden matches, with evidence.
#include <cstdio>
#include <iostream>
#include <stdexcept>

#include "app/peat/commands.h"
#include "core/detector/detector.h"
#include "core/io/tensor_source.h"
#include "core/util/json_writer.h"

namespace peat::cli {

void writeVerdict(JsonWriter& j, const detector::Verdict& v, bool top) {
  if (!top) j.beginObject();
  j.field(top ? "verdict" : "model", v.model).field("confidence", v.confidence).field("explanation", v.explanation);
  j.key("parameters").beginObject();
  for (const auto& [k, val] : v.parameters) j.field(k, val);
  j.endObject().key("evidence").beginObject();
  for (const auto& [k, val] : v.evidence) j.field(k, val);
  j.endObject();
  if (!top) j.endObject();
}

void writeCriteria(JsonWriter& j, const analyzer::Criteria& c) {
  j.key("criteria").beginObject();
  j.field("cosine", c.cosine).field("max_abs", c.maxAbs).field("max_rel", c.maxRel);
  j.field("rel_err_above_1e-2", c.relAbove2).field("rel_err_above_1e-3", c.relAbove3).field("rel_err_above_1e-4", c.relAbove4);
  j.field("max_ulp", c.maxUlp).field("non_finite_pairs", c.nonFinite);
  if (c.ruleEvaluated) {
    j.key("reference_rule").beginObject();
    j.field("rule", "max|candidate - float64| <= 2 max|reference - float64| + 1e-5");
    j.field("pass", c.rulePasses()).field("candidate_error", c.candidateError).field("reference_error", c.referenceError);
    j.field("floor", analyzer::Criteria::kFloor).field("reference", c.reference).endObject();
  }
  j.endObject();
}

std::string criteriaLine(const analyzer::Criteria& c) {
  char line[256];
  std::snprintf(line, sizeof line, "cos %.6f, max rel %.3g, rel>1e-2/1e-3/1e-4 %.1f%%/%.1f%%/%.1f%%, %.0f ULP", c.cosine,
                c.maxRel, 100 * c.relAbove2, 100 * c.relAbove3, 100 * c.relAbove4, c.maxUlp);
  std::string s = line;
  if (c.ruleEvaluated) {
    std::snprintf(line, sizeof line, "; 2x rule %s (%.3g vs %.3g)", c.rulePasses() ? "pass" : "FAIL", c.candidateError,
                  c.referenceError);
    s += line;
  }
  return s;
}

std::string parameters(const detector::Verdict& v) {
  std::string s;
  for (const auto& [k, val] : v.parameters) s += (s.empty() ? " (" : ", ") + k + "=" + val;
  return s.empty() ? s : s + ")";
}

int runDetect(const DetectOptions& o) {
  const io::FloatTensor g = io::readSource(o.golden);
  std::vector<io::FloatTensor> candidates;
  std::vector<const float*> pointers;
  for (const std::string& spec : o.candidates) {
    candidates.push_back(io::readSource(spec));
    io::checkComparable(g, candidates.back());  // what peat analyze refuses, with the same message
  }
  for (const io::FloatTensor& c : candidates) pointers.push_back(c.data());
  const detector::Detection d = detector::detect(g.data(), pointers, g.shape());
  const analyzer::Criteria criteria = analyzer::criteria(g.data(), pointers.front(), uint64_t(g.size()));
  if (o.json) {
    JsonWriter j(std::cout);
    j.beginObject();
    writeVerdict(j, d.verdict, true);
    writeCriteria(j, criteria);  // from the outputs alone: msProbe's metrics (no float64 recomputation)
    j.key("findings").beginArray();  // secondary findings beside the primary verdict
    for (const detector::Verdict& v : d.findings) writeVerdict(j, v, false);
    j.endArray();
    j.key("alternatives").beginArray();
    for (const detector::Verdict& v : d.alternatives) writeVerdict(j, v, false);
    j.endArray().endObject();
    std::cout << '\n';
    return 0;
  }
  std::cout << "verdict     " << d.verdict.model << parameters(d.verdict) << ", confidence " << d.verdict.confidence
            << "\n            " << d.verdict.explanation << '\n';
  for (const detector::Verdict& v : d.findings)
    std::cout << "also        " << v.model << parameters(v) << ", confidence " << v.confidence << ": " << v.explanation
              << '\n';
  for (const detector::Verdict& v : d.alternatives)
    std::cout << "alternative " << v.model << parameters(v) << ", confidence " << v.confidence << ": " << v.explanation
              << '\n';
  std::cout << "criteria    " << criteriaLine(criteria) << '\n';
  return 0;
}

}  // namespace peat::cli
