// SPDX-License-Identifier: MIT
#pragma once
// Shared by the `peat save` subcommands' files (cmd_save_*.cpp): each parses through
// core/save/command_settings.h, runs the core, and prints here.
#include <iostream>

#include "core/save/check_bits_record.h"
#include "core/util/json_writer.h"

namespace peat::cli {

// A check-bits result as text, or as JSON (check-bits, and merge of its shards).
void printCheckBits(const save::StoredCheckBits& s, bool json);

// One JSON object on stdout, written by `write(JsonWriter&)`, then the end of the line.
template <typename Write>
void printJson(Write write) {
  JsonWriter j(std::cout);
  write(j);
  std::cout << '\n';
}

}  // namespace peat::cli
