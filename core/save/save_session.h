// SPDX-License-Identifier: MIT
#pragma once
// The session side of the `peat save` commands: their provenance, the writer they store through,
// and a free id for a new SAVE result.
#include <cstdint>
#include <memory>
#include <string>

#include "core/store/session.h"

namespace peat::save {

// The provenance of a `peat save` session: the model, Fashion-MNIST, the CPU backend.
store::Provenance saveProvenance(const std::string& model, uint64_t seed, const std::string& commandLine);

// A writer on `path`: appending when the file is there, creating it otherwise.
std::unique_ptr<store::SessionWriter> openSaveSession(const std::string& path, const store::Provenance& prov);

// `base`, or base-2, base-3, ... when the session holds a SAVE result of that id already.
std::string freeResultId(const std::string& session, const std::string& base);

}  // namespace peat::save
