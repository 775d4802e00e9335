// SPDX-License-Identifier: MIT
#pragma once
// A recorded call as the tree and the call page write it: its op kind and variant, its parameters
// decoded (core/store/call_params.h), and its tensors with each input named by its role.
#include <QString>

#include <string>
#include <vector>

#include "core/store/call_params.h"
#include "core/store/session.h"

namespace peat::views {

// What the session records of one call's op, for its page.
struct CallOp {
  store::CallDescription description;
  std::string phase;                        // "forward" or "backward", as stored
  std::vector<store::TensorInfo> recorded;  // the tensors of the recorded call a playback replayed
  std::string recordedRun;                  // the run they are read from ("" when none)
};

// The call `path` of run `run` in the summary (null when it does not list it).
const store::CallInfo* findCallInfo(const store::SessionSummary& summary, const std::string& run, const std::string& path);

// "dropout forward, p 0.1", "gelu forward, approximate 1 (tanh form)": the tree's detail for a call
// (its stored parameters; the defaults and sizes are in its tooltip).
QString callDetailText(const store::CallDescription& d, const std::string& phase);

// One line a tensor, an input named by its role: "gamma: input_2 float32[32]", "output float32[32]: dBeta".
QString namedTensorText(const std::vector<store::TensorInfo>& tensors, const store::CallDescription& d);

// The tree's tooltip of a call: what it computes, every parameter (defaults marked), its tensors.
QString callToolTip(const store::CallDescription& d, const std::vector<store::TensorInfo>& tensors);

// The call page's "Call" section (HTML): kind and formula, parameters, then the call's own tensors
// and those of the recorded call where they add its inputs.
QString callSectionHtml(const CallOp& op, const std::vector<store::TensorInfo>& tensors);

}  // namespace peat::views
