// SPDX-License-Identifier: MIT
#pragma once
// Writes small, deterministic session files for tests and for `peat info` checks.
#include <string>

namespace peat::testsupport {

// Value of element i of tensor `salt` in the sample: the Python layout test recomputes it.
float sampleValue(int salt, long i);

// A complete session: provenance, one profile run of 3 iterations x 4 calls (fp32, fp16, bf16
// and int64 tensors), a checkpoint, a report, verdicts and a SAVE result. Fewer iterations make
// the same session with the later ones missing.
void writeSampleSession(const std::string& path, int iterations = 3);
// The sample with its schema_version raised past what this build reads.
void writeFutureSession(const std::string& path);
// An HDF5 file that is not a session.
void writeForeignHdf5(const std::string& path);
// The first `fraction` of `source`'s bytes.
void writeTruncatedCopy(const std::string& source, const std::string& path, double fraction);

}  // namespace peat::testsupport
