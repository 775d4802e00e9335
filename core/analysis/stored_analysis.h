// SPDX-License-Identifier: MIT
#pragma once
// Private to core/analysis: what session_analysis.cpp and stored_analysis.cpp share about a stored
// analysis.
#include <string>

#include "core/analysis/session_analysis.h"

namespace peat::analyzer {

// A call path as a report name: "iterations/000010/calls/000003" -> "iterations-000010-calls-000003".
std::string reportId(std::string call);

// A call's report as loadCallReport reads it, from its stored record.
StoredCallReport callReport(const store::StoredRecord& record, const std::string& analysisRun, const std::string& call);

// An analysis run read back into `out`: its table's rows (the kernel failures' rows, whose numbers
// are NaN, are the candidate run's to say again), its verdicts with their parameters, evidence and
// alternatives, and each call's criteria from its report.
void readBack(const store::SessionReader& reader, const std::string& analysisRun, SessionAnalysis& out);

}  // namespace peat::analyzer
