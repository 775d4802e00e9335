// SPDX-License-Identifier: MIT
#pragma once
// The JSON of SAVE's results, one writer per kind, as `peat save ... --json` prints them: a model's
// graph, an analysis (selection), a check-bits result, a campaign and a comparison of verifiers.
// Each writes one object; the caller ends the line.
#include <string>
#include <vector>

#include "core/save/campaign.h"
#include "core/save/check_bits_record.h"
#include "core/save/tightness_reference.h"
#include "core/util/json_writer.h"

namespace peat::save {

// A node's shape as "1x28x28", and its op's details ("kernel 3, stride 1, padding 1", "[0, 6]",
// "eps 1e-05"; empty for other ops), as `peat save inspect` prints them.
std::string dimsText(const std::vector<int64_t>& shape);
// A model's several inputs or outputs: "'image' 3x8x8, 'meta' 5"
std::string partsText(const std::vector<OutputPart>& parts);
std::string nodeDetails(const Node& n);
// "recompute", "abft", "mixed"
const char* verifierKindName(VerifierKind kind);

void writeGraphJson(JsonWriter& j, const Graph& g);
// `ref` with present false: no --tightness columns.
void writeAnalysisJson(JsonWriter& j, const Graph& g, const Selection& s, const SelectionOptions& so,
                       const TightnessReferences& ref);
void writeCheckBitsJson(JsonWriter& j, const StoredCheckBits& s);
// `data`: the data set's name; `profiledOnTest`: Ranger's bounds came from the test samples;
// `agreement`: scored against the fault-free prediction.
void writeCampaignJson(JsonWriter& j, const Graph& g, const Selection& sel, const ProtectedRunner& runner,
                       const CampaignOptions& co, const CampaignResult& r, const std::string& data, bool profiledOnTest,
                       bool agreement);
void writeVerifiersJson(JsonWriter& j, const Graph& g, int64_t batch, const SelectionOptions& so,
                        const std::vector<VerifierCoverage>& cov);

}  // namespace peat::save
