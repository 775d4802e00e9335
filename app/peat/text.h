// SPDX-License-Identifier: MIT
#pragma once
// Small text helpers shared by the CLI's printers.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/save/save_commands.h"  // parseTile, which the save commands' settings need too
#include "core/util/text.h"

namespace peat::cli {

// "[64x128]"
using util::shapeText;

}  // namespace peat::cli
